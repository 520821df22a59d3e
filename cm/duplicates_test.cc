// Duplicates answered per state, stale connections, lost RTU + COMM_EST,
// garbage from the peer.
#include <vector>

#include "cm/cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_dreq.h"
#include "mad/wire/cm_mra.h"
#include "mad/wire/cm_rej.h"

namespace uscm::cm {
namespace {

using ::testing::ElementsAre;
using mad::wire::CmAttr;
using testing::AttrOf;
using testing::DrainEvents;
using testing::DrainTx;
using testing::MakeAccept;
using testing::MakeConnect;
using testing::Pair;

// Runs REQ -> REP by hand; returns (active id, passive id, REQ, REP).
struct Handshake {
  ConnId a, b;
  OutgoingMad req, rep;
};

Handshake ToRepRcvd(Pair& p, ConnectParams cp = MakeConnect()) {
  Handshake h;
  h.a = *p.a.Connect(p.now, cp);
  h.req = DrainTx(p.a).at(0);
  p.b.HandleMad(p.now, p.addr_a, h.req.mad);
  h.b = DrainEvents(p.b).at(0).conn;
  EXPECT_TRUE(p.b.Accept(p.now, h.b, MakeAccept()).ok());
  h.rep = DrainTx(p.b).at(0);
  p.a.HandleMad(p.now, p.addr_b, h.rep.mad);
  EXPECT_THAT(testing::Types(DrainEvents(p.a)),
              ElementsAre(CmEventType::kConnectResponse));
  return h;
}

TEST(DuplicatesTest, DuplicateRepInEstablishedResendsRtu) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  Handshake h = ToRepRcvd(p);
  ASSERT_TRUE(p.a.Rtu(p.now, h.a, std::vector<uint8_t>{1, 2, 3}).ok());
  auto rtu = DrainTx(p.a);
  ASSERT_EQ(rtu.size(), 1u);
  p.a.HandleMad(p.now, p.addr_b, h.rep.mad);  // the REP again
  auto again = DrainTx(p.a);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].mad, rtu[0].mad);  // same RTU, same private data
  EXPECT_EQ(p.a.counters().duplicates[3], 1u);
  EXPECT_THAT(testing::Types(DrainEvents(p.a)), ElementsAre(CmEventType::kEstablished));
}

// A lost REP: the active side's REQ retransmission reaches the passive side in
// REP_SENT, which sends the same REP again at once (Linux drops the duplicate
// and waits for its REP timer) without using one of the REP's retries.
TEST(DuplicatesTest, DuplicateReqInRepSentResendsTheRep) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  const ConnId a = *p.a.Connect(p.now, MakeConnect());
  const OutgoingMad req = DrainTx(p.a).at(0);
  p.b.HandleMad(p.now, p.addr_a, req.mad);
  const ConnId b = DrainEvents(p.b).at(0).conn;
  ASSERT_TRUE(p.b.Accept(p.now, b, MakeAccept()).ok());
  const OutgoingMad rep = DrainTx(p.b).at(0);  // lost
  ASSERT_EQ(*p.b.State(b), CmState::kRepSent);
  const auto deadline = p.b.NextDeadline();
  p.b.HandleMad(p.now, p.addr_a, req.mad);  // the REQ again
  auto again = DrainTx(p.b);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].mad, rep.mad);  // the same REP, byte for byte
  EXPECT_EQ(p.b.counters().duplicates[0], 1u);
  EXPECT_EQ(p.b.counters().rep_resent_for_duplicate_req, 1u);
  EXPECT_EQ(p.b.counters().retransmitted[3], 0u) << "not a retry of the REP timer";
  EXPECT_EQ(p.b.NextDeadline(), deadline) << "REP timer left as it was";
  EXPECT_TRUE(DrainEvents(p.b).empty());
  p.a.HandleMad(p.now, p.addr_b, again[0].mad);
  EXPECT_THAT(testing::Types(DrainEvents(p.a)), ElementsAre(CmEventType::kConnectResponse));
  EXPECT_EQ(*p.a.State(a), CmState::kRepRcvd);
}

// CmConfig::rep_for_duplicate_req = false (the rdma_cm API): as Linux, the
// duplicate is dropped and the REP waits for its own timer.
TEST(DuplicatesTest, DuplicateReqInRepSentDroppedWhenConfigured) {
  CmConfig cb = testing::TestConfig();
  cb.rep_for_duplicate_req = false;
  Pair p(testing::TestConfig(), cb);
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  ASSERT_TRUE(p.a.Connect(p.now, MakeConnect()).ok());
  const OutgoingMad req = DrainTx(p.a).at(0);
  p.b.HandleMad(p.now, p.addr_a, req.mad);
  const ConnId b = DrainEvents(p.b).at(0).conn;
  ASSERT_TRUE(p.b.Accept(p.now, b, MakeAccept()).ok());
  DrainTx(p.b);  // the REP, lost
  p.b.HandleMad(p.now, p.addr_a, req.mad);  // the REQ again
  EXPECT_TRUE(DrainTx(p.b).empty());
  EXPECT_EQ(p.b.counters().duplicates[0], 1u);
  EXPECT_EQ(p.b.counters().rep_resent_for_duplicate_req, 0u);
}

// rdma_cm's MRA (Linux IB_CM_MRA_FLAG_DELAY): MRA_REQ_SENT at once, but the
// MRA goes out only when the REQ comes again; the peer then waits ~68 s more.
TEST(DuplicatesTest, MraHeldForDuplicateReqGoesOutOnlyThen) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  const ConnId a = *p.a.Connect(p.now, MakeConnect());
  const OutgoingMad req = DrainTx(p.a).at(0);
  p.b.HandleMad(p.now, p.addr_a, req.mad);
  const ConnId b = DrainEvents(p.b).at(0).conn;
  ASSERT_TRUE(p.b.SendMra(p.now, b, 24, {}, MraTiming::kOnDuplicate).ok());
  EXPECT_TRUE(DrainTx(p.b).empty()) << "nothing on the wire until a duplicate";
  EXPECT_EQ(*p.b.State(b), CmState::kMraReqSent);
  EXPECT_FALSE(p.b.NextDeadline().has_value()) << "no auto-MRA timer left";
  EXPECT_EQ(p.b.counters().mra_held, 1u);
  EXPECT_EQ(p.b.counters().auto_mra, 0u);
  const auto req_deadline = *p.a.NextDeadline();
  EXPECT_LT(req_deadline, p.now + mad::Duration::Seconds(10));
  p.b.HandleMad(p.now, p.addr_a, req.mad);  // the REQ again
  auto mra = DrainTx(p.b);
  ASSERT_EQ(mra.size(), 1u);
  ASSERT_EQ(AttrOf(mra[0]), CmAttr::kMra);
  auto r = mad::wire::MraRepr::Parse(mra[0].mad);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->message_mraed, mad::wire::MraMessage::kReq);
  EXPECT_EQ(r->service_timeout, 24);
  p.a.HandleMad(p.now, p.addr_b, mra[0].mad);
  EXPECT_EQ(*p.a.State(a), CmState::kMraReqRcvd);
  EXPECT_GT(*p.a.NextDeadline(), p.now + mad::Duration::Seconds(60)) << "REQ timer moved out";
  // Accepting from MRA_REQ_SENT is the usual path.
  ASSERT_TRUE(p.b.Accept(p.now, b, MakeAccept()).ok());
  EXPECT_EQ(AttrOf(DrainTx(p.b).at(0)), CmAttr::kRep);
}

// The same for the REP on the active side (rdma_cm before its user's RTU).
TEST(DuplicatesTest, MraHeldForDuplicateRepGoesOutOnlyThen) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  Handshake h = ToRepRcvd(p);
  ASSERT_TRUE(p.a.SendMra(p.now, h.a, 24, {}, MraTiming::kOnDuplicate).ok());
  EXPECT_TRUE(DrainTx(p.a).empty());
  EXPECT_EQ(*p.a.State(h.a), CmState::kMraRepSent);
  p.a.HandleMad(p.now, p.addr_b, h.rep.mad);  // the REP again
  auto mra = DrainTx(p.a);
  ASSERT_EQ(mra.size(), 1u);
  ASSERT_EQ(AttrOf(mra[0]), CmAttr::kMra);
  EXPECT_EQ(mad::wire::MraRepr::Parse(mra[0].mad)->message_mraed, mad::wire::MraMessage::kRep);
  p.b.HandleMad(p.now, p.addr_a, mra[0].mad);
  EXPECT_EQ(*p.b.State(h.b), CmState::kMraRepRcvd);
  EXPECT_GT(*p.b.NextDeadline(), p.now + mad::Duration::Seconds(60)) << "REP timer moved out";
  ASSERT_TRUE(p.a.Rtu(p.now, h.a).ok());
  EXPECT_EQ(AttrOf(DrainTx(p.a).at(0)), CmAttr::kRtu);
  EXPECT_THAT(testing::Types(DrainEvents(p.a)), ElementsAre(CmEventType::kEstablished));
}

TEST(DuplicatesTest, LostRtuThenCommEstablished) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  Handshake h = ToRepRcvd(p);
  ASSERT_TRUE(p.a.Rtu(p.now, h.a).ok());
  const OutgoingMad rtu = DrainTx(p.a).at(0);  // lost
  ASSERT_TRUE(p.b.NotifyCommEstablished(p.now, h.b).ok());
  EXPECT_EQ(*p.b.State(h.b), CmState::kEstablished);
  EXPECT_THAT(testing::Types(DrainEvents(p.b)), ElementsAre(CmEventType::kEstablished));
  EXPECT_FALSE(p.b.NextDeadline().has_value()) << "REP timer cancelled";
  // The late RTU is a counted duplicate, no second event.
  p.b.HandleMad(p.now, p.addr_a, rtu.mad);
  EXPECT_TRUE(DrainEvents(p.b).empty());
  EXPECT_EQ(p.b.counters().duplicates[4], 1u);
  EXPECT_TRUE(p.b.NotifyCommEstablished(p.now, h.b).ok());
  EXPECT_TRUE(DrainEvents(p.b).empty());
}

TEST(DuplicatesTest, DuplicateDreqInTimeWaitResendsDrep) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  Handshake h = ToRepRcvd(p);
  ASSERT_TRUE(p.a.Rtu(p.now, h.a).ok());
  p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a).at(0).mad);
  DrainEvents(p.a);
  DrainEvents(p.b);
  ASSERT_TRUE(p.a.Disconnect(p.now, h.a).ok());
  const OutgoingMad dreq = DrainTx(p.a).at(0);
  p.b.HandleMad(p.now, p.addr_a, dreq.mad);
  ASSERT_TRUE(p.b.Disconnect(p.now, h.b, std::vector<uint8_t>{7, 7}).ok());
  const OutgoingMad drep = DrainTx(p.b).at(0);
  EXPECT_EQ(AttrOf(drep), CmAttr::kDrep);
  EXPECT_EQ(*p.b.State(h.b), CmState::kTimeWait);
  p.b.HandleMad(p.now, p.addr_a, dreq.mad);  // DREP lost, DREQ retried
  auto again = DrainTx(p.b);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].mad, drep.mad);
  EXPECT_EQ(p.b.counters().duplicates[5], 1u);
}

TEST(DuplicatesTest, DreqForUnknownConnectionStillGetsDrep) {
  Pair p;
  mad::wire::DreqRepr d;
  d.local_comm_id = 0x1234;
  d.remote_comm_id = 0x5678;
  d.remote_qpn = 9;
  OutgoingMad m;
  ASSERT_TRUE(d.Emit(m.mad).ok());
  p.b.HandleMad(p.now, p.addr_a, m.mad);
  auto tx = DrainTx(p.b);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(AttrOf(tx[0]), CmAttr::kDrep);
  EXPECT_EQ(tx[0].to, p.addr_a);
  EXPECT_EQ(p.b.counters().unknown_connection, 1u);
  EXPECT_EQ(p.b.connection_count(), 0u);
}

TEST(DuplicatesTest, StaleReqSameQpnAndGuidGetsRej10AndOldGetsDreq) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  Handshake h = ToRepRcvd(p);
  ASSERT_TRUE(p.a.Rtu(p.now, h.a).ok());
  p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a).at(0).mad);
  DrainEvents(p.b);
  // "A reboots": a fresh endpoint with the same CA GUID reuses QPN 0x111.
  CmEndpoint a2(p.port_a, testing::TestConfig(), 99);
  ASSERT_TRUE(a2.Connect(p.now, MakeConnect(0x111)).ok());
  p.b.HandleMad(p.now, p.addr_a, DrainTx(a2).at(0).mad);
  auto tx = DrainTx(p.b);
  ASSERT_EQ(tx.size(), 2u);
  ASSERT_EQ(AttrOf(tx[0]), CmAttr::kRej);
  EXPECT_EQ(mad::wire::RejRepr::Parse(tx[0].mad)->reason, RejReason::kStaleConnection);
  ASSERT_EQ(AttrOf(tx[1]), CmAttr::kDreq);
  EXPECT_EQ(mad::wire::DreqRepr::Parse(tx[1].mad)->remote_qpn, 0x111u);
  EXPECT_EQ(*p.b.State(h.b), CmState::kDreqSent);
  EXPECT_TRUE(DrainEvents(p.b).empty()) << "no CONNECT_REQUEST for a stale REQ";
  EXPECT_EQ(p.b.counters().stale_connections, 1u);
  // The rebooted side: REJ 10 puts it in TimeWait, not IDLE.
  a2.HandleMad(p.now, p.addr_b, tx[0].mad);
  auto ev = DrainEvents(a2);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(ev[0].status, 10);
  EXPECT_EQ(*a2.State(ev[0].conn), CmState::kTimeWait);
}

TEST(DuplicatesTest, GarbageIsCountedNeverFatal) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  std::vector<uint8_t> junk(256, 0xA5);
  p.b.HandleMad(p.now, p.addr_a, junk);
  p.b.HandleMad(p.now, p.addr_a, std::span<const uint8_t>(junk.data(), 10));
  // A REQ cut short.
  ASSERT_TRUE(p.a.Connect(p.now, MakeConnect()).ok());
  const OutgoingMad req = DrainTx(p.a).at(0);
  p.b.HandleMad(p.now, p.addr_a, std::span<const uint8_t>(req.mad.data(), 100));
  // A valid MAD header with the REQ attribute but a bad MTU.
  OutgoingMad bad = req;
  bad.mad[24 + 50] = 0x70;
  p.b.HandleMad(p.now, p.addr_a, bad.mad);
  EXPECT_EQ(p.b.counters().malformed, 4u);
  EXPECT_TRUE(DrainTx(p.b).empty());
  EXPECT_TRUE(DrainEvents(p.b).empty());
  EXPECT_EQ(p.b.connection_count(), 0u);
}

}  // namespace
}  // namespace uscm::cm
