// The router in process on a simulated fabric, with in-memory clients: each
// client is a CmEndpoint whose MADs go through Router::HandleFrame and whose
// frames come back through the sink. The peer on the other host is a plain
// CmEndpoint. Virtual time only; every scenario ends with empty tables.
#include "cm/router/router.h"

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "cm/cm_testing.h"
#include "cm/endpoint.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/wire/cm_message.h"

namespace uscm::router {
namespace {

namespace w = mad::wire;
using cm::CmEndpoint;
using cm::CmEvent;
using cm::CmEventType;
using cm::ConnId;

constexpr uint64_t kSid = 0x0000000001060000ull | 7471;
constexpr uint16_t kRouterLid = 2;  // host1 (TwoHostsOneSwitch)
constexpr uint16_t kPeerLid = 3;    // host2

uint64_t TotalReceived(const CmEndpoint& e) {
  uint64_t n = 0;
  for (uint64_t v : e.counters().received) n += v;
  return n;
}

struct TestClient {
  uint8_t slot = 0;
  std::unique_ptr<CmEndpoint> cm;
  std::deque<std::vector<uint8_t>> inbox;  // frames from the router
  std::vector<absl::Status> refused;
  std::vector<ReplyFrame> replies;
  std::vector<CmEvent> events;
};

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::make_unique<sim::Scheduler>(7);
    auto f = sim::Fabric::Create(*sched_, sim::TwoHostsOneSwitch());
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    wire_ = *fabric_->Open("host1");
    peer_tx_ = *fabric_->Open("host2");
    router_ = std::make_unique<Router>(*wire_, RouterOptions{},
                                       [this](uint8_t slot, std::span<const uint8_t> f) {
                                         clients_.at(slot).inbox.emplace_back(f.begin(), f.end());
                                       });
    peer_ = std::make_unique<CmEndpoint>(peer_tx_->port(), cm::testing::TestConfig(), 99);
  }

  TestClient& AddClient() {
    auto wl = router_->AddClient();
    EXPECT_TRUE(wl.ok()) << wl.status();
    TestClient& c = clients_[wl->slot];
    c.slot = wl->slot;
    cm::CmConfig cfg = cm::testing::TestConfig();
    cfg.comm_id_prefix_bits = wl->comm_id_prefix_bits;
    cfg.comm_id_prefix = wl->comm_id_prefix;
    c.cm = std::make_unique<CmEndpoint>(wl->port, cfg, 100 + wl->slot);
    return c;
  }

  void Crash(TestClient& c) {
    router_->RemoveClient(c.slot);
    c.cm.reset();
    c.inbox.clear();
  }

  void SendFrame(TestClient& c, const mad::MadAddress& to, std::span<const uint8_t> mad) {
    std::vector<uint8_t> f;
    EncodeMad(to, mad, &f);
    router_->HandleFrame(c.slot, f);
  }

  absl::Status Claim(TestClient& c, uint64_t sid, uint64_t mask, bool reuse) {
    router_->HandleFrame(c.slot, EncodeClaim(FrameType::kClaim, ClaimFrame{1, sid, mask, reuse}));
    Deliver();
    EXPECT_FALSE(c.replies.empty());
    if (c.replies.empty()) return absl::InternalError("no reply");
    absl::Status s = c.replies.back().status;
    c.replies.clear();
    return s;
  }

  // Moves MADs and frames until nothing moves (no virtual time passes except
  // the fabric's delivery delay).
  void Deliver() {
    for (int round = 0; round < 1000; ++round) {
      bool moved = false;
      const mad::TimePoint now = sched_->Now();
      for (auto& [slot, c] : clients_) {
        if (!c.cm) continue;
        cm::OutgoingMad m;
        while (c.cm->PollTransmit(&m)) {
          moved = true;
          SendFrame(c, m.to, m.mad);
        }
      }
      cm::OutgoingMad m;
      while (peer_->PollTransmit(&m)) {
        moved = true;
        ASSERT_TRUE(peer_tx_->Send(m.to, m.mad).ok());
      }
      ASSERT_TRUE(sched_->RunUntilIdle().ok());
      if (router_->PollWire() > 0) moved = true;
      peer_tx_->Drain([&](const mad::ReceivedMad& r) {
        moved = true;
        peer_rx_.emplace_back(r.data.begin(), r.data.end());
        peer_->HandleMad(sched_->Now(), r.from, r.data);
      });
      for (auto& [slot, c] : clients_) {
        while (!c.inbox.empty()) {
          moved = true;
          std::vector<uint8_t> f = std::move(c.inbox.front());
          c.inbox.pop_front();
          auto type = PeekFrame(f);
          ASSERT_TRUE(type.ok());
          if (*type == FrameType::kMad) {
            auto mf = DecodeMad(f);
            ASSERT_TRUE(mf.ok());
            if (c.cm) c.cm->HandleMad(sched_->Now(), mf->address, mf->mad);
          } else if (*type == FrameType::kRefused) {
            c.refused.push_back(DecodeRefused(f)->why);
          } else if (*type == FrameType::kReply) {
            c.replies.push_back(*DecodeReply(f));
          }
        }
        CmEvent e;
        while (c.cm && c.cm->PollEvent(&e)) {
          moved = true;
          c.events.push_back(e);
          if (e.type == CmEventType::kConnectResponse) {
            ASSERT_TRUE(c.cm->Rtu(now, e.conn).ok());
          } else if (e.type == CmEventType::kConnectRequest && accept_on_clients_) {
            ASSERT_TRUE(c.cm->Accept(now, e.conn, cm::testing::MakeAccept(next_qpn_++)).ok());
          } else if (e.type == CmEventType::kSidrRequest && accept_on_clients_) {
            cm::SidrReplyParams rp;
            rp.qpn = 0x6000u + slot;  // tells the peer which client answered
            rp.qkey = 0x01234567;
            ASSERT_TRUE(c.cm->SidrReply(now, e.conn, rp).ok());
            ASSERT_TRUE(c.cm->Destroy(now, e.conn).ok());  // as rdma_cm after the reply
          }
        }
      }
      CmEvent e;
      while (peer_->PollEvent(&e)) {
        moved = true;
        peer_events_.push_back(e);
        if (e.type == CmEventType::kConnectRequest && accept_on_peer_) {
          ASSERT_TRUE(peer_->Accept(now, e.conn, cm::testing::MakeAccept(next_qpn_++)).ok());
        } else if (e.type == CmEventType::kConnectResponse && rtu_on_peer_) {
          ASSERT_TRUE(peer_->Rtu(now, e.conn).ok());
        } else if (e.type == CmEventType::kDisconnected || e.type == CmEventType::kRejected ||
                   e.type == CmEventType::kUnreachable || e.type == CmEventType::kSidrReply) {
          // An rdma_cm user destroys the id: DREP for a DREQ, then TimeWait.
          ASSERT_TRUE(peer_->Destroy(now, e.conn).ok());
        }
      }
      if (!moved) return;
    }
    ADD_FAILURE() << "Deliver did not settle";
  }

  // Jumps to the earliest CM deadline until none is left.
  void Drive(int max_steps = 10000) {
    for (int i = 0; i < max_steps; ++i) {
      Deliver();
      absl::optional<mad::TimePoint> next = peer_->NextDeadline();
      for (auto& [slot, c] : clients_) {
        if (!c.cm) continue;
        auto d = c.cm->NextDeadline();
        if (d.has_value() && (!next.has_value() || *d < *next)) next = d;
      }
      if (!next.has_value()) return;
      if (*next > sched_->Now()) {
        ASSERT_TRUE(sched_->RunFor(*next - sched_->Now()).ok());
      }
      peer_->HandleTimeout(sched_->Now());
      for (auto& [slot, c] : clients_) {
        if (c.cm) c.cm->HandleTimeout(sched_->Now());
      }
    }
    ADD_FAILURE() << "Drive did not settle in " << max_steps << " steps";
  }

  cm::ConnectParams ToPeer(uint32_t qpn) const {
    cm::ConnectParams p = cm::testing::MakeConnect(qpn);
    p.service_id = kSid;
    p.primary.local_lid = kRouterLid;
    p.primary.remote_lid = kPeerLid;
    p.primary.local_gid = wire_->port().gid;
    p.primary.remote_gid = peer_tx_->port().gid;
    p.primary.local_ack_timeout = 10;
    p.remote_cm_response_timeout = 10;
    p.local_cm_response_timeout = 10;
    return p;
  }
  cm::ConnectParams ToRouterHost(uint64_t sid, uint32_t qpn) const {
    cm::ConnectParams p = ToPeer(qpn);
    p.service_id = sid;
    p.primary.local_lid = kPeerLid;
    p.primary.remote_lid = kRouterLid;
    std::swap(p.primary.local_gid, p.primary.remote_gid);
    return p;
  }

  static int Count(const std::vector<CmEvent>& v, CmEventType t) {
    int n = 0;
    for (const CmEvent& e : v) n += e.type == t;
    return n;
  }

  void ExpectAllEmpty() {
    EXPECT_EQ(peer_->connection_count(), 0u);
    EXPECT_EQ(peer_->table_entries(), 0u);
    for (auto& [slot, c] : clients_) {
      if (!c.cm) continue;
      EXPECT_EQ(c.cm->connection_count(), 0u) << "slot " << int{slot};
      EXPECT_EQ(router_->tracked(slot), 0u) << "slot " << int{slot};
    }
  }

  std::unique_ptr<sim::Scheduler> sched_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<sim::SimTransport> wire_, peer_tx_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<CmEndpoint> peer_;
  std::map<uint8_t, TestClient> clients_;
  std::vector<CmEvent> peer_events_;
  bool accept_on_clients_ = true;
  bool accept_on_peer_ = true;
  std::vector<std::vector<uint8_t>> peer_rx_;  // every MAD the peer received
  bool rtu_on_peer_ = true;
  uint32_t next_qpn_ = 0x5000;  // every accepted connection gets its own QPN
};

TEST_F(RouterTest, SeveralClientsConnectAtOnceWithDisjointCommIds) {
  ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 16, false).ok());
  std::vector<std::pair<TestClient*, ConnId>> conns;
  for (int i = 0; i < 4; ++i) {
    TestClient& c = AddClient();
    for (int k = 0; k < 3; ++k) {
      auto id = c.cm->Connect(sched_->Now(), ToPeer(0x100 + i * 16 + k));
      ASSERT_TRUE(id.ok()) << id.status();
      conns.push_back({&c, *id});
    }
  }
  Deliver();
  for (auto& [c, id] : conns) {
    EXPECT_EQ(*c->cm->State(id), cm::CmState::kEstablished);
    EXPECT_EQ(router_->slot_of(*c->cm->LocalCommId(id)), c->slot);
  }
  EXPECT_EQ(Count(peer_events_, CmEventType::kEstablished), 12)
      << "peer rx " << TotalReceived(*peer_) << " dup " << peer_->counters().duplicates[0]
      << " malformed " << peer_->counters().malformed << " stale "
      << peer_->counters().stale_connections << " fabric drops "
      << fabric_->counters().total_dropped() << " to_wire " << router_->counters().to_wire
      << " from_wire " << router_->counters().from_wire << " unroutable "
      << router_->counters().wire_unroutable << " send_err " << router_->counters().send_errors;
  EXPECT_EQ(router_->counters().refused_mads, 0u);
  EXPECT_EQ(router_->counters().wire_unroutable, 0u);
  for (auto& [c, id] : conns) ASSERT_TRUE(c->cm->Disconnect(sched_->Now(), id).ok());
  Drive();
  for (auto& [c, id] : conns) ASSERT_TRUE(c->cm->Destroy(sched_->Now(), id).ok());
  Drive();
  EXPECT_EQ(Count(peer_events_, CmEventType::kDisconnected), 12);
  ExpectAllEmpty();
}

TEST_F(RouterTest, RequestsGoToTheClaimingClientAndConflictsAreRefused) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  TestClient& c = AddClient();
  ASSERT_TRUE(Claim(a, kSid, ~uint64_t{0}, false).ok());
  ASSERT_TRUE(Claim(b, kSid + 1, ~uint64_t{0}, false).ok());
  // Exclusive overlap from another process: refused, with the owner named.
  absl::Status s = Claim(c, kSid & ~uint64_t{0xFFFF}, ~uint64_t{0xFFFF}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("slot 1"), absl::string_view::npos) << s;
  EXPECT_EQ(router_->counters().claim_conflicts, 1u);
  ASSERT_TRUE(a.cm->Listen(kSid, ~uint64_t{0}, 4, false).ok());
  ASSERT_TRUE(b.cm->Listen(kSid + 1, ~uint64_t{0}, 4, false).ok());

  auto to_a = peer_->Connect(sched_->Now(), ToRouterHost(kSid, 0x301));
  auto to_b = peer_->Connect(sched_->Now(), ToRouterHost(kSid + 1, 0x302));
  auto to_none = peer_->Connect(sched_->Now(), ToRouterHost(kSid + 2, 0x303));
  ASSERT_TRUE(to_a.ok() && to_b.ok() && to_none.ok());
  Deliver();
  EXPECT_EQ(*peer_->State(*to_a), cm::CmState::kEstablished);
  EXPECT_EQ(*peer_->State(*to_b), cm::CmState::kEstablished);
  EXPECT_EQ(Count(a.events, CmEventType::kConnectRequest), 1);
  EXPECT_EQ(Count(b.events, CmEventType::kConnectRequest), 1);
  EXPECT_EQ(Count(c.events, CmEventType::kConnectRequest), 0);
  // Nobody claimed kSid + 2: dropped and counted, the REQ times out.
  EXPECT_EQ(*peer_->State(*to_none), cm::CmState::kReqSent);
  EXPECT_GE(router_->counters().wire_unroutable, 1u);
  Drive();
  EXPECT_EQ(Count(peer_events_, CmEventType::kUnreachable), 1);
}

TEST_F(RouterTest, ASecondProcessCannotListenOnAClaimedServiceEvenWithReuse) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  ASSERT_TRUE(Claim(a, kSid, ~uint64_t{0}, true).ok());
  // As the kernel's rdma_listen: one listener per service, REUSEADDR or not.
  for (bool reuse : {false, true}) {
    absl::Status s = Claim(b, kSid, ~uint64_t{0}, reuse);
    EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
    EXPECT_NE(s.message().find("EADDRINUSE"), absl::string_view::npos) << s;
  }
  EXPECT_EQ(router_->counters().claim_conflicts, 2u);
  EXPECT_EQ(router_->claim_count(), 1u);
  ASSERT_TRUE(a.cm->Listen(kSid, ~uint64_t{0}, 4, true).ok());
  ASSERT_TRUE(peer_->Connect(sched_->Now(), ToRouterHost(kSid, 0x301)).ok());
  Deliver();
  EXPECT_EQ(Count(a.events, CmEventType::kConnectRequest), 1);
  EXPECT_EQ(Count(b.events, CmEventType::kConnectRequest), 0);
  // Once a releases its claim, b may listen.
  router_->HandleFrame(a.slot, EncodeClaim(FrameType::kRelease, ClaimFrame{2, kSid, ~uint64_t{0}}));
  EXPECT_EQ(router_->claim_count(), 0u);
  EXPECT_TRUE(Claim(b, kSid, ~uint64_t{0}, true).ok());
}

// SIDR_REQ from the wire goes by service ID to the one client that listens
// on it; the SIDR_REP it sends goes back to the requester; another client
// (not listening) sees nothing.
TEST_F(RouterTest, SidrRequestsGoToTheListeningClientByServiceId) {
  constexpr uint64_t kUdSid = 0x0000000001110000ull | 4791;  // RDMA_PS_UDP port 4791
  TestClient& bystander = AddClient();
  TestClient& server = AddClient();
  ASSERT_TRUE(Claim(server, kUdSid, ~uint64_t{0}, false).ok());
  ASSERT_TRUE(server.cm->Listen(kUdSid, ~uint64_t{0}, 4, false).ok());
  ASSERT_TRUE(bystander.cm->Listen(kUdSid + 1, ~uint64_t{0}, 4, false).ok());  // not claimed

  cm::SidrRequestParams p;
  p.service_id = kUdSid;
  p.peer.lid = kRouterLid;
  p.timeout = 10;
  p.max_retries = 2;
  p.private_data = {7, 7};
  auto id = peer_->SidrRequest(sched_->Now(), p);
  ASSERT_TRUE(id.ok()) << id.status();
  Deliver();
  EXPECT_EQ(Count(server.events, CmEventType::kSidrRequest), 1);
  EXPECT_TRUE(bystander.events.empty());
  EXPECT_TRUE(bystander.refused.empty() && server.refused.empty());
  ASSERT_EQ(Count(peer_events_, CmEventType::kSidrReply), 1);
  for (const CmEvent& e : peer_events_) {
    if (e.type != CmEventType::kSidrReply) continue;
    EXPECT_EQ(e.sidr_qpn, 0x6000u + server.slot);  // the listening client answered
    EXPECT_EQ(e.sidr_qkey, 0x01234567u);
  }
  // A service nobody listens on: dropped and counted; the requester times out.
  p.service_id = kUdSid + 1;
  const uint64_t unroutable = router_->counters().wire_unroutable;
  ASSERT_TRUE(peer_->SidrRequest(sched_->Now(), p).ok());
  Drive();
  EXPECT_EQ(router_->counters().wire_unroutable, unroutable + 3);  // 1 + 2 retries
  EXPECT_EQ(Count(peer_events_, CmEventType::kUnreachable), 1);
  EXPECT_TRUE(bystander.events.empty());
  EXPECT_EQ(Count(server.events, CmEventType::kSidrRequest), 1);
  EXPECT_EQ(router_->counters().refused_mads, 0u);
  ExpectAllEmpty();
}

TEST_F(RouterTest, AClientSendingForAnotherClientsIdIsRefused) {
  ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 16, false).ok());
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  auto id = b.cm->Connect(sched_->Now(), ToPeer(0x200));
  ASSERT_TRUE(id.ok());
  Deliver();
  ASSERT_EQ(*b.cm->State(*id), cm::CmState::kEstablished);
  const uint32_t victim = *b.cm->LocalCommId(*id);
  const uint64_t peer_rx_before = TotalReceived(*peer_);

  // a forges a DREQ for b's connection.
  w::DreqRepr d;
  d.local_comm_id = victim;
  d.remote_comm_id = 1;
  std::array<uint8_t, 256> buf{};
  ASSERT_TRUE(d.Emit(buf).ok());
  const uint64_t to_wire = router_->counters().to_wire;
  mad::MadAddress to;
  to.lid = kPeerLid;
  SendFrame(a, to, buf);
  Deliver();
  EXPECT_EQ(router_->counters().refused_mads, 1u);
  EXPECT_EQ(router_->counters().to_wire, to_wire);  // nothing reached the wire
  ASSERT_EQ(a.refused.size(), 1u);
  EXPECT_EQ(a.refused[0].code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(a.refused[0].message().find("DREQ comm ID 0x"), absl::string_view::npos)
      << a.refused[0];
  EXPECT_EQ(TotalReceived(*peer_), peer_rx_before);
  EXPECT_EQ(*b.cm->State(*id), cm::CmState::kEstablished);

  // A REJ with LocalCommID 0 for a REQ a was never given, and garbage.
  w::RejRepr r;
  r.remote_comm_id = 0x1234;
  ASSERT_TRUE(r.Emit(buf).ok());
  SendFrame(a, to, buf);
  buf[1] = 0x07;
  buf[16] = 0x7F;  // unknown CM attribute
  SendFrame(a, to, buf);
  router_->HandleFrame(a.slot, std::vector<uint8_t>{1, 2, 3});
  Deliver();
  EXPECT_EQ(router_->counters().refused_mads, 3u);
  EXPECT_EQ(router_->counters().malformed_frames, 1u);
  EXPECT_EQ(a.refused.size(), 4u);
  EXPECT_EQ(router_->counters().to_wire, to_wire);
}

TEST_F(RouterTest, ActiveClientCrashAfterRepRejectsOnTheWire) {
  ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 16, false).ok());
  TestClient& c = AddClient();
  // The client never answers the REP: crash when it arrives.
  auto id = c.cm->Connect(sched_->Now(), ToPeer(0x200));
  ASSERT_TRUE(id.ok());
  const uint8_t slot = c.slot;
  // Deliver REQ to the peer and REP back to the router, then crash before
  // the client's endpoint sees the REP.
  cm::OutgoingMad m;
  ASSERT_TRUE(c.cm->PollTransmit(&m));
  SendFrame(c, m.to, m.mad);
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  peer_tx_->Drain([&](const mad::ReceivedMad& r) { peer_->HandleMad(sched_->Now(), r.from, r.data); });
  CmEvent e;
  ASSERT_TRUE(peer_->PollEvent(&e));
  ASSERT_TRUE(peer_->Accept(sched_->Now(), e.conn, cm::testing::MakeAccept()).ok());
  const ConnId peer_conn = e.conn;
  ASSERT_TRUE(peer_->PollTransmit(&m));
  ASSERT_TRUE(peer_tx_->Send(m.to, m.mad).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(router_->PollWire(), 1u);
  EXPECT_EQ(router_->tracked(slot), 1u);
  Crash(c);
  EXPECT_EQ(router_->counters().cleanup_rej, 1u);
  EXPECT_EQ(router_->client_count(), 0u);
  Deliver();
  EXPECT_EQ(Count(peer_events_, CmEventType::kRejected), 1);
  auto st = peer_->State(peer_conn);
  EXPECT_TRUE(!st.ok() || *st != cm::CmState::kRepSent);
  Drive();
  ExpectAllEmpty();
  EXPECT_EQ(router_->tracked(slot), 0u);
}

// A client that dies in REQ_SENT (its REQ is on the wire, no REP yet): the
// router does what cm_destroy_id does from REQ_SENT, REJ reason 4 (timeout)
// with our CA GUID as ARI, MessageRejected = REQ, RemoteCommID 0; the slot
// goes back to the pool.
TEST_F(RouterTest, ActiveClientCrashInReqSentRejectsWithTimeoutAndOurCaGuid) {
  // Three slots, so the freed one comes back after two more clients.
  RouterOptions small;
  small.slot_bits = 2;
  router_ = std::make_unique<Router>(*wire_, small,
                                     [this](uint8_t slot, std::span<const uint8_t> f) {
                                       clients_.at(slot).inbox.emplace_back(f.begin(), f.end());
                                     });
  accept_on_peer_ = false;  // the peer has not answered yet when the REJ arrives
  ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 16, false).ok());
  TestClient& c = AddClient();
  auto id = c.cm->Connect(sched_->Now(), ToPeer(0x200));
  ASSERT_TRUE(id.ok());
  const uint32_t local = *c.cm->LocalCommId(*id);
  const uint8_t slot = c.slot;
  cm::OutgoingMad m;
  ASSERT_TRUE(c.cm->PollTransmit(&m));
  SendFrame(c, m.to, m.mad);  // the REQ goes to the wire
  EXPECT_EQ(router_->tracked(slot), 1u);
  Crash(c);
  EXPECT_EQ(router_->counters().cleanup_rej, 1u);
  EXPECT_EQ(router_->client_count(), 0u);
  EXPECT_EQ(router_->tracked(slot), 0u);
  Deliver();

  // On the wire: the REQ, then the router's REJ.
  int rejs = 0;
  for (const auto& bytes : peer_rx_) {
    auto msg = w::ParseAnyCm(bytes);
    ASSERT_TRUE(msg.ok()) << msg.status();
    const auto* rej = std::get_if<w::RejRepr>(&*msg);
    if (rej == nullptr) continue;
    ++rejs;
    EXPECT_EQ(rej->reason, w::RejReason::kTimeout);
    EXPECT_EQ(rej->message_rejected, w::RejMessage::kReq);
    EXPECT_EQ(rej->local_comm_id, local);
    EXPECT_EQ(rej->remote_comm_id, 0u);
    ASSERT_TRUE(rej->AriValue().has_value());
    EXPECT_EQ(*rej->AriValue(), wire_->port().node_guid);
  }
  EXPECT_EQ(rejs, 1);
  // The peer's passive side took the REJ: CONNECT_REQUEST, then REJECTED (4).
  EXPECT_EQ(Count(peer_events_, CmEventType::kConnectRequest), 1);
  ASSERT_EQ(Count(peer_events_, CmEventType::kRejected), 1);
  EXPECT_EQ(peer_events_.back().status, 4);
  Drive();
  ExpectAllEmpty();
  // The slot (and its comm ID range) is handed out again.
  std::set<uint8_t> seen;
  for (int i = 0; i < 3; ++i) seen.insert(AddClient().slot);
  EXPECT_TRUE(seen.contains(slot));
  EXPECT_EQ(router_->client_count(), 3u);
}

TEST_F(RouterTest, PassiveClientCrashBeforeAnsweringRejectsTheReq) {
  accept_on_clients_ = false;
  TestClient& c = AddClient();
  ASSERT_TRUE(Claim(c, kSid, ~uint64_t{0}, false).ok());
  ASSERT_TRUE(c.cm->Listen(kSid, ~uint64_t{0}, 4, false).ok());
  auto id = peer_->Connect(sched_->Now(), ToRouterHost(kSid, 0x301));
  ASSERT_TRUE(id.ok());
  Deliver();
  ASSERT_EQ(Count(c.events, CmEventType::kConnectRequest), 1);
  EXPECT_EQ(router_->tracked(c.slot), 1u);
  Crash(c);
  EXPECT_EQ(router_->claim_count(), 0u);
  Deliver();
  EXPECT_EQ(Count(peer_events_, CmEventType::kRejected), 1);
  EXPECT_EQ(peer_events_.back().status, 28);
  Drive();
  ExpectAllEmpty();
}

TEST_F(RouterTest, EstablishedClientCrashDisconnects) {
  ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 16, false).ok());
  TestClient& c = AddClient();
  TestClient& other = AddClient();
  for (uint32_t q : {0x200u, 0x201u}) ASSERT_TRUE(c.cm->Connect(sched_->Now(), ToPeer(q)).ok());
  auto kept = other.cm->Connect(sched_->Now(), ToPeer(0x202));
  ASSERT_TRUE(kept.ok());
  Deliver();
  EXPECT_EQ(Count(peer_events_, CmEventType::kEstablished), 3);
  Crash(c);
  EXPECT_EQ(router_->counters().cleanup_dreq, 2u);
  Deliver();
  EXPECT_EQ(Count(peer_events_, CmEventType::kDisconnected), 2);
  // The peer's DREPs find no owner any more: dropped and counted.
  EXPECT_EQ(router_->counters().wire_unroutable, 2u);
  EXPECT_EQ(*other.cm->State(*kept), cm::CmState::kEstablished);
  // A new client does not get the dead slot back at once.
  TestClient& next = AddClient();
  EXPECT_NE(next.slot, c.slot);
}

// A client that never answers the peer's DREQ and goes away (qperf's server
// leaves the accepted id to its exit): the router sends the DREP, as the
// kernel's cm_destroy_id from DREQ_RCVD, so the peer's DREQ does not time out.
TEST_F(RouterTest, ClientGoneAfterThePeersDreqSendsTheDrep) {
  ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 16, false).ok());
  TestClient& c = AddClient();
  ASSERT_TRUE(c.cm->Connect(sched_->Now(), ToPeer(0x210)).ok());
  Deliver();
  ASSERT_EQ(Count(peer_events_, CmEventType::kEstablished), 1);
  ASSERT_TRUE(peer_->Disconnect(sched_->Now(), peer_events_.back().conn).ok());
  Deliver();
  ASSERT_EQ(Count(c.events, CmEventType::kDisconnected), 1);
  EXPECT_EQ(router_->tracked(c.slot), 1u) << "kept until the client's DREP";
  Crash(c);
  EXPECT_EQ(router_->counters().cleanup_drep, 1u);
  EXPECT_EQ(router_->counters().cleanup_dreq, 0u);
  Deliver();
  ASSERT_EQ(Count(peer_events_, CmEventType::kDisconnected), 1) << "no DREP: the DREQ waits";
  EXPECT_EQ(peer_events_.back().status, 0);
  Drive();
  ExpectAllEmpty();
}

// The client's own DREP ends the tracking: nothing is sent when it goes.
TEST_F(RouterTest, ClientsDrepForThePeersDreqLeavesNothingToClean) {
  ASSERT_TRUE(peer_->Listen(kSid, ~uint64_t{0}, 16, false).ok());
  TestClient& c = AddClient();
  auto conn = c.cm->Connect(sched_->Now(), ToPeer(0x211));
  ASSERT_TRUE(conn.ok());
  Deliver();
  ASSERT_TRUE(peer_->Disconnect(sched_->Now(), peer_events_.back().conn).ok());
  Deliver();
  ASSERT_EQ(Count(c.events, CmEventType::kDisconnected), 1);
  ASSERT_TRUE(c.cm->Destroy(sched_->Now(), *conn).ok());  // the DREP
  Deliver();
  EXPECT_EQ(router_->tracked(c.slot), 0u);
  Crash(c);
  EXPECT_EQ(router_->counters().cleanup_drep, 0u);
}

TEST_F(RouterTest, SaResponsesGoBackByTidWithTheClientsTidRestored) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  // Both clients use the same TID for a SubnAdmGet to the "SA" (the peer host).
  std::array<uint8_t, 256> get{};
  get[0] = 1;     // base version
  get[1] = 0x03;  // SubnAdm
  get[2] = 2;
  get[3] = 0x01;  // Get
  for (int i = 0; i < 8; ++i) get[8 + i] = static_cast<uint8_t>(0xA0 + i);
  mad::MadAddress sa;
  sa.lid = kPeerLid;
  SendFrame(a, sa, get);
  SendFrame(b, sa, get);
  SendFrame(a, sa, get);  // a retry: same router TID
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<std::vector<uint8_t>> seen;
  peer_tx_->Drain([&](const mad::ReceivedMad& r) { seen.emplace_back(r.data.begin(), r.data.end()); });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_NE(std::vector<uint8_t>(seen[0].begin() + 8, seen[0].begin() + 16),
            std::vector<uint8_t>(seen[1].begin() + 8, seen[1].begin() + 16));
  EXPECT_EQ(seen[0], seen[2]);
  EXPECT_EQ(router_->tid_entries(), 2u);
  // The SA answers b's request only.
  std::vector<uint8_t> resp = seen[1];
  resp[3] = 0x81;  // GetResp
  resp[60] = 0x5A;
  mad::MadAddress back;
  back.lid = kRouterLid;
  ASSERT_TRUE(peer_tx_->Send(back, resp).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(router_->PollWire(), 1u);
  ASSERT_EQ(b.inbox.size(), 1u);
  EXPECT_TRUE(a.inbox.empty());
  auto mf = DecodeMad(b.inbox.front());
  ASSERT_TRUE(mf.ok());
  EXPECT_EQ(std::vector<uint8_t>(mf->mad.begin() + 8, mf->mad.begin() + 16),
            std::vector<uint8_t>(get.begin() + 8, get.begin() + 16));
  EXPECT_EQ(mf->mad[60], 0x5A);
  // After b leaves, a late response for its TID is dropped and counted.
  b.inbox.clear();
  Crash(b);
  EXPECT_EQ(router_->tid_entries(), 1u);
  ASSERT_TRUE(peer_tx_->Send(back, resp).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  router_->PollWire();
  EXPECT_EQ(router_->counters().wire_unroutable, 1u);
}

// A PathRecord SubnAdmGet from the "SA"'s point of view: attribute 0x0035.
std::array<uint8_t, 256> PathRecordGet(uint8_t tid_byte, uint8_t dgid_byte) {
  std::array<uint8_t, 256> get{};
  get[0] = 1;
  get[1] = 0x03;  // SubnAdm
  get[2] = 2;
  get[3] = 0x01;  // Get
  for (int i = 0; i < 8; ++i) get[8 + i] = static_cast<uint8_t>(tid_byte + i);
  get[16] = 0x00;
  get[17] = 0x35;  // PathRecord
  get[56 + 8 + 16 + 15] = dgid_byte;  // DGID's last byte
  return get;
}

TEST_F(RouterTest, IdenticalPathQueriesOfSeveralClientsGoOnTheWireOnce) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  TestClient& c = AddClient();
  mad::MadAddress sa;
  sa.lid = kPeerLid;
  SendFrame(a, sa, PathRecordGet(0x10, 7));
  SendFrame(b, sa, PathRecordGet(0x20, 7));  // the same query, b's own TID
  SendFrame(c, sa, PathRecordGet(0x30, 8));  // another destination
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<std::vector<uint8_t>> seen;
  peer_tx_->Drain([&](const mad::ReceivedMad& r) { seen.emplace_back(r.data.begin(), r.data.end()); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(router_->counters().sa_coalesced, 1u);

  // b's retry while a's query is unanswered re-sends the shared query.
  SendFrame(b, sa, PathRecordGet(0x20, 7));
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<std::vector<uint8_t>> again;
  peer_tx_->Drain([&](const mad::ReceivedMad& r) { again.emplace_back(r.data.begin(), r.data.end()); });
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], seen[0]);
  EXPECT_EQ(router_->counters().sa_waiter_resends, 1u);

  std::vector<uint8_t> resp = seen[0];
  resp[3] = 0x81;
  resp[60] = 0x5A;
  mad::MadAddress back;
  back.lid = kRouterLid;
  ASSERT_TRUE(peer_tx_->Send(back, resp).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  router_->PollWire();
  for (auto [client, tid] : {std::pair<TestClient*, uint8_t>{&a, 0x10}, {&b, 0x20}}) {
    ASSERT_EQ(client->inbox.size(), 1u);
    auto mf = DecodeMad(client->inbox.front());
    ASSERT_TRUE(mf.ok());
    EXPECT_EQ(mf->mad[8], tid) << "each client gets its own TID back";
    EXPECT_EQ(mf->mad[15], tid + 7);
    EXPECT_EQ(mf->mad[60], 0x5A);
  }
  EXPECT_TRUE(c.inbox.empty());
  // Answered: the same query goes on the wire again.
  SendFrame(b, sa, PathRecordGet(0x40, 7));
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  size_t sent = 0;
  peer_tx_->Drain([&](const mad::ReceivedMad&) { ++sent; });
  EXPECT_EQ(sent, 1u);
}

TEST_F(RouterTest, AWaitingClientsRetryTakesOverTheQueryOfAClientThatLeft) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  mad::MadAddress sa;
  sa.lid = kPeerLid;
  SendFrame(a, sa, PathRecordGet(0x10, 7));
  SendFrame(b, sa, PathRecordGet(0x20, 7));
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  peer_tx_->Drain([](const mad::ReceivedMad&) {});
  Crash(a);
  SendFrame(b, sa, PathRecordGet(0x20, 7));  // b's retry: now its own query
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<std::vector<uint8_t>> seen;
  peer_tx_->Drain([&](const mad::ReceivedMad& r) { seen.emplace_back(r.data.begin(), r.data.end()); });
  ASSERT_EQ(seen.size(), 1u);
  std::vector<uint8_t> resp = seen[0];
  resp[3] = 0x81;
  mad::MadAddress back;
  back.lid = kRouterLid;
  ASSERT_TRUE(peer_tx_->Send(back, resp).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  router_->PollWire();
  ASSERT_EQ(b.inbox.size(), 1u);
  auto mf = DecodeMad(b.inbox.front());
  ASSERT_TRUE(mf.ok());
  EXPECT_EQ(mf->mad[8], 0x20);
  EXPECT_EQ(router_->counters().wire_unroutable, 0u);
}

TEST_F(RouterTest, SlotsRunOut) {
  RouterOptions o;
  o.slot_bits = 2;  // 3 clients
  Router small(*wire_, o, [](uint8_t, std::span<const uint8_t>) {});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(small.AddClient().ok());
  auto s = small.AddClient();
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(small.counters().clients_refused, 1u);
  small.RemoveClient(2);
  auto again = small.AddClient();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->slot, 2);
  EXPECT_EQ(again->comm_id_prefix, 2u);
  EXPECT_EQ(again->comm_id_prefix_bits, 2);
}

}  // namespace
}  // namespace uscm::router
