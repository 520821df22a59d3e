#include "mad/wire/cm_rep.h"

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

// Golden REP, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenRep = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 02 aa bb cc dd | TransactionID
  00 13 00 00             | AttributeID REP, reserved
  00 00 00 05             | AttributeModifier = ECE options 5
  55 66 77 88             | +24 LocalCommID
  11 22 33 44             | +28 RemoteCommID
  00 01 00 02             | +32 LocalQKey
  00 04 56                | +36 LocalQPN 0x456
  02                      | +39 VendorID[23:16]
  00 00 07                | +40 LocalEECN 7
  c9                      | +43 VendorID[15:8]
  65 43 21                | +44 StartingPSN
  03                      | +47 VendorID[7:0]  -> VendorID 0x02c903
  10                      | +48 ResponderResources 16
  20                      | +49 InitiatorDepth 32
  7b                      | +50 TargetACKDelay 15, FailoverAccepted 1, E2E 1
  f0                      | +51 RNRRetryCount 7, SRQ 1, reserved
  00 02 c9 03 00 d4 e5 f6 | +52 LocalCAGUID (only 4-byte aligned)
  52 45 50 21             | +60 PrivateData "REP!" (then zeros)
)");

RepRepr GoldenRepr() {
  RepRepr r;
  r.envelope.transaction_id = 0x00000002aabbccdd;
  r.local_comm_id = 0x55667788;
  r.remote_comm_id = 0x11223344;
  r.local_qkey = 0x00010002;
  r.local_qpn = 0x456;
  r.ece = {0x02c903, 5};
  r.local_eecn = 7;
  r.starting_psn = 0x654321;
  r.responder_resources = 16;
  r.initiator_depth = 32;
  r.target_ack_delay = 15;
  r.failover_accepted = FailoverAccepted::kNotSupported;
  r.end_to_end_flow_control = true;
  r.rnr_retry_count = 7;
  r.srq = true;
  r.local_ca_guid = 0x0002c90300d4e5f6;
  const uint8_t pd[4] = {'R', 'E', 'P', '!'};
  r.private_data = PrivateData(pd);
  return r;
}

TEST(RepTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRepr().Emit(buf).ok()) << GoldenRepr().Emit(buf);
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenRep.begin()))
      << DiffBytes(buf, kGoldenRep);
}

TEST(RepTest, ParseGolden) {
  auto r = RepRepr::Parse(kGoldenRep);
  ASSERT_TRUE(r.ok()) << r.status();
  RepRepr want = GoldenRepr();
  want.private_data = PrivateData(std::span(kGoldenRep).subspan(60, 196));
  EXPECT_EQ(*r, want);
  EXPECT_EQ(r->ece, (Ece{0x02c903, 5}));
  EXPECT_STREQ(FailoverAcceptedName(r->failover_accepted), "failover not supported");
}

TEST(RepTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return RepRepr::Parse(b).status(); }, "REP", kGoldenRep,
      {
          {"LocalCommID", 24, 27},
          {"RemoteCommID", 28, 31},
          {"LocalQKey", 32, 35},
          {"LocalQPN", 36, 38},
          {"VendorID[23:16]", 39, 39},
          {"LocalEECN", 40, 42},
          {"VendorID[15:8]", 43, 43},
          {"StartingPSN", 44, 46},
          {"VendorID[7:0]", 47, 47},
          {"ResponderResources", 48, 48},
          {"InitiatorDepth", 49, 49},
          {"TargetACKDelay", 50, 50},
          {"RNRRetryCount", 51, 51},
          {"LocalCAGUID", 52, 59},
          {"PrivateData", 60, 255},
      });
}

TEST(RepTest, VendorIdIsOneFieldAcrossThreeBytes) {
  RepRepr r = GoldenRepr();
  r.ece.vendor_id = 0xabcdef;
  auto buf = testing::Poisoned();
  ASSERT_TRUE(r.Emit(buf).ok());
  EXPECT_EQ(buf[39], 0xab);
  EXPECT_EQ(buf[43], 0xcd);
  EXPECT_EQ(buf[47], 0xef);
  EXPECT_EQ(buf[36], 0x00);  // the QPN / EECN / PSN beside them are untouched
  EXPECT_EQ(buf[46], 0x21);
  auto back = RepRepr::Parse(buf);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ece.vendor_id, 0xabcdefu);
  r.ece.vendor_id = 0x1000000;
  EXPECT_EQ(r.Emit(buf).message(),
            "REP.VendorID = 16777216 does not fit in 24 bits (max 16777215)");
}

TEST(RepTest, UnknownFailoverValueSurvives) {
  auto in = kGoldenRep;
  in[50] = (in[50] & ~0x06) | (3 << 1);
  auto r = RepRepr::Parse(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<int>(r->failover_accepted), 3);
  EXPECT_EQ(FailoverAcceptedName(r->failover_accepted), nullptr);
  auto out = testing::Poisoned();
  ASSERT_TRUE(r->Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << DiffBytes(out, in);
}

TEST(RepTest, RejectsWrongHeaderAndEnvelopeModifier) {
  auto bad = kGoldenRep;
  bad[17] = 0x10;
  EXPECT_EQ(RepRepr::Parse(bad).status().message(),
            "REP: MAD.AttributeID = 0x0010, expected 0x0013");
  RepRepr r = GoldenRepr();
  r.envelope.attribute_modifier = 1;
  auto buf = testing::Poisoned();
  EXPECT_THAT(r.Emit(buf).message(), HasSubstr("set ece.options instead"));
}

TEST(RepTest, LimitsAreStated) {
  RepRepr r = GoldenRepr();
  const std::vector<uint8_t> big(197, 1);
  r.private_data = PrivateData(big);
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(), "REP private data is 197 bytes; REP carries at most 196");
  r = GoldenRepr();
  r.target_ack_delay = 32;
  EXPECT_EQ(r.Emit(buf).message(), "REP.TargetACKDelay = 32 does not fit in 5 bits (max 31)");
  r = GoldenRepr();
  r.local_qpn = 0x1000000;
  EXPECT_EQ(r.Emit(buf).message(),
            "REP.LocalQPN = 16777216 does not fit in 24 bits (max 16777215)");
}

TEST(RepTest, RandomRoundTrip) {
  std::mt19937_64 rng(11);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    RepRepr r;
    r.envelope = testing::RandomEnvelope(rng, false);
    r.local_comm_id = static_cast<uint32_t>(rng());
    r.remote_comm_id = static_cast<uint32_t>(rng());
    r.local_qkey = static_cast<uint32_t>(rng());
    r.local_qpn = rng() & 0xFFFFFF;
    r.ece = {static_cast<uint32_t>(rng() & 0xFFFFFF), static_cast<uint32_t>(rng())};
    r.local_eecn = rng() & 0xFFFFFF;
    r.starting_psn = rng() & 0xFFFFFF;
    r.responder_resources = static_cast<uint8_t>(rng());
    r.initiator_depth = static_cast<uint8_t>(rng());
    r.target_ack_delay = rng() & 0x1F;
    r.failover_accepted = static_cast<FailoverAccepted>(rng() & 3);
    r.end_to_end_flow_control = rng() & 1;
    r.rnr_retry_count = rng() & 7;
    r.srq = rng() & 1;
    r.local_ca_guid = rng();
    r.private_data = testing::RandomPrivateData(rng, rep::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok()) << r.Emit(buf);
    auto back = RepRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
