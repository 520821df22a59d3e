// 50k bit-flipped MADs in flight: no crash, every copy the parsers reject is
// counted as malformed (exactly), no connection times out, no state leaks.
#include "cm/cm_testing.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_samples.h"
#include "tests/soak/scenarios.h"

namespace uscm::soak {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int kAttempts = 300;
#else
constexpr int kAttempts = 900;
#endif

TEST(BitflipTest, EveryDetectedCorruptionIsCountedAndNothingLeaks) {
  BitflipConfig c;
  c.attempts = kAttempts;
  c.copies = 4;
  const Result r = RunBitflip(c);
  EXPECT_TRUE(r.violations.empty()) << r.Summary();
  const Result again = RunBitflip(c);
  EXPECT_EQ(r.digest, again.digest);
}

TEST(BitflipTest, DetectorAgreesWithTheEndpoint) {
  // Every sample CM MAD passes the detector; with its base version zeroed,
  // or cut short, it is refused, and the endpoint counts exactly that.
  cm::CmEndpoint e(cm::testing::MakePort(2, cm::testing::kGuidB), cm::testing::TestConfig(), 1);
  uint64_t expected = 0;
  for (std::array<uint8_t, mad::kMadSize> m : mad::wire::SampleCmMads()) {
    EXPECT_FALSE(CmParserRejects(m));
    EXPECT_TRUE(CmParserRejects(std::span<const uint8_t>(m.data(), 10)));
    e.HandleMad(TimePoint::Epoch(), mad::MadAddress{}, std::span<const uint8_t>(m.data(), 10));
    m[0] = 0;  // BaseVersion
    EXPECT_TRUE(CmParserRejects(m));
    e.HandleMad(TimePoint::Epoch(), mad::MadAddress{}, m);
    expected += 2;
  }
  EXPECT_EQ(e.counters().malformed, expected);
}

}  // namespace
}  // namespace uscm::soak
