// A uscmd for router_launch_test: the same command line as tools/uscmd_main.cc
// (--ca, --port, --socket, --idle-exit=S) and the same router::Server, but over
// a simulated fabric's port instead of umad, so that tests can start it on
// demand where there is no RDMA device. Each start appends "started <pid>" to
// $USCM_TEST_STARTS, before the socket is bound: what the test counts.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cm/router/router_testing.h"
#include "cm/router/server.h"

int main(int argc, char** argv) {
  uscm::router::ServerOptions o;
  int idle_exit_s = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--socket" && i + 1 < argc) {
      o.socket_path = argv[++i];
    } else if ((a == "--ca" || a == "--port") && i + 1 < argc) {
      ++i;  // the simulated port is always host1's
    } else if (a.rfind("--idle-exit=", 0) == 0) {
      if (!absl::SimpleAtoi(a.substr(strlen("--idle-exit=")), &idle_exit_s)) return 2;
    } else {
      std::fprintf(stderr, "sim uscmd: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (const char* starts = std::getenv("USCM_TEST_STARTS"); starts != nullptr) {
    const int fd = open(starts, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const std::string line = absl::StrCat("started ", getpid(), "\n");
    if (fd < 0 || write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return 3;
    }
    close(fd);
  }
  auto ports = uscm::router::testing::OpenSimPorts(/*seed=*/1);
  if (!ports.ok()) return 4;
  o.idle_exit = uscm::mad::Duration::Seconds(idle_exit_s);
  o.pump = [] { return uscm::mad::Duration::Millis(1); };
  auto server = uscm::router::Server::Create(*ports->host1, o);
  if (!server.ok()) {
    std::fprintf(stderr, "sim uscmd: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("sim uscmd: serving %s\n", o.socket_path.c_str());
  std::fflush(stdout);
  const absl::Status s = (*server)->Run();
  std::printf("sim uscmd: exit (%s)\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
