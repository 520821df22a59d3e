// Per-state fixtures at explicit times (issue 5 "Tests"): each drives a pair
// of endpoints to one state, delivers one message (or makes one call) and
// asserts exactly what is sent (attribute and key fields), the events, the
// new state, and that nothing else is sent. The behaviour pinned here is the
// one docs/CM.md ("States and what is sent", "Duplicates", "Timers") claims.
#include <vector>

#include "cm/cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/iba_time.h"
#include "mad/wire/cm_drep.h"
#include "mad/wire/cm_dreq.h"
#include "mad/wire/cm_mra.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/cm_rep.h"
#include "mad/wire/cm_sidr.h"

namespace uscm::cm {
namespace {

using ::testing::ElementsAre;
using mad::Duration;
using mad::TimePoint;
using mad::wire::CmAttr;
using testing::AttrOf;
using testing::DrainEvents;
using testing::DrainTx;
using testing::MakeAccept;
using testing::MakeConnect;
using testing::Pair;

Duration Iba(int t) { return Duration::Nanos(4096ll << t); }
TimePoint At(int64_t us) { return TimePoint::Epoch() + Duration::Micros(us); }

// Comm IDs and the last MADs of a handshake run by hand.
struct Conn {
  ConnId a, b;
  uint32_t a_comm = 0, b_comm = 0;
  OutgoingMad req, rep, rtu;
};

// REQ (t = 0) -> CONNECT_REQUEST -> Accept at t = 10 us: B in REP_SENT, the
// REP in `rep`, not delivered.
Conn ToRepSent(Pair& p) {
  Conn c;
  EXPECT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  c.a = *p.a.Connect(At(0), MakeConnect());
  c.req = DrainTx(p.a).at(0);
  p.b.HandleMad(At(0), p.addr_a, c.req.mad);
  c.b = DrainEvents(p.b).at(0).conn;
  EXPECT_TRUE(p.b.Accept(At(10), c.b, MakeAccept()).ok());
  auto rep = DrainTx(p.b);
  EXPECT_EQ(rep.size(), 1u);
  c.rep = rep.at(0);
  c.a_comm = *p.a.LocalCommId(c.a);
  c.b_comm = *p.b.LocalCommId(c.b);
  EXPECT_EQ(*p.b.State(c.b), CmState::kRepSent);
  return c;
}

// ... and the REP delivered at t = 20 us: A in REP_RCVD.
Conn ToRepRcvd(Pair& p) {
  Conn c = ToRepSent(p);
  p.a.HandleMad(At(20), p.addr_b, c.rep.mad);
  EXPECT_THAT(testing::Types(DrainEvents(p.a)), ElementsAre(CmEventType::kConnectResponse));
  EXPECT_EQ(*p.a.State(c.a), CmState::kRepRcvd);
  return c;
}

// ... RTU at t = 30 us, delivered: both ESTABLISHED.
Conn ToEstablished(Pair& p) {
  Conn c = ToRepRcvd(p);
  EXPECT_TRUE(p.a.Rtu(At(30), c.a).ok());
  c.rtu = DrainTx(p.a).at(0);
  p.b.HandleMad(At(30), p.addr_a, c.rtu.mad);
  EXPECT_THAT(testing::Types(DrainEvents(p.a)), ElementsAre(CmEventType::kEstablished));
  EXPECT_THAT(testing::Types(DrainEvents(p.b)), ElementsAre(CmEventType::kEstablished));
  EXPECT_EQ(*p.b.State(c.b), CmState::kEstablished);
  return c;
}

// A REJ from B's connection (B's comm ID as local, A's as remote).
OutgoingMad RejFromB(const Conn& c, mad::wire::RejMessage msg, RejReason reason,
                     std::vector<uint8_t> pd = {}) {
  mad::wire::RejRepr r;
  r.local_comm_id = c.b_comm;
  r.remote_comm_id = c.a_comm;
  r.message_rejected = msg;
  r.reason = reason;
  r.private_data = mad::wire::PrivateData(pd);
  OutgoingMad m;
  EXPECT_TRUE(r.Emit(m.mad).ok());
  return m;
}

void ExpectEmpty(CmEndpoint& e) {
  EXPECT_EQ(e.connection_count(), 0u);
  EXPECT_EQ(e.table_entries(), 0u);
  EXPECT_TRUE(e.timers_empty());
  EXPECT_FALSE(e.NextDeadline().has_value());
}

// Runs `e`'s timers at `t` (the wheel may cascade: call until nothing is due).
void RunTimers(CmEndpoint& e, TimePoint t) {
  for (int i = 0; i < 64; ++i) {
    auto d = e.NextDeadline();
    if (!d.has_value() || *d > t) return;
    e.HandleTimeout(*d);
  }
  e.HandleTimeout(t);
}

// ---- MRA of the REP ----

// Active side in REP_RCVD: SendMra -> MRA(msg=REP) -> MRA_REP_SENT; a
// duplicate REP there gets the same MRA again, byte for byte; no event.
TEST(StateFixturesTest, MraOfRepThenDuplicateRepResendsTheSameMra) {
  Pair p;
  Conn c = ToRepRcvd(p);
  const std::vector<uint8_t> pd = {0xAB, 0xCD};
  ASSERT_TRUE(p.a.SendMra(At(40), c.a, 21, pd).ok());
  EXPECT_EQ(*p.a.State(c.a), CmState::kMraRepSent);
  auto tx = DrainTx(p.a);
  ASSERT_EQ(tx.size(), 1u);
  ASSERT_EQ(AttrOf(tx[0]), CmAttr::kMra);
  auto mra = mad::wire::MraRepr::Parse(tx[0].mad);
  ASSERT_TRUE(mra.ok());
  EXPECT_EQ(mra->message_mraed, mad::wire::MraMessage::kRep);
  EXPECT_EQ(mra->service_timeout, 21);
  EXPECT_EQ(mra->local_comm_id, c.a_comm);
  EXPECT_EQ(mra->remote_comm_id, c.b_comm);
  EXPECT_EQ(mra->private_data.bytes()[0], 0xAB);
  EXPECT_EQ(tx[0].to.lid, 2);
  EXPECT_TRUE(DrainEvents(p.a).empty());

  p.a.HandleMad(At(50), p.addr_b, c.rep.mad);  // the REP again
  auto again = DrainTx(p.a);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].mad, tx[0].mad);
  EXPECT_EQ(p.a.counters().duplicates[3], 1u) << "REP counted as a duplicate";
  EXPECT_EQ(*p.a.State(c.a), CmState::kMraRepSent);
  EXPECT_TRUE(DrainEvents(p.a).empty()) << "no second CONNECT_RESPONSE";
  // Rtu is still allowed from MRA_REP_SENT.
  ASSERT_TRUE(p.a.Rtu(At(60), c.a).ok());
  EXPECT_EQ(AttrOf(DrainTx(p.a).at(0)), CmAttr::kRtu);
  EXPECT_EQ(*p.a.State(c.a), CmState::kEstablished);
}

// Passive side in REP_SENT: MRA(REP) -> MRA_REP_RCVD, MRA_RECEIVED, and the
// REP timer becomes service timeout + the connection's ACK timeout (the REQ's
// primary local ACK timeout, 15 here) from the MRA's arrival.
TEST(StateFixturesTest, MraOfRepInRepSentExtendsTheRepTimer) {
  CmConfig ca = testing::TestConfig();
  ca.auto_mra = false;
  Pair p(ca, testing::TestConfig());
  Conn c = ToRepSent(p);
  // Without the MRA the REP would go again at Accept + REQ.LocalCMResponseTimeout (17).
  const TimePoint rep_retry = At(10) + Iba(17);
  EXPECT_LE(*p.b.NextDeadline(), rep_retry);
  p.a.HandleMad(At(20), p.addr_b, c.rep.mad);
  DrainEvents(p.a);
  ASSERT_TRUE(p.a.SendMra(At(20), c.a, 20).ok());
  const OutgoingMad mra = DrainTx(p.a).at(0);

  const TimePoint t = At(100);
  p.b.HandleMad(t, p.addr_a, mra.mad);
  EXPECT_EQ(*p.b.State(c.b), CmState::kMraRepRcvd);
  auto ev = DrainEvents(p.b);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kMraReceived));
  EXPECT_EQ(ev[0].mra_service_timeout, 20);
  EXPECT_TRUE(DrainTx(p.b).empty()) << "an MRA is not answered";
  const TimePoint resend = t + Iba(20) + Iba(15);
  ASSERT_EQ(resend, t + mad::CmMraTimeout(*mad::IbaTimeCode::Create(20, "s"),
                                          *mad::IbaTimeCode::Create(15, "a"),
                                          mad::IbaTimeRounding::kExact));
  EXPECT_LE(*p.b.NextDeadline(), resend);
  RunTimers(p.b, rep_retry);
  EXPECT_TRUE(DrainTx(p.b).empty()) << "the old REP deadline no longer fires";
  RunTimers(p.b, resend - Duration::Nanos(1));
  EXPECT_TRUE(DrainTx(p.b).empty());
  RunTimers(p.b, resend);
  auto tx = DrainTx(p.b);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].mad, c.rep.mad) << "the same REP, retransmitted";
  EXPECT_EQ(p.b.counters().retransmitted[3], 1u);
  EXPECT_EQ(*p.b.State(c.b), CmState::kMraRepRcvd);
  // A duplicate MRA(REP) is counted and changes nothing.
  p.b.HandleMad(resend, p.addr_a, mra.mad);
  EXPECT_TRUE(DrainTx(p.b).empty());
  EXPECT_TRUE(DrainEvents(p.b).empty());
  // The RTU still completes the connection from MRA_REP_RCVD.
  ASSERT_TRUE(p.a.Rtu(resend, c.a).ok());
  p.b.HandleMad(resend, p.addr_a, DrainTx(p.a).at(0).mad);
  EXPECT_EQ(*p.b.State(c.b), CmState::kEstablished);
  EXPECT_THAT(testing::Types(DrainEvents(p.b)), ElementsAre(CmEventType::kEstablished));
}

// ---- REJ received ----

// REP_RCVD: REJ(msg=other, 28, private data) -> TIMEWAIT, REJECTED with the
// reason and the data; nothing sent; TIMEWAIT_EXIT at exactly the ACK
// timeout derived from the REP (CmAckTimeout(target ACK delay 10, PLT 14)).
TEST(StateFixturesTest, RejInRepRcvdIsTimeWaitAndRejected) {
  Pair p;
  Conn c = ToRepRcvd(p);
  const TimePoint t = At(40);
  p.a.HandleMad(t, p.addr_b,
                RejFromB(c, mad::wire::RejMessage::kOther, RejReason::kConsumerReject,
                         {5, 6, 7})
                    .mad);
  EXPECT_TRUE(DrainTx(p.a).empty()) << "a REJ is not answered";
  auto ev = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(ev[0].status, 28);
  EXPECT_EQ(ev[0].private_data.bytes()[0], 5);
  EXPECT_EQ(ev[0].private_data.bytes()[2], 7);
  EXPECT_EQ(*p.a.State(c.a), CmState::kTimeWait);
  const mad::IbaTimeCode ack =
      mad::CmAckTimeout(*mad::IbaTimeCode::Create(10, "d"), *mad::IbaTimeCode::Create(14, "p"));
  const TimePoint end = t + ack.Exact();
  RunTimers(p.a, end - Duration::Nanos(1));
  EXPECT_EQ(*p.a.State(c.a), CmState::kTimeWait) << "auto-MRA disarmed, TimeWait runs";
  EXPECT_TRUE(DrainTx(p.a).empty()) << "no auto-MRA from TimeWait";
  RunTimers(p.a, end);
  EXPECT_THAT(testing::Types(DrainEvents(p.a)), ElementsAre(CmEventType::kTimewaitExit));
  EXPECT_EQ(*p.a.State(c.a), CmState::kIdle);
  ASSERT_TRUE(p.a.Destroy(end, c.a).ok());
  EXPECT_TRUE(DrainTx(p.a).empty());
  ExpectEmpty(p.a);
}

// ESTABLISHED: REJ(msg=other) -> TIMEWAIT, REJECTED; no DREQ, nothing sent.
TEST(StateFixturesTest, RejInEstablishedIsTimeWaitAndRejected) {
  Pair p;
  Conn c = ToEstablished(p);
  p.a.HandleMad(At(40), p.addr_b,
                RejFromB(c, mad::wire::RejMessage::kOther, RejReason::kConsumerReject).mad);
  EXPECT_TRUE(DrainTx(p.a).empty());
  auto ev = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(ev[0].status, 28);
  EXPECT_EQ(*p.a.State(c.a), CmState::kTimeWait);
  // Disconnect in TIMEWAIT is a no-op success; nothing sent.
  ASSERT_TRUE(p.a.Disconnect(At(41), c.a).ok());
  EXPECT_TRUE(DrainTx(p.a).empty());
  ASSERT_TRUE(p.a.Destroy(At(42), c.a).ok());
  EXPECT_TRUE(DrainTx(p.a).empty()) << "Destroy in TIMEWAIT sends nothing";
  RunTimers(p.a, At(42) + Duration::Seconds(10));
  EXPECT_TRUE(DrainEvents(p.a).empty()) << "no TIMEWAIT_EXIT after Destroy";
  EXPECT_TRUE(DrainTx(p.a).empty());
  ExpectEmpty(p.a);
}

// DREQ_SENT: REJ -> TIMEWAIT, REJECTED; the DREQ is no longer retransmitted.
TEST(StateFixturesTest, RejInDreqSentIsTimeWaitAndStopsTheDreq) {
  Pair p;
  Conn c = ToEstablished(p);
  ASSERT_TRUE(p.a.Disconnect(At(40), c.a).ok());
  ASSERT_EQ(AttrOf(DrainTx(p.a).at(0)), CmAttr::kDreq);
  ASSERT_EQ(*p.a.State(c.a), CmState::kDreqSent);
  const TimePoint dreq_retry = *p.a.NextDeadline();
  p.a.HandleMad(At(50), p.addr_b,
                RejFromB(c, mad::wire::RejMessage::kOther, RejReason::kStaleConnection).mad);
  EXPECT_TRUE(DrainTx(p.a).empty());
  auto ev = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(ev[0].status, 10);
  EXPECT_EQ(*p.a.State(c.a), CmState::kTimeWait);
  RunTimers(p.a, dreq_retry + Duration::Seconds(10));
  EXPECT_TRUE(DrainTx(p.a).empty()) << "no DREQ retransmission after the REJ";
  EXPECT_THAT(testing::Types(DrainEvents(p.a)), ElementsAre(CmEventType::kTimewaitExit));
  EXPECT_EQ(p.a.counters().retransmitted[5], 0u);
  ASSERT_TRUE(p.a.Destroy(p.now, c.a).ok());
  ExpectEmpty(p.a);
}

// ---- Destroy ----

// REP_SENT: REJ 28 (msg=other, both comm IDs) -> TIMEWAIT, no event; the
// record is freed at the end of TimeWait (the REQ's local ACK timeout, 15).
// The active side (REP received, RTU not yet sent) reports REJECTED 28.
TEST(StateFixturesTest, DestroyInRepSentSendsRej28MsgOther) {
  Pair p;
  Conn c = ToRepRcvd(p);
  const TimePoint t = At(40);
  ASSERT_TRUE(p.b.Destroy(t, c.b).ok());
  auto tx = DrainTx(p.b);
  ASSERT_EQ(tx.size(), 1u);
  ASSERT_EQ(AttrOf(tx[0]), CmAttr::kRej);
  auto rej = mad::wire::RejRepr::Parse(tx[0].mad);
  ASSERT_TRUE(rej.ok());
  EXPECT_EQ(rej->reason, RejReason::kConsumerReject);
  EXPECT_EQ(rej->message_rejected, mad::wire::RejMessage::kOther);
  EXPECT_EQ(rej->local_comm_id, c.b_comm);
  EXPECT_EQ(rej->remote_comm_id, c.a_comm);
  EXPECT_EQ(tx[0].to.lid, 1);
  EXPECT_TRUE(DrainEvents(p.b).empty());
  EXPECT_EQ(*p.b.State(c.b), CmState::kTimeWait);
  EXPECT_EQ(p.b.connection_count(), 1u) << "the record lives through TimeWait";
  RunTimers(p.b, t + Iba(15) - Duration::Nanos(1));
  EXPECT_EQ(p.b.connection_count(), 1u);
  RunTimers(p.b, t + Iba(15));
  EXPECT_TRUE(DrainTx(p.b).empty()) << "no REP retransmission, nothing else";
  EXPECT_TRUE(DrainEvents(p.b).empty()) << "no TIMEWAIT_EXIT for a destroyed id";
  ExpectEmpty(p.b);
  // The active side in REP_RCVD: REJECTED 28 -> TIMEWAIT, nothing sent.
  p.a.HandleMad(t, p.addr_b, tx[0].mad);
  auto ev = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(ev[0].status, 28);
  EXPECT_EQ(*p.a.State(c.a), CmState::kTimeWait);
  EXPECT_TRUE(DrainTx(p.a).empty());
  ASSERT_TRUE(p.a.Destroy(t, c.a).ok());
  EXPECT_TRUE(DrainTx(p.a).empty());
  RunTimers(p.a, t + Duration::Seconds(10));
  ExpectEmpty(p.a);
}

// The same REJ(msg=other) when the REP was lost: the active id is still in
// REQ_SENT and has not learned the passive comm ID the REJ names, so it is
// dropped (counted unknown), as Linux cm_acquire_rejected_id, which matches
// (remote comm ID, local comm ID); the REQ timer runs on and the retried REQ
// then meets the passive record in TimeWait (REJ 10).
TEST(StateFixturesTest, DestroyInRepSentWhenTheRepWasLostLeavesActiveInReqSent) {
  Pair p;
  Conn c = ToRepSent(p);  // REP never delivered
  ASSERT_TRUE(p.b.Destroy(At(40), c.b).ok());
  const OutgoingMad rej = DrainTx(p.b).at(0);
  const uint64_t unknown = p.a.counters().unknown_connection;
  p.a.HandleMad(At(40), p.addr_b, rej.mad);
  EXPECT_TRUE(DrainEvents(p.a).empty());
  EXPECT_TRUE(DrainTx(p.a).empty());
  EXPECT_EQ(p.a.counters().unknown_connection, unknown + 1);
  EXPECT_EQ(*p.a.State(c.a), CmState::kReqSent);
  // The REQ retransmission reaches B's TimeWait record: REJ 10 (stale).
  RunTimers(p.a, At(0) + Iba(14) * 2 + Iba(16));
  const OutgoingMad req2 = DrainTx(p.a).at(0);
  ASSERT_EQ(AttrOf(req2), CmAttr::kReq);
  p.b.HandleMad(p.now, p.addr_a, req2.mad);
  auto tx = DrainTx(p.b);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(mad::wire::RejRepr::Parse(tx[0].mad)->reason, RejReason::kStaleConnection);
  p.a.HandleMad(p.now, p.addr_b, tx[0].mad);
  auto ev = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(ev[0].status, 10);
}

// REP_RCVD: REJ 28 (msg=REP) -> TIMEWAIT; the passive side in REP_SENT
// reports REJECTED 28 and goes IDLE.
TEST(StateFixturesTest, DestroyInRepRcvdSendsRej28MsgRep) {
  Pair p;
  Conn c = ToRepRcvd(p);
  const TimePoint t = At(40);
  ASSERT_TRUE(p.a.Destroy(t, c.a).ok());
  auto tx = DrainTx(p.a);
  ASSERT_EQ(tx.size(), 1u);
  ASSERT_EQ(AttrOf(tx[0]), CmAttr::kRej);
  auto rej = mad::wire::RejRepr::Parse(tx[0].mad);
  ASSERT_TRUE(rej.ok());
  EXPECT_EQ(rej->reason, RejReason::kConsumerReject);
  EXPECT_EQ(rej->message_rejected, mad::wire::RejMessage::kRep);
  EXPECT_EQ(rej->local_comm_id, c.a_comm);
  EXPECT_EQ(rej->remote_comm_id, c.b_comm);
  EXPECT_TRUE(DrainEvents(p.a).empty());
  EXPECT_EQ(*p.a.State(c.a), CmState::kTimeWait);
  p.b.HandleMad(t, p.addr_a, tx[0].mad);
  auto ev = DrainEvents(p.b);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(ev[0].status, 28);
  EXPECT_EQ(*p.b.State(c.b), CmState::kIdle);
  EXPECT_TRUE(DrainTx(p.b).empty());
  ASSERT_TRUE(p.b.Destroy(t, c.b).ok());
  EXPECT_TRUE(DrainTx(p.b).empty());
  ExpectEmpty(p.b);
  const mad::IbaTimeCode ack =
      mad::CmAckTimeout(*mad::IbaTimeCode::Create(10, "d"), *mad::IbaTimeCode::Create(14, "p"));
  RunTimers(p.a, t + ack.Exact());
  EXPECT_TRUE(DrainTx(p.a).empty()) << "no auto-MRA, no RTU";
  EXPECT_TRUE(DrainEvents(p.a).empty());
  ExpectEmpty(p.a);
}

// DREQ_RCVD: Destroy sends the DREP (both comm IDs, the DREQ's TID) ->
// TIMEWAIT; the peer in DREQ_SENT reports DISCONNECTED.
TEST(StateFixturesTest, DestroyInDreqRcvdSendsDrep) {
  Pair p;
  Conn c = ToEstablished(p);
  ASSERT_TRUE(p.a.Disconnect(At(40), c.a).ok());
  const OutgoingMad dreq = DrainTx(p.a).at(0);
  p.b.HandleMad(At(40), p.addr_a, dreq.mad);
  EXPECT_THAT(testing::Types(DrainEvents(p.b)), ElementsAre(CmEventType::kDisconnected));
  ASSERT_EQ(*p.b.State(c.b), CmState::kDreqRcvd);
  EXPECT_TRUE(DrainTx(p.b).empty()) << "the DREP waits for the user";
  const TimePoint t = At(50);
  ASSERT_TRUE(p.b.Destroy(t, c.b).ok());
  auto tx = DrainTx(p.b);
  ASSERT_EQ(tx.size(), 1u);
  ASSERT_EQ(AttrOf(tx[0]), CmAttr::kDrep);
  auto drep = mad::wire::DrepRepr::Parse(tx[0].mad);
  ASSERT_TRUE(drep.ok());
  EXPECT_EQ(drep->local_comm_id, c.b_comm);
  EXPECT_EQ(drep->remote_comm_id, c.a_comm);
  EXPECT_EQ(drep->envelope.transaction_id,
            mad::wire::DreqRepr::Parse(dreq.mad)->envelope.transaction_id);
  EXPECT_EQ(*p.b.State(c.b), CmState::kTimeWait);
  EXPECT_TRUE(DrainEvents(p.b).empty());
  p.a.HandleMad(t, p.addr_b, tx[0].mad);
  EXPECT_THAT(testing::Types(DrainEvents(p.a)), ElementsAre(CmEventType::kDisconnected));
  EXPECT_EQ(*p.a.State(c.a), CmState::kTimeWait);
  // A DREQ retried into B's TimeWait still gets the same DREP.
  p.b.HandleMad(t, p.addr_a, dreq.mad);
  auto again = DrainTx(p.b);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].mad, tx[0].mad);
  RunTimers(p.b, t + Iba(15));
  EXPECT_TRUE(DrainEvents(p.b).empty());
  EXPECT_TRUE(DrainTx(p.b).empty());
  ExpectEmpty(p.b);
}

// SIDR_REQ_RCVD: Destroy answers SIDR_REP status 2 (rejected) with the
// request ID; no TimeWait: the record and the duplicate entry go at once.
TEST(StateFixturesTest, DestroyInSidrReqRcvdSendsSidrRepStatus2) {
  Pair p;
  auto l = p.b.Listen(testing::kService, ~uint64_t{0}, 8, false);
  ASSERT_TRUE(l.ok());
  SidrRequestParams sp;
  sp.service_id = testing::kService;
  sp.peer.lid = 2;
  sp.timeout = 16;
  sp.max_retries = 2;
  auto sid = p.a.SidrRequest(At(0), sp);
  ASSERT_TRUE(sid.ok());
  const OutgoingMad req = DrainTx(p.a).at(0);
  const uint32_t request_id = mad::wire::SidrReqRepr::Parse(req.mad)->request_id;
  p.b.HandleMad(At(10), p.addr_a, req.mad);
  auto ev = DrainEvents(p.b);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kSidrRequest));
  ASSERT_EQ(*p.b.State(ev[0].conn), CmState::kSidrReqRcvd);
  ASSERT_TRUE(p.b.Destroy(At(20), ev[0].conn).ok());
  auto tx = DrainTx(p.b);
  ASSERT_EQ(tx.size(), 1u);
  ASSERT_EQ(AttrOf(tx[0]), CmAttr::kSidrRep);
  auto rep = mad::wire::SidrRepRepr::Parse(tx[0].mad);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(static_cast<int>(rep->status), 2);
  EXPECT_EQ(rep->request_id, request_id);
  EXPECT_EQ(rep->qpn, 0u);
  EXPECT_EQ(tx[0].to, p.addr_a);
  EXPECT_TRUE(DrainEvents(p.b).empty());
  ASSERT_TRUE(p.b.StopListening(*l).ok());
  ExpectEmpty(p.b);
  p.a.HandleMad(At(20), p.addr_b, tx[0].mad);
  auto ea = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ea), ElementsAre(CmEventType::kUnreachable));
  EXPECT_EQ(ea[0].status, 2);
  ASSERT_TRUE(p.a.Destroy(At(20), *sid).ok());
  ExpectEmpty(p.a);
}

}  // namespace
}  // namespace uscm::cm
