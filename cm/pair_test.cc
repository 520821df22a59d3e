// End-to-end scenarios between two endpoints (Pair::Drive). Every scenario
// ends with all tables empty after TimeWait.
#include <vector>

#include "cm/cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::cm {
namespace {

using ::testing::ElementsAre;
using mad::wire::CmAttr;
using testing::AttrOf;
using testing::MakeAccept;
using testing::MakeConnect;
using testing::Pair;

std::vector<CmAttr> Attrs(const std::vector<OutgoingMad>& v) {
  std::vector<CmAttr> out;
  for (const auto& m : v) out.push_back(AttrOf(m));
  return out;
}

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i);
  return v;
}

// Accepts every CONNECT_REQUEST and answers every CONNECT_RESPONSE with RTU.
void AutoAccept(Pair& p, bool side_a, const CmEvent& e) {
  CmEndpoint& ep = side_a ? p.a : p.b;
  if (e.type == CmEventType::kConnectRequest) {
    AcceptParams ap = MakeAccept();
    ap.private_data = Bytes(196, 0x40);
    ASSERT_TRUE(ep.Accept(p.now, e.conn, ap).ok());
  } else if (e.type == CmEventType::kConnectResponse) {
    ASSERT_TRUE(ep.Rtu(p.now, e.conn, Bytes(224, 0x80)).ok());
  }
}

TEST(PairTest, HappyPathWithPrivateDataBothWaysThenDisconnect) {
  Pair p;
  auto l = p.b.Listen(testing::kService, ~uint64_t{0}, 8, false);
  ASSERT_TRUE(l.ok());
  p.react = AutoAccept;
  ConnectParams cp = MakeConnect();
  cp.private_data = Bytes(92, 1);
  auto id = p.a.Connect(p.now, cp);
  ASSERT_TRUE(id.ok()) << id.status();
  p.Deliver();

  EXPECT_THAT(Attrs(p.sent_by_a), ElementsAre(CmAttr::kReq, CmAttr::kRtu));
  EXPECT_THAT(Attrs(p.sent_by_b), ElementsAre(CmAttr::kRep));
  EXPECT_THAT(testing::Types(p.events_a),
              ElementsAre(CmEventType::kConnectResponse, CmEventType::kEstablished));
  EXPECT_THAT(testing::Types(p.events_b),
              ElementsAre(CmEventType::kConnectRequest, CmEventType::kEstablished));
  const CmEvent& req = p.events_b[0];
  EXPECT_EQ(req.listen, *l);
  EXPECT_EQ(req.private_data, mad::wire::PrivateData(Bytes(92, 1)));
  EXPECT_EQ(req.req.remote_qpn, 0x111u);
  EXPECT_EQ(req.req.service_id, testing::kService);
  EXPECT_EQ(p.events_a[0].private_data, mad::wire::PrivateData(Bytes(196, 0x40)));
  EXPECT_EQ(p.events_b[1].private_data, mad::wire::PrivateData(Bytes(224, 0x80)));
  const ConnId pb = req.conn;
  EXPECT_EQ(*p.a.State(*id), CmState::kEstablished);
  EXPECT_EQ(*p.b.State(pb), CmState::kEstablished);

  // Disconnect with private data; the passive user answers with DREP.
  p.react = [](Pair& p, bool side_a, const CmEvent& e) {
    if (!side_a && e.type == CmEventType::kDisconnected) {
      ASSERT_TRUE(p.b.Disconnect(p.now, e.conn, Bytes(224, 9)).ok());
    }
  };
  ASSERT_TRUE(p.a.Disconnect(p.now, *id, Bytes(220, 7)).ok());
  p.Deliver();
  EXPECT_EQ(p.events_b.back().type, CmEventType::kDisconnected);
  EXPECT_EQ(p.events_b.back().private_data, mad::wire::PrivateData(Bytes(220, 7)));
  EXPECT_EQ(p.events_a.back().type, CmEventType::kDisconnected);
  EXPECT_EQ(p.events_a.back().private_data, mad::wire::PrivateData(Bytes(224, 9)));
  EXPECT_EQ(*p.a.State(*id), CmState::kTimeWait);
  EXPECT_EQ(*p.b.State(pb), CmState::kTimeWait);

  p.Drive();
  EXPECT_EQ(p.events_a.back().type, CmEventType::kTimewaitExit);
  EXPECT_EQ(p.events_b.back().type, CmEventType::kTimewaitExit);
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  ASSERT_TRUE(p.b.Destroy(p.now, pb).ok());
  EXPECT_TRUE(testing::DrainTx(p.a).empty());
  EXPECT_TRUE(testing::DrainTx(p.b).empty());
  ASSERT_TRUE(p.b.StopListening(*l).ok());
  p.ExpectAllTablesEmpty();
  // TimeWait = the QP local ACK timeout: active from the REP's target ACK
  // delay (10) and PLT 14 -> 15; passive from the REQ's ack timeout (15).
  EXPECT_EQ(p.now - mad::TimePoint::Epoch(), mad::Duration::Nanos(4096ll << 15));
}

TEST(PairTest, ConsumerRejectCarries148Bytes) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  p.react = [](Pair& p, bool side_a, const CmEvent& e) {
    if (!side_a && e.type == CmEventType::kConnectRequest) {
      ASSERT_TRUE(p.b.Reject(p.now, e.conn, RejReason::kConsumerReject, Bytes(148, 3)).ok());
      ASSERT_TRUE(p.b.Destroy(p.now, e.conn).ok());
    }
  };
  auto id = p.a.Connect(p.now, MakeConnect());
  ASSERT_TRUE(id.ok());
  p.Deliver();
  ASSERT_THAT(testing::Types(p.events_a), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(p.events_a[0].status, 28);
  EXPECT_EQ(p.events_a[0].private_data, mad::wire::PrivateData(Bytes(148, 3)));
  EXPECT_EQ(*p.a.State(*id), CmState::kIdle);
  EXPECT_THAT(Attrs(p.sent_by_b), ElementsAre(CmAttr::kRej));
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  EXPECT_TRUE(testing::DrainTx(p.a).empty());  // IDLE: nothing to send
  p.Drive();
  EXPECT_EQ(p.a.connection_count(), 0u);
  EXPECT_EQ(p.b.connection_count(), 0u);
  EXPECT_EQ(p.a.table_entries() + p.b.table_entries(), 0u);
}

TEST(PairTest, NoListenerGetsRej8) {
  Pair p;
  auto id = p.a.Connect(p.now, MakeConnect());
  ASSERT_TRUE(id.ok());
  p.Deliver();
  ASSERT_THAT(testing::Types(p.events_a), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(p.events_a[0].status, 8);
  EXPECT_EQ(p.b.counters().no_listener, 1u);
  EXPECT_EQ(p.b.connection_count(), 0u);
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  p.Drive();
  p.ExpectAllTablesEmpty();
}

TEST(PairTest, CrossingDreqs) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  p.react = AutoAccept;
  auto id = p.a.Connect(p.now, MakeConnect());
  ASSERT_TRUE(id.ok());
  p.Deliver();
  const ConnId pb = p.events_b[0].conn;
  p.react = nullptr;
  // Both send DREQ before either arrives.
  ASSERT_TRUE(p.a.Disconnect(p.now, *id).ok());
  ASSERT_TRUE(p.b.Disconnect(p.now, pb).ok());
  auto from_a = testing::DrainTx(p.a);
  auto from_b = testing::DrainTx(p.b);
  ASSERT_THAT(Attrs(from_a), ElementsAre(CmAttr::kDreq));
  ASSERT_THAT(Attrs(from_b), ElementsAre(CmAttr::kDreq));
  p.b.HandleMad(p.now, p.addr_a, from_a[0].mad);
  p.a.HandleMad(p.now, p.addr_b, from_b[0].mad);
  EXPECT_EQ(*p.a.State(*id), CmState::kDreqRcvd);
  EXPECT_EQ(*p.b.State(pb), CmState::kDreqRcvd);
  EXPECT_TRUE(testing::DrainTx(p.a).empty());
  // Each user answers its DISCONNECTED with DREP.
  ASSERT_TRUE(p.a.Disconnect(p.now, *id).ok());
  ASSERT_TRUE(p.b.Disconnect(p.now, pb).ok());
  p.Deliver();
  EXPECT_EQ(*p.a.State(*id), CmState::kTimeWait);
  EXPECT_EQ(*p.b.State(pb), CmState::kTimeWait);
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  ASSERT_TRUE(p.b.Destroy(p.now, pb).ok());
  p.Drive();
  EXPECT_EQ(p.a.connection_count() + p.b.connection_count(), 0u);
  EXPECT_EQ(p.a.table_entries() + p.b.table_entries(), 0u);
}

TEST(PairTest, DreqTimeoutReportsEtimedout) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  p.react = AutoAccept;
  ConnectParams cp = MakeConnect();
  cp.max_cm_retries = 2;
  auto id = p.a.Connect(p.now, cp);
  ASSERT_TRUE(id.ok());
  p.Deliver();
  const ConnId pb = p.events_b[0].conn;
  p.drop = [](bool from_a, const OutgoingMad& m) { return from_a; };
  const mad::TimePoint t0 = p.now;
  ASSERT_TRUE(p.a.Disconnect(p.now, *id).ok());
  while (*p.a.State(*id) == CmState::kDreqSent) ASSERT_TRUE(p.Step());
  EXPECT_EQ(p.events_a.back().type, CmEventType::kDisconnected);
  EXPECT_EQ(p.events_a.back().status, -kEtimedout);
  // 1 + 2 retries, each waiting the REQ timer 2*PLT(14) + 16.
  const mad::Duration per = mad::Duration::Nanos((4096ll << 14) * 2 + (4096ll << 16));
  EXPECT_EQ(p.now - t0, per * 3);
  EXPECT_EQ(p.a.counters().retransmitted[0x15 - 0x10], 2u);
  p.drop = nullptr;
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  // B never heard: it is still ESTABLISHED; its own disconnect gets a DREP
  // from A's TimeWait record.
  ASSERT_TRUE(p.b.Disconnect(p.now, pb).ok());
  p.Deliver();
  EXPECT_EQ(*p.b.State(pb), CmState::kTimeWait);
  ASSERT_TRUE(p.b.Destroy(p.now, pb).ok());
  p.Drive();
  p.ExpectAllTablesEmpty();
}

TEST(PairTest, TimeWaitThenPeerCommIdReuse) {
  // During TimeWait a REQ reusing the old remote comm ID gets REJ 10; after
  // TimeWait the same comm ID starts a new connection.
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  p.react = AutoAccept;
  auto id = p.a.Connect(p.now, MakeConnect());
  ASSERT_TRUE(id.ok());
  p.Deliver();
  const OutgoingMad req = p.sent_by_a[0];
  ASSERT_EQ(AttrOf(req), CmAttr::kReq);
  const ConnId pb = p.events_b[0].conn;
  ASSERT_TRUE(p.b.Destroy(p.now, pb).ok());  // DREQ, then TimeWait at once
  p.Deliver();
  EXPECT_EQ(*p.b.State(pb), CmState::kTimeWait);

  p.b.HandleMad(p.now, p.addr_a, req.mad);
  auto tx = testing::DrainTx(p.b);
  ASSERT_THAT(Attrs(tx), ElementsAre(CmAttr::kRej));
  auto rej = mad::wire::RejRepr::Parse(tx[0].mad);
  ASSERT_TRUE(rej.ok());
  EXPECT_EQ(rej->reason, RejReason::kStaleConnection);
  EXPECT_EQ(p.b.counters().stale_connections, 1u);

  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  p.react = nullptr;
  p.Drive();
  EXPECT_EQ(p.b.connection_count(), 0u);
  const size_t before = p.events_b.size();
  p.b.HandleMad(p.now, p.addr_a, req.mad);  // same comm ID, after TimeWait
  ASSERT_EQ(p.events_b.size(), before);
  auto ev = testing::DrainEvents(p.b);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kConnectRequest));
  ASSERT_TRUE(p.b.Destroy(p.now, ev[0].conn).ok());  // REJ 28
  EXPECT_THAT(Attrs(testing::DrainTx(p.b)), ElementsAre(CmAttr::kRej));
  p.Drive();
  EXPECT_EQ(p.b.connection_count(), 0u);
  EXPECT_EQ(p.b.table_entries(), 0u);
}

// Every MAD an endpoint sends, retransmittable (REQ, REP, DREQ: Queue) or
// not (RTU, REJ, DREP, MRA: Send), is written into a buffer lent by the
// thread's QueueStorage and given back when drained, so one warm buffer
// serves all of a thread's endpoints (a buffer of an endpoint's own is cold
// at its next use when a simulator drives thousands: docs/SIMULATOR.md).
// Here each drained buffer is the next message's: REQ, then REP, then RTU.
TEST(PairTest, EachMessageIsWrittenIntoTheBufferThePreviousOneWasDrainedFrom) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  // DrainTransmit hands each MAD over in place: where it sits is the buffer.
  auto hand_over = [&p](CmEndpoint& from, CmEndpoint& to, const mad::MadAddress& addr) {
    const OutgoingMad* at = nullptr;
    EXPECT_EQ(from.DrainTransmit([&](const OutgoingMad& m) {
      at = &m;
      to.HandleMad(p.now, addr, m.mad);
    }), 1u);
    return at;
  };
  CmEvent e;
  ASSERT_TRUE(p.a.Connect(p.now, MakeConnect()).ok());
  const OutgoingMad* req = hand_over(p.a, p.b, p.addr_a);
  ASSERT_TRUE(p.b.PollEvent(&e));
  ASSERT_EQ(e.type, CmEventType::kConnectRequest);
  ASSERT_TRUE(p.b.Accept(p.now, e.conn, MakeAccept()).ok());
  const OutgoingMad* rep = hand_over(p.b, p.a, p.addr_b);
  ASSERT_TRUE(p.a.PollEvent(&e));
  ASSERT_EQ(e.type, CmEventType::kConnectResponse);
  ASSERT_TRUE(p.a.Rtu(p.now, e.conn).ok());
  const OutgoingMad* rtu = hand_over(p.a, p.b, p.addr_a);
  EXPECT_EQ(rep, req);
  EXPECT_EQ(rtu, rep);
  EXPECT_EQ(*p.a.State(e.conn), CmState::kEstablished);
}

}  // namespace
// DrainEvents hands out what a PollEvent loop would, in the same order,
// while the handler calls into the endpoint: each CONNECT_RESPONSE answered
// with Rtu raises an ESTABLISHED, which comes after the queued responses.
TEST(PairTest, DrainEventsInOrderWithEventsRaisedByTheHandler) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  auto c1 = p.a.Connect(p.now, MakeConnect(0x111));
  auto c2 = p.a.Connect(p.now, MakeConnect(0x112));
  ASSERT_TRUE(c1.ok() && c2.ok());
  for (const OutgoingMad& m : testing::DrainTx(p.a)) p.b.HandleMad(p.now, p.addr_a, m.mad);
  for (const CmEvent& e : testing::DrainEvents(p.b)) {
    AcceptParams ap = MakeAccept(0x200 + e.conn.index);
    ap.private_data = Bytes(196, static_cast<uint8_t>(e.conn.index));
    ASSERT_TRUE(p.b.Accept(p.now, e.conn, ap).ok());
  }
  for (const OutgoingMad& m : testing::DrainTx(p.b)) p.a.HandleMad(p.now, p.addr_b, m.mad);

  std::vector<std::pair<CmEventType, ConnId>> seen;
  std::vector<std::vector<uint8_t>> data;
  const size_t n = p.a.DrainEvents([&](CmEvent& e) {
    seen.emplace_back(e.type, e.conn);
    data.emplace_back(e.private_data.bytes().begin(), e.private_data.bytes().end());
    if (e.type == CmEventType::kConnectResponse) {
      ASSERT_TRUE(p.a.Rtu(p.now, e.conn, {}).ok());
    }
  });
  EXPECT_EQ(n, 4u);
  EXPECT_FALSE(p.a.has_events());
  using T = CmEventType;
  EXPECT_THAT(seen, ElementsAre(std::pair(T::kConnectResponse, *c1),
                                std::pair(T::kConnectResponse, *c2),
                                std::pair(T::kEstablished, *c1),
                                std::pair(T::kEstablished, *c2)));
  ASSERT_EQ(data.size(), 4u);
  // Each REP's data, read in place while the handler's Rtu grew the queue.
  for (int i : {0, 1}) {
    ASSERT_GE(data[i].size(), 196u);
    EXPECT_EQ(std::vector<uint8_t>(data[i].begin(), data[i].begin() + 196),
              Bytes(196, data[i][0]));
  }
  EXPECT_NE(data[0][0], data[1][0]);
}

}  // namespace uscm::cm
