// Test and demo helper: two hosts (10.0.0.1 on host1, 10.0.0.2 on host2)
// behind one switch on the simulated fabric, the simulated SA on the switch,
// one uscm::Device per host (optionally behind a fault injector), and
// neighbour entries both ways. Everything in virtual time.
#ifndef USCM_API_RDMA_CM_RDMA_CM_TESTING_H_
#define USCM_API_RDMA_CM_RDMA_CM_TESTING_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/sim/fabric.h"
#include "mad/sim/fault_injector.h"
#include "mad/sim/scheduler.h"
#include "sa/sim_sa.h"

namespace uscm::testing {

struct SimHost {
  std::unique_ptr<sim::SimTransport> qp1;
  std::unique_ptr<sim::FaultInjector> faults;
  std::unique_ptr<Device> device;
  std::unique_ptr<EventChannel> channel;
  Address ip;
};

// The bare two-host fabric (one switch, the simulated SA on it) and each
// host's QP1, for a test that builds its Devices with options of its own.
struct TwoHostQp1s {
  std::unique_ptr<sim::Fabric> fabric;
  std::unique_ptr<sa::SimSa> sa;
  std::unique_ptr<sim::SimTransport> host1, host2;
};
absl::StatusOr<TwoHostQp1s> OpenTwoHostQp1s(sim::Scheduler& scheduler);

// On two Devices of `scheduler`: an id of `listen` bound to `bind` listens,
// and an id of `connect` resolves `dst` (no source), its route, and
// connects (qp_num 0x123; RDMA_PS_UDP: a SIDR_REQ). The first event then on
// either channel: the listener's CONNECT_REQUEST or the connecting id's
// answer (not acked). An error names the step that failed, or says none came.
absl::StatusOr<Event*> ListenAndConnect(sim::Scheduler& scheduler, EventChannel& listen,
                                        EventChannel& connect, const Address& bind,
                                        const Address& dst, PortSpace ps);

class SimFabric {
 public:
  // `faults` applies to both hosts' QP1 (send and receive), or none.
  static absl::StatusOr<std::unique_ptr<SimFabric>> Create(
      uint64_t seed, const sim::FaultInjectorOptions* faults = nullptr,
      cm::NodeOptions node = {}, sim::FabricOptions fabric = {});
  ~SimFabric();

  sim::Scheduler& scheduler() { return *scheduler_; }
  sim::Fabric& fabric() { return *fabric_; }
  sa::SimSa& sa() { return *sa_; }
  SimHost& host(int i) { return hosts_[i]; }

  // Runs the simulation until `channel` has an event (or `limit` of virtual
  // time passes); returns it (moved out of the channel's), already acked.
  absl::StatusOr<Event> Next(EventChannel& channel,
                             mad::Duration limit = mad::Duration::Seconds(120));
  // Runs for `d` of virtual time.
  void RunFor(mad::Duration d);

 private:
  SimFabric() = default;
  std::unique_ptr<sim::Scheduler> scheduler_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<sa::SimSa> sa_;
  std::vector<SimHost> hosts_;
};

}  // namespace uscm::testing

#endif  // USCM_API_RDMA_CM_RDMA_CM_TESTING_H_
