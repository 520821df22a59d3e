#include "mad/timer_wheel.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include "absl/types/optional.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// Counts heap allocations while `g_count_allocations` is set (for the
// no-allocation-in-steady-state test).
namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  if (g_count_allocations.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace uscm::mad {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr TimePoint kStart = TimePoint::FromNanos(1000000);
constexpr Duration kTick = Duration::Micros(1);

TimePoint At(Duration d) { return kStart + d; }

// Advances and returns the payloads fired.
std::vector<uint64_t> Fire(TimerWheel& w, TimePoint now) {
  std::vector<uint64_t> out;
  w.Advance(now, [&](TimerHandle, uint64_t p) { out.push_back(p); });
  return out;
}

TEST(TimerWheelTest, FiresAtDeadlineRoundedUpToTickNeverEarly) {
  TimerWheel w(kStart, kTick);
  w.Schedule(At(Duration::Nanos(2500)), 1);  // rounds up to 3 us
  w.Schedule(At(Duration::Micros(4)), 2);    // on a tick boundary
  EXPECT_THAT(Fire(w, At(Duration::Nanos(2499))), IsEmpty());
  EXPECT_THAT(Fire(w, At(Duration::Nanos(2999))), IsEmpty());
  EXPECT_THAT(Fire(w, At(Duration::Micros(3))), ElementsAre(1));
  EXPECT_THAT(Fire(w, At(Duration::Nanos(3999))), IsEmpty());
  EXPECT_THAT(Fire(w, At(Duration::Micros(4))), ElementsAre(2));
  EXPECT_TRUE(w.empty());
}

TEST(TimerWheelTest, PastAndCurrentDeadlinesFireOnNextAdvance) {
  TimerWheel w(kStart, kTick);
  EXPECT_THAT(Fire(w, At(Duration::Millis(5))), IsEmpty());
  w.Schedule(At(Duration::Millis(1)), 1);            // in the past
  w.Schedule(TimePoint::Epoch(), 2);                 // before start
  w.Schedule(At(Duration::Millis(5)), 3);            // exactly now
  EXPECT_EQ(w.NextDeadline(), At(Duration::Millis(5)));
  EXPECT_THAT(Fire(w, At(Duration::Millis(5))), UnorderedElementsAre(1, 2, 3));
}

TEST(TimerWheelTest, TimeDoesNotGoBackwards) {
  TimerWheel w(kStart, kTick);
  Fire(w, At(Duration::Millis(10)));
  w.Schedule(At(Duration::Millis(11)), 1);
  EXPECT_THAT(Fire(w, At(Duration::Millis(3))), IsEmpty());
  EXPECT_EQ(w.now(), At(Duration::Millis(10)));
  EXPECT_THAT(Fire(w, At(Duration::Millis(11))), ElementsAre(1));
}

TEST(TimerWheelTest, CancelIsSafeForFiredCancelledAndDefaultHandles) {
  TimerWheel w(kStart, kTick);
  const TimerHandle a = w.Schedule(At(Duration::Micros(10)), 1);
  const TimerHandle b = w.Schedule(At(Duration::Micros(20)), 2);
  EXPECT_TRUE(w.IsPending(a));
  EXPECT_TRUE(w.Cancel(a));
  EXPECT_FALSE(w.IsPending(a));
  EXPECT_FALSE(w.Cancel(a));
  EXPECT_FALSE(w.Cancel(TimerHandle()));
  EXPECT_EQ(w.size(), 1u);

  // The node of `a` is reused; the stale handle must not touch the new timer.
  const TimerHandle c = w.Schedule(At(Duration::Micros(30)), 3);
  EXPECT_FALSE(w.Cancel(a));
  EXPECT_TRUE(w.IsPending(c));
  EXPECT_FALSE(a == c);

  EXPECT_THAT(Fire(w, At(Duration::Micros(20))), ElementsAre(2));
  EXPECT_FALSE(w.Cancel(b));  // already fired
  EXPECT_FALSE(w.Reschedule(b, At(Duration::Micros(40))));
  EXPECT_THAT(Fire(w, At(Duration::Micros(30))), ElementsAre(3));
  EXPECT_TRUE(w.empty());
}

TEST(TimerWheelTest, RescheduleKeepsTheHandle) {
  TimerWheel w(kStart, kTick);
  const TimerHandle h = w.Schedule(At(Duration::Seconds(10)), 7);
  EXPECT_TRUE(w.Reschedule(h, At(Duration::Micros(5))));
  EXPECT_EQ(w.size(), 1u);
  EXPECT_THAT(Fire(w, At(Duration::Micros(4))), IsEmpty());
  EXPECT_TRUE(w.Reschedule(h, At(Duration::Millis(2))));  // later again
  EXPECT_THAT(Fire(w, At(Duration::Millis(1))), IsEmpty());
  std::vector<std::pair<TimerHandle, uint64_t>> fired;
  w.Advance(At(Duration::Millis(2)),
            [&](TimerHandle fh, uint64_t p) { fired.emplace_back(fh, p); });
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_TRUE(fired[0].first == h);
  EXPECT_EQ(fired[0].second, 7u);
}

TEST(TimerWheelTest, NextDeadlineIsNeverLaterThanTheEarliestTimer) {
  TimerWheel w(kStart, kTick);
  EXPECT_EQ(w.NextDeadline(), absl::nullopt);
  w.Schedule(At(Duration::Micros(40)), 1);  // within 64 ticks: exact
  EXPECT_EQ(w.NextDeadline(), At(Duration::Micros(40)));
  w.Schedule(At(Duration::Nanos(30500)), 2);  // rounds up to 31 us
  EXPECT_EQ(w.NextDeadline(), At(Duration::Micros(31)));
  TimerWheel far(kStart, kTick);
  far.Schedule(At(Duration::Millis(100)), 1);  // level 2, yet exact: one timer
  EXPECT_EQ(far.NextDeadline(), At(Duration::Millis(100)));
}

// A far bucket of one chunk (<= 16 timers) answers its earliest timer, not the
// tick at which it must be cascaded; a larger one may answer the cascade.
TEST(TimerWheelTest, NextDeadlineOfAFarBucketIsItsEarliestTimerUpTo16) {
  TimerWheel w(kStart, kTick);
  // 70,000..70,015 us: one level-2 bucket (65,536 us wide at a 1 us tick).
  for (int i = 15; i >= 0; --i) w.Schedule(At(Duration::Micros(70000 + i)), i);
  EXPECT_EQ(w.NextDeadline(), At(Duration::Micros(70000)));
  w.Schedule(At(Duration::Micros(70100)), 16);  // a 17th: two chunks
  const absl::optional<TimePoint> shared = w.NextDeadline();
  ASSERT_TRUE(shared.has_value());
  EXPECT_LE(*shared, At(Duration::Micros(70000)));
}

// Few timers at every level, from random current times: each NextDeadline is
// the earliest pending timer's firing time, so driving the wheel by it wakes
// exactly once per distinct firing time (no wake for a cascade).
TEST(TimerWheelTest, FewTimersWakeOnlyWhenOneFires) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next_random = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int round = 0; round < 200; ++round) {
    TimerWheel w(kStart, kTick);
    const TimePoint base =
        At(Duration::Micros(static_cast<int64_t>(next_random() % (uint64_t{1} << 36))));
    w.Advance(base, [](TimerHandle, uint64_t) {});
    std::vector<TimePoint> deadlines;
    const int n = 1 + static_cast<int>(next_random() % 16);
    for (int i = 0; i < n; ++i) {
      const int bits = 1 + static_cast<int>(next_random() % 39);  // levels 0..4
      const Duration d =
          Duration::Micros(1 + static_cast<int64_t>(next_random() % (uint64_t{1} << bits)));
      deadlines.push_back(base + d);
      w.Schedule(base + d, static_cast<uint64_t>(i));
    }
    std::sort(deadlines.begin(), deadlines.end());
    const size_t distinct =
        std::unique(deadlines.begin(), deadlines.end()) - deadlines.begin();
    size_t wakes = 0;
    size_t fired = 0;
    while (absl::optional<TimePoint> next = w.NextDeadline()) {
      ASSERT_LT(wakes, distinct) << "round " << round;
      ASSERT_EQ(*next, deadlines[wakes]) << "round " << round << ", wake " << wakes;
      ++wakes;
      const size_t before = fired;
      w.Advance(*next, [&](TimerHandle, uint64_t) { ++fired; });
      ASSERT_GT(fired, before) << "round " << round << ": a wake fired nothing";
    }
    EXPECT_EQ(wakes, distinct);
    EXPECT_EQ(fired, static_cast<size_t>(n));
  }
}

// Drives the wheel the way a runtime would (sleep until NextDeadline, Advance)
// over timers from one tick to beyond the 2^48-tick ring, and checks that each
// fires exactly at its deadline and that few wake-ups are wasted.
TEST(TimerWheelTest, RangeFromOneTickToYearsViaNextDeadline) {
  TimerWheel w(kStart, kTick);
  const std::vector<Duration> delays = {
      Duration::Micros(1),        Duration::Micros(63),
      Duration::Micros(64),       Duration::Micros(65),
      Duration::Millis(1),        Duration::Millis(262),
      Duration::Seconds(4),       Duration::Seconds(3600),
      Duration::Seconds(86400),   Duration::Seconds(30 * 86400),
      // 2^48 us is ~8.9 years: these start in the overflow list.
      Duration::Seconds(int64_t{10} * 365 * 86400),
      Duration::Seconds(int64_t{40} * 365 * 86400),
  };
  for (size_t i = 0; i < delays.size(); ++i) w.Schedule(At(delays[i]), i);
  w.Schedule(TimePoint::Infinite(), 999);
  std::vector<uint64_t> fired;
  int wakeups = 0;
  while (fired.size() < delays.size()) {
    const absl::optional<TimePoint> next = w.NextDeadline();
    ASSERT_TRUE(next.has_value());
    ASSERT_LE(*next, At(delays[fired.size()]));
    ++wakeups;
    w.Advance(*next, [&](TimerHandle, uint64_t p) {
      EXPECT_EQ(w.now(), At(delays[p])) << p;
      fired.push_back(p);
    });
  }
  EXPECT_THAT(fired, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  EXPECT_LE(wakeups, static_cast<int>(delays.size()) *
                         (TimerWheel::kLevels + 2));
  EXPECT_EQ(w.size(), 1u);  // the infinite one
}

TEST(TimerWheelTest, HugeJumpFiresEverythingInTickOrder) {
  // 1 ns ticks: a jump of 10 hours is 3.6e13 ticks; a per-tick walk would
  // never finish.
  TimerWheel w(kStart, Duration::Nanos(1));
  uint64_t x = 88172645463325252ull;
  for (uint64_t i = 0; i < 20000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const int64_t delay = static_cast<int64_t>(x % (int64_t{9} * 3600 * 1000000000));
    w.Schedule(kStart + Duration::Nanos(delay), static_cast<uint64_t>(delay));
  }
  uint64_t last = 0;
  size_t count = 0;
  w.Advance(At(Duration::Seconds(10 * 3600)), [&](TimerHandle, uint64_t p) {
    EXPECT_GE(p, last);
    last = p;
    ++count;
  });
  EXPECT_EQ(count, 20000u);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.NextDeadline(), absl::nullopt);
}

TEST(TimerWheelTest, CallbacksMayCancelScheduleAndRescheduleReentrantly) {
  TimerWheel w(kStart, kTick);
  TimerHandle same_tick[4];
  for (int i = 0; i < 4; ++i) {
    same_tick[i] = w.Schedule(At(Duration::Micros(100)), 10 + i);
  }
  const TimerHandle later = w.Schedule(At(Duration::Micros(150)), 20);
  std::vector<uint64_t> fired;
  bool first = true;
  w.Advance(At(Duration::Micros(200)), [&](TimerHandle h, uint64_t p) {
    fired.push_back(p);
    EXPECT_FALSE(w.Cancel(h));  // the firing timer is no longer pending
    if (first) {
      first = false;
      // Cancel every other timer of this tick that has not fired yet.
      for (const TimerHandle& t : same_tick) {
        if (!(t == h)) w.Cancel(t);
      }
      // Due within this Advance: fires in it.
      w.Schedule(At(Duration::Micros(180)), 30);
      w.Schedule(At(Duration::Micros(50)), 31);  // already past
      // Beyond `now`: stays pending.
      w.Schedule(At(Duration::Micros(201)), 32);
      EXPECT_TRUE(w.Reschedule(later, At(Duration::Micros(300))));
    }
  });
  ASSERT_FALSE(fired.empty());
  EXPECT_GE(fired[0], 10u);
  EXPECT_LE(fired[0], 13u);
  EXPECT_THAT(std::vector<uint64_t>(fired.begin() + 1, fired.end()),
              UnorderedElementsAre(30, 31));
  EXPECT_EQ(w.size(), 2u);
  EXPECT_THAT(Fire(w, At(Duration::Micros(300))), ElementsAre(32, 20));
}

TEST(TimerWheelTest, NoAllocationInSteadyStateAfterReserve) {
  TimerWheel w(kStart, kTick);
  w.Reserve(30000);
  std::vector<TimerHandle> handles;
  handles.reserve(5000);
  std::vector<uint64_t> fired;
  fired.reserve(5000);
  int64_t allocations;
  {
    g_allocations = 0;
    g_count_allocations = true;
    for (int round = 0; round < 20; ++round) {
      handles.clear();
      for (int i = 0; i < 2500; ++i) {
        handles.push_back(
            w.Schedule(At(Duration::Micros(round * 1000 + (i * 7919) % 5000)), i));
      }
      for (int i = 0; i < 2500; i += 3) w.Cancel(handles[i]);
      for (int i = 1; i < 2500; i += 5) {
        w.Reschedule(handles[i], At(Duration::Micros(round * 1000 + 20000)));
      }
      fired.clear();
      w.Advance(At(Duration::Micros(round * 1000 + 1000)),
                [&](TimerHandle, uint64_t p) { fired.push_back(p); });
    }
    g_count_allocations = false;
    allocations = g_allocations;
  }
  EXPECT_EQ(allocations, 0);
  EXPECT_GT(w.size(), 5000u);
  EXPECT_LE(w.size(), 30000u);
}

TEST(TimerWheelTest, OddTickLengthsRoundUp) {
  TimerWheel w(TimePoint::FromNanos(5), Duration::Nanos(7));
  w.Schedule(TimePoint::FromNanos(5 + 15), 1);  // ceil(15 / 7) = 3 ticks = 26
  w.Schedule(TimePoint::FromNanos(5 + 14), 2);  // exactly 2 ticks = 19
  EXPECT_EQ(w.NextDeadline(), TimePoint::FromNanos(19));
  EXPECT_THAT(Fire(w, TimePoint::FromNanos(18)), IsEmpty());
  EXPECT_THAT(Fire(w, TimePoint::FromNanos(19)), ElementsAre(2));
  EXPECT_THAT(Fire(w, TimePoint::FromNanos(25)), IsEmpty());
  EXPECT_THAT(Fire(w, TimePoint::FromNanos(26)), ElementsAre(1));
}

}  // namespace
}  // namespace uscm::mad

namespace uscm::mad {
namespace {

// The bucket array is allocated only when more than kSparseBuckets buckets
// are non-empty: a wheel that never held a timer (an idle simulated host has
// two), or a few, stays small.
TEST(TimerWheelMemoryTest, AnUnusedWheelIsSmall) {
  // Seven cache lines with its 16-record bucket table; the bitmap (200 B) comes
  // with the bucket array.
  static_assert(sizeof(TimerWheel) == 448 && alignof(TimerWheel) == 64);
  TimerWheel w(TimePoint::Epoch(), Duration::Micros(1));
  EXPECT_EQ(w.NextDeadline(), absl::nullopt);
  EXPECT_EQ(w.Advance(TimePoint::Epoch() + Duration::Seconds(5), [](TimerHandle, uint64_t) {}),
            0u);
  EXPECT_FALSE(w.Cancel(TimerHandle()));
  TimerHandle h = w.Schedule(TimePoint::Epoch() + Duration::Seconds(6), 7);
  EXPECT_TRUE(w.IsPending(h));
  EXPECT_EQ(w.NextDeadline(), TimePoint::Epoch() + Duration::Seconds(6));
}

}  // namespace
}  // namespace uscm::mad
