// 2k attempts at 10% loss, 1% duplication and reordering: every attempt ends
// as established+closed, REJ or timeout; no endpoint keeps any state; the same
// seed gives the same digest and a different seed a different one.
#include "gtest/gtest.h"
#include "tests/soak/scenarios.h"

namespace uscm::soak {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int kAttempts = 500;
#else
constexpr int kAttempts = 2000;
#endif

TEST(LossTest, EveryAttemptEndsCleanlyAndTheSeedReproducesTheRun) {
  LossConfig c;
  c.attempts = kAttempts;
  const Result a = RunLoss(c);
  EXPECT_TRUE(a.violations.empty()) << a.Summary();
  const Result b = RunLoss(c);
  EXPECT_EQ(a.digest, b.digest);
  c.seed = 2;
  const Result other = RunLoss(c);
  EXPECT_TRUE(other.violations.empty()) << other.Summary();
  EXPECT_NE(a.digest, other.digest);
}

TEST(LossTest, LowLatencyProfileUnderLoss) {
  LossConfig c;
  c.attempts = kAttempts / 2;
  c.profile = LowLatencyProfile();
  c.seed = 7;
  const Result r = RunLoss(c);
  EXPECT_TRUE(r.violations.empty()) << r.Summary();
}

}  // namespace
}  // namespace uscm::soak
