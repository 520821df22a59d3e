#include "mad/wire/cm_dreq.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using testing::DiffBytes;
using testing::Hex;

// Golden DREQ, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenDreq = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 03 01 02 03 04 | TransactionID
  00 15 00 00             | AttributeID DREQ, reserved
  00 00 00 00             | AttributeModifier
  55 66 77 88             | +24 LocalCommID
  11 22 33 44             | +28 RemoteCommID
  00 01 23                | +32 RemoteQPN/EECN 0x123
  00                      | +35 reserved
  62 79 65                | +36 PrivateData "bye" (then zeros)
)");

DreqRepr GoldenRepr() {
  DreqRepr r;
  r.envelope.transaction_id = 0x0000000301020304;
  r.local_comm_id = 0x55667788;
  r.remote_comm_id = 0x11223344;
  r.remote_qpn = 0x123;
  const uint8_t pd[3] = {'b', 'y', 'e'};
  r.private_data = PrivateData(pd);
  return r;
}

TEST(DreqTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRepr().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenDreq.begin()))
      << DiffBytes(buf, kGoldenDreq);
}

TEST(DreqTest, ParseGolden) {
  auto r = DreqRepr::Parse(kGoldenDreq);
  ASSERT_TRUE(r.ok()) << r.status();
  DreqRepr want = GoldenRepr();
  want.private_data = PrivateData(std::span(kGoldenDreq).subspan(36, 220));
  EXPECT_EQ(*r, want);
}

TEST(DreqTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return DreqRepr::Parse(b).status(); }, "DREQ",
      kGoldenDreq,
      {
          {"LocalCommID", 24, 27},
          {"RemoteCommID", 28, 31},
          {"RemoteQPN/EECN", 32, 34},
          {"reserved", 35, 35},
          {"PrivateData", 36, 255},
      });
}

TEST(DreqTest, ReservedByteIgnoredAndZeroed) {
  auto in = kGoldenDreq;
  in[35] = 0xee;
  auto r = DreqRepr::Parse(in);
  ASSERT_TRUE(r.ok());
  auto out = testing::Poisoned();
  ASSERT_TRUE(r->Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), kGoldenDreq.begin()))
      << DiffBytes(out, kGoldenDreq);
}

TEST(DreqTest, RejectsWrongHeaderAndStatesLimits) {
  auto bad = kGoldenDreq;
  bad[17] = 0x16;
  EXPECT_EQ(DreqRepr::Parse(bad).status().message(),
            "DREQ: MAD.AttributeID = 0x0016, expected 0x0015");
  DreqRepr r = GoldenRepr();
  const std::vector<uint8_t> big(221, 1);
  r.private_data = PrivateData(big);
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(), "DREQ private data is 221 bytes; DREQ carries at most 220");
  r = GoldenRepr();
  r.remote_qpn = 1 << 24;
  EXPECT_EQ(r.Emit(buf).message(),
            "DREQ.RemoteQPN/EECN = 16777216 does not fit in 24 bits (max 16777215)");
}

TEST(DreqTest, RandomRoundTrip) {
  std::mt19937_64 rng(13);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    DreqRepr r;
    r.envelope = testing::RandomEnvelope(rng, true);
    r.local_comm_id = static_cast<uint32_t>(rng());
    r.remote_comm_id = static_cast<uint32_t>(rng());
    r.remote_qpn = rng() & 0xFFFFFF;
    r.private_data = testing::RandomPrivateData(rng, dreq::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = DreqRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
