#include "cm/router/router_testing.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mad/sim/topology.h"

namespace uscm::router::testing {

std::string ShortSocketDir() {
  const char* t = getenv("TEST_TMPDIR");
  if (t != nullptr && std::string(t).size() < 60) return t;
  char tmpl[] = "/tmp/uscmd-test-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d != nullptr ? d : "/tmp";
}

absl::StatusOr<SimPorts> OpenSimPorts(uint64_t seed) {
  SimPorts p;
  p.scheduler = std::make_unique<sim::Scheduler>(seed);
  auto f = sim::Fabric::Create(*p.scheduler, sim::TwoHostsOneSwitch());
  if (!f.ok()) return f.status();
  p.fabric = std::move(*f);
  for (auto [name, port] : {std::pair{"host1", &p.host1}, std::pair{"host2", &p.host2}}) {
    auto t = p.fabric->Open(name);
    if (!t.ok()) return t.status();
    *port = std::move(*t);
  }
  return p;
}

pid_t SpawnChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

int WaitForExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace uscm::router::testing
