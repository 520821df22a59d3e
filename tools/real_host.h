// One local port of a real fabric (umad or verbs UD, or umad under ibsim's
// umad2sim) as the uscm command drives it: the CM runtime's Node (a sans-IO
// CmEndpoint and a MAD Agent with an SA client) over the transport, stepped
// by a poll(2) loop with the real clock. poll, not the RealNode's epoll:
// umad2sim's fake descriptor is only understood by poll(2).
//
// Single-threaded: callbacks run inside a step (node lock held) and may call
// node().cm() / node().sa() directly; a call made outside a callback is
// followed by Kick() so the next step runs at once and sends it.
#ifndef USCM_TOOLS_REAL_HOST_H_
#define USCM_TOOLS_REAL_HOST_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cm/runtime.h"
#include "mad/time.h"
#include "mad/transport.h"
#include "sa/client.h"
#include "tools/fabric_flags.h"

namespace uscm::tools {

class RealHost final : private cm::NodeObserver {
 public:
  // Opens the fabric's transport (OpenRealTransport) and a Node on it.
  // `wrap`, when given, puts a middleware (a timeline tap) around the
  // transport; the host keeps both alive.
  using Wrap = std::function<std::unique_ptr<mad::Transport>(mad::Transport& inner)>;
  static absl::StatusOr<std::unique_ptr<RealHost>> Open(const FabricSpec& spec,
                                                        RealTransportOptions options,
                                                        Wrap wrap = nullptr);
  ~RealHost() override;

  cm::Node& node() { return *node_; }
  cm::CmEndpoint& cm() { return node_->cm(); }
  sa::SaClient& sa() { return node_->sa(); }
  mad::Transport& transport() { return transport_ != nullptr ? *transport_ : *inner_; }
  const mad::LocalPort& port() const { return inner_->port(); }
  mad::TimePoint Now() const { return clock_.Now(); }
  void Kick() { node_->Rearm(); }

  // Steps until `done()` is true (checked after every step) or `timeout`
  // passes (DeadlineExceeded naming `what`).
  absl::Status RunUntil(const std::function<bool()>& done, mad::Duration timeout,
                        const std::string& what);

  std::function<void(mad::TimePoint, const cm::CmEvent&)> on_cm_event;
  std::function<void(mad::TimePoint, sa::SaResult)> on_sa_result;

 private:
  RealHost() = default;
  void OnProgress(mad::TimePoint now) override;

  mad::RealClock clock_;
  std::unique_ptr<mad::Transport> inner_;      // the device transport
  std::unique_ptr<mad::Transport> transport_;  // inner_ or its wrapper
  std::unique_ptr<cm::Node> node_;
};

}  // namespace uscm::tools

#endif  // USCM_TOOLS_REAL_HOST_H_
