#include "mad/sim/scheduler.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::sim {
namespace {

using ::testing::ElementsAre;

TimePoint At(int64_t us) { return TimePoint::Epoch() + Duration::Micros(us); }

TEST(RngTest, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(42), b(42), c(43);
  std::vector<uint64_t> va, vb, vc;
  for (int i = 0; i < 8; ++i) {
    va.push_back(a.Next());
    vb.push_back(b.Next());
    vc.push_back(c.Next());
  }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
}

TEST(RngTest, PinnedValuesAreTheSameOnEveryPlatform) {
  // mt19937_64 is fully specified by the standard (10000th output of the
  // default seed is 9981545732273789042); our distributions are ours.
  std::mt19937_64 reference;
  reference.discard(9999);
  EXPECT_EQ(reference(), 9981545732273789042ULL);
  Rng r(5489);  // mt19937_64's default seed
  Rng again(5489);
  EXPECT_EQ(r.Below(1000), again.Below(1000));
}

TEST(RngTest, BelowStaysInRangeAndCoversIt) {
  Rng r(1);
  std::vector<int> hits(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const uint64_t v = r.Below(7);
    ASSERT_LT(v, 7u);
    hits[v]++;
  }
  for (int h : hits) EXPECT_NEAR(h, 1000, 150);
}

TEST(RngTest, BernoulliRateAndEdges) {
  Rng r(7);
  int yes = 0;
  for (int i = 0; i < 10000; ++i) yes += r.Bernoulli(0.25) ? 1 : 0;
  EXPECT_NEAR(yes, 2500, 200);
  Rng zero(7), copy(7);
  EXPECT_FALSE(zero.Bernoulli(0));
  EXPECT_TRUE(zero.Bernoulli(1));
  // p = 0 and p = 1 draw nothing: the streams stay aligned.
  EXPECT_EQ(zero.Next(), copy.Next());
}

TEST(RngTest, UpToIsInclusiveAndZeroForNonPositive) {
  Rng r(3);
  EXPECT_EQ(r.UpTo(Duration::Zero()), Duration::Zero());
  EXPECT_EQ(r.UpTo(Duration::Nanos(-5)), Duration::Zero());
  bool saw_max = false;
  for (int i = 0; i < 1000; ++i) {
    const Duration d = r.UpTo(Duration::Nanos(3));
    ASSERT_GE(d, Duration::Zero());
    ASSERT_LE(d, Duration::Nanos(3));
    saw_max = saw_max || d == Duration::Nanos(3);
  }
  EXPECT_TRUE(saw_max);
}

TEST(SchedulerTest, EventsRunInTimeThenSequenceOrder) {
  Scheduler s(1);
  std::vector<std::string> log;
  s.Schedule(At(20), [&] { log.push_back("b@20"); });
  s.Schedule(At(10), [&] { log.push_back("a@10"); });
  s.Schedule(At(20), [&] { log.push_back("c@20"); });
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_THAT(log, ElementsAre("a@10", "b@20", "c@20"));
  EXPECT_EQ(s.Now(), At(20));
}

// Events go to the heap or, when no earlier than the last one there, to the
// sorted tail; the two are merged by (time, sequence), so the order is the
// one of a single heap: checked against a sort, with events scheduled from
// inside events too, runs of equal times and times that go back.
TEST(SchedulerTest, HeapAndSortedTailMergeInTimeThenSequenceOrder) {
  Scheduler s(1);
  Rng rng(7);
  std::vector<std::pair<int64_t, int>> expected, ran;
  int next = 0;
  auto add = [&](int64_t at_ns) {
    const int id = next++;
    expected.push_back({std::max(at_ns, s.Now().nanos()), id});
    s.Schedule(TimePoint::Epoch() + Duration::Nanos(at_ns), [&, id] {
      ran.push_back({s.Now().nanos(), id});
      if (id % 3 == 0 && next < 3000) {
        // From inside: a near one (heap) and a far one (tail, usually).
        const int64_t now = s.Now().nanos();
        for (int64_t at : {now + static_cast<int64_t>(rng.Below(5)),
                           now + 1000 + static_cast<int64_t>(rng.Below(3))}) {
          const int inner = next++;
          expected.push_back({at, inner});
          s.Schedule(TimePoint::Epoch() + Duration::Nanos(at), [&, inner] {
            ran.push_back({s.Now().nanos(), inner});
          });
        }
      }
    });
  };
  for (int i = 0; i < 500; ++i) add(static_cast<int64_t>(i / 4) * 10);  // in order, ties
  for (int i = 0; i < 300; ++i) add(static_cast<int64_t>(rng.Below(2000)));  // any order
  ASSERT_TRUE(s.RunUntilIdle().ok());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ran, expected);
}

TEST(SchedulerTest, PastEventsRunNowAndTimeNeverGoesBack) {
  Scheduler s(1, At(100));
  TimePoint ran;
  s.Schedule(At(5), [&] { ran = s.Now(); });
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(ran, At(100));
}

TEST(SchedulerTest, CancelledEventDoesNotRun) {
  Scheduler s(1);
  int runs = 0;
  const Scheduler::EventId id = s.Schedule(At(1), [&] { runs++; });
  s.Schedule(At(2), [&] { runs += 10; });
  EXPECT_TRUE(s.Cancel(id));
  EXPECT_FALSE(s.Cancel(id));
  EXPECT_EQ(s.pending_events(), 1u);
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(runs, 10);
  EXPECT_FALSE(s.Cancel(12345));
}

TEST(SchedulerTest, RunForStopsAtTheBoundaryAndAdvancesTheClock) {
  Scheduler s(1);
  std::vector<int> log;
  s.Schedule(At(5), [&] { log.push_back(5); });
  s.Schedule(At(10), [&] { log.push_back(10); });
  s.Schedule(At(11), [&] { log.push_back(11); });
  ASSERT_TRUE(s.RunFor(Duration::Micros(10)).ok());
  EXPECT_THAT(log, ElementsAre(5, 10));  // an event exactly at the end runs
  EXPECT_EQ(s.Now(), At(10));
  ASSERT_TRUE(s.RunFor(Duration::Micros(100)).ok());
  EXPECT_THAT(log, ElementsAre(5, 10, 11));
  EXPECT_EQ(s.Now(), At(110));  // idle time still passes
}

TEST(SchedulerTest, RunUntilReportsEachOutcome) {
  Scheduler s(1);
  int n = 0;
  for (int i = 1; i <= 5; ++i) s.Schedule(At(i), [&] { n++; });
  EXPECT_TRUE(s.RunUntil([&] { return n == 3; }).ok());
  EXPECT_EQ(s.Now(), At(3));
  absl::Status late = s.RunUntil([&] { return n == 100; }, At(4));
  EXPECT_TRUE(absl::IsDeadlineExceeded(late)) << late;
  EXPECT_EQ(s.Now(), At(4));
  absl::Status idle = s.RunUntil([&] { return n == 100; });
  EXPECT_TRUE(absl::IsFailedPrecondition(idle)) << idle;
  EXPECT_EQ(n, 5);
}

// An actor that wants to run every `period` until it has run `limit` times.
class Ticker : public Actor {
 public:
  Ticker(std::vector<std::string>* log, std::string name, Duration period, int limit)
      : log_(log), name_(std::move(name)), period_(period), limit_(limit) {}
  absl::optional<TimePoint> NextDeadline() const override {
    if (runs_ == limit_) return absl::nullopt;
    return next_;
  }
  void Wake(TimePoint now) override {
    log_->push_back(name_ + "@" + std::to_string(now.nanos() / 1000));
    runs_++;
    next_ = now + period_;
  }

 private:
  std::vector<std::string>* log_;
  std::string name_;
  Duration period_;
  int limit_;
  int runs_ = 0;
  TimePoint next_;
};

TEST(SchedulerTest, ActorsWakeAtTheirDeadlinesAfterEventsAtTheSameTime) {
  Scheduler s(1);
  std::vector<std::string> log;
  Ticker a(&log, "a", Duration::Micros(10), 3);
  Ticker b(&log, "b", Duration::Micros(15), 2);
  s.AddActor(&a);
  s.AddActor(&b);
  s.Schedule(At(10), [&] { log.push_back("event@10"); });
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_THAT(log, ElementsAre("a@0", "b@0", "event@10", "a@10", "b@15", "a@20"));
}

class Spinner : public Actor {
 public:
  absl::optional<TimePoint> NextDeadline() const override { return TimePoint::Epoch(); }
  void Wake(TimePoint) override { wakes++; }
  int wakes = 0;
};

TEST(SchedulerTest, BoundedStepsCatchALivelock) {
  Scheduler s(1);
  Spinner spin;
  s.AddActor(&spin);
  absl::Status st = s.RunUntilIdle(1000);
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_EQ(spin.wakes, 1000);
  EXPECT_EQ(s.Now(), TimePoint::Epoch());  // a spinning actor never moves time
  absl::Status until = s.RunUntil([] { return false; }, TimePoint::Infinite(), 50);
  EXPECT_TRUE(absl::IsResourceExhausted(until)) << until;
  s.RemoveActor(&spin);
  EXPECT_TRUE(s.RunUntilIdle().ok());
}

// An actor whose deadline an outside event can set (to the past too), as a
// MAD arriving or a user call does.
class Pokeable : public Actor {
 public:
  Pokeable(std::vector<std::string>* log, int id, Duration period, int limit)
      : log_(log), id_(id), period_(period), limit_(limit) {}
  absl::optional<TimePoint> NextDeadline() const override { return next_; }
  void Wake(TimePoint now) override {
    log_->push_back(std::to_string(id_) + "@" + std::to_string(now.nanos()));
    next_ = ++runs_ < limit_ ? absl::optional<TimePoint>(now + period_) : absl::nullopt;
  }
  void Poke(TimePoint at) { next_ = at; }

 private:
  std::vector<std::string>* log_;
  int id_;
  Duration period_;
  int limit_;
  int runs_ = 0;
  absl::optional<TimePoint> next_ = TimePoint::Epoch();
};

// The wake order is (deadline clamped to now, registration order) whether
// actors are polled or notified: a random mix of actors, periods and pokes
// (some into the past, some at the same instant) gives the same log in
// every mode.
std::vector<std::string> RunPokes(uint64_t seed, int mode) {
  Scheduler s(1);
  Rng rng(seed);
  std::vector<std::string> log;
  std::vector<std::unique_ptr<Pokeable>> actors;
  for (int i = 0; i < 12; ++i) {
    actors.push_back(std::make_unique<Pokeable>(
        &log, i, Duration::Nanos(static_cast<int64_t>(1 + rng.Below(5)) * 100),
        static_cast<int>(1 + rng.Below(20))));
    const bool notified = mode == 1 || (mode == 2 && i % 2 == 1);
    s.AddActor(actors.back().get(),
               notified ? DeadlineUpdates::kNotified : DeadlineUpdates::kPolled);
  }
  for (int k = 0; k < 60; ++k) {
    const TimePoint at = TimePoint::Epoch() + Duration::Nanos(
                                                 static_cast<int64_t>(rng.Below(30)) * 100);
    const size_t who = rng.Below(actors.size());
    const int64_t back = static_cast<int64_t>(rng.Below(3)) * 100;
    s.Schedule(at, [&s, &actors, who, back] {
      actors[who]->Poke(s.Now() - Duration::Nanos(back));
      s.DeadlineChanged(actors[who].get());
    });
  }
  // Removing and re-adding puts an actor last in registration order.
  s.Schedule(At(1), [&] {
    s.RemoveActor(actors[0].get());
    s.AddActor(actors[0].get(), mode == 0 ? DeadlineUpdates::kPolled : DeadlineUpdates::kNotified);
  });
  EXPECT_TRUE(s.RunUntilIdle().ok());
  return log;
}

TEST(SchedulerTest, NotifiedActorsWakeInThePolledOrder) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<std::string> polled = RunPokes(seed, 0);
    EXPECT_GT(polled.size(), 20u);
    EXPECT_EQ(RunPokes(seed, 1), polled) << "seed " << seed;
    EXPECT_EQ(RunPokes(seed, 2), polled) << "seed " << seed;
  }
}

// An actor's entry lives in a slot the scheduler reuses after RemoveActor: a
// newcomer in a freed slot still wakes after the actors registered before it,
// the removed actor is never woken again, and adding an actor twice (or to a
// second scheduler while registered) changes nothing.
TEST(SchedulerTest, ReusedActorSlotsKeepRegistrationOrder) {
  for (DeadlineUpdates mode : {DeadlineUpdates::kPolled, DeadlineUpdates::kNotified}) {
    Scheduler s(1);
    s.set_verify_actor_index(true);
    std::vector<std::string> log;
    Pokeable a(&log, 0, Duration::Micros(1), 3);
    Pokeable b(&log, 1, Duration::Micros(1), 3);
    Pokeable c(&log, 2, Duration::Micros(1), 3);
    s.AddActor(&a, mode);
    s.AddActor(&b, mode);
    s.AddActor(&b, mode);  // no-op
    Scheduler other(2);
    other.AddActor(&a, mode);  // a belongs to s: ignored
    EXPECT_FALSE(other.Step());
    ASSERT_TRUE(s.RunFor(Duration::Nanos(500)).ok());
    s.RemoveActor(&a);
    c.Poke(TimePoint::Epoch() + Duration::Micros(1));
    s.AddActor(&c, mode);  // takes a's slot, last in order
    ASSERT_TRUE(s.RunUntilIdle().ok());
    EXPECT_THAT(log, ElementsAre("0@0", "1@0", "1@1000", "2@1000", "1@2000", "2@2000", "2@3000"))
        << static_cast<int>(mode);
  }
}

TEST(SchedulerDeathTest, VerifyCatchesAMissingDeadlineChanged) {
  Scheduler s(1);
  s.set_verify_actor_index(true);
  std::vector<std::string> log;
  Pokeable a(&log, 0, Duration::Micros(1), 5);
  Pokeable b(&log, 1, Duration::Micros(1), 5);
  s.AddActor(&a, DeadlineUpdates::kNotified);
  s.AddActor(&b, DeadlineUpdates::kNotified);
  ASSERT_TRUE(s.RunFor(Duration::Nanos(1500)).ok());
  s.Schedule(TimePoint::Epoch() + Duration::Nanos(1600),
             [&] { b.Poke(s.Now()); });  // earlier than 2 us, and no DeadlineChanged
  EXPECT_DEATH((void)s.RunUntilIdle(), "without DeadlineChanged");
}

}  // namespace
}  // namespace uscm::sim
