// User calls: misuse errors, listen table and backlog, ECE, Destroy side
// effects, QP attributes.
#include <vector>

#include "cm/cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/cm_rep.h"

namespace uscm::cm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using mad::wire::CmAttr;
using testing::AttrOf;
using testing::DrainEvents;
using testing::DrainTx;
using testing::MakeAccept;
using testing::MakeConnect;
using testing::Pair;

TEST(UserCallsTest, PrivateDataLimitsNameTheMessage) {
  Pair p;
  ConnectParams cp = MakeConnect();
  cp.private_data.assign(200, 0);
  auto r = p.a.Connect(p.now, cp);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "private data is 200 bytes; REQ carries at most 92");
  EXPECT_TRUE(DrainTx(p.a).empty());
  EXPECT_EQ(p.a.connection_count(), 0u);

  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  auto id = p.a.Connect(p.now, MakeConnect());
  p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a).at(0).mad);
  const ConnId pb = DrainEvents(p.b).at(0).conn;
  std::vector<uint8_t> big(149, 1);
  EXPECT_EQ(p.b.Reject(p.now, pb, RejReason::kConsumerReject, big).message(),
            "private data is 149 bytes; REJ carries at most 148");
  AcceptParams ap = MakeAccept();
  ap.private_data.assign(197, 0);
  EXPECT_EQ(p.b.Accept(p.now, pb, ap).message(),
            "private data is 197 bytes; REP carries at most 196");
  EXPECT_TRUE(DrainTx(p.b).empty());
  EXPECT_EQ(*p.b.State(pb), CmState::kReqRcvd);
}

TEST(UserCallsTest, RangeErrorsAndWrongStateAndUnknownId) {
  Pair p;
  ConnectParams cp = MakeConnect();
  cp.retry_count = 9;
  EXPECT_THAT(std::string(p.a.Connect(p.now, cp).status().message()),
              HasSubstr("retry_count = 9 does not fit in 3 bits (max 7)"));
  auto id = p.a.Connect(p.now, MakeConnect());
  ASSERT_TRUE(id.ok());
  const absl::Status s = p.a.Accept(p.now, *id, MakeAccept());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "Accept is not allowed in state REQ_SENT");
  EXPECT_EQ(p.a.Rtu(p.now, *id).message(), "Rtu is not allowed in state REQ_SENT");
  ConnId bogus{id->index, id->generation + 1};
  EXPECT_EQ(p.a.Disconnect(p.now, bogus).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  EXPECT_EQ(p.a.Destroy(p.now, *id).code(), absl::StatusCode::kNotFound);
}

TEST(UserCallsTest, DestroyInReqSentSendsRejTimeoutWithGuid) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  auto id = p.a.Connect(p.now, MakeConnect());
  p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a).at(0).mad);
  const ConnId pb = DrainEvents(p.b).at(0).conn;
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  auto tx = DrainTx(p.a);
  ASSERT_EQ(tx.size(), 1u);
  auto rej = mad::wire::RejRepr::Parse(tx[0].mad);
  ASSERT_TRUE(rej.ok());
  EXPECT_EQ(rej->reason, RejReason::kTimeout);
  EXPECT_EQ(rej->AriValue(), testing::kGuidA);
  EXPECT_EQ(p.a.connection_count(), 0u);
  EXPECT_FALSE(p.a.NextDeadline().has_value());
  // The passive side finds its connection by (GUID, comm ID).
  p.b.HandleMad(p.now, p.addr_a, tx[0].mad);
  auto ev = DrainEvents(p.b);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(ev[0].status, 4);
  EXPECT_EQ(*p.b.State(pb), CmState::kIdle);
}

// RoCE over a VLAN: the active side's MADs leave from the GID entry the
// caller names (the id's own, on its netdev), not index 0; the passive side
// learns the entry the REQ came in on and answers from it.
TEST(UserCallsTest, TheSourceGidIndexGoesWithTheConnectionsMads) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  ConnectParams cp = MakeConnect();
  cp.sgid_index = 2;
  auto id = p.a.Connect(p.now, cp);
  ASSERT_TRUE(id.ok());
  auto tx = DrainTx(p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].to.sgid_index, 2) << "the REQ";
  mad::MadAddress received_on = p.addr_a;
  received_on.sgid_index = 3;
  p.b.HandleMad(p.now, received_on, tx[0].mad);
  auto ev = DrainEvents(p.b);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].req.sgid_index, 3) << "the entry the REQ came in on";
  ASSERT_TRUE(p.b.Accept(p.now, ev[0].conn, MakeAccept()).ok());
  EXPECT_EQ(DrainTx(p.b).at(0).to.sgid_index, 3) << "the REP";
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  EXPECT_EQ(DrainTx(p.a).at(0).to.sgid_index, 2) << "the REJ of a destroyed id";
}

TEST(UserCallsTest, BacklogOverflowRejectsWithNoResourcesOrDrops) {
  for (BacklogPolicy policy : {BacklogPolicy::kReject, BacklogPolicy::kDrop}) {
    CmConfig cb = testing::TestConfig();
    cb.backlog_overflow = policy;
    Pair p(testing::TestConfig(), cb);
    ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 2, false).ok());
    for (uint32_t q = 1; q <= 3; ++q) {
      ASSERT_TRUE(p.a.Connect(p.now, MakeConnect(q)).ok());
      p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a).at(0).mad);
    }
    EXPECT_EQ(DrainEvents(p.b).size(), 2u);
    auto tx = DrainTx(p.b);
    if (policy == BacklogPolicy::kReject) {
      ASSERT_EQ(tx.size(), 1u);
      EXPECT_EQ(mad::wire::RejRepr::Parse(tx[0].mad)->reason, RejReason::kNoResources);
      EXPECT_EQ(p.b.counters().backlog_rejected, 1u);
    } else {
      EXPECT_TRUE(tx.empty());
      EXPECT_EQ(p.b.counters().backlog_dropped, 1u);
    }
  }
}

TEST(UserCallsTest, ListenConflictsUnlessBothReuse) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(0x1000, ~uint64_t{0xFF}, 4, false).ok());
  EXPECT_EQ(p.b.Listen(0x1010, ~uint64_t{0}, 4, false).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(p.b.Listen(0x1001, ~uint64_t{0xFF}, 4, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(p.b.Listen(0x2000, ~uint64_t{0}, 4, true).ok());
  EXPECT_TRUE(p.b.Listen(0x2000, ~uint64_t{0}, 4, true).ok());
}

TEST(UserCallsTest, EceEchoedAndRejectEce) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  ConnectParams cp = MakeConnect();
  cp.ece = Ece{0x15b3, 0x3};
  auto id = p.a.Connect(p.now, cp);
  p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a).at(0).mad);
  auto ev = DrainEvents(p.b);
  EXPECT_EQ(ev.at(0).remote_ece, (Ece{0x15b3, 0x3}));
  AcceptParams ap = MakeAccept();
  ap.ece_options = 0x1;
  ASSERT_TRUE(p.b.Accept(p.now, ev[0].conn, ap).ok());
  auto rep = DrainTx(p.b).at(0);
  EXPECT_EQ(mad::wire::RepRepr::Parse(rep.mad)->ece, (Ece{0x15b3, 0x1}));
  p.a.HandleMad(p.now, p.addr_b, rep.mad);
  auto ea = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ea), ElementsAre(CmEventType::kConnectResponse));
  EXPECT_EQ(ea[0].remote_ece, (Ece{0x15b3, 0x1}));

  // Second connection: the passive user refuses the options (REJ 35).
  auto id2 = p.a.Connect(p.now, [&] { auto c = cp; c.qpn = 0x333; return c; }());
  p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a).at(0).mad);
  const ConnId pb2 = DrainEvents(p.b).at(0).conn;
  ASSERT_TRUE(p.b.RejectEce(p.now, pb2, {}).ok());
  p.a.HandleMad(p.now, p.addr_b, DrainTx(p.b).at(0).mad);
  auto e2 = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(e2), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(e2[0].status, 35);
  EXPECT_EQ(*p.a.State(*id2), CmState::kIdle);
  (void)id;
}

TEST(UserCallsTest, EceVendorMismatchOnRepIsConnectError) {
  Pair p;
  ConnectParams cp = MakeConnect();
  cp.ece = Ece{0x15b3, 0x3};
  auto id = p.a.Connect(p.now, cp);
  const uint32_t local = *p.a.LocalCommId(*id);
  DrainTx(p.a);
  mad::wire::RepRepr rep;
  rep.local_comm_id = 77;
  rep.remote_comm_id = local;
  rep.local_qpn = 0x222;
  rep.ece = Ece{0x1234, 0x1};
  rep.local_ca_guid = testing::kGuidB;
  OutgoingMad m;
  ASSERT_TRUE(rep.Emit(m.mad).ok());
  p.a.HandleMad(p.now, p.addr_b, m.mad);
  auto ev = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kConnectError));
  EXPECT_EQ(*p.a.State(*id), CmState::kRepRcvd);
  ASSERT_TRUE(p.a.RejectEce(p.now, *id, {}).ok());
  auto tx = DrainTx(p.a);
  ASSERT_EQ(tx.size(), 1u);
  auto rej = mad::wire::RejRepr::Parse(tx[0].mad);
  EXPECT_EQ(rej->reason, RejReason::kVendorOptionNotSupported);
  EXPECT_EQ(rej->message_rejected, mad::wire::RejMessage::kRep);
  EXPECT_EQ(*p.a.State(*id), CmState::kTimeWait);
}

TEST(UserCallsTest, QpAttributesArePureFunctionsOfState) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  ConnectParams cp = MakeConnect(0x111, 0x1234);  // resp 4, init 2, retry 6, rnr 5
  auto id = p.a.Connect(p.now, cp);
  EXPECT_EQ(p.a.GetQpAttributes(*id, QpState::kRtr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a).at(0).mad);
  const ConnId pb = DrainEvents(p.b).at(0).conn;
  ASSERT_TRUE(p.b.Accept(p.now, pb, MakeAccept(0x222, 0x5678)).ok());  // resp 1, init 3, rnr 4, ack delay 10
  p.a.HandleMad(p.now, p.addr_b, DrainTx(p.b).at(0).mad);

  auto ai = *p.a.GetQpAttributes(*id, QpState::kInit);
  EXPECT_EQ(ai.mask, kQpState | kQpAccessFlags | kQpPkeyIndex | kQpPort);
  // Active responder resources after the swap = REP initiator depth (3) > 0.
  EXPECT_EQ(ai.access_flags, kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);

  auto ar = *p.a.GetQpAttributes(*id, QpState::kRtr);
  EXPECT_EQ(ar.dest_qpn, 0x222u);
  EXPECT_EQ(ar.rq_psn, 0x1234u);  // own PSN
  EXPECT_EQ(ar.max_dest_rd_atomic, 3);
  EXPECT_EQ(ar.min_rnr_timer, 0);
  EXPECT_EQ(ar.path_mtu, 4);
  EXPECT_EQ(ar.av.dlid, 2);
  EXPECT_EQ(ar.av.sl, 3);
  EXPECT_EQ(ar.mask & kQpAltPath, 0u);
  auto as = *p.a.GetQpAttributes(*id, QpState::kRts);
  EXPECT_EQ(as.sq_psn, 0x5678u);  // peer PSN
  EXPECT_EQ(as.retry_cnt, 6);
  EXPECT_EQ(as.rnr_retry, 4);     // what the REP said
  EXPECT_EQ(as.max_rd_atomic, 1); // REP responder resources
  EXPECT_EQ(as.timeout, 15);      // CmAckTimeout(10, PLT 14)

  auto br = *p.b.GetQpAttributes(pb, QpState::kRtr);
  EXPECT_EQ(br.dest_qpn, 0x111u);
  EXPECT_EQ(br.rq_psn, 0x5678u);
  EXPECT_EQ(br.max_dest_rd_atomic, 1);
  EXPECT_EQ(br.av.dlid, 1);
  auto bs = *p.b.GetQpAttributes(pb, QpState::kRts);
  EXPECT_EQ(bs.sq_psn, 0x1234u);
  EXPECT_EQ(bs.rnr_retry, 5);     // what the REQ said
  EXPECT_EQ(bs.retry_cnt, 6);
  EXPECT_EQ(bs.max_rd_atomic, 3);
  EXPECT_EQ(bs.timeout, 15);      // the REQ's primary local ACK timeout
  // Pure: asking twice changes nothing and sends nothing.
  EXPECT_EQ(p.b.GetQpAttributes(pb, QpState::kRts)->sq_psn, bs.sq_psn);
  EXPECT_TRUE(DrainTx(p.b).empty());
}

}  // namespace
}  // namespace uscm::cm
