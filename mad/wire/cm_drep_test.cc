#include "mad/wire/cm_drep.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using testing::DiffBytes;
using testing::Hex;

// Golden DREP, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenDrep = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 03 01 02 03 04 | TransactionID (the DREQ's)
  00 16 00 00             | AttributeID DREP, reserved
  00 00 00 00             | AttributeModifier
  11 22 33 44             | +24 LocalCommID
  55 66 77 88             | +28 RemoteCommID
  6f 6b                   | +32 PrivateData "ok" (then zeros)
)");

DrepRepr GoldenRepr() {
  DrepRepr r;
  r.envelope.transaction_id = 0x0000000301020304;
  r.local_comm_id = 0x11223344;
  r.remote_comm_id = 0x55667788;
  const uint8_t pd[2] = {'o', 'k'};
  r.private_data = PrivateData(pd);
  return r;
}

TEST(DrepTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRepr().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenDrep.begin()))
      << DiffBytes(buf, kGoldenDrep);
}

TEST(DrepTest, ParseGolden) {
  auto r = DrepRepr::Parse(kGoldenDrep);
  ASSERT_TRUE(r.ok()) << r.status();
  DrepRepr want = GoldenRepr();
  want.private_data = PrivateData(std::span(kGoldenDrep).subspan(32, 224));
  EXPECT_EQ(*r, want);
}

TEST(DrepTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return DrepRepr::Parse(b).status(); }, "DREP",
      kGoldenDrep,
      {
          {"LocalCommID", 24, 27},
          {"RemoteCommID", 28, 31},
          {"PrivateData", 32, 255},
      });
}

TEST(DrepTest, RejectsWrongHeaderAndShortBuffer) {
  auto bad = kGoldenDrep;
  bad[17] = 0x15;
  EXPECT_EQ(DrepRepr::Parse(bad).status().message(),
            "DREP: MAD.AttributeID = 0x0015, expected 0x0016");
  std::array<uint8_t, 100> small;
  EXPECT_EQ(GoldenRepr().Emit(small).message(),
            "DREP: output buffer is 100 bytes; a MAD needs 256");
}

TEST(DrepTest, RandomRoundTrip) {
  std::mt19937_64 rng(14);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    DrepRepr r;
    r.envelope = testing::RandomEnvelope(rng, true);
    r.local_comm_id = static_cast<uint32_t>(rng());
    r.remote_comm_id = static_cast<uint32_t>(rng());
    r.private_data = testing::RandomPrivateData(rng, drep::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = DrepRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
