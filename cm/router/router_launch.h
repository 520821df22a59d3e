// Starting uscmd on demand, shared by `uscm exec` (tools/cmd_exec.cc) and the
// C API's device opening (api/c/uscm_device.cc, so the drop-in librdmacm.so.1
// too): when no router answers on a port's socket, one process of the host
// starts the port's uscmd and every other one connects to it.
//
//   RouterLaunch l{.uscmd = "/opt/uscm/bin/uscmd", .ca = "rxe0", .port = 1};
//   absl::StatusOr<RouterLaunched> r = EnsureRouter(l);  // then RouterTransport::Connect
//   EnsureRouters({l0, l1});  // every port's uscmd started, then all waited for
//
// Concurrent starts do not race: the start runs under an exclusive flock(2) on
// `<socket>.lock`, and whoever gets the lock checks the socket again, so N
// programs starting at once start one uscmd and all connect to it. The daemon
// is detached (fork, setsid, fork): its own session, so the program's exit and
// its signals (a terminal's ^C to the process group, SIGHUP) do not reach it;
// stdin /dev/null, stdout and stderr to its log, no other descriptor of the
// program, signals unblocked. It exits by itself `idle_exit_s` after its last
// client (uscmd --idle-exit).
//
// How long the starter waits: a busy machine must not fail the program, and a
// uscmd that hangs must not hold it for ever. The started uscmd is watched
// every 10 ms: answering on its socket is success; having exited is an error
// with its log's last line; it "makes progress" while its CPU time, its page
// faults or its log change, or while it is runnable or in disk wait (waiting
// for a CPU or for its binary's pages: a loaded host). No progress for
// `stall_within` is a hang, and `ready_within` bounds the whole wait;
// either ends it with SIGTERM to the uscmd and DeadlineExceeded.
#ifndef USCM_CM_ROUTER_ROUTER_LAUNCH_H_
#define USCM_CM_ROUTER_ROUTER_LAUNCH_H_

#include <functional>
#include <string>
#include <vector>

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
  // A started uscmd that makes no progress (above) for this long hangs.
  mad::Duration stall_within = mad::Duration::Seconds(10);
  // The most the started uscmd has to answer on its socket, progress or not.
  mad::Duration ready_within = mad::Duration::Seconds(120);
  // Called once, `slow_after` into the wait, when the uscmd has not answered
  // yet but makes progress (what to tell the user; empty: nothing).
  mad::Duration slow_after = mad::Duration::Seconds(10);
  std::function<void(const std::string& message)> on_slow;
};

enum class RouterLaunched {
  kAlreadyServing,  // a router answered (started by someone else, or systemd's socket)
  kStarted,         // this call started it, and it answers now
};

// Makes sure a router answers on the port's socket. Errors name the log:
// FailedPrecondition when the uscmd exited before answering (its last log
// line: no permission on umad, the kernel's ib_cm owns the CM class, ...),
// DeadlineExceeded when it made no progress for stall_within or did not
// answer within ready_within (it is then sent SIGTERM), Internal when the
// lock or the fork failed.
absl::StatusOr<RouterLaunched> EnsureRouter(const RouterLaunch& launch);

// EnsureRouter for several ports at once: every port's uscmd is started
// (each under its own lock) before any is waited for, and the waits overlap,
// each by its own launch's rules, so two ports take about as long as the
// slower one rather than the sum. One result per launch, in order; a port
// whose start fails does not stop the others'.
std::vector<absl::StatusOr<RouterLaunched>> EnsureRouters(
    const std::vector<RouterLaunch>& launches);

// Where a router started on demand logs: /tmp/uscmd-<ca>-<port>.log.
std::string DefaultRouterLog(const std::string& ca_name, int port_num);

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_ROUTER_LAUNCH_H_
