#include "api/rdma_cm/rdma_cm_testing.h"

#include "absl/strings/str_cat.h"
#include "mad/sim/topology.h"

namespace uscm::testing {

absl::StatusOr<TwoHostQp1s> OpenTwoHostQp1s(sim::Scheduler& scheduler) {
  TwoHostQp1s net;
  auto fabric = sim::Fabric::Create(scheduler, sim::TwoHostsOneSwitch());
  if (!fabric.ok()) return fabric.status();
  net.fabric = std::move(*fabric);
  auto sa = sa::SimSa::Create(*net.fabric);
  if (!sa.ok()) return sa.status();
  net.sa = std::move(*sa);
  auto host1 = net.fabric->Open("host1");
  if (!host1.ok()) return host1.status();
  auto host2 = net.fabric->Open("host2");
  if (!host2.ok()) return host2.status();
  net.host1 = std::move(*host1);
  net.host2 = std::move(*host2);
  return net;
}

absl::StatusOr<std::unique_ptr<SimFabric>> SimFabric::Create(
    uint64_t seed, const sim::FaultInjectorOptions* faults, cm::NodeOptions node,
    sim::FabricOptions fabric_options) {
  std::unique_ptr<SimFabric> f(new SimFabric());
  f->scheduler_ = std::make_unique<sim::Scheduler>(seed);
  auto fabric = sim::Fabric::Create(*f->scheduler_, sim::TwoHostsOneSwitch(),
                                    std::move(fabric_options));
  if (!fabric.ok()) return fabric.status();
  f->fabric_ = std::move(*fabric);
  auto sa = sa::SimSa::Create(*f->fabric_);
  if (!sa.ok()) return sa.status();
  f->sa_ = std::move(*sa);
  f->hosts_.resize(2);
  for (int i = 0; i < 2; ++i) {
    SimHost& h = f->hosts_[i];
    auto qp1 = f->fabric_->Open(absl::StrCat("host", i + 1));
    if (!qp1.ok()) return qp1.status();
    h.qp1 = std::move(*qp1);
    mad::Transport* t = h.qp1.get();
    if (faults != nullptr) {
      sim::FaultInjectorOptions o = *faults;
      o.seed = faults->seed + i;
      auto fi = sim::FaultInjector::Create(*h.qp1, f->scheduler_->clock(), o);
      if (!fi.ok()) return fi.status();
      h.faults = std::move(*fi);
      t = h.faults.get();
    }
    h.ip = Address::Ipv4(0x0a000001 + i);
    DeviceOptions opts;
    opts.node = node;
    opts.node.seed = seed * 2 + i;
    opts.node.cm.timer_tick = mad::Duration::Micros(1);
    opts.local_ips = {h.ip};
    sim::SimTransport* raw = h.qp1.get();
    auto dev = Device::CreateSimulated(*f->scheduler_, *t, [raw] { return raw->pending() > 0; },
                                       opts);
    if (!dev.ok()) return dev.status();
    h.device = std::move(*dev);
    if (h.faults) {
      sim::FaultInjector* fi = h.faults.get();
      h.device->node().set_extra_deadline([fi] { return fi->NextDeadline(); });
    }
    auto ch = h.device->CreateEventChannel();
    if (!ch.ok()) return ch.status();
    h.channel = std::move(*ch);
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      if (i == j) continue;
      const mad::LocalPort& p = f->hosts_[j].device->port();
      absl::Status s = f->hosts_[i].device->AddNeighbor(f->hosts_[j].ip, p.gid, p.lid);
      if (!s.ok()) return s;
    }
  }
  return f;
}

SimFabric::~SimFabric() {
  for (SimHost& h : hosts_) {
    h.channel.reset();
    h.device.reset();
    h.faults.reset();
    h.qp1.reset();
  }
}

absl::StatusOr<Event> SimFabric::Next(EventChannel& channel, mad::Duration limit) {
  absl::Status s = scheduler_->RunUntil([&] { return channel.queued() > 0; },
                                        scheduler_->Now() + limit);
  if (!s.ok()) return s;
  absl::StatusOr<Event*> e = channel.GetEvent();
  if (!e.ok()) return e.status();
  Event taken = std::move(**e);  // acked just below: its vectors need not be copied
  absl::Status a = channel.AckEvent(*e);
  if (!a.ok()) return a;
  return taken;
}

void SimFabric::RunFor(mad::Duration d) { (void)scheduler_->RunFor(d); }

namespace {

// Runs until `ch` has an event (5 s of virtual time) and takes it: of `want`.
absl::Status TakeEvent(sim::Scheduler& scheduler, EventChannel& ch, EventType want,
                       const char* step) {
  (void)scheduler.RunUntil([&] { return ch.queued() > 0; },
                           scheduler.Now() + mad::Duration::Seconds(5));
  absl::StatusOr<Event*> e = ch.GetEvent();
  if (!e.ok()) return absl::DeadlineExceededError(absl::StrCat(step, ": no event"));
  if ((*e)->event != want) {
    return absl::InternalError(absl::StrCat(step, ": event ", static_cast<int>((*e)->event)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Event*> ListenAndConnect(sim::Scheduler& scheduler, EventChannel& listen,
                                        EventChannel& connect, const Address& bind,
                                        const Address& dst, PortSpace ps) {
  absl::StatusOr<CmId*> listener = listen.CreateId(nullptr, ps);
  if (!listener.ok()) return listener.status();
  if (absl::Status s = (*listener)->BindAddr(bind); !s.ok()) return s;
  if (absl::Status s = (*listener)->Listen(4); !s.ok()) return s;
  absl::StatusOr<CmId*> id = connect.CreateId(nullptr, ps);
  if (!id.ok()) return id.status();
  if (absl::Status s = (*id)->ResolveAddr(absl::nullopt, dst); !s.ok()) return s;
  if (absl::Status s = TakeEvent(scheduler, connect, EventType::kAddrResolved, "resolve_addr");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = (*id)->ResolveRoute(); !s.ok()) return s;
  if (absl::Status s = TakeEvent(scheduler, connect, EventType::kRouteResolved, "resolve_route");
      !s.ok()) {
    return s;
  }
  ConnParam p;
  p.qp_num = 0x123;
  if (absl::Status s = (*id)->Connect(p); !s.ok()) return s;
  (void)scheduler.RunUntil([&] { return listen.queued() > 0 || connect.queued() > 0; },
                           scheduler.Now() + mad::Duration::Seconds(5));
  return (listen.queued() > 0 ? listen : connect).GetEvent();
}

}  // namespace uscm::testing
