// uscmd's event loop: a Router (cm/router/router.h) behind a Unix
// SOCK_SEQPACKET socket. One thread runs Run(); Stop() may be called from any
// thread. Each accepted connection must open with a hello frame; the router
// answers with a welcome (slot, comm ID range, port) or a refusal.
//
// The wire transport's fd joins the epoll set; a transport without one (the
// simulated fabric) is driven by `pump`, called on every turn of the loop; a
// fd that epoll refuses (umad2sim's fake fd under ibsim) is drained every
// millisecond.
#ifndef USCM_CM_ROUTER_SERVER_H_
#define USCM_CM_ROUTER_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cm/router/frame_batch.h"
#include "cm/router/router.h"
#include "mad/time.h"
#include "mad/transport.h"

namespace uscm::router {

struct ServerOptions {
  // A stale socket file there (no router answers on it) is replaced; a live
  // router's socket is never touched (Create fails with AlreadyExists).
  std::string socket_path;
  // The socket file's mode. 0666: any local user may connect, as any user may
  // open /dev/infiniband/rdma_cm; the router is the boundary (each client
  // only sends for its own comm IDs and TIDs, listens below port 1024 need
  // CAP_NET_BIND_SERVICE from the peer credentials). 0660 plus a group
  // (chown by the service manager) restricts it to that group.
  uint32_t socket_mode = 0666;
  RouterOptions router;
  // Socket activation: an already bound, listening socket (systemd's
  // LISTEN_FDS, see ActivatedListenFd). The server neither binds nor
  // unlinks socket_path then (the service manager owns the file), and the
  // fd is closed with the server.
  int listen_fd = -1;
  // Run() returns on its own once no client has been connected for this long
  // (zero: never), so a router started on demand (uscm exec) does not outlive
  // its programs. Any socket connection counts, even before its hello.
  mad::Duration idle_exit = mad::Duration::Zero();
  // For a transport without an fd: advances it (delivers MADs that are due)
  // and returns how long the loop may sleep before calling it again.
  std::function<mad::Duration()> pump;
  // SO_SNDBUF of each client's socket (the kernel caps it at
  // net.core.wmem_max: 208 KiB by default, ~300 MAD frames). Frames beyond it
  // wait in the server's queue (ServerCounters::queued_to_client).
  int client_send_buffer = 4 << 20;
};

struct ServerCounters {
  uint64_t accepted = 0;         // socket connections
  uint64_t bad_hello = 0;        // first frame was not a hello
  uint64_t other_release_hellos = 0;  // a hello of another frame version (refused)
  uint64_t no_credentials = 0;   // SO_PEERCRED failed: treated as unprivileged
  // A client's socket full (a process slower than the wire: 1,000 REQs at once
  // for cmtime's server): frames wait in the client's queue, in order, until
  // the socket takes them (EPOLLOUT); only beyond kMaxQueuedFrames is one lost.
  uint64_t queued_to_client = 0;   // frames that had to wait
  uint64_t max_client_queue = 0;   // the longest a client's queue was
  uint64_t dropped_to_client = 0;  // queue full: the frame is lost (the CM's retries cover it)
  // A MAD identical to one still waiting in the client's queue (a peer's
  // retransmission of a request the client has not read yet): not queued
  // twice. The client would only answer the copy as a duplicate (an MRA per
  // duplicate REQ, an RTU per duplicate REP), and under load each such answer
  // made the peer's queue longer: the retry storm (docs/ROUTER.md).
  uint64_t duplicates_not_queued = 0;
  uint64_t client_receive_calls = 0;  // recvmmsg(2) calls on the clients' sockets
  uint64_t wire_polls = 0;            // loop turns that read the wire
};

// Frames that may wait for one client before one is dropped (a MAD frame is
// ~300 bytes: at most ~20 MB for a client that stopped reading).
inline constexpr size_t kMaxQueuedFrames = 1 << 16;

// Whether a router answers on `socket_path` (a connect succeeds): a live
// router's socket, never to be unlinked. A stale socket file or none: false.
bool RouterServesAt(const std::string& socket_path);

// systemd socket activation (sd_listen_fds(3)): the passed listening socket
// (fd 3) when LISTEN_PID is `self` and LISTEN_FDS is 1, -1 when nothing was
// passed (either variable unset, or LISTEN_PID another process's: inherited
// from a parent). More than one fd or a malformed value is an error.
absl::StatusOr<int> ActivatedListenFd(const char* listen_pid, const char* listen_fds, pid_t self);

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Create(mad::Transport& wire,
                                                        ServerOptions options);
  ~Server();  // closes every client and unlinks the socket
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Waits up to `timeout` for work, then does it. Returns the ready fd count.
  absl::StatusOr<int> RunOnce(mad::Duration timeout);
  // Loops until Stop(), until idle_exit has passed without a client, or
  // until the wire is lost for good (wire_lost()).
  absl::Status Run();
  void Stop();
  // Whether idle_exit has passed at `now` without any client connected:
  // the idle time starts at the first call after the last client left.
  bool IdleExpired(mad::TimePoint now);
  // Whether Run() returned because of idle_exit.
  bool idle_exited() const { return idle_exited_; }
  // OK, or why the wire is gone for good (mad::Transport::link_status: the
  // port's umad file reads EIO once its device was removed, and epoll
  // reports it ready for ever): Run() then returns, as nothing can be served
  // (and the program's next start opens the port again, its device back).
  absl::Status wire_lost() const { return wire_.link_status(); }

  // Read these only while no thread runs the loop.
  const Router& router() const { return *router_; }
  const ServerCounters& counters() const { return counters_; }
  const std::string& socket_path() const { return options_.socket_path; }

 private:
  Server(mad::Transport& wire, ServerOptions options);
  absl::Status Init();
  absl::Status WatchFds();
  void Accept();
  void ReadClient(int fd);
  bool HandleClientFrame(int fd, std::span<const uint8_t> frame);
  void CloseClient(int fd);
  // `page`: a lease reply's, sent as SCM_RIGHTS with the frame.
  void SendTo(uint8_t slot, std::span<const uint8_t> frame,
              const std::shared_ptr<mad::PortPage>& page = nullptr);
  // Sends what waits in the client's queue until the socket is full again;
  // watches EPOLLOUT exactly while something waits.
  void Flush(int fd);
  void WatchWritable(int fd, bool on);

  mad::Transport& wire_;
  ServerOptions options_;
  std::unique_ptr<Router> router_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;
  struct Conn {
    uint8_t slot = 0;  // 0 until the hello
    ClientCredentials creds;  // SO_PEERCRED at accept
    // Frames the socket had no room for; a lease reply keeps its page (the
    // fd goes with the frame).
    struct Outgoing {
      std::vector<uint8_t> frame;
      std::shared_ptr<mad::PortPage> page;
    };
    std::deque<Outgoing> queued;
    // How many MAD frames in `queued` have each 64-bit hash of their bytes
    // (SendTo compares the bytes before it drops a copy).
    absl::flat_hash_map<uint64_t, uint32_t> queued_mads;
    bool watching_out = false;
  };
  absl::flat_hash_map<int, Conn> conns_;     // by fd
  absl::flat_hash_map<uint8_t, int> by_slot_;
  FrameBatch batch_;  // ReadClient's
  std::atomic<bool> stop_{false};
  // False when epoll refused the wire's fd (umad2sim): drained every tick.
  bool wire_fd_watched_ = true;
  bool owns_socket_file_ = true;  // false when the socket came from socket activation
  std::optional<mad::TimePoint> idle_since_;
  bool idle_exited_ = false;
  static constexpr mad::Duration kUnwatchedWireTick = mad::Duration::Millis(1);
  ServerCounters counters_;
};

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_SERVER_H_
