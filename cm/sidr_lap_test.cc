// SIDR (success, no listener, timeout) and LAP/APR between two endpoints.
#include <vector>

#include "cm/cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

SidrRequestParams MakeSidr() {
  SidrRequestParams p;
  p.service_id = testing::kService;
  p.peer.lid = 2;
  p.timeout = 16;
  p.max_retries = 2;
  p.private_data = {1, 2, 3};
  return p;
}

TEST(SidrTest, SuccessCarriesQpnQkeyAndPrivateData) {
  Pair p;
  auto l = p.b.Listen(testing::kService, ~uint64_t{0}, 8, false);
  auto id = p.a.SidrRequest(p.now, MakeSidr());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*p.a.State(*id), CmState::kSidrReqSent);
  const OutgoingMad req = DrainTx(p.a).at(0);
  mad::MadAddress received_on = p.addr_a;
  received_on.sgid_index = 3;  // the local GID entry it came in on (RoCE: its netdev)
  p.b.HandleMad(p.now, received_on, req.mad);
  auto ev = DrainEvents(p.b);
  ASSERT_THAT(testing::Types(ev), ElementsAre(CmEventType::kSidrRequest));
  EXPECT_EQ(ev[0].listen, *l);
  EXPECT_EQ(ev[0].service_id, testing::kService);
  EXPECT_EQ(ev[0].req.sgid_index, 3);
  p.b.HandleMad(p.now, p.addr_a, req.mad);  // duplicate: dropped, counted
  EXPECT_TRUE(DrainEvents(p.b).empty());
  EXPECT_EQ(p.b.counters().duplicates[7], 1u);
  SidrReplyParams rp;
  rp.qpn = 0x4242;
  rp.qkey = 0x01234567;
  rp.private_data = {9, 9};
  ASSERT_TRUE(p.b.SidrReply(p.now, ev[0].conn, rp).ok());
  p.a.HandleMad(p.now, p.addr_b, DrainTx(p.b).at(0).mad);
  auto ea = DrainEvents(p.a);
  ASSERT_THAT(testing::Types(ea), ElementsAre(CmEventType::kSidrReply));
  EXPECT_EQ(ea[0].sidr_qpn, 0x4242u);
  EXPECT_EQ(ea[0].sidr_qkey, 0x01234567u);
  EXPECT_EQ(ea[0].private_data.bytes()[0], 9);
  EXPECT_EQ(*p.a.State(*id), CmState::kIdle);
  EXPECT_FALSE(p.a.NextDeadline().has_value());
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());
  ASSERT_TRUE(p.b.Destroy(p.now, ev[0].conn).ok());
  ASSERT_TRUE(p.b.StopListening(*l).ok());
  p.ExpectAllTablesEmpty();
}

// On RoCE the SIDR_REQ (and its retries) carries a GRH even when the path
// says subnet-local, as every MAD on an Ethernet port does.
TEST(SidrTest, EthernetPortSendsTheRequestWithAGrh) {
  mad::LocalPort ib = testing::MakePort(1, testing::kGuidA);
  mad::LocalPort roce = ib;
  roce.link_layer = mad::LinkLayer::kEthernet;
  for (const mad::LocalPort& port : {ib, roce}) {
    CmEndpoint e(port, testing::TestConfig(), 1);
    SidrRequestParams p = MakeSidr();
    p.peer.has_grh = false;
    p.peer.gid = mad::Gid::FromParts(0, 0x0000ffffc0a84e01ull);  // ::ffff:192.168.78.1
    auto id = e.SidrRequest(mad::TimePoint::Epoch(), p);
    ASSERT_TRUE(id.ok()) << id.status();
    const std::vector<OutgoingMad> tx = DrainTx(e);
    ASSERT_EQ(tx.size(), 1u);
    const bool ethernet = port.link_layer == mad::LinkLayer::kEthernet;
    EXPECT_EQ(tx[0].to.has_grh, ethernet);
    EXPECT_EQ(tx[0].to.gid, p.peer.gid);
    e.HandleTimeout(*e.NextDeadline());  // the retry goes the same way
    const std::vector<OutgoingMad> retry = DrainTx(e);
    ASSERT_EQ(retry.size(), 1u);
    EXPECT_EQ(retry[0].to.has_grh, ethernet);
    ASSERT_TRUE(e.Destroy(mad::TimePoint::Epoch(), *id).ok());
  }
}

TEST(SidrTest, NoListenerIsStatus1AndTimeoutIsUnreachable) {
  Pair p;
  auto id = p.a.SidrRequest(p.now, MakeSidr());
  p.Deliver();
  ASSERT_THAT(testing::Types(p.events_a), ElementsAre(CmEventType::kUnreachable));
  EXPECT_EQ(p.events_a[0].status, 1);
  EXPECT_EQ(p.b.connection_count(), 0u);
  ASSERT_TRUE(p.a.Destroy(p.now, *id).ok());

  p.drop = [](bool, const OutgoingMad&) { return true; };
  auto id2 = p.a.SidrRequest(p.now, MakeSidr());
  p.Drive();
  EXPECT_EQ(p.events_a.back().type, CmEventType::kUnreachable);
  EXPECT_EQ(p.events_a.back().status, -kEtimedout);
  EXPECT_EQ(p.sent_by_a.size(), 1u + 3u);  // first try of id 1, then 1 + 2 retries
  ASSERT_TRUE(p.a.Destroy(p.now, *id2).ok());
  p.ExpectAllTablesEmpty();
}

TEST(LapTest, LoadAlternatePathAndApr) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  p.react = [](Pair& p, bool side_a, const CmEvent& e) {
    CmEndpoint& ep = side_a ? p.a : p.b;
    if (e.type == CmEventType::kConnectRequest) {
      ASSERT_TRUE(ep.Accept(p.now, e.conn, MakeAccept()).ok());
    } else if (e.type == CmEventType::kConnectResponse) {
      ASSERT_TRUE(ep.Rtu(p.now, e.conn).ok());
    } else if (e.type == CmEventType::kLapReceived) {
      EXPECT_EQ(e.alternate_path.remote_lid, 12);
      ASSERT_TRUE(ep.AprReply(p.now, e.conn, 0).ok());
    }
  };
  auto id = p.a.Connect(p.now, MakeConnect());
  p.Deliver();
  const ConnId pb = p.events_b[0].conn;
  PathInfo alt = MakeConnect().primary;
  alt.local_lid = 11;
  alt.remote_lid = 12;
  ASSERT_TRUE(p.a.LoadAlternatePath(p.now, *id, alt).ok());
  EXPECT_EQ(*p.a.GetLapState(*id), LapState::kLapSent);
  EXPECT_EQ(p.a.LoadAlternatePath(p.now, *id, alt).code(),
            absl::StatusCode::kFailedPrecondition);
  p.Deliver();
  EXPECT_EQ(p.events_a.back().type, CmEventType::kAprReceived);
  EXPECT_EQ(p.events_a.back().status, 0);
  EXPECT_EQ(*p.a.GetLapState(*id), LapState::kIdle);
  EXPECT_EQ(*p.b.GetLapState(pb), LapState::kIdle);
  // After LAP, RTS loads only the alternate path (re-armed).
  auto rts = *p.a.GetQpAttributes(*id, QpState::kRts);
  EXPECT_EQ(rts.mask, kQpAltPath | kQpPathMigState);
  EXPECT_EQ(rts.alt_av.dlid, 12);
  auto brts = *p.b.GetQpAttributes(pb, QpState::kRts);
  EXPECT_EQ(brts.alt_av.dlid, 11);
  EXPECT_FALSE(p.a.NextDeadline().has_value());
}

}  // namespace
}  // namespace uscm::cm
