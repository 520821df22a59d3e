// Retransmission, MRA extension, auto-MRA and backoff at explicit times.
#include <vector>

#include "cm/cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_mra.h"

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

TEST(TimersTest, ReqRetriesExhaustedIsUnreachableAtExactTime) {
  Pair p;
  ConnectParams cp = MakeConnect();  // PLT 14, remote response 16, 3 retries
  auto id = p.a.Connect(TimePoint::Epoch(), cp);
  ASSERT_TRUE(id.ok());
  const Duration per = Iba(14) * 2 + Iba(16);
  ASSERT_EQ(DrainTx(p.a).size(), 1u);
  for (int i = 1; i <= 3; ++i) {
    const TimePoint t = TimePoint::Epoch() + per * i;
    p.a.HandleTimeout(t - Duration::Nanos(1));
    EXPECT_TRUE(DrainTx(p.a).empty()) << "early retransmission " << i;
    p.a.HandleTimeout(t);
    auto tx = DrainTx(p.a);
    ASSERT_EQ(tx.size(), 1u) << "retransmission " << i;
    EXPECT_EQ(AttrOf(tx[0]), CmAttr::kReq);
    EXPECT_TRUE(DrainEvents(p.a).empty());
  }
  p.a.HandleTimeout(TimePoint::Epoch() + per * 4);
  EXPECT_TRUE(DrainTx(p.a).empty()) << "no REJ when REQ retries run out";
  auto ev = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kUnreachable));
  EXPECT_EQ(ev[0].status, -kEtimedout);
  EXPECT_EQ(*p.a.State(*id), CmState::kIdle);
  EXPECT_EQ(p.a.counters().retransmitted[0], 3u);
  EXPECT_EQ(p.a.counters().timeouts, 1u);
  EXPECT_FALSE(p.a.NextDeadline().has_value());
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  EXPECT_EQ(p.a.connection_count(), 0u);
  EXPECT_EQ(p.a.table_entries(), 0u);
}

TEST(TimersTest, ExponentialBackoffIsCapped) {
  Pair p;
  ConnectParams cp = MakeConnect();
  cp.retry.response_timeout = Duration::Millis(100);
  cp.retry.backoff_factor = 2;
  cp.retry.backoff_cap = Duration::Millis(300);
  auto id = p.a.Connect(TimePoint::Epoch(), cp);
  ASSERT_TRUE(id.ok());
  DrainTx(p.a);
  std::vector<int64_t> at;
  while (p.a.NextDeadline().has_value()) {
    const TimePoint t = *p.a.NextDeadline();
    p.a.HandleTimeout(t);
    if (!DrainTx(p.a).empty()) at.push_back((t - TimePoint::Epoch()).nanos() / 1000000);
  }
  // 100, then 200, 300 (capped), 300: resends at 100, 300, 600; UNREACHABLE at 900.
  EXPECT_THAT(at, ElementsAre(100, 300, 600));
  EXPECT_EQ(DrainEvents(p.a).back().type, CmEventType::kUnreachable);
}

TEST(TimersTest, RepRetriesExhaustedIsUnreachableOnPassiveSide) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  auto id = p.a.Connect(p.now, MakeConnect());
  ASSERT_TRUE(id.ok());
  p.b.HandleMad(p.now, p.addr_a, DrainTx(p.a)[0].mad);
  const ConnId pb = DrainEvents(p.b)[0].conn;
  ASSERT_TRUE(p.b.Accept(p.now, pb, MakeAccept()).ok());
  ASSERT_EQ(DrainTx(p.b).size(), 1u);
  // REP timer = the REQ's local CM response timeout (17), 3 retries.
  for (int i = 1; i <= 3; ++i) {
    p.b.HandleTimeout(p.now + Iba(17) * i);
    auto tx = DrainTx(p.b);
    ASSERT_EQ(tx.size(), 1u);
    EXPECT_EQ(AttrOf(tx[0]), CmAttr::kRep);
  }
  p.b.HandleTimeout(p.now + Iba(17) * 4);
  EXPECT_TRUE(DrainTx(p.b).empty());
  auto ev = DrainEvents(p.b);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kUnreachable));
  EXPECT_EQ(*p.b.State(pb), CmState::kIdle);
}

TEST(TimersTest, MraExtendsTheReqTimer) {
  CmConfig cb = testing::TestConfig();
  cb.auto_mra = false;
  Pair q(testing::TestConfig(), cb);
  ASSERT_TRUE(q.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  auto id = q.a.Connect(TimePoint::Epoch(), MakeConnect());
  ASSERT_TRUE(id.ok());
  q.b.HandleMad(q.now, q.addr_a, DrainTx(q.a)[0].mad);
  const ConnId pb = DrainEvents(q.b)[0].conn;
  const TimePoint t1 = TimePoint::Epoch() + Duration::Millis(1);
  ASSERT_TRUE(q.b.SendMra(t1, pb, 20).ok());
  EXPECT_EQ(*q.b.State(pb), CmState::kMraReqSent);
  auto mra = DrainTx(q.b);
  ASSERT_EQ(mra.size(), 1u);
  EXPECT_EQ(AttrOf(mra[0]), CmAttr::kMra);
  q.a.HandleMad(t1, q.addr_b, mra[0].mad);
  EXPECT_EQ(*q.a.State(*id), CmState::kMraReqRcvd);
  EXPECT_THAT(testing::Types(DrainEvents(q.a)), ElementsAre(CmEventType::kMraReceived));
  // New wait: service timeout 20 + our ACK timeout 15.
  const TimePoint resend = t1 + Iba(20) + Iba(15);
  // The wheel may report an earlier wake-up (a cascade), never a later one.
  EXPECT_LE(*q.a.NextDeadline(), resend);
  q.a.HandleTimeout(resend - Duration::Nanos(1));
  EXPECT_TRUE(DrainTx(q.a).empty());
  q.a.HandleTimeout(resend);
  EXPECT_EQ(DrainTx(q.a).size(), 1u);
}

TEST(TimersTest, AutoMraBeforeThePeerGivesUpAndOnDuplicateReq) {
  Pair p;  // auto-MRA on, 50 % of the REQ's remote response timeout (16)
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  auto id = p.a.Connect(p.now, MakeConnect());
  ASSERT_TRUE(id.ok());
  const OutgoingMad req = DrainTx(p.a)[0];
  p.b.HandleMad(p.now, p.addr_a, req.mad);
  const ConnId pb = DrainEvents(p.b)[0].conn;
  const TimePoint due = p.now + Iba(16) / 2;
  EXPECT_LE(*p.b.NextDeadline(), due);
  p.b.HandleTimeout(due - Duration::Nanos(1));
  EXPECT_TRUE(DrainTx(p.b).empty());
  p.b.HandleTimeout(due);
  auto tx = DrainTx(p.b);
  ASSERT_EQ(tx.size(), 1u);
  auto mra = mad::wire::MraRepr::Parse(tx[0].mad);
  ASSERT_TRUE(mra.ok());
  EXPECT_EQ(mra->service_timeout, 24);
  EXPECT_EQ(mra->message_mraed, mad::wire::MraMessage::kReq);
  EXPECT_EQ(*p.b.State(pb), CmState::kMraReqSent);
  EXPECT_EQ(p.b.counters().auto_mra, 1u);
  // A duplicate REQ now re-sends the same MRA, and is counted.
  p.b.HandleMad(due, p.addr_a, req.mad);
  auto again = DrainTx(p.b);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].mad, tx[0].mad);
  EXPECT_EQ(p.b.counters().duplicates[0], 1u);
  EXPECT_TRUE(DrainEvents(p.b).empty());
}

TEST(TimersTest, DuplicateReqInReqRcvdIsDroppedSilently) {
  CmConfig cb = testing::TestConfig();
  cb.auto_mra = false;
  Pair p(testing::TestConfig(), cb);
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  ASSERT_TRUE(p.a.Connect(p.now, MakeConnect()).ok());
  const OutgoingMad req = DrainTx(p.a)[0];
  p.b.HandleMad(p.now, p.addr_a, req.mad);
  EXPECT_EQ(DrainEvents(p.b).size(), 1u);
  p.b.HandleMad(p.now, p.addr_a, req.mad);
  EXPECT_TRUE(DrainTx(p.b).empty());
  EXPECT_TRUE(DrainEvents(p.b).empty());
  EXPECT_EQ(p.b.counters().duplicates[0], 1u);
  EXPECT_EQ(p.b.connection_count(), 1u);
}

}  // namespace
}  // namespace uscm::cm
