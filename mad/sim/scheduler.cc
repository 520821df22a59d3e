#include "mad/sim/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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
  const TimePoint when = std::max(at, Now());
  if (tail_.empty() || when >= tail_.back().at) {  // sorted by (at, seq) still
    tail_.push_back(Event{when, seq, std::move(cb)});
    return seq;
  }
  queue_.push_back(Event{when, seq, std::move(cb)});
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
  for (const Event& e : tail_) {
    if (e.seq == id) {
      cancelled_.insert(id);
      return true;
    }
  }
  return false;
}

bool Scheduler::TailFirst() const {
  return !tail_.empty() && (queue_.empty() || Later(queue_.front(), tail_.front()));
}

const Scheduler::Event& Scheduler::FrontEvent() const {
  return TailFirst() ? tail_.front() : queue_.front();
}

Scheduler::Event Scheduler::PopEvent() {
  if (TailFirst()) {
    Event e = std::move(tail_.front());
    tail_.pop_front();
    return e;
  }
  std::pop_heap(queue_.begin(), queue_.end(), Later);
  Event e = std::move(queue_.back());
  queue_.pop_back();
  return e;
}

Scheduler::ActorEntry* Scheduler::EntryOf(const Actor* actor) {
  if (actor->scheduler_ != this) return nullptr;
  return &actors_[actor->scheduler_slot_];
}

const Scheduler::ActorEntry* Scheduler::EntryOf(const Actor* actor) const {
  if (actor->scheduler_ != this) return nullptr;
  return &actors_[actor->scheduler_slot_];
}

void Scheduler::AddActor(Actor* actor, DeadlineUpdates updates) {
  if (actor->scheduler_ != nullptr) return;  // registered (here, or elsewhere)
  uint32_t slot;
  if (free_actor_slots_.empty()) {
    slot = static_cast<uint32_t>(actors_.size());
    actors_.emplace_back();
  } else {
    slot = free_actor_slots_.back();
    free_actor_slots_.pop_back();
  }
  actor->scheduler_ = this;
  actor->scheduler_slot_ = slot;
  ActorEntry& e = actors_[slot];
  e = ActorEntry{};
  e.actor = actor;
  e.order = next_actor_order_++;
  e.updates = updates;
  if (updates == DeadlineUpdates::kPolled) {
    polled_.emplace_back(e.order, actor);
  } else {
    Index(actor, e);
  }
}

void Scheduler::RemoveActor(Actor* actor) {
  ActorEntry* e = EntryOf(actor);
  if (e == nullptr) return;
  if (e->updates == DeadlineUpdates::kPolled) {
    polled_.erase(std::find(polled_.begin(), polled_.end(), std::make_pair(e->order, actor)));
  } else {
    Unindex(actor, *e);
  }
  *e = ActorEntry{};
  free_actor_slots_.push_back(actor->scheduler_slot_);
  actor->scheduler_ = nullptr;
}

// Most calls leave the key as it was (a MAD arriving at a host that is
// already due; a wake that re-arms the same deadline): then the index is not
// touched, which at 10,240 hosts saves two cold B-tree walks.
void Scheduler::DeadlineChanged(Actor* actor) {
  ActorEntry* e = EntryOf(actor);
  if (e == nullptr || e->updates == DeadlineUpdates::kPolled) return;
  const absl::optional<TimePoint> d = actor->NextDeadline();
  if (!d.has_value()) {
    if (e->where != ActorEntry::Where::kNone) Unindex(actor, *e);
    return;
  }
  if (*d <= Now()) {
    if (e->where == ActorEntry::Where::kDue) return;
  } else if (e->where == ActorEntry::Where::kFuture && e->at == d->nanos()) {
    return;
  }
  Unindex(actor, *e);
  Insert(actor, *e, *d);
}

void Scheduler::Unindex(Actor* actor, ActorEntry& e) {
  if (e.where == ActorEntry::Where::kDue) {
    due_.erase({e.order, actor});
  } else if (e.where == ActorEntry::Where::kFuture) {
    future_.Erase(actor->scheduler_slot_);
  }
  e.where = ActorEntry::Where::kNone;
}

void Scheduler::Index(Actor* actor, ActorEntry& e) {
  absl::optional<TimePoint> d = actor->NextDeadline();
  if (d.has_value()) Insert(actor, e, *d);
}

void Scheduler::Insert(Actor* actor, ActorEntry& e, TimePoint deadline) {
  if (deadline <= Now()) {
    due_.insert({e.order, actor});
    e.where = ActorEntry::Where::kDue;
  } else {
    e.at = deadline.nanos();
    future_.Insert({e.at, e.order, actor->scheduler_slot_});
    e.where = ActorEntry::Where::kFuture;
  }
}

void Scheduler::PromoteDue() {
  const int64_t now = Now().nanos();
  while (!future_.empty() && future_.top().at <= now) {
    ActorEntry& e = actors_[future_.top().slot];
    future_.Pop();
    due_.insert({e.order, e.actor});
    e.where = ActorEntry::Where::kDue;
  }
}

void Scheduler::DropCancelledTop() {
  while (HasEvent() && !cancelled_.empty() && cancelled_.contains(FrontEvent().seq)) {
    cancelled_.erase(FrontEvent().seq);
    PopEvent();
  }
}

// Actors are ordered by (deadline clamped to now, registration order): the
// old single scan's order, so that results do not depend on DeadlineUpdates.
Actor* Scheduler::EarliestActor(TimePoint* at) {
  PromoteDue();
  Actor* best = nullptr;
  uint64_t best_order = 0;
  TimePoint best_at = TimePoint::Infinite();
  if (!due_.empty()) {
    best_order = due_.begin()->first;
    best = due_.begin()->second;
    best_at = Now();
  } else if (!future_.empty()) {
    best_at = TimePoint::Epoch() + Duration::Nanos(future_.top().at);
    best_order = future_.top().order;
    best = actors_[future_.top().slot].actor;
  }
  for (const auto& [order, a] : polled_) {
    absl::optional<TimePoint> d = a->NextDeadline();
    if (!d.has_value()) continue;
    const TimePoint t = std::max(*d, Now());
    if (best == nullptr || t < best_at || (t == best_at && order < best_order)) {
      best = a;
      best_at = t;
      best_order = order;
    }
  }
  *at = best_at;
  if (verify_) Verify(best, best_at);
  return best;
}

Actor* Scheduler::ScanActors(TimePoint* at) const {
  std::vector<std::pair<uint64_t, Actor*>> all;
  all.reserve(actors_.size());
  for (const ActorEntry& e : actors_) {
    if (e.actor != nullptr) all.emplace_back(e.order, e.actor);
  }
  std::sort(all.begin(), all.end());
  Actor* best = nullptr;
  TimePoint best_at = TimePoint::Infinite();
  for (const auto& [order, a] : all) {
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

void Scheduler::Verify(Actor* chosen, TimePoint at) const {
  TimePoint scan_at;
  Actor* scan = ScanActors(&scan_at);
  if (scan == chosen && (scan == nullptr || scan_at == at)) return;
  auto order = [&](Actor* a) -> int64_t {
    if (a == nullptr) return -1;
    return static_cast<int64_t>(EntryOf(a)->order);
  };
  std::fprintf(stderr,
               "sim::Scheduler: the actor index picked actor #%lld at %lldns, asking every "
               "actor gives #%lld at %lldns: a notified actor's deadline changed without "
               "DeadlineChanged()\n",
               static_cast<long long>(order(chosen)), static_cast<long long>(at.nanos()),
               static_cast<long long>(order(scan)), static_cast<long long>(scan_at.nanos()));
  std::abort();
}

Scheduler::NextStep Scheduler::PickNext() {
  DropCancelledTop();
  TimePoint actor_at;
  Actor* actor = EarliestActor(&actor_at);
  NextStep n;
  if (HasEvent() && (actor == nullptr || FrontEvent().at <= actor_at)) {
    n.event = true;
    n.at = FrontEvent().at;
  } else if (actor != nullptr) {
    n.actor = actor;
    n.at = actor_at;
  }
  return n;
}

void Scheduler::Run(const NextStep& n) {
  ++steps_;
  if (n.event) {
    Event e = PopEvent();
    clock_.AdvanceTo(e.at);
    e.cb();
    return;
  }
  clock_.AdvanceTo(n.at);
  n.actor->Wake(Now());
  // Wake may have removed the actor (or others); a notified one is asked
  // again now, since its deadline is whatever Wake left.
  DeadlineChanged(n.actor);
}

TimePoint Scheduler::NextTime() { return PickNext().at; }

bool Scheduler::Step() {
  const NextStep n = PickNext();
  if (!n.event && n.actor == nullptr) return false;
  Run(n);
  return true;
}

absl::Status Scheduler::RunUntil(absl::FunctionRef<bool()> done, TimePoint deadline,
                                 uint64_t max_steps) {
  for (uint64_t i = 0;; ++i) {
    if (done()) return absl::OkStatus();
    // Picked once per step: the actors' deadlines are asked once, not again
    // by Step (half the polling of a step, docs/CM.md "The API layer").
    const NextStep n = PickNext();
    if (n.at == TimePoint::Infinite() && deadline == TimePoint::Infinite()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "simulation went idle at ", Now().nanos(), "ns before the condition held"));
    }
    if (n.at > deadline) {
      clock_.AdvanceTo(deadline);
      return absl::DeadlineExceededError(
          absl::StrCat("condition not met by virtual time ", deadline.nanos(), "ns"));
    }
    if (i == max_steps) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "condition not met after ", max_steps, " steps (livelock?) at ", Now().nanos(), "ns"));
    }
    Run(n);
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
