#include "tools/real_host.h"

#include <poll.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uscm::tools {

absl::StatusOr<std::unique_ptr<RealHost>> RealHost::Open(const FabricSpec& spec,
                                                         RealTransportOptions options,
                                                         Wrap wrap) {
  auto t = OpenRealTransport(spec, options);
  if (!t.ok()) return t.status();
  if ((*t)->fd() < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--fabric=", spec.ToString(), ": the transport has no pollable fd"));
  }
  std::unique_ptr<RealHost> h(new RealHost());
  h->inner_ = std::move(*t);
  if (wrap) h->transport_ = wrap(*h->inner_);
  mad::Transport& t_used = h->transport_ != nullptr ? *h->transport_ : *h->inner_;
  cm::NodeOptions no;
  no.seed = static_cast<uint64_t>(h->clock_.Now().nanos());
  h->node_ = std::make_unique<cm::Node>(t_used, h->clock_, no);
  h->node_->set_observer(h.get());
  return h;
}

RealHost::~RealHost() {
  if (node_ != nullptr) node_->set_observer(nullptr);
  node_.reset();
  transport_.reset();
  inner_.reset();
}

void RealHost::OnProgress(mad::TimePoint now) {
  cm::CmEvent e;
  while (node_->cm().PollEvent(&e)) {
    if (on_cm_event) on_cm_event(now, e);
  }
  while (auto r = node_->sa().PollResult()) {
    if (on_sa_result) on_sa_result(now, std::move(*r));
  }
}

absl::Status RealHost::RunUntil(const std::function<bool()>& done, mad::Duration timeout,
                                const std::string& what) {
  const mad::TimePoint deadline = clock_.Now() + timeout;
  for (;;) {
    node_->Process();
    if (done()) return absl::OkStatus();
    const mad::TimePoint now = clock_.Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("%s: nothing after %.0f ms", what, timeout.millis()));
    }
    // Sleep until input, the node's next deadline, or 100 ms.
    mad::TimePoint wake = std::min(deadline, now + mad::Duration::Millis(100));
    absl::optional<mad::TimePoint> next;
    {
      std::lock_guard<std::mutex> lock(node_->mutex());
      next = node_->NextDeadlineLocked();
    }
    if (next.has_value() && *next < wake) wake = *next;
    const int wait_ms =
        wake <= now ? 0 : static_cast<int>(std::ceil((wake - now).millis()));
    pollfd pfd{inner_->fd(), POLLIN, 0};
    poll(&pfd, 1, wait_ms);
  }
}

}  // namespace uscm::tools
