#include "tools/sim_router_host.h"

#include "tools/sim_world.h"

namespace uscm::tools {

absl::StatusOr<std::unique_ptr<SimRouterHost>> SimRouterHost::Create(sim::Fabric& fabric,
                                                                     const std::string& node,
                                                                     Timeline* timeline) {
  std::unique_ptr<SimRouterHost> h(new SimRouterHost(fabric.scheduler(), node));
  auto qp1 = fabric.Open(node);
  if (!qp1.ok()) return qp1.status();
  h->qp1_ = std::move(*qp1);
  mad::Transport* wire = h->qp1_.get();
  if (timeline != nullptr) {
    h->tap_ = std::make_unique<TapTransport>(*h->qp1_, *timeline, fabric.scheduler().clock(),
                                             fabric.sm_lid());
    wire = h->tap_.get();
  }
  h->router_ = std::make_unique<router::LocalRouter>(*wire);
  SimRouterHost* raw = h.get();
  h->qp1_->set_on_arrival([raw] { raw->scheduler_.DeadlineChanged(raw); });
  fabric.scheduler().AddActor(raw, sim::DeadlineUpdates::kNotified);
  return h;
}

SimRouterHost::~SimRouterHost() { scheduler_.RemoveActor(this); }

absl::optional<mad::TimePoint> SimRouterHost::NextDeadline() const {
  if (qp1_->pending() > 0) return mad::TimePoint::Epoch();
  return absl::nullopt;
}

void SimRouterHost::Wake(mad::TimePoint) { router_->PollWire(); }

}  // namespace uscm::tools
