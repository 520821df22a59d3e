#include "mad/wire/cm_message.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_samples.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

TEST(CmMessageTest, EverySampleDispatchesToItsRepr) {
  const auto samples = SampleCmMessages();
  ASSERT_EQ(samples.size(), std::variant_size_v<CmMessage>);
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].index(), i);  // one sample per alternative, in order
    auto buf = testing::Poisoned();
    ASSERT_TRUE(EmitCm(samples[i], buf).ok()) << i;
    EXPECT_EQ(buf[16] << 8 | buf[17], static_cast<int>(AttrOf(samples[i]))) << i;
    auto back = ParseAnyCm(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(back->index(), i);
    EXPECT_EQ(EnvelopeOf(*back).transaction_id, EnvelopeOf(samples[i]).transaction_id);
    // Private data comes back at full capacity, so compare after a re-emit.
    auto again = testing::Poisoned();
    ASSERT_TRUE(EmitCm(*back, again).ok());
    EXPECT_EQ(again, buf) << CmAttrName(AttrOf(samples[i]));
  }
  EXPECT_EQ(AttrOf(samples[0]), CmAttr::kReq);
  EXPECT_EQ(AttrOf(samples[10]), CmAttr::kApr);
}

TEST(CmMessageTest, ErrorsNameTheProblem) {
  auto mad = SampleCmMads()[0];
  mad[17] = 0x42;
  EXPECT_EQ(ParseAnyCm(mad).status().message(), "CM: AttributeID 0x0042 is not a CM message");
  mad[17] = 0x01;
  EXPECT_THAT(ParseAnyCm(mad).status().message(), ::testing::HasSubstr("is ClassPortInfo"));
  mad = SampleCmMads()[0];
  mad[1] = 0x03;
  EXPECT_EQ(ParseAnyCm(mad).status().message(), "CM: MAD class 0x03 is not CM (0x07)");
  EXPECT_EQ(ParseAnyCm(std::span(mad).first(10)).status().message(),
            "CM: MAD header truncated: 10 of 256 bytes; TransactionID (MAD bytes 8..15) is "
            "incomplete");
  mad = SampleCmMads()[2];  // REJ
  EXPECT_EQ(ParseAnyCm(std::span(mad).first(40)).status().message(),
            "REJ truncated: 40 of 256 bytes; ARI (MAD bytes 36..107) is incomplete");
}

// Random bodies under a valid CM header for every attribute: whatever parses
// must re-emit to bytes that parse to the same repr.
TEST(CmMessageTest, RandomBodiesRoundTripThroughTheDispatcher) {
  std::mt19937_64 rng(21);
  const uint16_t attrs[] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a};
  int parsed = 0;
  for (uint16_t attr : attrs) {
    for (int i = 0; i < 1000; ++i) {
      std::array<uint8_t, 256> mad;
      testing::RandomBytes(rng, mad);
      mad[0] = 1;
      mad[1] = 0x07;
      mad[2] = 2;
      mad[3] = 0x03;
      mad[16] = 0;
      mad[17] = static_cast<uint8_t>(attr);
      auto m = ParseAnyCm(mad);
      if (!m.ok()) continue;  // e.g. a reserved REQ MTU or an ARI length over 72
      ++parsed;
      std::array<uint8_t, 256> out;
      ASSERT_TRUE(EmitCm(*m, out).ok());
      auto back = ParseAnyCm(out);
      ASSERT_TRUE(back.ok()) << back.status();
      ASSERT_TRUE(*back == *m) << attr;
    }
  }
  EXPECT_GT(parsed, 7000);
}

}  // namespace
}  // namespace uscm::mad::wire
