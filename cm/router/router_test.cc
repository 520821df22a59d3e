// Router scenarios on the simulated fabric (fixture: router_test_fixture.h).
#include "cm/router/router_test_fixture.h"

namespace uscm::router {
namespace {

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

// A REQ retransmitted after the client's REP (the REP was slow or lost) is
// handed to the client, whose CM decides, but is not tracked as a second
// pending REQ: the client's exit sends a DREQ for the connection and no REJ
// (before the fix, cmtime's server exit sent "cleanup REJ 223").
TEST_F(RouterTest, ADuplicateReqAfterTheRepIsHandedOverButNotTrackedAgain) {
  TestClient& c = AddClient();
  ASSERT_TRUE(Claim(c, kSid, ~uint64_t{0}, false).ok());
  ASSERT_TRUE(c.cm->Listen(kSid, ~uint64_t{0}, 4, false).ok());
  auto id = peer_->Connect(sched_->Now(), ToRouterHost(kSid, 0x301));
  ASSERT_TRUE(id.ok());
  Deliver();
  ASSERT_EQ(*peer_->State(*id), cm::CmState::kEstablished);
  EXPECT_EQ(router_->tracked(c.slot), 1u);
  auto req = std::find_if(peer_sent_.begin(), peer_sent_.end(), [](const cm::OutgoingMad& m) {
    return CmAttrIndex(m.mad) == 0;  // REQ
  });
  ASSERT_NE(req, peer_sent_.end());
  const cm::OutgoingMad dup = *req;
  const uint64_t dups_before = c.cm->counters().duplicates[0];
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(peer_tx_->Send(dup.to, dup.mad).ok());
    Deliver();
  }
  EXPECT_EQ(c.cm->counters().duplicates[0], dups_before + 2) << "the client's CM saw both";
  EXPECT_EQ(router_->counters().duplicate_reqs, 2u);
  EXPECT_EQ(router_->tracked(c.slot), 1u) << "the connection only, no pending REQ";
  Crash(c);
  EXPECT_EQ(router_->counters().cleanup_rej, 0u);
  EXPECT_EQ(router_->counters().cleanup_dreq, 1u);
  Deliver();
  EXPECT_EQ(Count(peer_events_, CmEventType::kDisconnected), 1);
  EXPECT_EQ(Count(peer_events_, CmEventType::kRejected), 0);
}

// A duplicate while the REQ waits for the client's answer replaces the entry.
TEST_F(RouterTest, ADuplicateOfAPendingReqKeepsOneEntry) {
  accept_on_clients_ = false;
  TestClient& c = AddClient();
  ASSERT_TRUE(Claim(c, kSid, ~uint64_t{0}, false).ok());
  ASSERT_TRUE(c.cm->Listen(kSid, ~uint64_t{0}, 4, false).ok());
  ASSERT_TRUE(peer_->Connect(sched_->Now(), ToRouterHost(kSid, 0x301)).ok());
  Deliver();
  ASSERT_EQ(router_->tracked(c.slot), 1u);
  ASSERT_FALSE(peer_sent_.empty());
  ASSERT_TRUE(peer_tx_->Send(peer_sent_.front().to, peer_sent_.front().mad).ok());
  Deliver();
  EXPECT_EQ(router_->tracked(c.slot), 1u);
  Crash(c);
  EXPECT_EQ(router_->counters().cleanup_rej, 1u);
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
