#include "api/c/router_process_testing.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cm/cm_testing.h"
#include "cm/runtime.h"

namespace uscm::router::testing {
namespace {

using cm::CmEvent;
using cm::CmEventType;

constexpr mad::Duration kChildDeadline = mad::Duration::Seconds(60);

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

}  // namespace

DeviceOptions WithLocalIp() {
  DeviceOptions o;
  o.local_ips.push_back(Address::Ipv4(kLocalIp));
  return o;
}

void RouterProcessFixture::SetUp() {
  dir_ = ShortSocketDir();
  path_ = dir_ + "/uscmd.sock";
  auto p = OpenSimPorts(/*seed=*/3);
  ASSERT_TRUE(p.ok()) << p.status();
  sim_ = std::move(*p);
  sched_ = sim_.scheduler.get();
  wire_ = sim_.host1.get();
  peer_tx_ = sim_.host2.get();
  peer_ = std::make_unique<cm::CmEndpoint>(peer_tx_->port(), cm::CmConfig{}, 5);
  ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 1024, false).ok());
  start_ = clock_.Now();
  absl::Status s = StartRouter();
  ASSERT_TRUE(s.ok()) << s;
}

ServerOptions RouterProcessFixture::OptionsAt(const std::string& socket_path) {
  ServerOptions o;
  o.socket_path = socket_path;
  o.pump = [this] { return Pump(); };
  return o;
}

absl::StatusOr<std::unique_ptr<Server>> RouterProcessFixture::CreateRouter(
    const ServerOptions& options) {
  return Server::Create(*wire_, options);
}

absl::Status RouterProcessFixture::StartRouter() {
  auto s = CreateRouter(OptionsAt(path_));
  if (!s.ok()) return s.status();
  server_ = std::move(*s);
  return absl::OkStatus();
}

mad::Duration RouterProcessFixture::Pump() {
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

pid_t RouterProcessFixture::Spawn(int index, int n, ChildMode mode) {
  return SpawnChild([&]() -> int { ChildMain(path_, peer_gid(), index, n, mode); });
}

std::vector<int> RouterProcessFixture::RunUntilChildrenExit(const std::vector<pid_t>& pids,
                                                            std::function<bool()> done) {
  done_ = std::move(done);
  std::thread loop([this] { (void)server_->Run(); });
  std::vector<int> statuses;
  for (pid_t p : pids) statuses.push_back(WaitForExit(p));
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

absl::StatusOr<RouterClient> RouterProcessFixture::ConnectClient(const DeviceOptions& options) {
  RouterClient c;
  auto t = RouterTransport::Connect(path_);
  if (!t.ok()) return t.status();
  c.transport = std::move(*t);
  auto dev = Device::Create(*c.transport, options);
  if (!dev.ok()) return dev.status();
  c.device = std::move(*dev);
  return c;
}

absl::Status RouterProcessFixture::ServeUntilNoClients() {
  const mad::TimePoint cap = clock_.Now() + mad::Duration::Seconds(20);
  while (server_->router().client_count() > 0 && clock_.Now() < cap) {
    if (auto r = server_->RunOnce(mad::Duration::Millis(10)); !r.ok()) return r.status();
  }
  return absl::OkStatus();
}

int RouterProcessFixture::Count(CmEventType t) const {
  int n = 0;
  for (CmEventType e : peer_events_) n += e == t;
  return n;
}

absl::StatusOr<SeenEvent> NextEvent(EventChannel& ch) {
  auto e = ch.WaitEvent(mad::Duration::Seconds(20));
  if (!e.ok()) return e.status();
  SeenEvent seen{(*e)->event, (*e)->status, (*e)->id, (*e)->detail};
  if (absl::Status s = ch.AckEvent(*e); !s.ok()) return s;
  return seen;
}

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

}  // namespace uscm::router::testing
