// Starting uscmd on demand, shared by `uscm exec` (tools/cmd_exec.cc) and the
// C API's device opening (api/c/uscm_device.cc, so the drop-in librdmacm.so.1
// too): when no router answers on a port's socket, one process of the host
// starts the port's uscmd and every other one connects to it.
//
//   RouterLaunch l{.uscmd = "/opt/uscm/bin/uscmd", .ca = "rxe0", .port = 1};
//   absl::StatusOr<RouterLaunched> r = EnsureRouter(l);  // then RouterTransport::Connect
//
// Concurrent starts do not race: the start runs under an exclusive flock(2) on
// `<socket>.lock`, and whoever gets the lock checks the socket again, so N
// programs starting at once start one uscmd and all connect to it. The daemon
// is detached (fork, setsid, fork): its own session, so the program's exit and
// its signals (a terminal's ^C to the process group, SIGHUP) do not reach it;
// stdin /dev/null, stdout and stderr to its log, no other descriptor of the
// program, signals unblocked. It exits by itself `idle_exit_s` after its last
// client (uscmd --idle-exit).
#ifndef USCM_CM_ROUTER_ROUTER_LAUNCH_H_
#define USCM_CM_ROUTER_ROUTER_LAUNCH_H_

#include <string>

#include "absl/status/statusor.h"
#include "mad/time.h"

namespace uscm::router {

struct RouterLaunch {
  std::string uscmd;  // the uscmd binary to run
  std::string ca;
  int port = 0;
  // Empty: DefaultRouterSocket(ca, port) and DefaultRouterLog(ca, port).
  std::string socket_path;
  std::string log_path;
  int idle_exit_s = 30;
  // How long the started uscmd has to answer on its socket.
  mad::Duration ready_within = mad::Duration::Seconds(10);
};

enum class RouterLaunched {
  kAlreadyServing,  // a router answered (started by someone else, or systemd's socket)
  kStarted,         // this call started it, and it answers now
};

// Makes sure a router answers on the port's socket. Errors name the log:
// FailedPrecondition when the uscmd exited before answering (its last log
// line: no permission on umad, the kernel's ib_cm owns the CM class, ...),
// DeadlineExceeded when it did not answer within ready_within (it is then
// sent SIGTERM), Internal when the lock or the fork failed.
absl::StatusOr<RouterLaunched> EnsureRouter(const RouterLaunch& launch);

// Where a router started on demand logs: /tmp/uscmd-<ca>-<port>.log.
std::string DefaultRouterLog(const std::string& ca_name, int port_num);

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_ROUTER_LAUNCH_H_
