// What the tests that run a uscmd Server in this process share: a directory
// short enough for its socket, and the port it owns on a simulated fabric.
#ifndef USCM_CM_ROUTER_ROUTER_TESTING_H_
#define USCM_CM_ROUTER_ROUTER_TESTING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"

namespace uscm::router::testing {

// TEST_TMPDIR when it is short enough, else a fresh directory under /tmp: a
// Unix socket's path holds at most 107 characters.
std::string ShortSocketDir();

// Two hosts behind one switch in virtual time: host1's QP1 for the router,
// host2's for a peer. Members go in reverse order, the scheduler last.
struct SimPorts {
  std::unique_ptr<sim::Scheduler> scheduler;
  std::unique_ptr<sim::Fabric> fabric;
  std::unique_ptr<sim::SimTransport> host1, host2;
};
absl::StatusOr<SimPorts> OpenSimPorts(uint64_t seed);

}  // namespace uscm::router::testing

#endif  // USCM_CM_ROUTER_ROUTER_TESTING_H_
