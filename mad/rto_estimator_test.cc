#include "mad/rto_estimator.h"

#include "gtest/gtest.h"

namespace uscm::mad {
namespace {

RtoConfig Config() {
  RtoConfig c;
  c.initial = Duration::Seconds(1);
  c.floor = Duration::Millis(10);
  c.granularity = Duration::Millis(1);
  c.ceiling = Duration::Seconds(16);
  return c;
}

TEST(RtoEstimatorTest, InitialValueUntilTheFirstSample) {
  RtoEstimator e(Config());
  EXPECT_FALSE(e.has_sample());
  EXPECT_EQ(e.rto(), Duration::Seconds(1));
}

TEST(RtoEstimatorTest, FirstSampleSetsSrttAndHalfOfItAsVariation) {
  RtoEstimator e(Config());
  e.AddSample(Duration::Millis(40));
  EXPECT_EQ(e.srtt(), Duration::Millis(40));
  EXPECT_EQ(e.rttvar(), Duration::Millis(20));
  EXPECT_EQ(e.rto(), Duration::Millis(40 + 4 * 20));  // RFC 6298 2.2
}

TEST(RtoEstimatorTest, LaterSamplesSmoothWithAlphaOneEighthAndBetaOneQuarter) {
  RtoEstimator e(Config());
  e.AddSample(Duration::Millis(80));
  e.AddSample(Duration::Millis(40));
  // RTTVAR = 3/4 * 40 + 1/4 * |80 - 40| = 40; SRTT = 7/8 * 80 + 1/8 * 40 = 75.
  EXPECT_EQ(e.rttvar(), Duration::Millis(40));
  EXPECT_EQ(e.srtt(), Duration::Millis(75));
  EXPECT_EQ(e.rto(), Duration::Millis(75 + 160));
}

TEST(RtoEstimatorTest, SteadyFastAnswersSettleOnTheFloor) {
  RtoEstimator e(Config());
  for (int i = 0; i < 100; ++i) e.AddSample(Duration::Micros(5));
  EXPECT_LT(e.srtt(), Duration::Micros(6));
  EXPECT_EQ(e.rto(), Duration::Millis(10));
}

TEST(RtoEstimatorTest, GranularityIsTheLeastVariationTerm) {
  RtoConfig c = Config();
  c.floor = Duration::Zero();
  RtoEstimator e(c);
  for (int i = 0; i < 100; ++i) e.AddSample(Duration::Millis(3));
  EXPECT_EQ(e.rto(), Duration::Millis(3) + Duration::Millis(1));
}

TEST(RtoEstimatorTest, AdvertisedBoundCapsTheInitialAndMeasuredValues) {
  RtoEstimator e(Config());
  e.SetBound(Duration::Millis(300));
  EXPECT_EQ(e.rto(), Duration::Millis(300));  // initial 1 s capped
  e.AddSample(Duration::Millis(200));         // 200 + 4 * 100 = 600 ms
  EXPECT_EQ(e.rto(), Duration::Millis(300));
  e.SetBound(Duration::Zero());
  EXPECT_EQ(e.rto(), Duration::Millis(600));
}

TEST(RtoEstimatorTest, TheFloorWinsOverABoundBelowIt) {
  RtoEstimator e(Config());
  e.SetBound(Duration::Millis(2));
  EXPECT_EQ(e.rto(), Duration::Millis(10));
}

TEST(RtoEstimatorTest, CeilingWhenNothingIsAdvertised) {
  RtoEstimator e(Config());
  e.AddSample(Duration::Seconds(10));  // 10 + 4 * 5 = 30 s
  EXPECT_EQ(e.rto(), Duration::Seconds(16));
}

}  // namespace
}  // namespace uscm::mad
