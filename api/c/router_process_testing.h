// router_process_test's set-up: the router (a uscmd Server) runs in this
// process on a simulated fabric paced by the real clock; client processes
// (fork) connect over the Unix socket with RouterTransport + RealNode, or
// this process connects through the rdma_cm API, exactly as an application
// would. The peer on the other host is a CmEndpoint driven by the same pump:
// it accepts every REQ and records the events it sees.
#ifndef USCM_API_C_ROUTER_PROCESS_TESTING_H_
#define USCM_API_C_ROUTER_PROCESS_TESTING_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/endpoint.h"
#include "cm/router/router_testing.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "gtest/gtest.h"
#include "mad/time.h"

namespace uscm::router::testing {

inline constexpr uint64_t kSid = 0x0000000001060000ull | 7471;
inline constexpr uint16_t kPeerLid = 3;
inline constexpr uint32_t kLocalIp = 0x0A000001;  // 10.0.0.1

// What a child does once its connection got a REP.
enum class ChildMode { kConnect, kCrashAfterRep };

// One application process's end of the router: its socket and its Device
// (members in this order: the Device goes first).
struct RouterClient {
  std::unique_ptr<RouterTransport> transport;
  std::unique_ptr<Device> device;
};

// A Device that owns 10.0.0.1 (for AF_INET binds).
DeviceOptions WithLocalIp();

class RouterProcessFixture : public ::testing::Test {
 protected:
  // The peer listens on kSid; the router is created at path_ (not running:
  // a test runs it on a LoopThread or with RunUntilChildrenExit).
  void SetUp() override;

  // The router's options at `socket_path`, pumping the peer.
  ServerOptions OptionsAt(const std::string& socket_path);
  // A router on host1's port.
  absl::StatusOr<std::unique_ptr<Server>> CreateRouter(const ServerOptions& options);
  // A new router at path_ into server_ (SetUp's, or a restart's).
  absl::Status StartRouter();

  // A child process making `n` connections to the peer through the router;
  // it exits 0 when all are established, 2.. at a failing step.
  pid_t Spawn(int index, int n, ChildMode mode);
  // Runs the router until every child has exited and `done` (checked by the
  // server thread, in the pump) holds; returns the children's statuses.
  std::vector<int> RunUntilChildrenExit(const std::vector<pid_t>& pids,
                                        std::function<bool()> done);

  // This process as a client of the router, with a Device on it.
  absl::StatusOr<RouterClient> ConnectClient(const DeviceOptions& options = DeviceOptions{});
  // Serves (this thread) until the router has no client left, at most 20 s.
  absl::Status ServeUntilNoClients();

  // How many events of type `t` the peer has seen.
  int Count(cm::CmEventType t) const;
  const mad::Gid& peer_gid() const { return peer_tx_->port().gid; }

  // Members in this order: server_ goes before the peer and the ports.
  std::string dir_, path_;
  mad::RealClock clock_;
  mad::TimePoint start_;
  std::function<bool()> done_;
  std::atomic<bool> done_flag_{false};
  SimPorts sim_;
  sim::Scheduler* sched_ = nullptr;
  sim::SimTransport* wire_ = nullptr;     // the router's port (host1)
  sim::SimTransport* peer_tx_ = nullptr;  // the peer's (host2)
  std::unique_ptr<cm::CmEndpoint> peer_;
  std::unique_ptr<Server> server_;
  std::vector<cm::CmEventType> peer_events_;
  uint32_t next_qpn_ = 0x5000;

 private:
  // Virtual time follows the real clock; the peer runs at that time.
  mad::Duration Pump();
};

// The next event on `ch` within 20 s (the device is driven by WaitEvent's
// Poll), acked; its type, status, id and detail.
struct SeenEvent {
  EventType type = EventType::kAddrError;
  int status = 0;
  CmId* id = nullptr;
  std::string detail;
};
absl::StatusOr<SeenEvent> NextEvent(EventChannel& ch);

// An RC connection to the peer through the API: AF_IB, the path given with
// the IB_PATH option (no SA), external QP mode (CONNECT_RESPONSE, Establish).
absl::StatusOr<CmId*> ConnectThroughApi(EventChannel& ch, const mad::LocalPort& port,
                                        const mad::Gid& peer_gid, uint32_t qpn);

}  // namespace uscm::router::testing

#endif  // USCM_API_C_ROUTER_PROCESS_TESTING_H_
