// A Router whose clients live in the same process: each client is a
// mad::Transport (LocalRouterClient) instead of a Unix socket. The frames are
// the socket's frames: a client's Send is encoded as a kMad frame and given
// to Router::HandleFrame, a claim as a kClaim frame; what the router's sink
// emits for a slot is decoded by that slot's client. Only the socket and the
// event loop of Server are replaced, so everything the router checks and
// routes (claims, comm ID slots, SA TIDs, tracking) is the real code.
//
// The simulator (tools/sim_world.h, --procs-per-host) runs N uscm processes
// of one host behind one LocalRouter. Delivery is synchronous: a frame for a
// client is queued at once and its arrival callback runs, so the simulated
// hop between a process and the router takes no virtual time.
#ifndef USCM_CM_ROUTER_LOCAL_ROUTER_H_
#define USCM_CM_ROUTER_LOCAL_ROUTER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cm/router/frame.h"
#include "cm/router/router.h"
#include "mad/transport.h"

namespace uscm::router {

class LocalRouterClient;

class LocalRouter {
 public:
  // `wire` (the port's QP1) must outlive the router; every client must be
  // destroyed before the router.
  LocalRouter(mad::Transport& wire, RouterOptions options = {});
  LocalRouter(const LocalRouter&) = delete;
  LocalRouter& operator=(const LocalRouter&) = delete;
  ~LocalRouter();

  // A new client (a slot and its comm ID range); ResourceExhausted when the
  // router's slots are taken.
  absl::StatusOr<std::unique_ptr<LocalRouterClient>> Connect();
  // Routes the MADs waiting on the wire to the clients; returns how many.
  size_t PollWire(size_t max = SIZE_MAX) { return router_.PollWire(max); }

  const Router& router() const { return router_; }
  const RouterCounters& counters() const { return router_.counters(); }
  // Frames the sink had for a slot with no client (a client that went away).
  uint64_t frames_for_no_client() const { return frames_for_no_client_; }

 private:
  friend class LocalRouterClient;
  void Deliver(uint8_t slot, std::span<const uint8_t> frame,
               const std::shared_ptr<mad::PortPage>& page = nullptr);
  void Disconnect(uint8_t slot);

  Router router_;
  std::vector<LocalRouterClient*> clients_;  // by slot
  uint64_t frames_for_no_client_ = 0;
};

struct LocalRouterClientCounters {
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t refused = 0;      // MADs the router would not send
  uint64_t undecodable = 0;  // frames from the router that did not decode
};

// One process's side of a LocalRouter: a mad::Transport like RouterTransport,
// without the socket. fd() is -1; a caller learns of arrivals from
// set_on_arrival (the simulator's scheduler) or by polling pending().
class LocalRouterClient final : public mad::Transport {
 public:
  ~LocalRouterClient() override;  // the router cleans up as for a closed socket

  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override;
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink,
               size_t max = SIZE_MAX) override;
  int fd() const override { return -1; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return welcome_.port; }
  // Answered synchronously: the router replies inside HandleFrame.
  absl::Status ClaimService(uint64_t service_id, uint64_t mask, bool reuse,
                            const mad::ListenAddress& address = {},
                            mad::ClaimKind kind = mad::ClaimKind::kListen) override;
  void ReleaseService(uint64_t service_id, uint64_t mask, const mad::ListenAddress& address = {},
                      mad::ClaimKind kind = mad::ClaimKind::kListen) override;
  // The router's page itself (on the heap), no memfd.
  absl::StatusOr<mad::PortLease> LeasePorts(uint16_t port_space) override;

  size_t pending() const { return inbox_.size(); }
  // Runs whenever a MAD is queued for Drain.
  void set_on_arrival(std::function<void()> cb) { on_arrival_ = std::move(cb); }
  uint8_t slot() const { return welcome_.slot; }
  const absl::Status& last_refusal() const { return last_refusal_; }
  const LocalRouterClientCounters& counters() const { return counters_; }

 private:
  friend class LocalRouter;
  LocalRouterClient(LocalRouter& router, Welcome welcome);
  void Receive(std::span<const uint8_t> frame, const std::shared_ptr<mad::PortPage>& page);
  absl::Status Request(FrameType type, const ClaimFrame& claim);

  LocalRouter& router_;
  Welcome welcome_;
  mad::TransportCaps caps_;
  std::deque<std::pair<mad::MadAddress, std::vector<uint8_t>>> inbox_;
  std::function<void()> on_arrival_;
  std::vector<uint8_t> out_;
  uint32_t next_request_ = 1;
  std::vector<ReplyFrame> replies_;
  std::vector<absl::StatusOr<mad::PortLease>> leases_;  // the answer to LeasePorts
  absl::Status last_refusal_;
  LocalRouterClientCounters counters_;
};

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_LOCAL_ROUTER_H_
