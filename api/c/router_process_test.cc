// uscmd end to end: the router runs in this process (a Server thread) on a
// simulated fabric paced by the real clock; client processes (fork) connect
// over the Unix socket with RouterTransport + RealNode, exactly as an
// application would. The peer on the other host is a CmEndpoint driven by
// the same pump. Outcomes are read after the server thread has stopped.
// The set-up: api/c/router_process_testing.h.
#include <errno.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/c/router_process_testing.h"
#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/router/router_testing.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "gtest/gtest.h"
#include "mad/status_errno.h"

namespace uscm::router {
namespace {

using cm::CmEventType;
using ::uscm::Address;
using ::uscm::CmId;
using ::uscm::EventType;
using ::uscm::IdState;
using ::uscm::PortSpace;
using testing::ChildMode;
using testing::ConnectThroughApi;
using testing::kLocalIp;
using testing::kPeerLid;
using testing::kSid;
using testing::LoopThread;
using testing::NextEvent;
using testing::RouterClient;
using testing::SpawnChild;
using testing::WaitForExit;
using testing::WithLocalIp;

class RouterProcessTest : public testing::RouterProcessFixture {};

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

  absl::Status again = StartRouter();
  ASSERT_TRUE(again.ok()) << again;
  LoopThread loop2(server_.get());
  auto t2 = RouterTransport::Connect(path_);
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_TRUE((*t2)->ClaimService(kSid, ~uint64_t{0}, false).ok());
  EXPECT_TRUE((*t2)->Send(to, mad).ok());
  loop2.Stop();
}

// Issue 10's "a router restart (clients see a clear error event and can
// reconnect)", through the rdma_cm API: a connection established and a
// listener claimed through uscmd; uscmd goes away; every id gets
// RDMA_CM_EVENT_DEVICE_REMOVAL (status -ENODEV, the detail names the router
// socket and says to connect again); the application destroys its ids and
// Device and connects again through the restarted router; tables end empty.
TEST_F(RouterProcessTest, RouterRestartIsDeviceRemovalOnEveryIdAndANewDeviceReconnects) {
  auto loop = std::make_unique<LoopThread>(server_.get());
  auto client = ConnectClient();
  ASSERT_TRUE(client.ok()) << client.status();
  const mad::LocalPort port = client->transport->port();
  auto ch = client->device->CreateEventChannel();
  ASSERT_TRUE(ch.ok());
  auto conn = ConnectThroughApi(**ch, port, peer_gid(), 0x777);
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ((*conn)->state(), IdState::kEstablished);
  auto listener = (*ch)->CreateId(nullptr, PortSpace::kIb);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(
      (*listener)->BindAddr(Address::Ib(port.gid, port.lid, kSid + 5)).ok());
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
  EXPECT_EQ(client->device->node().counters().transport_lost, 1u);
  EXPECT_EQ(client->device->node().TransportStatus().code(), absl::StatusCode::kUnavailable);
  // Nothing more: one DEVICE_REMOVAL per id.
  EXPECT_FALSE((*ch)->WaitEvent(mad::Duration::Millis(100)).ok());
  ASSERT_TRUE((*ch)->DestroyId(*conn).ok());
  ASSERT_TRUE((*ch)->DestroyId(*listener).ok());
  EXPECT_EQ(client->device->id_count(), 0u);
  ch->reset();
  client = RouterClient{};

  // The restarted router: a new transport and Device connect again (with a
  // new QP: the peer still holds the old connection, which died with the old
  // router without a DREQ, and would reject the same QPN as stale, REJ 10).
  absl::Status again = StartRouter();
  ASSERT_TRUE(again.ok()) << again;
  loop = std::make_unique<LoopThread>(server_.get());
  auto client2 = ConnectClient();
  ASSERT_TRUE(client2.ok()) << client2.status();
  auto ch2 = client2->device->CreateEventChannel();
  ASSERT_TRUE(ch2.ok());
  auto conn2 = ConnectThroughApi(**ch2, client2->transport->port(), peer_gid(), 0x778);
  ASSERT_TRUE(conn2.ok()) << conn2.status();
  EXPECT_EQ((*conn2)->state(), IdState::kEstablished);
  ASSERT_TRUE((*conn2)->Disconnect().ok());
  auto ev = NextEvent(**ch2);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_EQ(ev->type, EventType::kDisconnected) << EventTypeName(ev->type);
  ASSERT_TRUE((*ch2)->DestroyId(*conn2).ok());
  EXPECT_EQ(client2->device->node().counters().transport_lost, 0u);
  const uint8_t slot = client2->transport->slot();
  ch2->reset();
  client2 = RouterClient{};
  loop->Stop();
  // The router sees the socket close; then its tables are empty.
  ASSERT_TRUE(ServeUntilNoClients().ok());
  EXPECT_EQ(server_->router().client_count(), 0u);
  EXPECT_EQ(server_->router().tracked(slot), 0u);
  EXPECT_EQ(server_->router().claim_count(), 0u);
  EXPECT_EQ(server_->router().counters().cleanup_dreq, 0u);  // disconnected before exit
  EXPECT_EQ(server_->router().counters().refused_mads, 0u);
}

// REUSEADDR shares a bind between processes but not a listen (as the
// kernel's cma_check_port at bind and rdma_listen, which checks again
// without it): both binds succeed, and a listen fails, through the C API,
// with -1 / EADDRINUSE and a message naming the router, while the other
// process holds its bind.
TEST_F(RouterProcessTest, ReuseaddrSharesABindAndAListenFailsWithEaddrinuse) {
  LoopThread loop(server_.get());
  struct Proc {
    RouterClient client;
    uscm_device* handle = nullptr;
    uscm_event_channel* ch = nullptr;
    uscm_cm_id* id = nullptr;
  };
  Proc procs[2];
  uscm_addr addr{};
  ASSERT_EQ(uscm_parse_addr("10.0.0.1:7471", &addr), 0) << uscm_last_error();  // = kSid
  for (Proc& p : procs) {
    auto client = ConnectClient(WithLocalIp());
    ASSERT_TRUE(client.ok()) << client.status();
    p.client = std::move(*client);
    p.handle = uscm_device_wrap(p.client.device.get());
    p.ch = uscm_create_event_channel_on(p.handle);
    ASSERT_NE(p.ch, nullptr) << uscm_last_error();
    ASSERT_EQ(uscm_create_id(p.ch, &p.id, nullptr, USCM_PS_TCP), 0) << uscm_last_error();
    const int one = 1;
    ASSERT_EQ(uscm_set_option(p.id, USCM_OPTION_ID, USCM_OPTION_ID_REUSEADDR, &one, sizeof one),
              0)
        << uscm_last_error();
    ASSERT_EQ(uscm_bind_addr(p.id, &addr), 0) << uscm_last_error();
  }
  ASSERT_NE(procs[0].client.transport->slot(), procs[1].client.transport->slot());
  errno = 0;
  EXPECT_EQ(uscm_listen(procs[1].id, 8), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  const std::string why = uscm_last_error();
  EXPECT_NE(why.find("router"), std::string::npos) << why;
  EXPECT_NE(why.find("another process has bound"), std::string::npos) << why;
  // Once the other process's id is destroyed the listen goes through.
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
// holds. As the kernel's cma_alloc_any_port skips a port in use, the second
// bind moves on to the next free port when the router refuses its bind
// claim. Both processes start at 50000 here (ephemeral_start). A uscmd that
// leases no port blocks (max_blocks_per_client 0: as one with none left for
// the process) keeps binds to port 0 going port by port, as here; with
// blocks they take no claim (docs/ROUTER.md "Port blocks").
TEST_F(RouterProcessTest, BindToAnEphemeralPortAnotherProcessHoldsMovesOn) {
  server_.reset();
  ServerOptions no_blocks = OptionsAt(path_);
  no_blocks.router.max_blocks_per_client = 0;
  auto restarted = CreateRouter(no_blocks);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  server_ = std::move(*restarted);
  LoopThread loop(server_.get());
  struct Proc {
    RouterClient client;
    std::unique_ptr<EventChannel> ch;
    CmId* id = nullptr;
  };
  Proc procs[2];
  uint16_t want = 50000;
  for (Proc& p : procs) {
    DeviceOptions o = WithLocalIp();
    o.ephemeral_start = 50000;
    auto client = ConnectClient(o);
    ASSERT_TRUE(client.ok()) << client.status();
    p.client = std::move(*client);
    auto ch = p.client.device->CreateEventChannel();
    ASSERT_TRUE(ch.ok()) << ch.status();
    p.ch = std::move(*ch);
    auto id = p.ch->CreateId(nullptr, PortSpace::kTcp);
    ASSERT_TRUE(id.ok()) << id.status();
    p.id = *id;
    ASSERT_TRUE(p.id->BindAddr(Address::Ipv4(kLocalIp)).ok());  // port 0: ephemeral
    EXPECT_EQ(p.id->GetLocalAddr().port, want++) << "the next free port, at bind";
  }
  EXPECT_EQ(procs[1].client.device->ephemeral_moves(), 1u);
  for (Proc& p : procs) {
    absl::Status s = p.id->Listen(4);
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(procs[1].id->GetLocalAddr().port, 50001);
  EXPECT_EQ(server_->router().claim_count(), 4u) << "a bind and a listen claim each";
  // An explicit port another process holds fails at bind (no move).
  auto fixed = procs[1].ch->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(fixed.ok());
  absl::Status s = (*fixed)->BindAddr(Address::Ipv4(kLocalIp, 50000));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  ASSERT_TRUE(procs[1].ch->DestroyId(*fixed).ok());
  for (Proc& p : procs) ASSERT_TRUE(p.ch->DestroyId(p.id).ok());
  // An ephemeral port's release is not waited for (ReleaseServiceNoWait);
  // an explicit port's is, and a process's frames reach the router in
  // order: one explicit bind and destroy each, then the router has them all.
  uint16_t explicit_port = 50100;
  for (Proc& p : procs) {
    auto barrier = p.ch->CreateId(nullptr, PortSpace::kTcp);
    ASSERT_TRUE(barrier.ok());
    ASSERT_TRUE((*barrier)->BindAddr(Address::Ipv4(kLocalIp, explicit_port++)).ok());
    ASSERT_TRUE(p.ch->DestroyId(*barrier).ok());
  }
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
    DeviceOptions o = WithLocalIp();
    o.node.seed = i + 1;
    auto client = ConnectClient(o);
    ASSERT_TRUE(client.ok()) << client.status();
    auto ch = client->device->CreateEventChannel();
    ASSERT_TRUE(ch.ok());
    auto id = (*ch)->CreateId(nullptr, PortSpace::kTcp);
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*id)->BindAddr(Address::Ipv4(kLocalIp)).ok());
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
  auto second = CreateRouter(OptionsAt(path_));
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
  ServerOptions o = OptionsAt(stale);
  o.socket_mode = 0660;
  auto s = CreateRouter(o);
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
  const int st = WaitForExit(SpawnChild([&] {
    if (!DropNetBindService()) return 3;
    auto t = RouterTransport::Connect(path_);
    if (!t.ok()) return 4;
    absl::Status low = (*t)->ClaimService(kPort80, ~uint64_t{0}, false);
    if (low.code() != absl::StatusCode::kPermissionDenied) return 5;
    if (low.message().find("CAP_NET_BIND_SERVICE") == absl::string_view::npos) return 6;
    if (!(*t)->ClaimService(kPort8080, ~uint64_t{0}, false).ok()) return 7;
    return 0;
  }));
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
