// What the tests that run a uscmd Server in this process share: a directory
// short enough for its socket, the port it owns on a simulated fabric, its
// loop on a thread, and client processes.
#ifndef USCM_CM_ROUTER_ROUTER_TESTING_H_
#define USCM_CM_ROUTER_ROUTER_TESTING_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "cm/router/server.h"
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

// Runs a server's loop on a thread; stops and joins on scope exit too, so a
// failed ASSERT does not leave a joinable thread behind.
class LoopThread {
 public:
  explicit LoopThread(Server* s) : s_(s), t_([s] { (void)s->Run(); }) {}
  ~LoopThread() { Stop(); }
  void Stop() {
    if (!t_.joinable()) return;
    s_->Stop();
    t_.join();
  }

 private:
  Server* s_;
  std::thread t_;
};

// Forks a child that runs `body` and exits (_exit) with what it returns.
pid_t SpawnChild(const std::function<int()>& body);
// Waits for a child; its wait status (WIFEXITED, WEXITSTATUS, ...).
int WaitForExit(pid_t pid);

}  // namespace uscm::router::testing

#endif  // USCM_CM_ROUTER_ROUTER_TESTING_H_
