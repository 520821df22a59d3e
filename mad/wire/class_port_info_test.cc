#include "mad/wire/class_port_info.h"

#include <algorithm>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/sa_header.h"
#include "mad/wire/sa_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;
using testing::DiffBytes;
using testing::Hex;

// Golden SA ClassPortInfo GetResp, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenMad = Hex(R"(
  01 03 02 81   | BaseVersion 1, class SA, version 2, GetResp
  00 00 00 00   | Status, ClassSpecific
  00 00 00 00 00 00 00 07 | TransactionID
  00 01 00 00   | AttributeID ClassPortInfo, reserved
  00 00 00 00   | AttributeModifier
  00 00 00 00 00 00 00 00 00 00 00 00 | +24 RMPP header: not in use
  00 00 00 00 00 00 00 00 | +36 SM_Key
  00 09 00 00   | +44 AttributeOffset 9 words, reserved
  00 00 00 00 00 00 00 00 | +48 ComponentMask 0
  01 02         | +56 BaseVersion 1, ClassVersion 2
  26 02         | +58 CapabilityMask 0x2602
  00 02 00 12   | +60 CapabilityMask2 0x1000 (bit 12: send-only full member) << 5 | RespTimeValue 18
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 00 00 01 | +64 RedirectGID
  a0 51 23 45   | +80 RedirectTC 0xa0, RedirectSL 5, RedirectFL 0x12345
  00 07 ff ff   | +84 RedirectLID 7, RedirectP_Key 0xffff
  00 00 00 01   | +88 reserved, RedirectQP 1
  80 01 00 00   | +92 RedirectQ_Key 0x80010000
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 00 00 02 | +96 TrapGID
  00 f0 00 01   | +112 TrapTC 0, TrapSL 15, TrapFL 1
  00 08 7f ff   | +116 TrapLID 8, TrapP_Key 0x7fff
  40 ab cd ef   | +120 TrapHL 0x40, TrapQP 0xabcdef
  00 00 00 2a   | +124 TrapQ_Key 42
)");

ClassPortInfo GoldenRecord() {
  ClassPortInfo c;
  c.base_version = 1;
  c.class_version = 2;
  c.capability_mask = 0x2602;
  c.capability_mask2 = kSaCap2SendOnlyFullMemberSupported;
  c.resp_time_value = 18;
  c.redirect_gid = Gid::FromParts(0xfe80000000000000, 0x0002c90300000001);
  c.redirect_tc = 0xa0;
  c.redirect_sl = 5;
  c.redirect_fl = 0x12345;
  c.redirect_lid = 7;
  c.redirect_pkey = 0xffff;
  c.redirect_qp = 1;
  c.redirect_qkey = 0x80010000;
  c.trap_gid = Gid::FromParts(0xfe80000000000000, 0x0002c90300000002);
  c.trap_sl = 15;
  c.trap_fl = 1;
  c.trap_lid = 8;
  c.trap_pkey = 0x7fff;
  c.trap_hl = 0x40;
  c.trap_qp = 0xabcdef;
  c.trap_qkey = 42;
  return c;
}

ClassPortInfoMad GoldenMad() {
  ClassPortInfoMad m;
  m.envelope.method = static_cast<uint8_t>(Method::kGetResp);
  m.envelope.transaction_id = 7;
  m.envelope.attribute_offset = 9;
  m.record = GoldenRecord();
  return m;
}

const std::vector<testing::Cut> kCuts = {
    {1, "BaseVersion", 0},     {2, "ClassVersion", 1},   {4, "CapabilityMask", 2},
    {8, "CapabilityMask2", 4}, {24, "RedirectGID", 8},   {25, "RedirectTC", 24},
    {26, "RedirectSL", 25},    {28, "RedirectFL", 25},    {30, "RedirectLID", 28},  {32, "RedirectP_Key", 30},
    {33, "reserved", 32},      {36, "RedirectQP", 33},   {40, "RedirectQ_Key", 36},
    {56, "TrapGID", 40},       {57, "TrapTC", 56},       {58, "TrapSL", 57},       {60, "TrapFL", 57},
    {62, "TrapLID", 60},       {64, "TrapP_Key", 62},    {65, "TrapHL", 64},
    {68, "TrapQP", 65},        {72, "TrapQ_Key", 68},
};

TEST(ClassPortInfoTest, ParseAndEmitGolden) {
  auto m = ClassPortInfoMad::Parse(kGoldenMad);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->record, GoldenRecord());
  EXPECT_TRUE(m->record.capability_mask2 & kSaCap2SendOnlyFullMemberSupported);
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenMad().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenMad.begin()))
      << DiffBytes(buf, kGoldenMad);
}

TEST(ClassPortInfoTest, SameLayoutInsideACmMad) {
  // CM answers Get(ClassPortInfo) with the attribute at MAD byte 24.
  std::array<uint8_t, 256> cm{};
  ASSERT_TRUE(GoldenRecord().Emit(std::span(cm).subspan(24)).ok());
  EXPECT_TRUE(std::equal(cm.begin() + 24, cm.begin() + 96, kGoldenMad.begin() + 56));
  auto c = ClassPortInfo::Parse(std::span(cm).subspan(24));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, GoldenRecord());
}

TEST(ClassPortInfoTest, TruncationErrorAtEveryPrefix) {
  for (size_t n = 0; n < 72; ++n) {
    auto r = ClassPortInfo::Parse(std::span(kGoldenMad).subspan(56, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(testing::ExpectedCut(kCuts, n, 0, "record")))
        << n;
  }
  for (size_t n = 0; n < kGoldenMad.size(); ++n) {
    auto r = ClassPortInfoMad::Parse(std::span(kGoldenMad).first(n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(testing::ExpectedMadCut(kCuts, 72, n))) << n;
  }
}

TEST(ClassPortInfoTest, RangeErrorsNameTheField) {
  std::array<uint8_t, 72> out;
  ClassPortInfo c = GoldenRecord();
  c.capability_mask2 = 1u << 27;
  EXPECT_THAT(c.Emit(out).message(),
              HasSubstr("ClassPortInfo.CapabilityMask2 = 134217728 does not fit in 27 bits"));
  c = GoldenRecord();
  c.resp_time_value = 32;
  EXPECT_THAT(c.Emit(out).message(), HasSubstr("ClassPortInfo.RespTimeValue = 32"));
  c = GoldenRecord();
  c.redirect_qp = 1u << 24;
  EXPECT_THAT(c.Emit(out).message(), HasSubstr("ClassPortInfo.RedirectQP = 16777216"));
}

TEST(ClassPortInfoTest, RandomRoundTrip) {
  std::mt19937_64 rng(1);
  std::array<uint8_t, 256> buf;
  using testing::RandomFor;
  namespace t = class_port_info;
  for (int i = 0; i < 10000; ++i) {
    ClassPortInfoMad m;
    m.envelope = testing::RandomEnvelope(rng, 9);
    m.component_mask = ClassPortInfoMask(rng());
    ClassPortInfo& c = m.record;
    c.base_version = RandomFor(rng, t::kBaseVersion);
    c.class_version = RandomFor(rng, t::kClassVersion);
    c.capability_mask = RandomFor(rng, t::kCapabilityMask);
    c.capability_mask2 = RandomFor(rng, t::kCapabilityMask2);
    c.resp_time_value = RandomFor(rng, t::kRespTimeValue);
    c.redirect_gid = testing::RandomGid(rng);
    c.redirect_tc = RandomFor(rng, t::kRedirectTc);
    c.redirect_sl = RandomFor(rng, t::kRedirectSl);
    c.redirect_fl = RandomFor(rng, t::kRedirectFl);
    c.redirect_lid = RandomFor(rng, t::kRedirectLid);
    c.redirect_pkey = RandomFor(rng, t::kRedirectPKey);
    c.redirect_qp = RandomFor(rng, t::kRedirectQp);
    c.redirect_qkey = RandomFor(rng, t::kRedirectQKey);
    c.trap_gid = testing::RandomGid(rng);
    c.trap_tc = RandomFor(rng, t::kTrapTc);
    c.trap_sl = RandomFor(rng, t::kTrapSl);
    c.trap_fl = RandomFor(rng, t::kTrapFl);
    c.trap_lid = RandomFor(rng, t::kTrapLid);
    c.trap_pkey = RandomFor(rng, t::kTrapPKey);
    c.trap_hl = RandomFor(rng, t::kTrapHl);
    c.trap_qp = RandomFor(rng, t::kTrapQp);
    c.trap_qkey = RandomFor(rng, t::kTrapQKey);
    ASSERT_TRUE(m.Emit(buf).ok());
    auto back = ClassPortInfoMad::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, m);
  }
}

}  // namespace
}  // namespace uscm::mad::wire
