#include "mad/sim/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace uscm::sim {

bool Rng::Bernoulli(double p) {
  if (p <= 0) return false;
  if (p >= 1) return true;
  return Uniform01() < p;
}

uint64_t Rng::Below(uint64_t n) {
  // Reject the top partial bucket so every residue is equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = Next();
  } while (x >= limit);
  return x % n;
}

Duration Rng::UpTo(Duration max) {
  if (max <= Duration::Zero()) return Duration::Zero();
  return Duration::Nanos(static_cast<int64_t>(Below(static_cast<uint64_t>(max.nanos()) + 1)));
}

Scheduler::Scheduler(uint64_t seed, TimePoint start) : clock_(start), rng_(seed) {}

Scheduler::EventId Scheduler::Schedule(TimePoint at, Callback cb) {
  const uint64_t seq = next_seq_++;
  queue_.push_back(Event{std::max(at, Now()), seq, std::move(cb)});
  std::push_heap(queue_.begin(), queue_.end(), Later);
  return seq;
}

bool Scheduler::Cancel(EventId id) {
  if (cancelled_.contains(id)) return false;
  for (const Event& e : queue_) {
    if (e.seq == id) {
      cancelled_.insert(id);
      return true;
    }
  }
  return false;
}

void Scheduler::AddActor(Actor* actor) {
  if (std::find(actors_.begin(), actors_.end(), actor) == actors_.end()) {
    actors_.push_back(actor);
  }
}

void Scheduler::RemoveActor(Actor* actor) {
  actors_.erase(std::remove(actors_.begin(), actors_.end(), actor), actors_.end());
}

void Scheduler::DropCancelledTop() {
  while (!queue_.empty() && !cancelled_.empty() && cancelled_.contains(queue_.front().seq)) {
    cancelled_.erase(queue_.front().seq);
    std::pop_heap(queue_.begin(), queue_.end(), Later);
    queue_.pop_back();
  }
}

Actor* Scheduler::EarliestActor(TimePoint* at) const {
  Actor* best = nullptr;
  TimePoint best_at = TimePoint::Infinite();
  for (Actor* a : actors_) {
    absl::optional<TimePoint> d = a->NextDeadline();
    if (!d.has_value()) continue;
    const TimePoint t = std::max(*d, Now());
    if (best == nullptr || t < best_at) {
      best = a;
      best_at = t;
    }
  }
  *at = best_at;
  return best;
}

TimePoint Scheduler::NextTime() {
  DropCancelledTop();
  TimePoint actor_at;
  Actor* actor = EarliestActor(&actor_at);
  TimePoint t = queue_.empty() ? TimePoint::Infinite() : queue_.front().at;
  if (actor != nullptr && actor_at < t) t = actor_at;
  if (queue_.empty() && actor == nullptr) return TimePoint::Infinite();
  return t;
}

bool Scheduler::Step() {
  DropCancelledTop();
  TimePoint actor_at;
  Actor* actor = EarliestActor(&actor_at);
  const bool have_event = !queue_.empty();
  if (!have_event && actor == nullptr) return false;
  ++steps_;
  if (have_event && (actor == nullptr || queue_.front().at <= actor_at)) {
    std::pop_heap(queue_.begin(), queue_.end(), Later);
    Event e = std::move(queue_.back());
    queue_.pop_back();
    clock_.AdvanceTo(e.at);
    e.cb();
    return true;
  }
  clock_.AdvanceTo(actor_at);
  actor->Wake(Now());
  return true;
}

absl::Status Scheduler::RunUntil(absl::FunctionRef<bool()> done, TimePoint deadline,
                                 uint64_t max_steps) {
  for (uint64_t i = 0;; ++i) {
    if (done()) return absl::OkStatus();
    const TimePoint next = NextTime();
    if (next == TimePoint::Infinite() && deadline == TimePoint::Infinite()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "simulation went idle at ", Now().nanos(), "ns before the condition held"));
    }
    if (next > deadline) {
      clock_.AdvanceTo(deadline);
      return absl::DeadlineExceededError(
          absl::StrCat("condition not met by virtual time ", deadline.nanos(), "ns"));
    }
    if (i == max_steps) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "condition not met after ", max_steps, " steps (livelock?) at ", Now().nanos(), "ns"));
    }
    Step();
  }
}

absl::Status Scheduler::RunFor(Duration d, uint64_t max_steps) {
  const TimePoint end = Now() + d;
  absl::Status s = RunUntil([] { return false; }, end, max_steps);
  // Reaching `end` (even by going idle first) is the normal outcome.
  return absl::IsDeadlineExceeded(s) ? absl::OkStatus() : s;
}

absl::Status Scheduler::RunUntilIdle(uint64_t max_steps) {
  for (uint64_t i = 0; i < max_steps; ++i) {
    if (!Step()) return absl::OkStatus();
  }
  if (NextTime() == TimePoint::Infinite()) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("still busy after ", max_steps, " steps (livelock?) at ", Now().nanos(), "ns"));
}

}  // namespace uscm::sim
