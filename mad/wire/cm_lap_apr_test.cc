#include "mad/wire/cm_lap_apr.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using testing::DiffBytes;
using testing::Hex;

// Golden LAP, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenLap = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 05 00 00 00 01 | TransactionID
  00 19 00 00             | AttributeID LAP, reserved
  00 00 00 00             | AttributeModifier
  11 22 33 44             | +24 LocalCommID
  55 66 77 88             | +28 RemoteCommID
  00 00 00 00             | +32 reserved
  00 01 23                | +36 RemoteQPN/EECN 0x123
  b0                      | +39 RemoteCMResponseTimeout 22, reserved
  00 00 00 00             | +40 reserved
  00 0c 00 0d             | +44 AlternateLocalPortLID 12, AlternateRemotePortLID 13
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c4 | +48 AlternateLocalPortGID
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 d4 e5 f7 | +64 AlternateRemotePortGID
  ab cd e0                | +80 AlternateFlowLabel 0xabcde, reserved nibble
  04                      | +83 AlternateTrafficClass 4
  02                      | +84 AlternateHopLimit 2
  03                      | +85 reserved 2 bits, AlternatePacketRate 3
  28                      | +86 AlternateSL 2, AlternateSubnetLocal 1, reserved
  98                      | +87 AlternateLocalACKTimeout 19, reserved
  6c 61 70                | +88 PrivateData "lap" (then zeros)
)");

LapRepr GoldenLap() {
  LapRepr r;
  r.envelope.transaction_id = 0x0000000500000001;
  r.local_comm_id = 0x11223344;
  r.remote_comm_id = 0x55667788;
  r.remote_qpn = 0x123;
  r.remote_cm_response_timeout = 22;
  r.alternate = {12, 13, *Gid::Parse("fe80::2:c903:a1:b2c4"), *Gid::Parse("fe80::2:c903:d4:e5f7"),
                 0xabcde, 3, 4, 2, 2, true, 19};
  const uint8_t pd[3] = {'l', 'a', 'p'};
  r.private_data = PrivateData(pd);
  return r;
}

// Golden APR (invalid LID), commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenApr = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 05 00 00 00 01 | TransactionID (the LAP's)
  00 1a 00 00             | AttributeID APR, reserved
  00 00 00 00             | AttributeModifier
  55 66 77 88             | +24 LocalCommID
  11 22 33 44             | +28 RemoteCommID
  02                      | +32 AdditionalInformationLength 2
  07                      | +33 APStatus 7 (invalid LID)
  00 00                   | +34 reserved
  00 0c                   | +36 AdditionalInformation (then zeros up to +107)
)");

AprRepr GoldenApr() {
  AprRepr r;
  r.envelope.transaction_id = 0x0000000500000001;
  r.local_comm_id = 0x55667788;
  r.remote_comm_id = 0x11223344;
  r.status = ApStatus::kInvalidLid;
  const uint8_t info[2] = {0x00, 0x0c};
  r.additional_info = InfoBlock::Of(info);
  return r;
}

TEST(LapTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenLap().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenLap.begin()))
      << DiffBytes(buf, kGoldenLap);
}

TEST(LapTest, ParseGolden) {
  auto r = LapRepr::Parse(kGoldenLap);
  ASSERT_TRUE(r.ok()) << r.status();
  LapRepr want = GoldenLap();
  want.private_data = PrivateData(std::span(kGoldenLap).subspan(88, 168));
  EXPECT_EQ(*r, want);
}

TEST(LapTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return LapRepr::Parse(b).status(); }, "LAP", kGoldenLap,
      {
          {"LocalCommID", 24, 27},
          {"RemoteCommID", 28, 31},
          {"reserved", 32, 35},
          {"RemoteQPN/EECN", 36, 38},
          {"RemoteCMResponseTimeout", 39, 39},
          {"reserved", 40, 43},
          {"AlternateLocalPortLID", 44, 45},
          {"AlternateRemotePortLID", 46, 47},
          {"AlternateLocalPortGID", 48, 63},
          {"AlternateRemotePortGID", 64, 79},
          {"AlternateFlowLabel", 80, 82},
          {"AlternateTrafficClass", 83, 83},
          {"AlternateHopLimit", 84, 84},
          {"reserved", 85, 85},
          {"AlternateSL", 86, 86},
          {"AlternateLocalACKTimeout", 87, 87},
          {"PrivateData", 88, 255},
      });
}

TEST(LapTest, RejectsWrongHeaderAndStatesLimits) {
  auto bad = kGoldenLap;
  bad[17] = 0x1a;
  EXPECT_EQ(LapRepr::Parse(bad).status().message(),
            "LAP: MAD.AttributeID = 0x001a, expected 0x0019");
  LapRepr r = GoldenLap();
  const std::vector<uint8_t> big(169, 1);
  r.private_data = PrivateData(big);
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(), "LAP private data is 169 bytes; LAP carries at most 168");
  r = GoldenLap();
  r.alternate.packet_rate = 64;
  EXPECT_EQ(r.Emit(buf).message(),
            "LAP.AlternatePacketRate = 64 does not fit in 6 bits (max 63)");
}

TEST(LapTest, RandomRoundTrip) {
  std::mt19937_64 rng(18);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    LapRepr r;
    r.envelope = testing::RandomEnvelope(rng, true);
    r.local_comm_id = static_cast<uint32_t>(rng());
    r.remote_comm_id = static_cast<uint32_t>(rng());
    r.remote_qpn = rng() & 0xFFFFFF;
    r.remote_cm_response_timeout = rng() & 0x1F;
    r.alternate = testing::RandomPath(rng);
    r.private_data = testing::RandomPrivateData(rng, lap::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = LapRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

TEST(AprTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenApr().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenApr.begin()))
      << DiffBytes(buf, kGoldenApr);
}

TEST(AprTest, ParseGolden) {
  auto r = AprRepr::Parse(kGoldenApr);
  ASSERT_TRUE(r.ok()) << r.status();
  AprRepr want = GoldenApr();
  want.private_data = PrivateData(std::span(kGoldenApr).subspan(108, 148));
  EXPECT_EQ(*r, want);
  EXPECT_STREQ(ApStatusName(r->status), "invalid LID");
  EXPECT_EQ(r->additional_info.used().size(), 2u);
}

TEST(AprTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return AprRepr::Parse(b).status(); }, "APR", kGoldenApr,
      {
          {"LocalCommID", 24, 27},
          {"RemoteCommID", 28, 31},
          {"AdditionalInformationLength", 32, 32},
          {"APStatus", 33, 33},
          {"reserved", 34, 35},
          {"AdditionalInformation", 36, 107},
          {"PrivateData", 108, 255},
      });
}

TEST(AprTest, StatusNamesInfoLengthAndLimits) {
  for (int s = 0; s <= 13; ++s) {
    EXPECT_NE(ApStatusName(static_cast<ApStatus>(s)), nullptr) << s;
  }
  EXPECT_EQ(ApStatusName(static_cast<ApStatus>(14)), nullptr);
  auto bad = kGoldenApr;
  bad[32] = 200;
  EXPECT_EQ(AprRepr::Parse(bad).status().message(),
            "APR.AdditionalInformationLength = 200; the AdditionalInformation field holds at "
            "most 72 bytes");
  AprRepr r = GoldenApr();
  const std::vector<uint8_t> big(149, 1);
  r.private_data = PrivateData(big);
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(), "APR private data is 149 bytes; APR carries at most 148");
}

TEST(AprTest, RandomRoundTrip) {
  std::mt19937_64 rng(19);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    AprRepr r;
    r.envelope = testing::RandomEnvelope(rng, true);
    r.local_comm_id = static_cast<uint32_t>(rng());
    r.remote_comm_id = static_cast<uint32_t>(rng());
    r.status = static_cast<ApStatus>(rng());
    r.additional_info = testing::RandomInfoBlock(rng);
    r.private_data = testing::RandomPrivateData(rng, apr::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = AprRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
