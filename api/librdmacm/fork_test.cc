// fork() while a thread of the library holds its lock (fork_locks.h): the
// child's calls on the simulated port (ids_testing.h) complete. fork() after
// the parent opened a port through a router: the child opens its own and
// connects, the parent's ids are refused in it and stay the parent's.
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/c/router_process_testing.h"
#include "api/c/uscm_cma.h"
#include "api/c/uscm_sim_c.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/fork_locks.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"
#include "api/librdmacm/ports.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/router/router_transport.h"
#include "gtest/gtest.h"
#include "mad/wire/path_record.h"

namespace uscm::librdmacm {
namespace {

using Clock = std::chrono::steady_clock;

// In the child: the next event on `ch` is `want` (the fabric run until the
// port has one). No gtest assertion in a child: the exit code says.
bool ChildGets(uscm_sim* sim, rdma_event_channel* ch, rdma_cm_event_type want) {
  if (QueuedEvents(ch) == 0) {
    if (uscm_sim_run_until_event(sim, BackendChannel(), 120000) != 0 || PumpEvents() <= 0) {
      return false;
    }
  }
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch, &e) != 0) return false;
  const bool ok = e->event == want && e->status == 0;
  rdma_ack_cm_event(e);
  return ok;
}

// The child's own channel and id, on the simulated port (the test's device,
// given opened: not left to the parent, the child's copy of the fabric runs
// here): create, bind, resolve the address and the route (an SA query on the
// fabric).
int ChildCalls(uscm_sim* sim) {
  rdma_event_channel* ch = NewNonBlockingChannel();
  if (ch == nullptr) return 2;
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) return 3;
  sockaddr_in src = Ipv4("10.0.0.1", 7501);
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&src)) != 0) return 4;
  sockaddr_in dst = Ipv4("10.0.0.2", 7502);
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0) return 5;
  if (!ChildGets(sim, ch, RDMA_CM_EVENT_ADDR_RESOLVED)) return 6;
  if (rdma_resolve_route(id, 2000) != 0) return 7;
  if (!ChildGets(sim, ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) return 8;
  if (rdma_destroy_id(id) != 0) return 9;
  rdma_destroy_event_channel(ch);
  return 0;
}

void Sleep() { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }

// The exit status of `child`, waited for up to `bound` (then killed: -1),
// running `idle` between the checks.
int WaitBounded(pid_t child, std::chrono::seconds bound, void (*idle)(void*) = nullptr,
                void* arg = nullptr) {
  const Clock::time_point end = Clock::now() + bound;
  int status = 0;
  while (Clock::now() < end) {
    const pid_t got = waitpid(child, &status, WNOHANG);
    if (got == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (got < 0) return -2;
    if (idle != nullptr) {
      idle(arg);
    } else {
      Sleep();
    }
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  return -1;
}

// A thread holds the library's lock, as a port's progress hook does while it
// moves events, when another thread forks. Without the pthread_atfork
// handlers the child's copy of the lock stayed held and its first call
// (rdma_create_id) waited for ever; with them the fork waits for the lock,
// and the child's calls complete.
TEST_F(IdsTest, AChildForkedWhileALibraryThreadHoldsTheLockMakesItsCalls) {
  // Make the port's id tables and the event pool exist before the fork (the
  // child's calls then take locks that existed in the parent).
  rdma_cm_id* mine = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &mine, nullptr, RDMA_PS_TCP), 0) << strerror(errno);

  std::atomic<bool> held{false}, forked{false};
  const uint64_t prepares = ForkPrepares();
  // The holder lets go once the fork's prepare handler waits for the lock
  // (or after a bound: without the handler no prepare ever comes), then
  // waits for the fork to return before it exits (a thread's exit
  // allocates: under ASan a fork then could copy the allocator's lock held).
  std::thread holder([&] {
    {
      std::lock_guard<std::mutex> lock(LibraryLockForTesting());
      held.store(true);
      const Clock::time_point end = Clock::now() + std::chrono::seconds(20);
      while (ForkPrepares() == prepares && Clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    while (!forked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!held.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const pid_t child = fork();
  if (child == 0) _exit(ChildCalls(sim_));
  forked.store(true);
  const int status = child > 0 ? WaitBounded(child, std::chrono::seconds(30)) : -3;
  holder.join();
  ASSERT_GT(child, 0) << strerror(errno);
  EXPECT_EQ(status, 0)
      << "the child's step (-1: still running after 30 s, its copy of the lock held)";
  EXPECT_GT(ForkPrepares(), prepares);

  // The parent's lock was given back: its calls go on.
  sockaddr_in src = Ipv4("10.0.0.1", 7503);
  EXPECT_EQ(rdma_bind_addr(mine, reinterpret_cast<sockaddr*>(&src)), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(mine), 0);
}

// ---- A port the parent opened through a router ----

// The drop-in's port (10.0.0.1) is host1's on the fixture's simulated fabric,
// shared through its router: a uscmd Server in this process on a Unix socket,
// whose peer on host2 (10.0.0.2, kPeerLid) accepts every REQ. Each open of
// the port is a connection of its own to the router with a Device and its
// progress thread, as uscm_device_open's through the host's uscmd; a child's
// open connects again (to the router the parent serves meanwhile).
struct RouterPortDevice {
  std::unique_ptr<router::RouterTransport> transport;
  std::unique_ptr<Device> device;
  uscm_device* handle = nullptr;
};

struct RouterPort {
  std::string path;
  mad::Gid local_gid, peer_gid;
  uint16_t local_lid = 0;
  std::vector<RouterPortDevice> opened;  // this process's opens
};

RouterPort& TheRouterPort() {
  static auto* p = new RouterPort;
  return *p;
}

uscm_device* OpenThroughRouter(ibv_context*, int) {
  RouterPort& rp = TheRouterPort();
  auto t = router::RouterTransport::Connect(rp.path, mad::Duration::Seconds(20));
  if (!t.ok()) {
    errno = ECONNREFUSED;
    return nullptr;
  }
  DeviceOptions o = router::testing::WithLocalIp();
  o.resolve_neighbour = [](const Address&, const Address&,
                           mad::Duration) -> absl::StatusOr<absl::optional<mad::Gid>> {
    return absl::optional<mad::Gid>(TheRouterPort().peer_gid);
  };
  auto d = Device::Create(**t, o);
  if (!d.ok() || !(*d)->StartProgressThread().ok()) {
    errno = EIO;
    return nullptr;
  }
  RouterPortDevice opened{std::move(*t), std::move(*d), nullptr};
  opened.handle = uscm_device_wrap(opened.device.get());
  rp.opened.push_back(std::move(opened));
  return rp.opened.back().handle;
}

// The next event on `ch` is `want` with status 0, within 20 s. The port's
// device is not one of uscm_device_open's (no progress hook): its events are
// moved here; `idle` runs between the looks (it serves the router when no
// thread does).
bool Next(rdma_event_channel* ch, rdma_cm_event_type want, const std::function<void()>& idle) {
  const Clock::time_point end = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < end) {
    PumpEvents();
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(ch, &e) == 0) {
      const bool ok = e->event == want && e->status == 0;
      rdma_ack_cm_event(e);
      return ok;
    }
    if (errno != EAGAIN) return false;
    idle();
  }
  return false;
}

// An RC connection from 10.0.0.1:`src_port` to the peer's 10.0.0.2:7471 (the
// fixture's kSid), the route given with RDMA_OPTION_IB_PATH (the simulated
// fabric has no SA), the program's own QP number (CONNECT_RESPONSE,
// rdma_establish): 0, or the failing step.
int ConnectToPeer(rdma_event_channel* ch, uint16_t src_port, const std::function<void()>& idle,
                  rdma_cm_id** out) {
  if (rdma_create_id(ch, out, nullptr, RDMA_PS_TCP) != 0) return 1;
  rdma_cm_id* id = *out;
  sockaddr_in src = Ipv4("10.0.0.1", src_port);
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&src)) != 0) return 2;
  sockaddr_in dst = Ipv4("10.0.0.2", 7471);
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0) return 3;
  if (!Next(ch, RDMA_CM_EVENT_ADDR_RESOLVED, idle)) return 4;
  const RouterPort& rp = TheRouterPort();
  mad::wire::PathRecord r;
  r.sgid = rp.local_gid;
  r.dgid = rp.peer_gid;
  r.slid = rp.local_lid;
  r.dlid = router::testing::kPeerLid;
  r.pkey = 0xFFFF;
  r.reversible = true;
  r.mtu = mad::wire::Mtu::k2048;
  r.rate = 3;
  r.packet_life_time = 12;
  uscm_path_data path = {};
  path.flags = USCM_PATH_FLAG_GMP | USCM_PATH_FLAG_PRIMARY | USCM_PATH_FLAG_BIDIRECTIONAL;
  if (!r.Emit(path.path_rec).ok() ||
      rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &path, sizeof path) != 0) {
    return 5;
  }
  if (rdma_resolve_route(id, 2000) != 0) return 6;
  if (!Next(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, idle)) return 7;
  rdma_conn_param param = {};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.qp_num = 0x31 + src_port;
  if (rdma_connect(id, &param) != 0) return 8;
  if (!Next(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, idle)) return 9;
  if (rdma_establish(id) != 0) return 10;
  return 0;
}

// In the child: its own channel and connection on the port its parent
// opened, then the parent's channel `ch` and connected id `mine`, each
// refused with EACCES (as the kernel's ucma_write refuses the parent's fd)
// and left alone; its own connection torn down. 0, or the failing step.
int ChildOnRouterPort(rdma_event_channel* ch, rdma_cm_id* mine) {
  rdma_event_channel* own = NewNonBlockingChannel();
  if (own == nullptr) return 20;
  rdma_cm_id* id = nullptr;
  if (const int step = ConnectToPeer(own, 7602, Sleep, &id); step != 0) return 20 + step;
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch, &e) == 0 || errno != EACCES) return 40;
  if (rdma_disconnect(mine) == 0 || errno != EACCES) return 41;
  rdma_cm_id* other = nullptr;
  if (rdma_create_id(ch, &other, nullptr, RDMA_PS_TCP) == 0 || errno != EACCES) return 42;
  if (rdma_destroy_id(mine) == 0 || errno != EACCES) return 43;
  rdma_destroy_event_channel(ch);  // the child's copy: the parent's id stays connected
  if (rdma_disconnect(id) != 0) return 50;
  if (!Next(own, RDMA_CM_EVENT_DISCONNECTED, Sleep)) return 51;
  if (rdma_destroy_id(id) != 0) return 52;
  rdma_destroy_event_channel(own);
  return 0;
}

class ForkOnRouterPortTest : public router::testing::RouterProcessFixture {
 protected:
  void SetUp() override {
    RouterProcessFixture::SetUp();
    RouterPort& rp = TheRouterPort();
    rp.path = path_;
    rp.local_gid = wire_->port().gid;
    rp.local_lid = wire_->port().lid;
    rp.peer_gid = peer_gid();
    // A simulated table with no port, then the router's, listed unopened:
    // the first call that needs it opens it through OpenThroughRouter.
    ASSERT_EQ(UseDevicesForTesting({}, {}), 0) << strerror(errno);
    SetPortDevicesForTesting(OpenThroughRouter, nullptr);
    Addr16 ip{};
    ip[10] = ip[11] = 0xff;
    ip[12] = 10;
    ip[15] = 1;
    ASSERT_EQ(AddUnopenedDeviceForTesting({ip}), 0) << strerror(errno);
  }
  void TearDown() override {
    ResetBackendForTesting();
    SetPortDevicesForTesting(nullptr, nullptr);
    for (RouterPortDevice& d : TheRouterPort().opened) {
      d.device->StopProgressThread();
      uscm_device_unwrap_free(d.handle);
    }
    TheRouterPort().opened.clear();
  }

  // Serves the router on a thread for its life (Server::Run cannot run
  // again once stopped: RunOnce turns).
  class ServingThread {
   public:
    explicit ServingThread(ForkOnRouterPortTest* test)
        : thread_([this, test] {
            while (!stop_.load()) test->Serve();
          }) {}
    ~ServingThread() {
      stop_.store(true);
      thread_.join();
    }

   private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
  };

 public:
  // One turn of the router's loop.
  void Serve() { (void)server_->RunOnce(mad::Duration::Millis(1)); }
};

// A parent connects on the router's port (its open: the parent's connection
// to the router), then forks. The child's own id on that port connects to
// the peer through a connection of its own to the router, and its calls on
// the parent's channel and id fail with EACCES; it exits 0 (the parent waits
// with a 60 s bound, serving the router). Then the parent's connection is
// still its own: the peer saw the child's disconnect only, and the parent's
// disconnect is answered. Without the child's own open the child's calls ran
// on its copy of the parent's device, whose answers the parent's progress
// thread reads (checked: the child's REQ was never answered, exit 29 after
// its 20 s wait for CONNECT_RESPONSE; the peer saw 1 connection, not 2).
TEST_F(ForkOnRouterPortTest, AChildConnectsOnAPortItsParentOpenedAndLeavesTheParentsIdsAlone) {
  rdma_event_channel* ch = NewNonBlockingChannel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* mine = nullptr;
  {
    // A thread serves the router while the port opens (the hello handshake
    // waits for it); none runs at the fork.
    const ServingThread serving(this);
    ASSERT_EQ(ConnectToPeer(ch, 7601, Sleep, &mine), 0) << strerror(errno);
  }
  ASSERT_EQ(TheRouterPort().opened.size(), 1u);
  const pid_t child = fork();
  if (child == 0) _exit(ChildOnRouterPort(ch, mine));
  ASSERT_GT(child, 0) << strerror(errno);
  const int status = WaitBounded(
      child, std::chrono::seconds(60),
      [](void* test) { static_cast<ForkOnRouterPortTest*>(test)->Serve(); }, this);
  EXPECT_EQ(status, 0) << "the child's step (-1: still running after 60 s)";
  EXPECT_EQ(TheRouterPort().opened.size(), 1u) << "the child's open was the child's";
  const std::function<void()> serve = [this] { Serve(); };
  const Clock::time_point end = Clock::now() + std::chrono::seconds(20);
  while (Count(cm::CmEventType::kDisconnected) < 1 && Clock::now() < end) Serve();
  EXPECT_EQ(Count(cm::CmEventType::kEstablished), 2) << "the parent's and the child's";
  EXPECT_EQ(Count(cm::CmEventType::kDisconnected), 1) << "the child's only";

  ASSERT_EQ(rdma_disconnect(mine), 0) << strerror(errno);
  EXPECT_TRUE(Next(ch, RDMA_CM_EVENT_DISCONNECTED, serve));
  EXPECT_EQ(Count(cm::CmEventType::kDisconnected), 2);
  const ServingThread serving(this);  // the id's release waits for the router's answer
  EXPECT_EQ(rdma_destroy_id(mine), 0) << strerror(errno);
  rdma_destroy_event_channel(ch);
}

// A child whose own open of the port fails (here its router connection is
// refused; with USCM_NO_USCMD the parent's umad file is EBUSY) gets that
// error from the call that needed the port, at once, and the parent's open
// is not used instead; the parent's connection to the router stays its own.
// Without the change (checked) the child's bind ran on its copy of the
// parent's device and succeeded (the child's step 2).
TEST_F(ForkOnRouterPortTest, AChildWhoseOwnOpenFailsGetsTheErrorNotTheParentsPort) {
  rdma_event_channel* ch = NewNonBlockingChannel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* mine = nullptr;
  {
    const ServingThread serving(this);
    ASSERT_EQ(rdma_create_id(ch, &mine, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in src = Ipv4("10.0.0.1", 7603);
    ASSERT_EQ(rdma_bind_addr(mine, reinterpret_cast<sockaddr*>(&src)), 0) << strerror(errno);
  }
  const pid_t child = fork();
  if (child == 0) {
    TheRouterPort().path += ".nowhere";  // the child's open is refused
    rdma_event_channel* own = NewNonBlockingChannel();
    rdma_cm_id* id = nullptr;
    if (own == nullptr || rdma_create_id(own, &id, nullptr, RDMA_PS_TCP) != 0) _exit(1);
    sockaddr_in src = Ipv4("10.0.0.1", 7604);
    if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&src)) == 0) _exit(2);
    if (errno != ECONNREFUSED) _exit(3);
    _exit(TheRouterPort().opened.size() == 1 ? 0 : 4);
  }
  ASSERT_GT(child, 0) << strerror(errno);
  const int status = WaitBounded(
      child, std::chrono::seconds(60),
      [](void* test) { static_cast<ForkOnRouterPortTest*>(test)->Serve(); }, this);
  EXPECT_EQ(status, 0) << "the child's step (-1: still running after 60 s)";
  const ServingThread serving(this);  // the parent's bind and its release talk to the router
  rdma_cm_id* again = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &again, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in src = Ipv4("10.0.0.1", 7605);
  EXPECT_EQ(rdma_bind_addr(again, reinterpret_cast<sockaddr*>(&src)), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(again), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(mine), 0) << strerror(errno);
  rdma_destroy_event_channel(ch);
}

}  // namespace
}  // namespace uscm::librdmacm
