#include "mad/time.h"

#include "absl/types/optional.h"
#include "gtest/gtest.h"

namespace uscm::mad {
namespace {

TEST(DurationTest, UnitsAndArithmetic) {
  EXPECT_EQ(Duration::Micros(3).nanos(), 3000);
  EXPECT_EQ(Duration::Millis(2), Duration::Micros(2000));
  EXPECT_EQ(Duration::Seconds(1), Duration::Millis(1000));
  EXPECT_EQ(Duration::Zero().nanos(), 0);
  EXPECT_EQ(Duration().nanos(), 0);
  EXPECT_EQ((Duration::Millis(3) - Duration::Millis(1)) * 2, Duration::Millis(4));
  EXPECT_EQ(Duration::Seconds(1) / 4, Duration::Millis(250));
  Duration d = Duration::Micros(1);
  d += Duration::Nanos(5);
  EXPECT_EQ(d.nanos(), 1005);
  d -= Duration::Nanos(1005);
  EXPECT_EQ(d, Duration::Zero());
  EXPECT_LT(Duration::Nanos(-1), Duration::Zero());
  EXPECT_GT(Duration::Max(), Duration::Seconds(1000000000));
  EXPECT_DOUBLE_EQ(Duration::Micros(1500).millis(), 1.5);
  EXPECT_DOUBLE_EQ(Duration::Nanos(4096).micros(), 4.096);
  EXPECT_DOUBLE_EQ(Duration::Millis(2500).seconds(), 2.5);
}

TEST(DurationTest, ToString) {
  EXPECT_EQ(Duration::Nanos(999).ToString(), "999ns");
  EXPECT_EQ(Duration::Nanos(4096).ToString(), "4.096us");
  EXPECT_EQ(Duration::Micros(1500).ToString(), "1.5ms");
  EXPECT_EQ(Duration::Seconds(2).ToString(), "2s");
  EXPECT_EQ(Duration::Millis(-3).ToString(), "-3ms");
}

TEST(TimePointTest, Arithmetic) {
  const TimePoint t0 = TimePoint::FromNanos(1000);
  const TimePoint t1 = t0 + Duration::Micros(1);
  EXPECT_EQ(t1.nanos(), 2000);
  EXPECT_EQ(t1 - t0, Duration::Micros(1));
  EXPECT_EQ(t1 - Duration::Micros(1), t0);
  TimePoint t = t0;
  t += Duration::Nanos(1);
  EXPECT_EQ(t.nanos(), 1001);
  EXPECT_LT(t0, t1);
  EXPECT_EQ(TimePoint::Epoch().nanos(), 0);
  EXPECT_LT(t1, TimePoint::Infinite());
}

TEST(TimePointTest, OptionalDeadlineHasNoZeroSentinel) {
  // The epoch is a valid deadline, distinct from "no deadline".
  absl::optional<TimePoint> deadline;
  EXPECT_FALSE(deadline.has_value());
  deadline = TimePoint::Epoch();
  EXPECT_TRUE(deadline.has_value());
}

TEST(VirtualClockTest, MovesOnlyForwardAndOnlyWhenTold) {
  VirtualClock clock(TimePoint::FromNanos(100));
  EXPECT_EQ(clock.Now().nanos(), 100);
  clock.AdvanceBy(Duration::Nanos(50));
  EXPECT_EQ(clock.Now().nanos(), 150);
  clock.AdvanceTo(TimePoint::FromNanos(120));  // backwards: ignored
  EXPECT_EQ(clock.Now().nanos(), 150);
  clock.AdvanceBy(Duration::Nanos(-10));
  EXPECT_EQ(clock.Now().nanos(), 150);
  // A leap of hours in one step.
  clock.AdvanceBy(Duration::Seconds(5 * 3600));
  EXPECT_EQ(clock.Now().nanos(), 150 + 5 * 3600 * 1000000000LL);
  const Clock& as_interface = clock;
  EXPECT_EQ(as_interface.Now(), clock.Now());
}

TEST(RealClockTest, IsMonotonic) {
  RealClock clock;
  TimePoint prev = clock.Now();
  for (int i = 0; i < 1000; ++i) {
    const TimePoint now = clock.Now();
    EXPECT_GE(now, prev);
    prev = now;
  }
}

}  // namespace
}  // namespace uscm::mad
