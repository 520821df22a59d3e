#include "mad/wire/path_record.h"

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

// Golden PathRecord GetResp, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenMad = Hex(R"(
  01 03 02 81   | BaseVersion 1, class SA, version 2, GetResp
  00 00 00 00   | Status, ClassSpecific
  00 00 00 2a 00 00 10 01 | TransactionID
  00 35 00 00   | AttributeID PathRecord, reserved
  00 00 00 00   | AttributeModifier
  00 00 00 00   | +24 RMPP: version 0, type 0, RRespTime 0 + flags 0, status 0
  00 00 00 00   | +28 SegmentNumber
  00 00 00 00   | +32 PayloadLength
  00 00 00 00 00 00 00 00 | +36 SM_Key
  00 08 00 00   | +44 AttributeOffset 8 words, reserved
  00 00 00 00 00 00 38 0f | +48 ComponentMask: ServiceID(0,1) DGID SGID Reversible NumbPath P_Key
  00 00 00 00 01 06 12 34 | +56 ServiceID 0x0000000001061234 (rdma_cm TCP port 0x1234)
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c3 | +64 DGID fe80::2:c903:a1:b2c3
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c4 | +80 SGID fe80::2:c903:a1:b2c4
  00 11 00 22   | +96 DLID 0x11, SLID 0x22
  80 0a bc de   | +100 RawTraffic 1, reserved 000, FlowLabel 0x00abc, HopLimit 0xde
  03 81         | +104 TClass 3, Reversible 1 + NumbPath 1
  ff ff         | +106 P_Key 0xffff
  12 35         | +108 QoSClass 0x123, SL 5
  84 83         | +110 MTUSelector = (2) + MTU 2048 (4); RateSelector = (2) + Rate 3
  d2 07         | +112 PacketLifeTimeSelector best (3) + PacketLifeTime 18; Preference 7
  00 00 00 00 00 00 | +114 reserved
)");
// Bytes 100..103 = 1 000 0000 0000 1010 1011 1100 | 1101 1110: RawTraffic 1,
// reserved 000, FlowLabel 0x00abc, HopLimit 0xde. Byte 110 = 10 000100,
// byte 111 = 10 000011 (Rate 3 = 10 Gb/s).

PathRecord GoldenRecord() {
  PathRecord r;
  r.service_id = 0x0000000001061234;
  r.dgid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c3);
  r.sgid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c4);
  r.dlid = 0x11;
  r.slid = 0x22;
  r.raw_traffic = true;
  r.flow_label = 0x00abc;
  r.hop_limit = 0xde;
  r.tclass = 3;
  r.reversible = true;
  r.numb_path = 1;
  r.pkey = 0xffff;
  r.qos_class = 0x123;
  r.sl = 5;
  r.mtu_selector = Selector::kExactly;
  r.mtu = Mtu::k2048;
  r.rate_selector = Selector::kExactly;
  r.rate = 3;
  r.packet_life_time_selector = Selector::kBest;
  r.packet_life_time = 18;
  r.preference = 7;
  return r;
}

PathRecordMad GoldenMad() {
  PathRecordMad m;
  m.envelope.method = static_cast<uint8_t>(Method::kGetResp);
  m.envelope.transaction_id = 0x0000002a00001001;
  m.envelope.attribute_offset = 8;
  m.component_mask = PathRecordMask::kServiceId | PathRecordMask::kDgid | PathRecordMask::kSgid |
                     PathRecordMask::kReversible | PathRecordMask::kNumbPath |
                     PathRecordMask::kPKey;
  m.record = GoldenRecord();
  return m;
}

const std::vector<testing::Cut> kCuts = {
    {8, "ServiceID", 0},         {24, "DGID", 8},       {40, "SGID", 24},
    {42, "DLID", 40},            {44, "SLID", 42},      {45, "RawTraffic", 44},
    {47, "FlowLabel", 44},       {48, "HopLimit", 47},  {49, "TClass", 48},
    {50, "Reversible", 49},      {52, "P_Key", 50},     {54, "QoSClass", 52},
    {55, "MTUSelector", 54},     {56, "RateSelector", 55},
    {57, "PacketLifeTimeSelector", 56}, {58, "Preference", 57}, {64, "reserved", 58},
};

TEST(PathRecordTest, GoldenBytesDecodeAsCommented) {
  // The hand-written fixture matches the field comments, independently of Emit.
  EXPECT_EQ(kGoldenMad[100], 0x80);
  EXPECT_EQ(kGoldenMad[110], 0x84);
  EXPECT_EQ(kGoldenMad[111], 0x83);
  auto m = PathRecordMad::Parse(kGoldenMad);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->record, GoldenRecord());
  EXPECT_EQ(m->record.dgid.ToString(), "fe80::2:c903:a1:b2c3");
  EXPECT_EQ(m->component_mask, GoldenMad().component_mask);
  EXPECT_EQ(m->envelope, GoldenMad().envelope);
}

TEST(PathRecordTest, EmitMadMatchesGoldenIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenMad().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenMad.begin()))
      << DiffBytes(buf, kGoldenMad);
}

TEST(PathRecordTest, EmitRecordTouchesExactly64Bytes) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRecord().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + 64, kGoldenMad.begin() + 56))
      << DiffBytes(std::span(buf).first(64), std::span(kGoldenMad).subspan(56, 64));
  EXPECT_TRUE(std::all_of(buf.begin() + 64, buf.end(),
                          [](uint8_t b) { return b == testing::kPoison; }));
}

TEST(PathRecordTest, RecordTruncationErrorAtEveryPrefix) {
  const auto record = std::span(kGoldenMad).subspan(56, 64);
  for (size_t n = 0; n < 64; ++n) {
    auto r = PathRecord::Parse(record.first(n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("PathRecord truncated: ", n,
                                                             " of 64 bytes")));
    EXPECT_THAT(r.status().message(), HasSubstr(testing::ExpectedCut(kCuts, n, 0, "record")))
        << n;
  }
  EXPECT_TRUE(PathRecord::Parse(record).ok());
}

TEST(PathRecordTest, MadTruncationErrorAtEveryPrefix) {
  for (size_t n = 0; n < kGoldenMad.size(); ++n) {
    auto r = PathRecordMad::Parse(std::span(kGoldenMad).first(n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat(n, " of 256 bytes"))) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(testing::ExpectedMadCut(kCuts, 64, n))) << n;
    EXPECT_THAT(r.status().message(), HasSubstr("PathRecord")) << n;
  }
}

TEST(PathRecordTest, ServiceIdMaskSetsBothBits) {
  EXPECT_EQ(PathRecordMask::kServiceId.bits(), 0x3u);
  EXPECT_EQ(PathRecordMask::kPreference.bits(), uint64_t{1} << 22);
  EXPECT_TRUE(PathRecordMask(0x3).Has(PathRecordMask::kServiceId));
  EXPECT_FALSE(PathRecordMask(0x1).Has(PathRecordMask::kServiceId));
  EXPECT_THAT(GoldenMad().component_mask.Names(),
              ElementsAre("ServiceID", "DGID", "SGID", "Reversible", "NumbPath", "P_Key"));
  EXPECT_THAT(PathRecordMask(0x1 | 0x80 | (uint64_t{1} << 40)).Names(),
              ElementsAre("ServiceID(MSB)", "bit7", "bit40"));
}

TEST(PathRecordTest, OutOfRangeValuesAreErrorsNamingTheField) {
  std::array<uint8_t, 256> buf;
  auto expect_error = [&](PathRecord r, const char* want) {
    auto s = r.Emit(buf);
    EXPECT_THAT(s.message(), HasSubstr(want));
    PathRecordMad m = GoldenMad();
    m.record = r;
    EXPECT_THAT(m.Emit(buf).message(), HasSubstr(want));
  };
  PathRecord r = GoldenRecord();
  r.flow_label = 1 << 20;
  expect_error(r, "PathRecord.FlowLabel = 1048576 does not fit in 20 bits (max 1048575)");
  r = GoldenRecord();
  r.mtu = static_cast<Mtu>(64);
  expect_error(r, "PathRecord.MTU = 64 does not fit in 6 bits");
  r = GoldenRecord();
  r.sl = 16;
  expect_error(r, "PathRecord.SL = 16");
  r = GoldenRecord();
  r.numb_path = 128;
  expect_error(r, "PathRecord.NumbPath = 128");
  r = GoldenRecord();
  r.qos_class = 4096;
  expect_error(r, "PathRecord.QoSClass = 4096 does not fit in 12 bits");
  r = GoldenRecord();
  r.packet_life_time = 64;
  expect_error(r, "PathRecord.PacketLifeTime = 64");
  std::array<uint8_t, 63> small;
  EXPECT_THAT(GoldenRecord().Emit(small).message(),
              HasSubstr("PathRecord output buffer is 63 bytes; the record needs 64"));
}

TEST(PathRecordTest, UnknownEnumValuesSurvive) {
  auto mad = kGoldenMad;
  mad[110] = 0x80 | 0x3f;  // MTUSelector = (2), MTU code 63 (undefined)
  auto m = PathRecordMad::Parse(mad);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(static_cast<uint8_t>(m->record.mtu), 63);
  EXPECT_EQ(MtuBytes(m->record.mtu), 0u);
  EXPECT_EQ(MtuBytes(Mtu::k4096), 4096u);
  std::array<uint8_t, 256> out;
  ASSERT_TRUE(m->Emit(out).ok());
  EXPECT_EQ(out[110], 0xbf);
}

TEST(PathRecordTest, ReservedBitsAreIgnoredOnParseAndZeroedOnEmit) {
  auto mad = kGoldenMad;
  mad[100] |= 0x70;  // the three reserved bits after RawTraffic
  mad[115] = 0xee;   // trailing reserved bytes
  mad[200] = 0xee;   // SA data beyond the record
  auto m = PathRecordMad::Parse(mad);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->record, GoldenRecord());
  auto out = testing::Poisoned();
  ASSERT_TRUE(m->Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), kGoldenMad.begin())) << DiffBytes(out, kGoldenMad);
}

TEST(PathRecordTest, RejectsWrongAttributeClassAndOffset) {
  auto bad = kGoldenMad;
  bad[17] = 0x38;
  EXPECT_THAT(PathRecordMad::Parse(bad).status().message(),
              HasSubstr("PathRecord: MAD.AttributeID = 0x0038, expected 0x0035"));
  bad = kGoldenMad;
  bad[1] = 0x07;
  EXPECT_THAT(PathRecordMad::Parse(bad).status().message(), HasSubstr("is not SA"));
  bad = kGoldenMad;
  bad[2] = 1;
  EXPECT_THAT(PathRecordMad::Parse(bad).status().message(),
              HasSubstr("MAD class 0x03 version 1 is not SA"));
  bad = kGoldenMad;
  bad[45] = 7;
  EXPECT_THAT(PathRecordMad::Parse(bad).status().message(),
              HasSubstr("SA.AttributeOffset = 7 words; a 64-byte PathRecord takes 8"));
  PathRecordMad m = GoldenMad();
  m.envelope.attribute_offset = 9;
  std::array<uint8_t, 256> buf;
  EXPECT_THAT(m.Emit(buf).message(), HasSubstr("SA.AttributeOffset = 9 words"));
}

PathRecord RandomRecord(std::mt19937_64& rng) {
  using testing::RandomFor;
  namespace t = path_record;
  PathRecord r;
  r.service_id = rng();
  r.dgid = testing::RandomGid(rng);
  r.sgid = testing::RandomGid(rng);
  r.dlid = RandomFor(rng, t::kDlid);
  r.slid = RandomFor(rng, t::kSlid);
  r.raw_traffic = RandomFor(rng, t::kRawTraffic);
  r.flow_label = RandomFor(rng, t::kFlowLabel);
  r.hop_limit = RandomFor(rng, t::kHopLimit);
  r.tclass = RandomFor(rng, t::kTClass);
  r.reversible = RandomFor(rng, t::kReversible);
  r.numb_path = RandomFor(rng, t::kNumbPath);
  r.pkey = RandomFor(rng, t::kPKey);
  r.qos_class = RandomFor(rng, t::kQosClass);
  r.sl = RandomFor(rng, t::kSl);
  r.mtu_selector = static_cast<Selector>(RandomFor(rng, t::kMtuSelector));
  r.mtu = static_cast<Mtu>(RandomFor(rng, t::kMtu));
  r.rate_selector = static_cast<Selector>(RandomFor(rng, t::kRateSelector));
  r.rate = RandomFor(rng, t::kRate);
  r.packet_life_time_selector = static_cast<Selector>(RandomFor(rng, t::kPacketLifeTimeSelector));
  r.packet_life_time = RandomFor(rng, t::kPacketLifeTime);
  r.preference = RandomFor(rng, t::kPreference);
  return r;
}

TEST(PathRecordTest, RandomRoundTrip) {
  std::mt19937_64 rng(35);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    PathRecordMad m;
    m.envelope = testing::RandomEnvelope(rng, 8);
    m.component_mask = PathRecordMask(rng());
    m.record = RandomRecord(rng);
    ASSERT_TRUE(m.Emit(buf).ok());
    auto back = PathRecordMad::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, m);
    auto rec = PathRecord::Parse(std::span(buf).subspan(56, 64));
    ASSERT_TRUE(rec.ok());
    ASSERT_EQ(*rec, m.record);
  }
}

}  // namespace
}  // namespace uscm::mad::wire
