#include "mad/wire/cm_rej.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;
using testing::DiffBytes;
using testing::Hex;

// Golden REJ (reason 12, primary remote port GID rejected), commented field
// by field (MAD offsets).
const std::vector<uint8_t> kGoldenRej = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 02 aa bb cc dd | TransactionID (the REQ's)
  00 12 00 00             | AttributeID REJ, reserved
  00 00 00 00             | AttributeModifier
  99 88 77 66             | +24 LocalCommID
  11 22 33 44             | +28 RemoteCommID
  00                      | +32 MessageRejected 0 (REQ), reserved
  20                      | +33 RejectInfoLength 16, reserved
  00 0c                   | +34 Reason 12
  fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c3 | +36 ARI: the GID the rejector accepts
  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 | +52 ARI (rest, zero)
  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 | +68
  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 | +84
  00 00 00 00 00 00 00 00                         | +100 (ARI ends at +107)
  6e 6f                   | +108 PrivateData "no" (then zeros)
)");

Gid G(const char* text) { return *Gid::Parse(text); }

RejRepr GoldenRepr() {
  RejRepr r;
  r.envelope.transaction_id = 0x00000002aabbccdd;
  r.local_comm_id = 0x99887766;
  r.remote_comm_id = 0x11223344;
  r.message_rejected = RejMessage::kReq;
  r.reason = RejReason::kInvalidPrimaryGid;
  EXPECT_TRUE(r.SetAriGid(G("fe80::2:c903:a1:b2c3")).ok());
  const uint8_t pd[2] = {'n', 'o'};
  r.private_data = PrivateData(pd);
  return r;
}

TEST(RejTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRepr().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenRej.begin()))
      << DiffBytes(buf, kGoldenRej);
}

TEST(RejTest, ParseGolden) {
  auto r = RejRepr::Parse(kGoldenRej);
  ASSERT_TRUE(r.ok()) << r.status();
  RejRepr want = GoldenRepr();
  want.private_data = PrivateData(std::span(kGoldenRej).subspan(108, 148));
  EXPECT_EQ(*r, want);
  EXPECT_EQ(r->ari.length, 16);
  ASSERT_TRUE(r->AriGid().has_value());
  EXPECT_EQ(r->AriGid()->ToString(), "fe80::2:c903:a1:b2c3");
  EXPECT_FALSE(r->AriValue().has_value());
  EXPECT_STREQ(RejReasonName(r->reason), "Primary remote port GID rejected");
}

TEST(RejTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return RejRepr::Parse(b).status(); }, "REJ", kGoldenRej,
      {
          {"LocalCommID", 24, 27},
          {"RemoteCommID", 28, 31},
          {"MessageRejected", 32, 32},
          {"RejectInfoLength", 33, 33},
          {"Reason", 34, 35},
          {"ARI", 36, 107},
          {"PrivateData", 108, 255},
      });
}

TEST(RejTest, AriLengthOver72IsRejected) {
  auto bad = kGoldenRej;
  bad[33] = 73 << 1;
  EXPECT_EQ(RejRepr::Parse(bad).status().message(),
            "REJ.RejectInfoLength = 73; the ARI field holds at most 72 bytes");
  bad[33] = 72 << 1;
  EXPECT_TRUE(RejRepr::Parse(bad).ok());
  RejRepr r = GoldenRepr();
  r.ari.length = 100;
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(),
            "REJ.RejectInfoLength = 100; the ARI field holds at most 72 bytes");
}

TEST(RejTest, EveryReasonHasANameAndUnknownCodesSurvive) {
  for (int code = 1; code <= 35; ++code) {
    const char* name = RejReasonName(static_cast<RejReason>(code));
    if (code == 34) {
      EXPECT_EQ(name, nullptr);
    } else {
      EXPECT_NE(name, nullptr) << code;
    }
  }
  EXPECT_STREQ(RejReasonName(RejReason::kConsumerReject), "Consumer reject");
  EXPECT_STREQ(RejReasonName(static_cast<RejReason>(35)), "Vendor option not supported");
  EXPECT_EQ(RejReasonName(static_cast<RejReason>(0)), nullptr);
  for (uint16_t code : {0, 34, 36, 0x1234, 0xffff}) {
    RejRepr r = GoldenRepr();
    r.reason = static_cast<RejReason>(code);
    r.message_rejected = static_cast<RejMessage>(3);
    auto buf = testing::Poisoned();
    ASSERT_TRUE(r.Emit(buf).ok());
    EXPECT_EQ(buf[34], code >> 8);
    EXPECT_EQ(buf[35], code & 0xff);
    auto back = RejRepr::Parse(buf);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(static_cast<uint16_t>(back->reason), code);
    EXPECT_EQ(static_cast<int>(back->message_rejected), 3);
    EXPECT_EQ(RejMessageName(back->message_rejected), nullptr);
  }
}

TEST(RejTest, TimeoutCarriesTheCaGuid) {
  RejRepr r = GoldenRepr();
  r.reason = RejReason::kTimeout;
  r.message_rejected = RejMessage::kOther;
  ASSERT_TRUE(r.SetAriValue(0x0002c90300a1b2c3).ok());
  auto buf = testing::Poisoned();
  ASSERT_TRUE(r.Emit(buf).ok());
  const std::vector<uint8_t> ari = Hex("00 02 c9 03 00 a1 b2 c3", 0);
  EXPECT_TRUE(std::equal(ari.begin(), ari.end(), buf.begin() + 36));
  EXPECT_EQ(buf[33], 8 << 1);
  EXPECT_EQ(buf[32], 0x80);  // MessageRejected 2 (other)
  auto back = RejRepr::Parse(buf);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->AriValue(), 0x0002c90300a1b2c3u);
  EXPECT_FALSE(back->AriGid().has_value());
  EXPECT_EQ(AriKindFor(back->reason), AriKind::kCaGuid);
}

TEST(RejTest, AriLayoutPerReason) {
  struct Case {
    RejReason reason;
    uint64_t value;
    const char* ari_hex;  // the bytes SetAriValue must produce
  };
  const Case cases[] = {
      {RejReason::kInvalidPrimaryLid, 0x1234, "12 34"},
      {RejReason::kInvalidAlternateLid, 0x00ff, "00 ff"},
      {RejReason::kInvalidPrimarySl, 9, "90"},
      {RejReason::kInvalidAlternateSl, 15, "f0"},
      {RejReason::kInvalidPrimaryTrafficClass, 0xb8, "b8"},
      {RejReason::kInvalidAlternateTrafficClass, 1, "01"},
      {RejReason::kInvalidPrimaryHopLimit, 64, "40"},
      {RejReason::kInvalidAlternateHopLimit, 255, "ff"},
      {RejReason::kInvalidPrimaryPacketRate, 16, "10"},
      {RejReason::kInvalidAlternatePacketRate, 63, "3f"},
      {RejReason::kInvalidMtu, 4, "40"},
      {RejReason::kInsufficientResponderResources, 16, "10"},
      {RejReason::kInvalidRnrRetry, 7, "07"},
      {RejReason::kInvalidClassVersion, 2, "02"},
      {RejReason::kInvalidPrimaryFlowLabel, 0xabcde, "ab cd e0"},
      {RejReason::kInvalidAlternateFlowLabel, 1, "00 00 10"},
  };
  for (const Case& c : cases) {
    RejRepr r;
    r.reason = c.reason;
    ASSERT_TRUE(r.SetAriValue(c.value).ok()) << RejReasonName(c.reason);
    const std::vector<uint8_t> want = Hex(c.ari_hex, 0);
    EXPECT_EQ(r.ari.length, want.size()) << RejReasonName(c.reason);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), r.ari.bytes.begin()))
        << RejReasonName(c.reason);
    EXPECT_EQ(r.AriValue(), c.value) << RejReasonName(c.reason);
  }
}

TEST(RejTest, AriKindMismatchAndRangeAreErrors) {
  RejRepr r;
  r.reason = RejReason::kInvalidPrimarySl;
  EXPECT_EQ(r.SetAriValue(17).message(), "REJ ARI.SL = 17 does not fit in 4 bits (max 15)");
  EXPECT_EQ(r.SetAriGid(Gid{}).message(),
            "REJ reason 14 (Invalid primary SL) carries ARI kind \"SL\", not \"GID\"");
  r.reason = RejReason::kNoQp;
  EXPECT_THAT(r.SetAriValue(1).message(), HasSubstr("carries ARI kind \"none\""));
  EXPECT_FALSE(r.AriValue().has_value());
  // A GID reason with a short ARI has no typed GID.
  r.reason = RejReason::kInvalidAlternateGid;
  r.ari = InfoBlock::Of(std::vector<uint8_t>(15, 1));
  EXPECT_FALSE(r.AriGid().has_value());
  r.reason = RejReason::kPortRedirect;
  ASSERT_TRUE(r.SetAriGid(G("fe80::1")).ok());
  EXPECT_EQ(r.AriGid(), G("fe80::1"));
  // Port and CM redirection carries a whole ClassPortInfo.
  r.reason = RejReason::kPortCmRedirect;
  r.ari = InfoBlock::Of(std::vector<uint8_t>(72, 7));
  ASSERT_TRUE(r.AriClassPortInfo().has_value());
  EXPECT_EQ(r.AriClassPortInfo()->size(), 72u);
  EXPECT_EQ(AriKindFor(RejReason::kConsumerReject), AriKind::kConsumer);
}

TEST(RejTest, RejectsWrongHeaderAndStatesLimits) {
  auto bad = kGoldenRej;
  bad[17] = 0x11;
  EXPECT_EQ(RejRepr::Parse(bad).status().message(),
            "REJ: MAD.AttributeID = 0x0011, expected 0x0012");
  RejRepr r = GoldenRepr();
  const std::vector<uint8_t> big(149, 1);
  r.private_data = PrivateData(big);
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(), "REJ private data is 149 bytes; REJ carries at most 148");
}

TEST(RejTest, RandomRoundTrip) {
  std::mt19937_64 rng(15);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    RejRepr r;
    r.envelope = testing::RandomEnvelope(rng, true);
    r.local_comm_id = static_cast<uint32_t>(rng());
    r.remote_comm_id = static_cast<uint32_t>(rng());
    r.message_rejected = static_cast<RejMessage>(rng() & 3);
    r.reason = static_cast<RejReason>(rng() % 2 ? 1 + rng() % 35 : rng() & 0xffff);
    r.ari = testing::RandomInfoBlock(rng);
    r.private_data = testing::RandomPrivateData(rng, rej::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = RejRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
