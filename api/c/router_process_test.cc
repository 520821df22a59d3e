// uscmd end to end: the router runs in this process (a Server thread) on a
// simulated fabric paced by the real clock; client processes (fork) connect
// over the Unix socket with RouterTransport + RealNode, exactly as an
// application would. The peer on the other host is a CmEndpoint driven by
// the same pump. Outcomes are read after the server thread has stopped.
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/cm_testing.h"
#include "cm/endpoint.h"
#include "cm/router/router_testing.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "cm/runtime.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"

namespace uscm::router {
namespace {

using cm::CmEvent;
using cm::CmEventType;
using ::uscm::CmId;
using ::uscm::Device;
using ::uscm::DeviceOptions;
using ::uscm::EventChannel;
using ::uscm::EventType;
using ::uscm::IdOptions;
using ::uscm::IdState;
using ::uscm::PortSpace;
using ::uscm::ConnParam;
using ::uscm::Address;

constexpr uint64_t kSid = 0x0000000001060000ull | 7471;
constexpr uint16_t kPeerLid = 3;
constexpr mad::Duration kChildDeadline = mad::Duration::Seconds(60);

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

// What a child does once its connection got a REP.
enum class ChildMode { kConnect, kCrashAfterRep };

// Runs in the child: `n` connections to the peer through the router. Exit
// code 0 = all established; 2.. = a failure step.
[[noreturn]] void ChildMain(const std::string& path, const mad::Gid& peer_gid, int index, int n,
                            ChildMode mode) {
  auto t = RouterTransport::Connect(path);
  if (!t.ok()) _exit(2);
  auto node = cm::RealNode::Create(**t, cm::NodeOptions{});
  if (!node.ok()) _exit(3);
  cm::RealNode& nd = **node;
  int established = 0;
  {
    std::lock_guard<std::mutex> lock(nd.mutex());
    for (int k = 0; k < n; ++k) {
      cm::ConnectParams p = cm::testing::MakeConnect(0x1000 * (index + 1) + k);
      p.service_id = kSid;
      p.primary.local_lid = (*t)->port().lid;
      p.primary.remote_lid = kPeerLid;
      p.primary.local_gid = (*t)->port().gid;
      p.primary.remote_gid = peer_gid;
      p.remote_cm_response_timeout = 20;  // ~4.3 s: generous under load
      p.local_cm_response_timeout = 20;
      p.max_cm_retries = 8;
      if (!nd.cm().Connect(nd.Now(), p).ok()) _exit(4);
    }
    nd.FlushLocked();
  }
  mad::RealClock clock;
  const mad::TimePoint deadline = clock.Now() + kChildDeadline;
  while (established < n && clock.Now() < deadline) {
    if (!nd.Poll(mad::Duration::Millis(50)).ok()) _exit(5);
    std::lock_guard<std::mutex> lock(nd.mutex());
    CmEvent e;
    while (nd.cm().PollEvent(&e)) {
      if (e.type == CmEventType::kConnectResponse) {
        if (mode == ChildMode::kCrashAfterRep) kill(getpid(), SIGKILL);
        if (!nd.cm().Rtu(nd.Now(), e.conn).ok()) _exit(6);
      } else if (e.type == CmEventType::kEstablished) {
        ++established;
      } else if (e.type != CmEventType::kMraReceived) {
        _exit(20 + static_cast<int>(e.type));  // rejected / unreachable / ...
      }
    }
    nd.FlushLocked();
  }
  _exit(established == n ? 0 : 8);
}

class RouterProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ShortSocketDir();
    path_ = dir_ + "/uscmd.sock";
    auto p = testing::OpenSimPorts(/*seed=*/3);
    ASSERT_TRUE(p.ok()) << p.status();
    sim_ = std::move(*p);
    sched_ = sim_.scheduler.get();
    wire_ = sim_.host1.get();
    peer_tx_ = sim_.host2.get();
    peer_ = std::make_unique<cm::CmEndpoint>(peer_tx_->port(), cm::CmConfig{}, 5);
    ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 1024, false).ok());
    start_ = clock_.Now();
    ServerOptions o;
    o.socket_path = path_;
    o.pump = [this] { return Pump(); };
    auto s = Server::Create(*wire_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  // Virtual time follows the real clock; the peer runs at that time.
  mad::Duration Pump() {
    const mad::TimePoint target = mad::TimePoint::Epoch() + (clock_.Now() - start_);
    if (target > sched_->Now()) (void)sched_->RunFor(target - sched_->Now());
    const mad::TimePoint now = sched_->Now();
    peer_tx_->Drain([&](const mad::ReceivedMad& r) { peer_->HandleMad(now, r.from, r.data); });
    peer_->HandleTimeout(now);
    CmEvent e;
    while (peer_->PollEvent(&e)) {
      peer_events_.push_back(e.type);
      if (e.type == CmEventType::kConnectRequest) {
        (void)peer_->Accept(now, e.conn, cm::testing::MakeAccept(next_qpn_++));
      } else if (e.type == CmEventType::kRejected || e.type == CmEventType::kDisconnected ||
                 e.type == CmEventType::kUnreachable) {
        (void)peer_->Destroy(now, e.conn);
      }
    }
    cm::OutgoingMad m;
    while (peer_->PollTransmit(&m)) (void)peer_tx_->Send(m.to, m.mad);
    if (done_ && done_()) done_flag_ = true;
    return mad::Duration::Millis(1);
  }

  pid_t Spawn(int index, int n, ChildMode mode) {
    const pid_t pid = fork();
    if (pid == 0) ChildMain(path_, peer_tx_->port().gid, index, n, mode);
    return pid;
  }

  // Runs the server until every child has exited and `done` (checked by the
  // server thread, in the pump) holds; returns the children's statuses.
  std::vector<int> RunUntilChildrenExit(const std::vector<pid_t>& pids,
                                        std::function<bool()> done) {
    done_ = std::move(done);
    std::thread loop([this] { (void)server_->Run(); });
    std::vector<int> statuses;
    for (pid_t p : pids) {
      int st = 0;
      waitpid(p, &st, 0);
      statuses.push_back(st);
    }
    // Until the router has seen the last socket close and the peer has
    // heard the cleanup (a generous cap, not a sleep: it ends when done).
    const mad::TimePoint cap = clock_.Now() + mad::Duration::Seconds(60);
    while (!done_flag_.load() && clock_.Now() < cap) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(done_flag_.load()) << "the router did not settle within 60 s";
    server_->Stop();
    loop.join();
    return statuses;
  }

  int Count(CmEventType t) const {
    int n = 0;
    for (CmEventType e : peer_events_) n += e == t;
    return n;
  }

  std::string dir_, path_;
  mad::RealClock clock_;
  mad::TimePoint start_;
  std::function<bool()> done_;
  std::atomic<bool> done_flag_{false};
  testing::SimPorts sim_;
  sim::Scheduler* sched_ = nullptr;
  sim::SimTransport* wire_ = nullptr;     // the router's port (host1)
  sim::SimTransport* peer_tx_ = nullptr;  // the peer's (host2)
  std::unique_ptr<cm::CmEndpoint> peer_;
  std::unique_ptr<Server> server_;
  std::vector<CmEventType> peer_events_;
  uint32_t next_qpn_ = 0x5000;
};

TEST_F(RouterProcessTest, SeveralProcessesConnectAtOnce) {
  constexpr int kProcs = 4, kEach = 4;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcs; ++i) pids.push_back(Spawn(i, kEach, ChildMode::kConnect));
  std::vector<int> st = RunUntilChildrenExit(pids, [&] {
    return server_->router().client_count() == 0 &&
           server_->router().counters().clients_gone == kProcs &&
           Count(CmEventType::kDisconnected) >= kProcs * kEach;
  });
  for (int i = 0; i < kProcs; ++i) {
    EXPECT_TRUE(WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0) << "child " << i << " status "
                                                              << st[i];
  }
  EXPECT_EQ(Count(CmEventType::kEstablished), kProcs * kEach);
  const RouterCounters& c = server_->router().counters();
  EXPECT_EQ(c.clients_accepted, static_cast<uint64_t>(kProcs));
  EXPECT_EQ(c.clients_gone, static_cast<uint64_t>(kProcs));
  EXPECT_EQ(c.refused_mads, 0u);
  // The children exited with established connections: the router
  // disconnected every one of them on the wire.
  EXPECT_EQ(c.cleanup_dreq, static_cast<uint64_t>(kProcs * kEach));
  EXPECT_EQ(Count(CmEventType::kDisconnected), kProcs * kEach);
  EXPECT_EQ(server_->router().client_count(), 0u);
}

TEST_F(RouterProcessTest, ProcessKilledMidHandshakeIsRejectedOnTheWire) {
  std::vector<pid_t> pids = {Spawn(0, 1, ChildMode::kCrashAfterRep),
                             Spawn(1, 2, ChildMode::kConnect)};
  std::vector<int> st = RunUntilChildrenExit(pids, [&] {
    return server_->router().counters().clients_gone == 2 && Count(CmEventType::kRejected) >= 1 &&
           Count(CmEventType::kDisconnected) >= 2;
  });
  EXPECT_TRUE(WIFSIGNALED(st[0]) && WTERMSIG(st[0]) == SIGKILL) << st[0];
  EXPECT_TRUE(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 0) << st[1];
  const RouterCounters& c = server_->router().counters();
  EXPECT_EQ(c.cleanup_rej, 1u);  // the REP the killed process never answered
  EXPECT_EQ(Count(CmEventType::kRejected), 1);
  EXPECT_EQ(Count(CmEventType::kEstablished), 2);
  EXPECT_EQ(server_->router().client_count(), 0u);
}

TEST_F(RouterProcessTest, RouterRestartBreaksClientsClearlyAndTheyCanReconnect) {
  LoopThread loop(server_.get());
  auto t = RouterTransport::Connect(path_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE((*t)->status().ok());
  EXPECT_GE((*t)->slot(), 1);
  EXPECT_EQ((*t)->caps().comm_id_prefix, (*t)->slot());
  EXPECT_TRUE((*t)->ClaimService(kSid, ~uint64_t{0}, false).ok());
  loop.Stop();
  server_.reset();  // the router goes away: sockets closed, path unlinked

  std::array<uint8_t, 256> mad{};
  mad[0] = 1;
  mad[1] = 0x03;
  mad::MadAddress to;
  to.lid = kPeerLid;
  (*t)->Drain([](const mad::ReceivedMad&) {});
  absl::Status s = (*t)->Send(to, mad);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("connect again"), absl::string_view::npos) << s;
  EXPECT_EQ((*t)->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(RouterTransport::Connect(path_).status().code(), absl::StatusCode::kUnavailable);

  ServerOptions o;
  o.socket_path = path_;
  o.pump = [this] { return Pump(); };
  auto again = Server::Create(*wire_, o);
  ASSERT_TRUE(again.ok()) << again.status();
  server_ = std::move(*again);
  LoopThread loop2(server_.get());
  auto t2 = RouterTransport::Connect(path_);
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_TRUE((*t2)->ClaimService(kSid, ~uint64_t{0}, false).ok());
  EXPECT_TRUE((*t2)->Send(to, mad).ok());
  loop2.Stop();
}

// The next event on `ch` within 20 s (the device is driven by WaitEvent's
// Poll), acked; its type, status and detail are returned.
struct SeenEvent {
  EventType type = EventType::kAddrError;
  int status = 0;
  CmId* id = nullptr;
  std::string detail;
};
absl::StatusOr<SeenEvent> NextEvent(EventChannel& ch) {
  auto e = ch.WaitEvent(mad::Duration::Seconds(20));
  if (!e.ok()) return e.status();
  SeenEvent seen{(*e)->event, (*e)->status, (*e)->id, (*e)->detail};
  if (absl::Status s = ch.AckEvent(*e); !s.ok()) return s;
  return seen;
}

// An RC connection to the peer through the API: AF_IB, the path given with
// the IB_PATH option (no SA), external QP mode (CONNECT_RESPONSE, Establish).
absl::StatusOr<CmId*> ConnectThroughApi(EventChannel& ch, const mad::LocalPort& port,
                                        const mad::Gid& peer_gid, uint32_t qpn) {
  auto id = ch.CreateId(nullptr, PortSpace::kIb);
  if (!id.ok()) return id.status();
  IdOptions o;
  cm::PathInfo p;
  p.local_lid = port.lid;
  p.remote_lid = kPeerLid;
  p.local_gid = port.gid;
  p.remote_gid = peer_gid;
  p.local_ack_timeout = 14;
  p.packet_life_time = 10;
  o.ib_path = p;
  if (absl::Status s = (*id)->SetOption(o); !s.ok()) return s;
  if (absl::Status s = (*id)->ResolveAddr(absl::nullopt, Address::Ib(peer_gid, kPeerLid, kSid));
      !s.ok()) {
    return s;
  }
  auto ev = NextEvent(ch);
  if (!ev.ok() || ev->type != EventType::kAddrResolved) {
    return absl::InternalError("no ADDR_RESOLVED");
  }
  if (absl::Status s = (*id)->ResolveRoute(); !s.ok()) return s;
  ev = NextEvent(ch);
  if (!ev.ok() || ev->type != EventType::kRouteResolved) {
    return absl::InternalError("no ROUTE_RESOLVED");
  }
  ConnParam cp;
  cp.qp_num = qpn;
  if (absl::Status s = (*id)->Connect(cp); !s.ok()) return s;
  ev = NextEvent(ch);
  if (!ev.ok()) return ev.status();
  if (ev->type == EventType::kConnectResponse) {
    if (absl::Status s = (*id)->Establish(); !s.ok()) return s;
  } else if (ev->type != EventType::kEstablished) {
    return absl::InternalError(absl::StrCat("connect: ", EventTypeName(ev->type), " status ",
                                            ev->status, " ", ev->detail));
  }
  return *id;
}

// Issue 10's "a router restart (clients see a clear error event and can
// reconnect)", through the rdma_cm API: a connection established and a
// listener claimed through uscmd; uscmd goes away; every id gets
// RDMA_CM_EVENT_DEVICE_REMOVAL (status -ENODEV, the detail names the router
// socket and says to connect again); the application destroys its ids and
// Device and connects again through the restarted router; tables end empty.
TEST_F(RouterProcessTest, RouterRestartIsDeviceRemovalOnEveryIdAndANewDeviceReconnects) {
  auto loop = std::make_unique<LoopThread>(server_.get());
  const mad::Gid peer_gid = peer_tx_->port().gid;
  auto t = RouterTransport::Connect(path_);
  ASSERT_TRUE(t.ok()) << t.status();
  auto dev = Device::Create(**t, DeviceOptions{});
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto ch = (*dev)->CreateEventChannel();
  ASSERT_TRUE(ch.ok());
  auto conn = ConnectThroughApi(**ch, (*t)->port(), peer_gid, 0x777);
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ((*conn)->state(), IdState::kEstablished);
  auto listener = (*ch)->CreateId(nullptr, PortSpace::kIb);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(
      (*listener)->BindAddr(Address::Ib((*t)->port().gid, (*t)->port().lid, kSid + 5)).ok());
  ASSERT_TRUE((*listener)->Listen(4).ok());  // a claim at the router

  loop->Stop();
  loop.reset();
  server_.reset();  // uscmd exits: sockets closed, path unlinked

  std::set<CmId*> removed;
  for (int i = 0; i < 2; ++i) {
    auto ev = NextEvent(**ch);
    ASSERT_TRUE(ev.ok()) << ev.status();
    EXPECT_EQ(ev->type, EventType::kDeviceRemoval) << EventTypeName(ev->type);
    EXPECT_EQ(ev->status, -ENODEV);
    EXPECT_NE(ev->detail.find(path_), std::string::npos) << ev->detail;
    EXPECT_NE(ev->detail.find("connect again"), std::string::npos) << ev->detail;
    removed.insert(ev->id);
  }
  EXPECT_EQ(removed, (std::set<CmId*>{*conn, *listener}));
  EXPECT_EQ((*dev)->node().counters().transport_lost, 1u);
  EXPECT_EQ((*dev)->node().transport_status().code(), absl::StatusCode::kUnavailable);
  // Nothing more: one DEVICE_REMOVAL per id.
  EXPECT_FALSE((*ch)->WaitEvent(mad::Duration::Millis(100)).ok());
  ASSERT_TRUE((*ch)->DestroyId(*conn).ok());
  ASSERT_TRUE((*ch)->DestroyId(*listener).ok());
  EXPECT_EQ((*dev)->id_count(), 0u);
  ch->reset();
  dev->reset();
  t->reset();

  // The restarted router: a new transport and Device connect again (with a
  // new QP: the peer still holds the old connection, which died with the old
  // router without a DREQ, and would reject the same QPN as stale, REJ 10).
  ServerOptions o;
  o.socket_path = path_;
  o.pump = [this] { return Pump(); };
  auto again = Server::Create(*wire_, o);
  ASSERT_TRUE(again.ok()) << again.status();
  server_ = std::move(*again);
  loop = std::make_unique<LoopThread>(server_.get());
  auto t2 = RouterTransport::Connect(path_);
  ASSERT_TRUE(t2.ok()) << t2.status();
  auto dev2 = Device::Create(**t2, DeviceOptions{});
  ASSERT_TRUE(dev2.ok()) << dev2.status();
  auto ch2 = (*dev2)->CreateEventChannel();
  ASSERT_TRUE(ch2.ok());
  auto conn2 = ConnectThroughApi(**ch2, (*t2)->port(), peer_gid, 0x778);
  ASSERT_TRUE(conn2.ok()) << conn2.status();
  EXPECT_EQ((*conn2)->state(), IdState::kEstablished);
  ASSERT_TRUE((*conn2)->Disconnect().ok());
  auto ev = NextEvent(**ch2);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_EQ(ev->type, EventType::kDisconnected) << EventTypeName(ev->type);
  ASSERT_TRUE((*ch2)->DestroyId(*conn2).ok());
  EXPECT_EQ((*dev2)->node().counters().transport_lost, 0u);
  const uint8_t slot = (*t2)->slot();
  ch2->reset();
  dev2->reset();
  t2->reset();
  loop->Stop();
  // The router sees the socket close; then its tables are empty.
  const mad::TimePoint cap = clock_.Now() + mad::Duration::Seconds(20);
  while (server_->router().client_count() > 0 && clock_.Now() < cap) {
    ASSERT_TRUE(server_->RunOnce(mad::Duration::Millis(10)).ok());
  }
  EXPECT_EQ(server_->router().client_count(), 0u);
  EXPECT_EQ(server_->router().tracked(slot), 0u);
  EXPECT_EQ(server_->router().claim_count(), 0u);
  EXPECT_EQ(server_->router().counters().cleanup_dreq, 0u);  // disconnected before exit
  EXPECT_EQ(server_->router().counters().refused_mads, 0u);
}

// REUSEADDR does not share a listen between processes (as the kernel's
// rdma_listen): the second process's listen on the same port fails, through
// the C API, with -1 / EADDRINUSE and a message naming the router.
TEST_F(RouterProcessTest, SecondListenOnTheSameServiceFailsWithEaddrinuseEvenWithReuseaddr) {
  LoopThread loop(server_.get());
  struct Proc {
    std::unique_ptr<RouterTransport> t;
    std::unique_ptr<Device> dev;
    uscm_device* handle = nullptr;
    uscm_event_channel* ch = nullptr;
    uscm_cm_id* id = nullptr;
  };
  Proc procs[2];
  uscm_addr addr{};
  ASSERT_EQ(uscm_parse_addr("10.0.0.1:7471", &addr), 0) << uscm_last_error();  // = kSid
  for (Proc& p : procs) {
    auto t = RouterTransport::Connect(path_);
    ASSERT_TRUE(t.ok()) << t.status();
    p.t = std::move(*t);
    DeviceOptions o;
    o.local_ips.push_back(Address::Ipv4(0x0A000001));
    auto dev = Device::Create(*p.t, o);
    ASSERT_TRUE(dev.ok()) << dev.status();
    p.dev = std::move(*dev);
    p.handle = uscm_device_wrap(p.dev.get());
    p.ch = uscm_create_event_channel_on(p.handle);
    ASSERT_NE(p.ch, nullptr) << uscm_last_error();
    ASSERT_EQ(uscm_create_id(p.ch, &p.id, nullptr, USCM_PS_TCP), 0) << uscm_last_error();
    const int one = 1;
    ASSERT_EQ(uscm_set_option(p.id, USCM_OPTION_ID, USCM_OPTION_ID_REUSEADDR, &one, sizeof one),
              0)
        << uscm_last_error();
    ASSERT_EQ(uscm_bind_addr(p.id, &addr), 0) << uscm_last_error();
  }
  ASSERT_NE(procs[0].t->slot(), procs[1].t->slot());
  ASSERT_EQ(uscm_listen(procs[0].id, 8), 0) << uscm_last_error();
  errno = 0;
  EXPECT_EQ(uscm_listen(procs[1].id, 8), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  const std::string why = uscm_last_error();
  EXPECT_NE(why.find("router"), std::string::npos) << why;
  EXPECT_NE(why.find("another process"), std::string::npos) << why;
  // After the first listener is destroyed the service is free again.
  ASSERT_EQ(uscm_destroy_id(procs[0].id), 0) << uscm_last_error();
  procs[0].id = nullptr;
  EXPECT_EQ(uscm_listen(procs[1].id, 8), 0) << uscm_last_error();
  for (Proc& p : procs) {
    if (p.id != nullptr) {
      EXPECT_EQ(uscm_destroy_id(p.id), 0) << uscm_last_error();
    }
    uscm_destroy_event_channel(p.ch);
    uscm_device_unwrap_free(p.handle);
  }
  loop.Stop();
  EXPECT_EQ(server_->router().counters().claim_conflicts, 1u);
  EXPECT_EQ(server_->router().claim_count(), 0u);
}

// Issue 13's qperf server: every process behind one uscmd numbers its own
// ephemeral ports, so a second process could bind the port another one
// listens on. As the kernel's cma_alloc_any_port skips a port in use, the
// second listen moves on to the next free port when the router refuses the
// claim. Both processes start at 50000 here (ephemeral_start).
TEST_F(RouterProcessTest, ListenOnAnEphemeralPortAnotherProcessHoldsMovesOn) {
  LoopThread loop(server_.get());
  struct Proc {
    std::unique_ptr<RouterTransport> t;
    std::unique_ptr<Device> dev;
    std::unique_ptr<EventChannel> ch;
    CmId* id = nullptr;
  };
  Proc procs[2];
  for (Proc& p : procs) {
    auto t = RouterTransport::Connect(path_);
    ASSERT_TRUE(t.ok()) << t.status();
    p.t = std::move(*t);
    DeviceOptions o;
    o.local_ips.push_back(Address::Ipv4(0x0A000001));
    o.ephemeral_start = 50000;
    auto dev = Device::Create(*p.t, o);
    ASSERT_TRUE(dev.ok()) << dev.status();
    p.dev = std::move(*dev);
    auto ch = p.dev->CreateEventChannel();
    ASSERT_TRUE(ch.ok()) << ch.status();
    p.ch = std::move(*ch);
    auto id = p.ch->CreateId(nullptr, PortSpace::kTcp);
    ASSERT_TRUE(id.ok()) << id.status();
    p.id = *id;
    ASSERT_TRUE(p.id->BindAddr(Address::Ipv4(0x0A000001)).ok());  // port 0: ephemeral
    EXPECT_EQ(p.id->GetLocalAddr().port, 50000);
  }
  absl::Status s = procs[0].id->Listen(4);
  ASSERT_TRUE(s.ok()) << s;
  s = procs[1].id->Listen(4);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(procs[0].id->GetLocalAddr().port, 50000);
  EXPECT_EQ(procs[1].id->GetLocalAddr().port, 50001) << "the next free port";
  EXPECT_EQ(procs[1].dev->ephemeral_moves(), 1u);
  EXPECT_EQ(server_->router().claim_count(), 2u);
  // An explicit port another process holds still fails (no move).
  auto fixed = procs[1].ch->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(fixed.ok());
  ASSERT_TRUE((*fixed)->BindAddr(Address::Ipv4(0x0A000001, 50000)).ok());
  EXPECT_EQ((*fixed)->Listen(4).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(procs[1].ch->DestroyId(*fixed).ok());
  for (Proc& p : procs) ASSERT_TRUE(p.ch->DestroyId(p.id).ok());
  loop.Stop();
  EXPECT_EQ(server_->router().counters().claim_conflicts, 2u);
  EXPECT_EQ(server_->router().claim_count(), 0u);
}

// Without ephemeral_start each process starts at a port of its own drawn in
// the kernel's range (net.ipv4.ip_local_port_range), as cma_alloc_any_port,
// not at a fixed 40000 for every process (seeds 1 and 2 here).
TEST_F(RouterProcessTest, EphemeralPortsStartApartInTheKernelsRange) {
  unsigned low = 32768, high = 60999;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    ASSERT_EQ(fscanf(f, "%u %u", &low, &high), 2);
    fclose(f);
  }
  LoopThread loop(server_.get());
  uint16_t ports[2] = {};
  for (int i = 0; i < 2; ++i) {
    auto t = RouterTransport::Connect(path_);
    ASSERT_TRUE(t.ok()) << t.status();
    DeviceOptions o;
    o.local_ips.push_back(Address::Ipv4(0x0A000001));
    o.node.seed = i + 1;
    auto dev = Device::Create(**t, o);
    ASSERT_TRUE(dev.ok()) << dev.status();
    auto ch = (*dev)->CreateEventChannel();
    ASSERT_TRUE(ch.ok());
    auto id = (*ch)->CreateId(nullptr, PortSpace::kTcp);
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*id)->BindAddr(Address::Ipv4(0x0A000001)).ok());
    ports[i] = (*id)->GetLocalAddr().port;
    EXPECT_GE(ports[i], low);
    EXPECT_LE(ports[i], high);
    ASSERT_TRUE((*ch)->DestroyId(*id).ok());
  }
  EXPECT_NE(ports[0], ports[1]);
  loop.Stop();
}

TEST_F(RouterProcessTest, HelloIsRequiredAndBadFramesAreRefused) {
  LoopThread loop(server_.get());
  auto t = RouterTransport::Connect(path_);
  ASSERT_TRUE(t.ok());
  // A second claim on the same exclusive service from another process.
  auto t2 = RouterTransport::Connect(path_);
  ASSERT_TRUE(t2.ok());
  ASSERT_TRUE((*t)->ClaimService(kSid, ~uint64_t{0}, false).ok());
  absl::Status s = (*t2)->ClaimService(kSid, ~uint64_t{0}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  loop.Stop();
  EXPECT_EQ(server_->router().counters().claim_conflicts, 1u);
}

// A live router comes first, even when the port could be owned (or not
// opened at all: no permission on umad).
TEST_F(RouterProcessTest, OpenOwnerOrRouterPrefersALiveRouter) {
  LoopThread loop(server_.get());
  bool owner_tried = false;
  auto free_port = [&]() -> absl::StatusOr<std::unique_ptr<mad::Transport>> {
    owner_tried = true;
    return absl::PermissionDeniedError("no permission on umad");
  };
  auto t = OpenOwnerOrRouter(free_port, path_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->caps().name, "router");
  EXPECT_FALSE(owner_tried);
}

TEST_F(RouterProcessTest, OpenOwnerOrRouterFallsBackOnlyWhenThePortIsTaken) {
  LoopThread loop(server_.get());
  auto taken = [] () -> absl::StatusOr<std::unique_ptr<mad::Transport>> {
    return absl::FailedPreconditionError("CM class already registered");
  };
  auto t = OpenOwnerOrRouter(taken, path_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->caps().name, "router");
  EXPECT_EQ((*t)->caps().comm_id_prefix_bits, 8);
  auto broken = [] () -> absl::StatusOr<std::unique_ptr<mad::Transport>> {
    return absl::NotFoundError("no such CA");
  };
  EXPECT_EQ(OpenOwnerOrRouter(broken, dir_ + "/none.sock").status(),
            absl::NotFoundError("no such CA"));
  auto nobody = OpenOwnerOrRouter(taken, dir_ + "/none.sock");
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(nobody.status().message().find("CM class already registered"),
            absl::string_view::npos);
}

// ------------------------------------------------ the privilege boundary

TEST_F(RouterProcessTest, ASecondRouterLeavesALiveOnesSocketAlone) {
  LoopThread loop(server_.get());
  ServerOptions o;
  o.socket_path = path_;
  o.pump = [this] { return Pump(); };
  auto second = Server::Create(*wire_, o);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  EXPECT_NE(second.status().message().find("another uscmd is serving"), absl::string_view::npos);
  // The first one still serves its socket.
  auto t = RouterTransport::Connect(path_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE((*t)->ClaimService(kSid, ~uint64_t{0}, false).ok());
}

TEST_F(RouterProcessTest, TheSocketModeIsDeliberateAndAStaleSocketIsReplaced) {
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  // A dead router's socket file: bound, then closed without unlink.
  const std::string stale = dir_ + "/stale.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, stale.data(), stale.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
  ServerOptions o;
  o.socket_path = stale;
  o.socket_mode = 0660;
  o.pump = [this] { return Pump(); };
  auto s = Server::Create(*wire_, o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(stat(stale.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

// Drops CAP_NET_BIND_SERVICE from this process's effective set.
bool DropNetBindService() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  data[0].effective &= ~(1u << CAP_NET_BIND_SERVICE);
  return syscall(SYS_capset, &hdr, data) == 0;
}

// As the kernel's rdma_cm: a listen below port 1024 needs
// CAP_NET_BIND_SERVICE, which the router reads from the peer's credentials.
TEST_F(RouterProcessTest, APortBelow1024NeedsCapNetBindServiceFromThePeer) {
  LoopThread loop(server_.get());
  constexpr uint64_t kPort80 = 0x0000000001060000ull | 80;
  constexpr uint64_t kPort8080 = 0x0000000001060000ull | 8080;
  const pid_t pid = fork();
  if (pid == 0) {
    if (!DropNetBindService()) _exit(3);
    auto t = RouterTransport::Connect(path_);
    if (!t.ok()) _exit(4);
    absl::Status low = (*t)->ClaimService(kPort80, ~uint64_t{0}, false);
    if (low.code() != absl::StatusCode::kPermissionDenied) _exit(5);
    if (low.message().find("CAP_NET_BIND_SERVICE") == absl::string_view::npos) _exit(6);
    if (!(*t)->ClaimService(kPort8080, ~uint64_t{0}, false).ok()) _exit(7);
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "3 capset, 4 connect, 5/6 port 80 allowed, 7 port 8080 refused";
  // This process (root in CI, with the capability) may.
  auto t = RouterTransport::Connect(path_);
  ASSERT_TRUE(t.ok()) << t.status();
  if (geteuid() == 0) {
    EXPECT_TRUE((*t)->ClaimService(kPort80, ~uint64_t{0}, false).ok());
  }
  loop.Stop();
  EXPECT_EQ(server_->router().counters().claims_denied, 1u);
}

}  // namespace
}  // namespace uscm::router
