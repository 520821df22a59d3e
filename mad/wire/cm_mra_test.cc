#include "mad/wire/cm_mra.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using testing::DiffBytes;
using testing::Hex;

// Golden MRA, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenMra = Hex(R"(
  01 07 02 03             | BaseVersion 1, class CM, version 2, Send
  00 00 00 00             | Status, ClassSpecific
  00 00 00 02 aa bb cc dd | TransactionID
  00 11 00 00             | AttributeID MRA, reserved
  00 00 00 00             | AttributeModifier
  55 66 77 88             | +24 LocalCommID
  11 22 33 44             | +28 RemoteCommID
  40                      | +32 MessageMRAed 1 (REP), reserved
  a8                      | +33 ServiceTimeout 21, reserved
  4d 52 41                | +34 PrivateData "MRA" (then zeros)
)");

MraRepr GoldenRepr() {
  MraRepr r;
  r.envelope.transaction_id = 0x00000002aabbccdd;
  r.local_comm_id = 0x55667788;
  r.remote_comm_id = 0x11223344;
  r.message_mraed = MraMessage::kRep;
  r.service_timeout = 21;
  const uint8_t pd[3] = {'M', 'R', 'A'};
  r.private_data = PrivateData(pd);
  return r;
}

TEST(MraTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRepr().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenMra.begin()))
      << DiffBytes(buf, kGoldenMra);
}

TEST(MraTest, ParseGolden) {
  auto r = MraRepr::Parse(kGoldenMra);
  ASSERT_TRUE(r.ok()) << r.status();
  MraRepr want = GoldenRepr();
  want.private_data = PrivateData(std::span(kGoldenMra).subspan(34, 222));
  EXPECT_EQ(*r, want);
  EXPECT_STREQ(MraMessageName(r->message_mraed), "REP");
}

TEST(MraTest, TruncationErrorAtEveryPrefix) {
  testing::ExpectExactTruncationErrors(
      [](std::span<const uint8_t> b) { return MraRepr::Parse(b).status(); }, "MRA", kGoldenMra,
      {
          {"LocalCommID", 24, 27},
          {"RemoteCommID", 28, 31},
          {"MessageMRAed", 32, 32},
          {"ServiceTimeout", 33, 33},
          {"PrivateData", 34, 255},
      });
}

TEST(MraTest, ReservedMessageValueSurvives) {
  auto in = kGoldenMra;
  in[32] = 0xC0;  // MessageMRAed 3 (reserved)
  auto r = MraRepr::Parse(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<int>(r->message_mraed), 3);
  EXPECT_EQ(MraMessageName(r->message_mraed), nullptr);
  auto out = testing::Poisoned();
  ASSERT_TRUE(r->Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << DiffBytes(out, in);
}

TEST(MraTest, RejectsWrongHeaderAndStatesLimits) {
  auto bad = kGoldenMra;
  bad[17] = 0x12;
  EXPECT_EQ(MraRepr::Parse(bad).status().message(),
            "MRA: MAD.AttributeID = 0x0012, expected 0x0011");
  MraRepr r = GoldenRepr();
  const std::vector<uint8_t> big(223, 1);
  r.private_data = PrivateData(big);
  auto buf = testing::Poisoned();
  EXPECT_EQ(r.Emit(buf).message(), "MRA private data is 223 bytes; MRA carries at most 222");
  r = GoldenRepr();
  r.message_mraed = static_cast<MraMessage>(4);
  EXPECT_EQ(r.Emit(buf).message(), "MRA.MessageMRAed = 4 does not fit in 2 bits (max 3)");
}

TEST(MraTest, RandomRoundTrip) {
  std::mt19937_64 rng(12);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    MraRepr r;
    r.envelope = testing::RandomEnvelope(rng, true);
    r.local_comm_id = static_cast<uint32_t>(rng());
    r.remote_comm_id = static_cast<uint32_t>(rng());
    r.message_mraed = static_cast<MraMessage>(rng() & 3);
    r.service_timeout = rng() & 0x1F;
    r.private_data = testing::RandomPrivateData(rng, mra::kPrivateDataBytes);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = MraRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
