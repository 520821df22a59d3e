// The SA client over the real umad transport, driven by a poll(2) loop with
// the real clock: what tests/ibsim/sa_query_client and the ibsim SA benchmark
// run on an ibsim node (under LD_PRELOAD=libumad2sim.so, whose fake fd only
// poll(2) understands).
#ifndef USCM_TESTS_IBSIM_SA_SESSION_H_
#define USCM_TESTS_IBSIM_SA_SESSION_H_

#include <poll.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "mad/agent.h"
#include "mad/agent_pump.h"
#include "mad/time.h"
#include "mad/umad_transport.h"
#include "sa/client.h"

namespace uscm::tests {

class SaSession {
 public:
  // `base` sets the agent's window, timeouts and retries; ConfigFor adds the
  // transport's RMPP mode.
  static absl::StatusOr<std::unique_ptr<SaSession>> Open(mad::AgentConfig base) {
    mad::UmadOptions o;
    o.receive_cm = false;  // SA only: no CM agent needed
    auto t = mad::UmadTransport::Open(o);
    if (!t.ok()) return t.status();
    return std::unique_ptr<SaSession>(new SaSession(std::move(*t), base));
  }

  mad::TimePoint Now() const { return clock_.Now(); }
  mad::UmadTransport& transport() { return *transport_; }
  mad::Agent& agent() { return agent_; }
  sa::SaClient& client() { return client_; }

  // Pumps the transport until `done()` or `timeout` passes; every result is
  // handed to `on_result`. DeadlineExceeded names what was still outstanding.
  absl::Status RunUntil(absl::FunctionRef<bool()> done,
                        absl::FunctionRef<void(sa::SaResult)> on_result,
                        mad::Duration timeout) {
    const mad::TimePoint deadline = Now() + timeout;
    for (;;) {
      const mad::TimePoint now = Now();
      if (auto s = mad::Pump(now, *transport_, agent_); !s.ok()) return s;
      while (auto r = client_.PollResult()) on_result(std::move(*r));
      if (done()) return absl::OkStatus();
      if (now >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrFormat("%zu SA queries still outstanding after %.0f ms",
                            client_.outstanding(), timeout.millis()));
      }
      // Sleep until input, the agent's next timer or 5 ms, whichever first.
      int wait_ms = 5;
      if (auto next = agent_.NextDeadline()) {
        wait_ms = static_cast<int>(
            std::clamp<int64_t>(static_cast<int64_t>((*next - now).millis()), 0, 5));
      }
      pollfd pfd{transport_->fd(), POLLIN, 0};
      poll(&pfd, 1, wait_ms);
    }
  }

 private:
  SaSession(std::unique_ptr<mad::UmadTransport> t, mad::AgentConfig base)
      : transport_(std::move(t)),
        agent_(mad::ConfigFor(*transport_, base), clock_.Now()),
        client_(&agent_, Config(*transport_)) {}

  static sa::SaClientConfig Config(const mad::Transport& t) {
    sa::SaClientConfig c;
    c.sa = sa::SaAddressFor(t.port());
    return c;
  }

  mad::RealClock clock_;
  std::unique_ptr<mad::UmadTransport> transport_;
  mad::Agent agent_;
  sa::SaClient client_;
};

}  // namespace uscm::tests

#endif  // USCM_TESTS_IBSIM_SA_SESSION_H_
