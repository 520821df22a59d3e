// The MAD router of one simulated host with several uscm processes
// (`uscm sim --procs-per-host=N`): the host's QP1 on the fabric and the real
// router (cm/router/local_router.h) behind it, woken by the scheduler when a
// MAD lands on QP1. The processes are SimHosts created with
// SimHost::CreateProcess on this router; what they send reaches the router
// (and the wire) inside their Send, what the router routes to them is queued
// on their LocalRouterClient at once.
#ifndef USCM_TOOLS_SIM_ROUTER_HOST_H_
#define USCM_TOOLS_SIM_ROUTER_HOST_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cm/router/local_router.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/transport.h"

namespace uscm::tools {

class Timeline;
class TapTransport;

class SimRouterHost : public sim::Actor {
 public:
  // `timeline` (may be null) shows the MADs on the host's wire.
  static absl::StatusOr<std::unique_ptr<SimRouterHost>> Create(sim::Fabric& fabric,
                                                               const std::string& node,
                                                               Timeline* timeline);
  ~SimRouterHost() override;

  absl::optional<mad::TimePoint> NextDeadline() const override;
  void Wake(mad::TimePoint now) override;

  const std::string& name() const { return name_; }
  router::LocalRouter& router() { return *router_; }
  const router::RouterCounters& counters() const { return router_->counters(); }

 private:
  SimRouterHost(sim::Scheduler& scheduler, std::string name)
      : scheduler_(scheduler), name_(std::move(name)) {}

  sim::Scheduler& scheduler_;
  std::string name_;
  std::unique_ptr<sim::SimTransport> qp1_;
  std::unique_ptr<TapTransport> tap_;
  std::unique_ptr<router::LocalRouter> router_;
};

}  // namespace uscm::tools

#endif  // USCM_TOOLS_SIM_ROUTER_HOST_H_
