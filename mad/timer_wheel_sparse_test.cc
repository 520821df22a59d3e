// The bucket records of a wheel with few non-empty buckets live in a small
// table inside the wheel; past kSparseBuckets they move to the array for good
// (mad/timer_wheel.h). Where a record lives must change nothing: a wheel that
// starts sparse fires exactly what a wheel given the array from the start
// (Reserve) fires, in the same order, ties within a tick included (the
// simulator's results depend on that order).
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "mad/time.h"
#include "mad/timer_wheel.h"

namespace uscm::mad {
namespace {

struct Fired {
  int64_t advance;
  uint64_t payload;
  bool operator==(const Fired&) const = default;
};

// Drives two wheels through the same operations and records what fires.
class Twins {
 public:
  Twins()
      : sparse_(TimePoint::Epoch(), Duration::Micros(1)),
        dense_(TimePoint::Epoch(), Duration::Micros(1)) {
    dense_.Reserve(1);
  }

  void Schedule(Duration from_now, uint64_t payload) {
    const TimePoint d = now_ + from_now;
    handles_.push_back({sparse_.Schedule(d, payload), dense_.Schedule(d, payload)});
  }
  void Cancel(size_t i) {
    EXPECT_EQ(sparse_.Cancel(handles_[i].first), dense_.Cancel(handles_[i].second));
  }
  void Reschedule(size_t i, Duration from_now) {
    EXPECT_EQ(sparse_.Reschedule(handles_[i].first, now_ + from_now),
              dense_.Reschedule(handles_[i].second, now_ + from_now));
  }
  void Advance(Duration by) {
    now_ = now_ + by;
    ++advances_;
    EXPECT_EQ(sparse_.NextDeadline(), dense_.NextDeadline());
    // A fired timer sometimes schedules another (as a CM retry does), some
    // of them due at once, so callbacks change the buckets mid-Advance.
    auto run = [this](TimerWheel& w, std::vector<Fired>& out) {
      w.Advance(now_, [&](TimerHandle, uint64_t payload) {
        out.push_back({advances_, payload});
        if (payload % 3 == 0) w.Schedule(now_ + Duration::Micros(payload % 700), payload + 1);
      });
    };
    run(sparse_, sparse_fired_);
    run(dense_, dense_fired_);
    EXPECT_EQ(sparse_.size(), dense_.size());
  }

  size_t handles() const { return handles_.size(); }
  const TimerWheel& sparse() const { return sparse_; }
  const std::vector<Fired>& sparse_fired() const { return sparse_fired_; }
  const std::vector<Fired>& dense_fired() const { return dense_fired_; }

 private:
  TimerWheel sparse_;
  TimerWheel dense_;
  TimePoint now_ = TimePoint::Epoch();
  int64_t advances_ = 0;
  std::vector<std::pair<TimerHandle, TimerHandle>> handles_;
  std::vector<Fired> sparse_fired_, dense_fired_;
};

// Deadlines from a handful of values, so that many timers share a tick
// (ties) and a bucket, on every level.
Duration Deadline(std::mt19937_64& rng) {
  static constexpr int64_t kMicros[] = {0, 1, 3, 200, 255, 256, 300, 5000, 70000, 300000};
  const int64_t base = kMicros[rng() % (sizeof(kMicros) / sizeof(kMicros[0]))];
  return Duration::Micros(base + static_cast<int64_t>(rng() % 3));
}

// Random schedules (deadlines from `deadline`), cancels, reschedules and
// advances (up to `max_step`), then up to ten advances by `drain` to fire
// the rest.
void RunRandom(uint64_t seed, int max_pending, Twins& t,
               Duration (*deadline)(std::mt19937_64&) = Deadline,
               Duration max_step = Duration::Micros(400), int ops = 20000,
               Duration drain = Duration::Seconds(1)) {
  std::mt19937_64 rng(seed);
  for (int op = 0; op < ops && !::testing::Test::HasFailure(); ++op) {
    const int r = static_cast<int>(rng() % 100);
    if (r < 35 && t.sparse().size() < static_cast<size_t>(max_pending)) {
      t.Schedule(deadline(rng), rng());
    } else if (r < 45 && t.handles() > 0) {
      t.Cancel(rng() % t.handles());
    } else if (r < 55 && t.handles() > 0) {
      t.Reschedule(rng() % t.handles(), deadline(rng));
    } else {
      t.Advance(Duration::Micros(static_cast<int64_t>(
          rng() % static_cast<uint64_t>(max_step.nanos() / 1000))));
    }
  }
  // Children of the last timers are due after the last Advance's time.
  for (int i = 0; i < 10 && t.sparse().size() > 0; ++i) t.Advance(drain);
  EXPECT_EQ(t.sparse().size(), 0u);
}

TEST(TimerWheelSparseTest, FewBucketsFireAsTheArrayInTheSameOrder) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Twins t;
    // Fewer pending timers than table entries: the table never fills up.
    RunRandom(seed, TimerWheel::kSparseBuckets, t);
    EXPECT_FALSE(t.sparse().uses_bucket_array()) << "seed " << seed;
    ASSERT_EQ(t.sparse_fired(), t.dense_fired()) << "seed " << seed;
    EXPECT_GT(t.sparse_fired().size(), 1000u);
  }
}

// A sparse wheel keeps no occupancy bitmap: its overflow bucket (timers more
// than 2^48 ticks ahead, ~8.9 years at 1 us) is known from the level summary
// alone, and its earliest timer must still be tracked as the array's is.
TEST(TimerWheelSparseTest, OverflowTimersFireAsTheArray) {
  auto far = [](std::mt19937_64& rng) {
    static constexpr int64_t kSeconds[] = {0, 1, 5, 86400, int64_t{10} * 365 * 86400,
                                           int64_t{12} * 365 * 86400,
                                           int64_t{20} * 365 * 86400};
    const int64_t base = kSeconds[rng() % (sizeof(kSeconds) / sizeof(kSeconds[0]))];
    return Duration::Seconds(base) + Duration::Micros(static_cast<int64_t>(rng() % 3));
  };
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Twins t;
    // ~70 years of steps up to a year, then up to 30 more: virtual time
    // stays far from TimePoint's 292 years.
    const Duration year = Duration::Seconds(int64_t{365} * 86400);
    RunRandom(seed, TimerWheel::kSparseBuckets / 2, t, +far, year, 300,
              Duration::Seconds(int64_t{3} * 365 * 86400));
    EXPECT_FALSE(t.sparse().uses_bucket_array()) << "seed " << seed;
    ASSERT_EQ(t.sparse_fired(), t.dense_fired()) << "seed " << seed;
    EXPECT_GT(t.sparse_fired().size(), 30u);
  }
}

TEST(TimerWheelSparseTest, MovingToTheArrayMidRunKeepsTheOrder) {
  for (uint64_t seed = 100; seed <= 110; ++seed) {
    Twins t;
    RunRandom(seed, 200, t);
    EXPECT_TRUE(t.sparse().uses_bucket_array()) << "seed " << seed;
    ASSERT_EQ(t.sparse_fired(), t.dense_fired()) << "seed " << seed;
  }
}

TEST(TimerWheelSparseTest, TheArrayComesWithTheBucketPastTheTable) {
  TimerWheel w(TimePoint::Epoch(), Duration::Micros(1));
  // One timer per level-0 bucket: kSparseBuckets buckets fit the table.
  for (int i = 1; i <= TimerWheel::kSparseBuckets; ++i) {
    w.Schedule(TimePoint::Epoch() + Duration::Micros(i), static_cast<uint64_t>(i));
  }
  w.Schedule(TimePoint::Epoch() + Duration::Micros(1), 99);  // a bucket already held
  EXPECT_FALSE(w.uses_bucket_array());
  w.Schedule(TimePoint::Epoch() + Duration::Micros(TimerWheel::kSparseBuckets + 1), 100);
  EXPECT_TRUE(w.uses_bucket_array());
  std::vector<uint64_t> fired;
  w.Advance(TimePoint::Epoch() + Duration::Seconds(1),
            [&](TimerHandle, uint64_t p) { fired.push_back(p); });
  EXPECT_EQ(fired.size(), TimerWheel::kSparseBuckets + 2u);
}

}  // namespace
}  // namespace uscm::mad
