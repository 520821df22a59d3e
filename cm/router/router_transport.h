// The client side of uscmd: a mad::Transport over the router's Unix socket,
// so a process that cannot own the port's QP1 (another process or the
// kernel's ib_cm has it) runs the same CM and API over the router:
//
//   auto t = router::RouterTransport::Connect("/run/uscm/mlx5_0-1.sock");
//   auto dev = uscm::Device::Create(**t, options);   // nothing else changes
//
// caps() carries the comm ID range the router gave this process, and
// cm::Node makes its endpoint allocate inside it. ClaimService (called by
// rdma_cm's listen) asks the router for REQs of a service ID.
//
// When the router goes away (restart, crash) the transport breaks for good:
// Send returns Unavailable naming the socket, status() says the same and the
// fd stops waking the caller. The Device over it delivers
// RDMA_CM_EVENT_DEVICE_REMOVAL (status -ENODEV, detail = that message) on
// every id. Reconnecting means a new RouterTransport (a new range) and a new
// Device; the old connections are gone with the old router.
#ifndef USCM_CM_ROUTER_ROUTER_TRANSPORT_H_
#define USCM_CM_ROUTER_ROUTER_TRANSPORT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "cm/router/frame.h"
#include "cm/router/frame_batch.h"
#include "cm/runtime.h"
#include "mad/time.h"
#include "mad/transport.h"

namespace uscm::router {

struct RouterTransportCounters {
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t refused = 0;  // MADs the router would not send (see last_refusal())
  // recvmmsg(2) calls of Drain: one takes every frame queued (up to
  // FrameBatch::kSlots), and fewer than asked means the socket is empty.
  uint64_t receive_calls = 0;
  // Answers to ReleaseServiceNoWait's releases, dropped as they came.
  uint64_t unawaited_answers = 0;
};

class RouterTransport final : public mad::Transport {
 public:
  // Connects and does the hello / welcome handshake within `timeout`.
  // Unavailable when no router listens at `socket_path`.
  static absl::StatusOr<std::unique_ptr<RouterTransport>> Connect(
      const std::string& socket_path, mad::Duration timeout = mad::Duration::Seconds(30));
  ~RouterTransport() override;

  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override;
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink,
               size_t max = SIZE_MAX) override;
  int fd() const override { return fd_; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return welcome_.port; }
  // Waits (up to 30 s) for the router's answer; MADs arriving meanwhile are
  // kept for Drain.
  absl::Status ClaimService(uint64_t service_id, uint64_t mask, bool reuse,
                            const mad::ListenAddress& address = {},
                            mad::ClaimKind kind = mad::ClaimKind::kListen) override;
  void ReleaseService(uint64_t service_id, uint64_t mask, const mad::ListenAddress& address = {},
                      mad::ClaimKind kind = mad::ClaimKind::kListen) override;
  // Sends the release and returns; its answer is dropped when it comes.
  void ReleaseServiceNoWait(uint64_t service_id, uint64_t mask, const mad::ListenAddress& address,
                            mad::ClaimKind kind) override;
  // Waits for the router's answer as ClaimService; the block's page comes
  // as a memfd with it (SCM_RIGHTS) and is mapped here.
  absl::StatusOr<mad::PortLease> LeasePorts(uint16_t port_space) override;

  // OK while the router is there; Unavailable once it closed the socket.
  const absl::Status& status() const { return status_; }
  // mad::Transport: the same (a Node over this transport turns a loss into
  // DEVICE_REMOVAL on every rdma_cm id).
  absl::Status link_status() const override { return status_; }
  const absl::Status& last_refusal() const { return last_refusal_; }
  uint8_t slot() const { return welcome_.slot; }
  const RouterTransportCounters& counters() const { return counters_; }

 private:
  RouterTransport(int fd, std::string path, Welcome welcome);
  void Break(absl::string_view why);
  // Reads frames (queueing MADs) until the reply to `request` (a claim or a
  // release); `what` names it in the timeout error.
  absl::Status AwaitReply(uint32_t request, const std::string& what);
  absl::optional<uint32_t> SendRelease(uint64_t service_id, uint64_t mask,
                                       const mad::ListenAddress& address, mad::ClaimKind kind);
  // `page_fd`: a descriptor that came with the frame (-1: none), closed here.
  void Handle(std::span<const uint8_t> frame,
              absl::FunctionRef<void(const mad::ReceivedMad&)>* sink, int page_fd = -1);

  int fd_ = -1;
  std::string path_;
  Welcome welcome_;
  mad::TransportCaps caps_;
  absl::Status status_;
  absl::Status last_refusal_;
  std::vector<uint8_t> buf_;
  FrameBatch batch_;  // Drain's
  std::vector<uint8_t> out_;
  // MADs read while waiting for a reply, handed out by the next Drain.
  std::deque<std::pair<mad::MadAddress, std::vector<uint8_t>>> held_;
  uint32_t next_request_ = 1;
  std::vector<ReplyFrame> replies_;
  // Granted leases by request (their status is in replies_ too).
  std::vector<std::pair<uint32_t, mad::PortLease>> leases_;
  std::vector<uint32_t> unawaited_;  // ReleaseServiceNoWait's requests, answers still to come
  RouterTransportCounters counters_;
};

// Where uscmd listens for port `port_num` of CA `ca_name` unless told
// otherwise: /tmp/uscmd-<ca>-<port>.sock.
std::string DefaultRouterSocket(const std::string& ca_name, int port_num);

// The automatic choice: a router that answers at `socket_path` first (every
// process of a host then shares it, and it cleans up for a killed one); else
// `open_owner` tries to own the port (umad); when that fails with
// FailedPrecondition (the CM class is taken: EINVAL from umad_register) the
// router at `socket_path` is tried again. Any other error is returned as is.
absl::StatusOr<std::unique_ptr<mad::Transport>> OpenOwnerOrRouter(
    const std::function<absl::StatusOr<std::unique_ptr<mad::Transport>>()>& open_owner,
    const std::string& socket_path);

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_ROUTER_TRANSPORT_H_
