// Randomized differential test: TimerWheel against an ordered reference model
// (std::set keyed by the rounded-up firing tick). At every Advance both must
// fire the same set of timers, no timer may fire before its deadline, and none
// may fire more than one tick after it.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/types/optional.h"
#include "gtest/gtest.h"
#include "mad/time.h"
#include "mad/timer_wheel.h"

namespace uscm::mad {
namespace {

// The reference: the documented semantics, written the obvious way.
class ReferenceTimers {
 public:
  ReferenceTimers(TimePoint start, Duration tick)
      : start_(start.nanos()), tick_(tick.nanos()) {}

  // ceil((deadline - start) / tick), 0 for deadlines at or before start.
  uint64_t FiringTick(TimePoint deadline) const {
    if (deadline.nanos() <= start_) return 0;
    const __int128 off = static_cast<__int128>(deadline.nanos()) - start_;
    return static_cast<uint64_t>((off + tick_ - 1) / tick_);
  }
  uint64_t FloorTick(TimePoint t) const {
    if (t.nanos() <= start_) return 0;
    return static_cast<uint64_t>((static_cast<__int128>(t.nanos()) - start_) /
                                 tick_);
  }
  TimePoint TickTime(uint64_t tick) const {
    const __int128 ns = static_cast<__int128>(start_) +
                        static_cast<__int128>(tick) * tick_;
    return ns >= INT64_MAX ? TimePoint::Infinite()
                           : TimePoint::FromNanos(static_cast<int64_t>(ns));
  }

  void Schedule(uint64_t id, TimePoint deadline) {
    const uint64_t t = FiringTick(deadline);
    queue_.emplace(t, id);
    live_[id] = {t, deadline};
  }
  bool Cancel(uint64_t id) {
    auto it = live_.find(id);
    if (it == live_.end()) return false;
    queue_.erase({it->second.first, id});
    live_.erase(it);
    return true;
  }
  bool Contains(uint64_t id) const { return live_.count(id) != 0; }
  TimePoint DeadlineOf(uint64_t id) const { return live_.at(id).second; }
  size_t size() const { return live_.size(); }
  absl::optional<uint64_t> EarliestTick() const {
    if (queue_.empty()) return absl::nullopt;
    return queue_.begin()->first;
  }

  // Pops every timer due by `now`; `spawn(id)` may schedule more.
  template <typename Spawn>
  std::vector<uint64_t> Advance(TimePoint now, Spawn spawn) {
    now_tick_ = std::max(now_tick_, FloorTick(now));
    std::vector<uint64_t> fired;
    while (!queue_.empty() && queue_.begin()->first <= now_tick_) {
      const uint64_t id = queue_.begin()->second;
      queue_.erase(queue_.begin());
      live_.erase(id);
      fired.push_back(id);
      spawn(id);
    }
    return fired;
  }

 private:
  int64_t start_;
  int64_t tick_;
  uint64_t now_tick_ = 0;
  std::set<std::pair<uint64_t, uint64_t>> queue_;
  std::unordered_map<uint64_t, std::pair<uint64_t, TimePoint>> live_;
};

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer: a bijection
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Sanitizer builds run fewer operations; native runs keep >= 1M in total.
int64_t OpsScale() {
#if defined(__SANITIZE_ADDRESS__)
  return 4;
#else
  return 1;
#endif
}

struct Config {
  std::string name;
  TimePoint start;
  Duration tick;
  int64_t ops;
};

class Driver {
 public:
  explicit Driver(const Config& c, uint64_t seed)
      : cfg_(c), wheel_(c.start, c.tick), ref_(c.start, c.tick), rng_(seed),
        now_(c.start) {}

  void Run() {
    for (int64_t op = 0; op < cfg_.ops && !::testing::Test::HasFailure(); ++op) {
      const int r = Uniform(0, 99);
      piling_up_ = op < cfg_.ops * 4 / 10;
      if (r < 40) {
        ScheduleNew();
      } else if (r < 50) {
        CancelLive();
      } else if (r < 53) {
        CancelStale();
      } else if (r < 60) {
        RescheduleLive();
      } else if (r < 94 || piling_up_) {
        // The first 40% only creeps forward so that many timers pile up.
        AdvanceBy(SmallStep());
      } else if (r < 98) {
        AdvanceBy(BigStep());
      } else {
        AdvanceToNextDeadline();
      }
      ASSERT_EQ(wheel_.size(), ref_.size()) << "op " << op;
      max_pending_ = std::max(max_pending_, wheel_.size());
    }
    // Drain: a final jump past every finite deadline (at most 2^61 ns ahead).
    AdvanceBy(Duration::Nanos(int64_t{1} << 61));
    EXPECT_EQ(wheel_.size(), ref_.size());
  }

  size_t max_pending() const { return max_pending_; }
  int64_t fired() const { return fired_total_; }

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  int64_t Ticks(int64_t n) const { return n * cfg_.tick.nanos(); }

  // Deadlines across every scale the wheel handles, plus the edge cases.
  TimePoint RandomDeadline() {
    const int r = Uniform(0, 99);
    int64_t d;
    if (r < 8) {
      d = -Uniform(0, Ticks(1000));  // past or now
    } else if (r < 40) {
      d = Uniform(0, Ticks(70));  // level 0 and its edge
    } else if (r < 60) {
      d = Uniform(0, Ticks(5000));
    } else if (r < 80) {
      d = Uniform(0, Ticks(int64_t{1} << 24));
    } else if (r < 95) {
      d = Uniform(0, int64_t{86400} * 1000000000);  // up to a day
    } else if (r < 99) {
      // Around and beyond the 2^48-tick ring (overflow list).
      const int64_t cap = cfg_.tick.nanos() >= (1 << 11)
                              ? int64_t{1} << 61
                              : Ticks(int64_t{1} << 50);
      d = Uniform(0, cap);
    } else {
      return TimePoint::Infinite();
    }
    if (d > 0 && now_.nanos() > INT64_MAX - d) return TimePoint::Infinite();
    return now_ + Duration::Nanos(d);
  }

  Duration SmallStep() {
    return Duration::Nanos(Uniform(0, Uniform(0, 1) ? Ticks(3) : Ticks(200)));
  }
  Duration BigStep() {
    // Keeps the whole run within ~200 years of int64 nanoseconds.
    const int r = Uniform(0, 999);
    if (r < 600) return Duration::Nanos(Uniform(0, Ticks(int64_t{1} << 26)));
    if (r < 999) {
      return Duration::Nanos(Uniform(0, int64_t{10} * 3600 * 1000000000));
    }
    return Duration::Nanos(Uniform(0, int64_t{3} * 365 * 86400 * 1000000000));
  }

  void ScheduleNew() {
    const uint64_t id = next_id_++;
    const TimePoint d = RandomDeadline();
    AddTimer(id, d);
  }

  void AddTimer(uint64_t id, TimePoint deadline) {
    handles_[id] = wheel_.Schedule(deadline, id);
    ref_.Schedule(id, deadline);
    info_[id] = {deadline, advances_};
    live_ids_.push_back(id);
  }

  // Picks a live id (lazily pruning fired/cancelled ones from live_ids_):
  // often one of the newest, as a CM answer cancels a recent timer.
  absl::optional<uint64_t> PickLive() {
    const bool recent = piling_up_ || Uniform(0, 1) == 0;
    while (!live_ids_.empty()) {
      const int64_t n = static_cast<int64_t>(live_ids_.size());
      const size_t i = static_cast<size_t>(
          recent ? Uniform(std::max<int64_t>(0, n - 64), n - 1)
                 : Uniform(0, n - 1));
      const uint64_t id = live_ids_[i];
      if (ref_.Contains(id)) return id;
      live_ids_[i] = live_ids_.back();
      live_ids_.pop_back();
    }
    return absl::nullopt;
  }

  void CancelLive() {
    const absl::optional<uint64_t> id = PickLive();
    if (!id) return;
    const TimerHandle h = handles_.at(*id);
    ASSERT_TRUE(wheel_.IsPending(h));
    ASSERT_TRUE(wheel_.Cancel(h)) << "id " << *id;
    ASSERT_TRUE(ref_.Cancel(*id));
    info_.erase(*id);
    Retire(*id);
  }

  void CancelStale() {
    if (stale_.empty()) return;
    const TimerHandle h =
        stale_[static_cast<size_t>(Uniform(0, static_cast<int64_t>(stale_.size()) - 1))];
    ASSERT_FALSE(wheel_.IsPending(h));
    ASSERT_FALSE(wheel_.Cancel(h));
    ASSERT_FALSE(wheel_.Reschedule(h, now_));
  }

  void RescheduleLive() {
    const absl::optional<uint64_t> id = PickLive();
    if (!id) return;
    const TimePoint d = RandomDeadline();
    ASSERT_TRUE(wheel_.Reschedule(handles_.at(*id), d));
    ref_.Cancel(*id);
    ref_.Schedule(*id, d);
    info_[*id] = {d, advances_};
  }

  void Retire(uint64_t id) {
    auto it = handles_.find(id);
    if (stale_.size() < 4096) {
      stale_.push_back(it->second);
    } else {
      stale_[static_cast<size_t>(Uniform(0, 4095))] = it->second;
    }
    handles_.erase(it);
  }

  // Some fired timers schedule a child, as a CM retry would: decided by the id
  // alone so the wheel and the model (which fire in different orders within a
  // tick) spawn the same children. Some children are already due.
  bool Spawns(uint64_t id) const { return Mix(id) % 5 == 0; }
  TimePoint ChildDeadline(uint64_t id, TimePoint now) const {
    const int64_t delta = static_cast<int64_t>(Mix(id ^ 0x5555) % 400) - 100;
    return now + Duration::Nanos(Ticks(delta));
  }

  void AdvanceBy(Duration step) {
    if (static_cast<__int128>(now_.nanos()) + step.nanos() >= INT64_MAX) {
      AdvanceTo(TimePoint::FromNanos(INT64_MAX - 1));
    } else {
      AdvanceTo(now_ + step);
    }
  }

  void AdvanceToNextDeadline() {
    const absl::optional<TimePoint> next = wheel_.NextDeadline();
    const absl::optional<uint64_t> earliest = ref_.EarliestTick();
    ASSERT_EQ(next.has_value(), earliest.has_value());
    if (!next) return;
    // Never later than the earliest pending timer's firing tick, or the
    // current tick when a timer is already due.
    ASSERT_LE(*next, std::max(ref_.TickTime(*earliest), wheel_.now()));
    // Jump there unless only a far (overflow or infinite) timer is left, which
    // would end the useful part of the run.
    if (*next - now_ < Duration::Seconds(int64_t{10} * 86400)) {
      AdvanceTo(std::max(*next, now_));
    }
  }

  void AdvanceTo(TimePoint now) {
    const TimePoint prev = now_;
    now_ = std::max(now_, now);
    ++advances_;
    std::vector<uint64_t> wheel_fired;
    wheel_.Advance(now_, [&](TimerHandle h, uint64_t id) {
      wheel_fired.push_back(id);
      EXPECT_FALSE(wheel_.IsPending(h));
      if (Spawns(id)) {
        const uint64_t child = Mix(id);
        wheel_children_.emplace_back(
            child, wheel_.Schedule(ChildDeadline(id, now_), child));
      }
    });
    const std::vector<uint64_t> ref_fired = ref_.Advance(now_, [&](uint64_t id) {
      if (!Spawns(id)) return;
      const TimePoint d = ChildDeadline(id, now_);
      ref_.Schedule(Mix(id), d);
      // First chance to fire: this Advance.
      info_[Mix(id)] = {d, advances_ - 1};
    });
    std::sort(wheel_fired.begin(), wheel_fired.end());
    std::vector<uint64_t> sorted_ref = ref_fired;
    std::sort(sorted_ref.begin(), sorted_ref.end());
    ASSERT_EQ(wheel_fired, sorted_ref)
        << cfg_.name << ": advance " << (prev - cfg_.start).nanos() << " -> "
        << (now_ - cfg_.start).nanos() << " ns";
    for (const auto& [child, handle] : wheel_children_) {
      handles_[child] = handle;
      live_ids_.push_back(child);
    }
    wheel_children_.clear();
    for (uint64_t id : ref_fired) {
      auto it = info_.find(id);
      ASSERT_NE(it, info_.end()) << id;
      CheckFiringTime(id, it->second, prev);
      info_.erase(it);
      Retire(id);
    }
    fired_total_ += static_cast<int64_t>(ref_fired.size());
  }

  struct Info {
    TimePoint deadline;
    int64_t scheduled_after_advance;  // the number of Advances done by then
  };

  // Never early (deadline <= now); never more than a tick late: the firing
  // tick is < deadline + tick, and no earlier Advance that could have fired it
  // reached the firing tick.
  void CheckFiringTime(uint64_t id, const Info& info, TimePoint prev) {
    const TimePoint firing = ref_.TickTime(ref_.FiringTick(info.deadline));
    EXPECT_LE(info.deadline, now_) << "fired early: id " << id;
    EXPECT_LE(firing, now_) << "id " << id;
    if (info.deadline > cfg_.start) {
      EXPECT_GE(firing, info.deadline) << "id " << id;
      EXPECT_LT(firing - info.deadline, cfg_.tick) << "id " << id;
    }
    if (info.scheduled_after_advance + 1 < advances_) {
      EXPECT_LT(prev, firing) << "fired late: id " << id;
    }
  }

  Config cfg_;
  TimerWheel wheel_;
  ReferenceTimers ref_;
  std::mt19937_64 rng_;
  TimePoint now_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, TimerHandle> handles_;
  std::unordered_map<uint64_t, Info> info_;
  int64_t advances_ = 0;
  std::vector<uint64_t> live_ids_;
  std::vector<TimerHandle> stale_;
  std::vector<std::pair<uint64_t, TimerHandle>> wheel_children_;
  bool piling_up_ = false;
  size_t max_pending_ = 0;
  int64_t fired_total_ = 0;
};

TEST(TimerWheelDiffTest, MicrosecondTick1MOps) {
  Driver d({"1us", TimePoint::FromNanos(123456789), Duration::Micros(1),
            1000000 / OpsScale()},
           1);
  d.Run();
  EXPECT_GT(d.fired(), 100000 / OpsScale());
  EXPECT_GT(d.max_pending(), 10000u / OpsScale());
}

TEST(TimerWheelDiffTest, NanosecondTick) {
  Driver d({"1ns", TimePoint::Epoch(), Duration::Nanos(1), 250000 / OpsScale()},
           2);
  d.Run();
  EXPECT_GT(d.fired(), 10000 / OpsScale());
}

TEST(TimerWheelDiffTest, OddTickLateEpoch) {
  // A 7 ns tick and a start far along the clock (the real clock's epoch is
  // boot, the simulator's may be anything).
  Driver d({"7ns", TimePoint::FromNanos(int64_t{1} << 55), Duration::Nanos(7),
            250000 / OpsScale()},
           3);
  d.Run();
  EXPECT_GT(d.fired(), 10000 / OpsScale());
}

TEST(TimerWheelDiffTest, MillisecondTick) {
  Driver d({"1ms", TimePoint::FromNanos(-5000), Duration::Millis(1),
            250000 / OpsScale()},
           4);
  d.Run();
  EXPECT_GT(d.fired(), 10000 / OpsScale());
}

// One million pending timers over a day, drained in random jumps: the same
// timers fire at each jump as a sorted list says.
TEST(TimerWheelDiffTest, MillionPending) {
  const int64_t n = 1000000 / OpsScale();
  const TimePoint start = TimePoint::FromNanos(42);
  TimerWheel w(start, Duration::Micros(1));
  w.Reserve(static_cast<size_t>(n));
  ReferenceTimers ref(start, Duration::Micros(1));
  std::mt19937_64 rng(5);
  std::vector<std::pair<uint64_t, uint64_t>> expected;  // (firing tick, id)
  expected.reserve(static_cast<size_t>(n));
  const int64_t day = int64_t{86400} * 1000000000;
  for (int64_t i = 0; i < n; ++i) {
    const TimePoint d =
        start + Duration::Nanos(static_cast<int64_t>(rng() % static_cast<uint64_t>(day)));
    w.Schedule(d, static_cast<uint64_t>(i));
    expected.emplace_back(ref.FiringTick(d), static_cast<uint64_t>(i));
  }
  ASSERT_EQ(w.size(), static_cast<size_t>(n));
  std::sort(expected.begin(), expected.end());
  size_t next = 0;
  TimePoint now = start;
  std::vector<uint64_t> fired;
  while (next < expected.size()) {
    now += Duration::Nanos(static_cast<int64_t>(rng() % (day / 50)));
    fired.clear();
    w.Advance(now, [&](TimerHandle, uint64_t id) { fired.push_back(id); });
    std::vector<uint64_t> want;
    const uint64_t now_tick = ref.FloorTick(now);
    while (next < expected.size() && expected[next].first <= now_tick) {
      want.push_back(expected[next++].second);
    }
    std::sort(fired.begin(), fired.end());
    std::sort(want.begin(), want.end());
    ASSERT_EQ(fired, want);
    ASSERT_EQ(w.size(), expected.size() - next);
  }
  EXPECT_TRUE(w.empty());
}

}  // namespace
}  // namespace uscm::mad
