#include "mad/wire/mcmember_record.h"

#include <algorithm>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/sa_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::DiffBytes;
using testing::Hex;

// Golden MCMemberRecord join (SubnAdmSet), as Linux rdma_cm sends it for a
// PS_UDP group, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenMad = Hex(R"(
  01 03 02 02   | BaseVersion 1, class SA, version 2, Set
  00 00 00 00   | Status, ClassSpecific
  00 00 00 00 00 00 20 02 | TransactionID
  00 38 00 00   | AttributeID MCMemberRecord, reserved
  00 00 00 00   | AttributeModifier
  00 00 00 00 00 00 00 00 00 00 00 00 | +24 RMPP header: not in use
  00 00 00 00 00 00 00 00 | +36 SM_Key
  00 00 00 00   | +44 AttributeOffset 0 (request), reserved
  00 00 00 00 00 01 30 c7 | +48 ComponentMask: MGID PortGID Q_Key TClass P_Key SL FlowLabel JoinState
  ff 12 40 01 ff ff 00 00 00 00 00 00 e0 00 00 fb | +56 MGID ff12:4001:ffff::e000:fb
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c3 | +72 PortGID
  01 23 45 67   | +88 Q_Key 0x01234567 (RDMA_UDP_QKEY)
  c0 01         | +92 MLID 0xc001
  84            | +94 MTUSelector = (2), MTU 2048 (4)
  00            | +95 TClass 0
  ff ff         | +96 P_Key 0xffff
  83            | +98 RateSelector = (2), Rate 3
  d2            | +99 PacketLifeTimeSelector best (3), PacketLifeTime 18
  30 0a bc 40   | +100 SL 3, FlowLabel 0x0abc, HopLimit 0x40
  21            | +104 Scope 2 (link-local), JoinState FullMember
  80 00 00      | +105 ProxyJoin 1, reserved
)");

McMemberRecord GoldenRecord() {
  McMemberRecord r;
  r.mgid = Gid::FromParts(0xff124001ffff0000, 0x00000000e00000fb);
  r.port_gid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c3);
  r.qkey = 0x01234567;
  r.mlid = 0xc001;
  r.mtu_selector = Selector::kExactly;
  r.mtu = Mtu::k2048;
  r.pkey = 0xffff;
  r.rate_selector = Selector::kExactly;
  r.rate = 3;
  r.packet_life_time_selector = Selector::kBest;
  r.packet_life_time = 18;
  r.sl = 3;
  r.flow_label = 0x0abc;
  r.hop_limit = 0x40;
  r.scope = McScope::kLinkLocal;
  r.join_state = JoinState(JoinState::kFullMember);
  r.proxy_join = true;
  return r;
}

McMemberRecordMad GoldenMad() {
  McMemberRecordMad m;
  m.envelope.method = static_cast<uint8_t>(Method::kSet);
  m.envelope.transaction_id = 0x2002;
  using M = McMemberRecordMask;
  m.component_mask = M::kMgid | M::kPortGid | M::kQKey | M::kTClass | M::kPKey | M::kSl |
                     M::kFlowLabel | M::kJoinState;
  m.record = GoldenRecord();
  return m;
}

const std::vector<testing::Cut> kCuts = {
    {16, "MGID", 0},          {32, "PortGID", 16},      {36, "Q_Key", 32},
    {38, "MLID", 36},         {39, "MTUSelector", 38},  {40, "TClass", 39},
    {42, "P_Key", 40},        {43, "RateSelector", 42}, {44, "PacketLifeTimeSelector", 43},
    {45, "SL", 44},           {47, "FlowLabel", 44},    {48, "HopLimit", 47},
    {49, "Scope", 48},        {50, "ProxyJoin", 49},    {52, "reserved", 49},
};

TEST(McMemberRecordTest, ParseGolden) {
  auto m = McMemberRecordMad::Parse(kGoldenMad);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->record, GoldenRecord());
  EXPECT_EQ(m->component_mask, GoldenMad().component_mask);
  EXPECT_EQ(m->record.mgid.ToString(), "ff12:4001:ffff::e000:fb");
  EXPECT_EQ(m->record.join_state.ToString(), "FullMember");
}

TEST(McMemberRecordTest, EmitMatchesGoldenIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenMad().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenMad.begin()))
      << DiffBytes(buf, kGoldenMad);
  buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRecord().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + 52, kGoldenMad.begin() + 56));
  EXPECT_EQ(buf[52], testing::kPoison);  // 52 bytes, not the 56-byte stride
}

TEST(McMemberRecordTest, TruncationErrorAtEveryPrefix) {
  const auto record = std::span(kGoldenMad).subspan(56, 52);
  for (size_t n = 0; n < 52; ++n) {
    auto r = McMemberRecord::Parse(record.first(n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_THAT(r.status().message(),
                HasSubstr(absl::StrCat("MCMemberRecord truncated: ", n, " of 52 bytes")));
    EXPECT_THAT(r.status().message(), HasSubstr(testing::ExpectedCut(kCuts, n, 0, "record")))
        << n;
  }
  for (size_t n = 0; n < kGoldenMad.size(); ++n) {
    auto r = McMemberRecordMad::Parse(std::span(kGoldenMad).first(n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(testing::ExpectedMadCut(kCuts, 52, n))) << n;
  }
}

TEST(McMemberRecordTest, RecordsAtTheAttributeOffsetStride) {
  // A GetTableResp payload: AttributeOffset 7 -> records every 56 bytes.
  EXPECT_EQ(AttributeOffsetFor(McMemberRecord::kBytes), 7);
  std::vector<uint8_t> data(3 * 56, 0xee);  // padding bytes are junk on purpose
  for (int i = 0; i < 3; ++i) {
    McMemberRecord r = GoldenRecord();
    r.mlid = static_cast<uint16_t>(0xc000 + i);
    ASSERT_TRUE(r.Emit(std::span(data).subspan(i * 56)).ok());
  }
  for (int i = 0; i < 3; ++i) {
    auto r = McMemberRecord::Parse(std::span(data).subspan(i * 56, 52));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->mlid, 0xc000 + i);
    EXPECT_EQ(r->qkey, 0x01234567u);
  }
}

TEST(McMemberRecordTest, JoinStateAndMaskNames) {
  JoinState j(JoinState::kFullMember | JoinState::kSendOnlyFullMember);
  EXPECT_TRUE(j.full_member());
  EXPECT_TRUE(j.send_only_full_member());
  EXPECT_FALSE(j.non_member());
  EXPECT_EQ(j.ToString(), "FullMember|SendOnlyFullMember");
  EXPECT_EQ(JoinState().ToString(), "none");
  EXPECT_THAT(GoldenMad().component_mask.Names(),
              ElementsAre("MGID", "PortGID", "Q_Key", "TClass", "P_Key", "SL", "FlowLabel",
                          "JoinState"));
  EXPECT_EQ(McMemberRecordMask::kProxyJoin.bits(), uint64_t{1} << 17);
  EXPECT_EQ(McMemberRecordMask::kScope.bits(), uint64_t{1} << 15);
}

TEST(McMemberRecordTest, UnknownScopeSurvivesAndRangeErrorsNameTheField) {
  auto mad = kGoldenMad;
  mad[104] = 0x7f;  // Scope 7 (unassigned), all four JoinState bits
  auto m = McMemberRecordMad::Parse(mad);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(static_cast<uint8_t>(m->record.scope), 7);
  EXPECT_EQ(m->record.join_state.bits(), 0xf);
  std::array<uint8_t, 256> out;
  ASSERT_TRUE(m->Emit(out).ok());
  EXPECT_EQ(out[104], 0x7f);

  McMemberRecord r = GoldenRecord();
  r.scope = static_cast<McScope>(16);
  EXPECT_THAT(r.Emit(out).message(),
              HasSubstr("MCMemberRecord.Scope = 16 does not fit in 4 bits (max 15)"));
  r = GoldenRecord();
  r.join_state = JoinState(0x10);
  EXPECT_THAT(r.Emit(out).message(), HasSubstr("MCMemberRecord.JoinState = 16"));
  r = GoldenRecord();
  r.flow_label = 0x100000;
  EXPECT_THAT(r.Emit(out).message(), HasSubstr("MCMemberRecord.FlowLabel"));
  McMemberRecordMad bad = GoldenMad();
  bad.envelope.attribute_offset = 6;  // 52 / 8 rounded down: the classic mistake
  EXPECT_THAT(bad.Emit(out).message(),
              HasSubstr("SA.AttributeOffset = 6 words; a 52-byte MCMemberRecord takes 7"));
}

McMemberRecord RandomRecord(std::mt19937_64& rng) {
  using testing::RandomFor;
  namespace t = mcmember_record;
  McMemberRecord r;
  r.mgid = testing::RandomGid(rng);
  r.port_gid = testing::RandomGid(rng);
  r.qkey = RandomFor(rng, t::kQKey);
  r.mlid = RandomFor(rng, t::kMlid);
  r.mtu_selector = static_cast<Selector>(RandomFor(rng, t::kMtuSelector));
  r.mtu = static_cast<Mtu>(RandomFor(rng, t::kMtu));
  r.tclass = RandomFor(rng, t::kTClass);
  r.pkey = RandomFor(rng, t::kPKey);
  r.rate_selector = static_cast<Selector>(RandomFor(rng, t::kRateSelector));
  r.rate = RandomFor(rng, t::kRate);
  r.packet_life_time_selector = static_cast<Selector>(RandomFor(rng, t::kPacketLifeTimeSelector));
  r.packet_life_time = RandomFor(rng, t::kPacketLifeTime);
  r.sl = RandomFor(rng, t::kSl);
  r.flow_label = RandomFor(rng, t::kFlowLabel);
  r.hop_limit = RandomFor(rng, t::kHopLimit);
  r.scope = static_cast<McScope>(RandomFor(rng, t::kScope));
  r.join_state = JoinState(static_cast<uint8_t>(RandomFor(rng, t::kJoinState)));
  r.proxy_join = RandomFor(rng, t::kProxyJoin);
  return r;
}

TEST(McMemberRecordTest, RandomRoundTrip) {
  std::mt19937_64 rng(38);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    McMemberRecordMad m;
    m.envelope = testing::RandomEnvelope(rng, 7);
    m.component_mask = McMemberRecordMask(rng());
    m.record = RandomRecord(rng);
    ASSERT_TRUE(m.Emit(buf).ok());
    auto back = McMemberRecordMad::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, m);
  }
}

}  // namespace
}  // namespace uscm::mad::wire
