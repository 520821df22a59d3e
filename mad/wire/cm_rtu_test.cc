#include "mad/wire/cm_rtu.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;
using testing::DiffBytes;
using testing::Hex;

// Golden RTU, commented field by field (MAD offsets).
const std::vector<uint8_t> kGoldenRtu = Hex(R"(
  01 07 02 03   | BaseVersion 1, class CM, version 2, Send
  00 00 00 00   | Status, ClassSpecific
  00 00 00 01 11 22 33 44 | TransactionID
  00 14 00 00   | AttributeID RTU, reserved
  00 00 00 00   | AttributeModifier
  11 22 33 44   | +24 LocalCommID
  55 66 77 88   | +28 RemoteCommID
  52 54 55 21   | +32 PrivateData "RTU!" (then zeros)
)");

RtuRepr GoldenRepr() {
  RtuRepr r;
  r.envelope.transaction_id = 0x0000000111223344;
  r.local_comm_id = 0x11223344;
  r.remote_comm_id = 0x55667788;
  const uint8_t pd[4] = {'R', 'T', 'U', '!'};
  r.private_data = PrivateData(pd);
  return r;
}

TEST(RtuTest, EmitMatchesGoldenBytesIntoPoisonedBuffer) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenRepr().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), kGoldenRtu.begin()))
      << DiffBytes(buf, kGoldenRtu);
}

TEST(RtuTest, ParseGolden) {
  auto r = RtuRepr::Parse(kGoldenRtu);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->local_comm_id, 0x11223344u);
  EXPECT_EQ(r->remote_comm_id, 0x55667788u);
  EXPECT_EQ(r->private_data.size(), rtu::kPrivateDataBytes);  // no length on the wire
  EXPECT_EQ(r->private_data.bytes()[3], '!');
}

TEST(RtuTest, TruncationErrorAtEveryPrefix) {
  for (size_t n = 0; n < kGoldenRtu.size(); ++n) {
    auto r = RtuRepr::Parse(std::span(kGoldenRtu).first(n));
    ASSERT_FALSE(r.ok()) << n;
    std::string want;
    if (n < 1) want = "BaseVersion (MAD bytes 0..0)";
    else if (n < 24) want = "MAD header truncated";
    else if (n < 28) want = "LocalCommID (MAD bytes 24..27)";
    else if (n < 32) want = "RemoteCommID (MAD bytes 28..31)";
    else want = "PrivateData (MAD bytes 32..255)";
    EXPECT_THAT(r.status().message(), HasSubstr(want)) << n;
    EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat(n, " of 256 bytes"))) << n;
  }
}

TEST(RtuTest, RejectsWrongHeader) {
  auto bad = kGoldenRtu;
  bad[17] = 0x15;  // DREQ attribute
  EXPECT_THAT(RtuRepr::Parse(bad).status().message(), HasSubstr("AttributeID = 0x0015"));
  bad = kGoldenRtu;
  bad[1] = 0x03;
  EXPECT_THAT(RtuRepr::Parse(bad).status().message(), HasSubstr("is not CM"));
  bad = kGoldenRtu;
  bad[0] = 0x80;  // OPA
  EXPECT_THAT(RtuRepr::Parse(bad).status().message(), HasSubstr("BaseVersion = 128"));
}

TEST(RtuTest, PrivateDataLimitIsStated) {
  RtuRepr r = GoldenRepr();
  const std::vector<uint8_t> big(225, 1);
  r.private_data = PrivateData(big);  // clipped to 224: fits exactly
  std::array<uint8_t, 256> buf;
  EXPECT_TRUE(r.Emit(buf).ok());
}

TEST(RtuTest, RandomRoundTrip) {
  std::mt19937_64 rng(7);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    RtuRepr r;
    r.envelope.transaction_id = rng();
    r.local_comm_id = static_cast<uint32_t>(rng());
    r.remote_comm_id = static_cast<uint32_t>(rng());
    std::array<uint8_t, rtu::kPrivateDataBytes> pd;
    testing::RandomBytes(rng, pd);
    r.private_data = PrivateData(pd);
    ASSERT_TRUE(r.Emit(buf).ok());
    auto back = RtuRepr::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, r);
  }
}

}  // namespace
}  // namespace uscm::mad::wire
