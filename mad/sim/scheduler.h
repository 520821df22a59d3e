// The one owner of virtual time in simulations. Events run in (time,
// sequence) order; protocol endpoints register as Actors and are woken at the
// deadline they report. Every random choice comes from the scheduler's seeded
// Rng, whose distributions are written here (std:: distributions differ
// between standard libraries), so a seed reproduces a run byte for byte.
// Model: quiche/quic/test_tools/simulator/simulator.h, smoltcp tests/netsim.rs.
#ifndef USCM_MAD_SIM_SCHEDULER_H_
#define USCM_MAD_SIM_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "mad/sim/deadline_heap.h"
#include "mad/time.h"

namespace uscm::sim {

using mad::Duration;
using mad::TimePoint;

// A seeded 64-bit generator with portable distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  uint64_t Next() { return engine_(); }
  // Uniform in [0, 1), 53 random bits.
  double Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // True with probability p (p <= 0 never draws, so a fault-free run does not
  // consume random numbers).
  bool Bernoulli(double p);
  // Uniform in [0, n); n > 0. Unbiased (rejection sampling).
  uint64_t Below(uint64_t n);
  // Uniform duration in [0, max]; Zero() if max <= 0.
  Duration UpTo(Duration max);
  // An independent stream derived from this one (for a sub-component).
  Rng Fork() { return Rng(Next() ^ 0x9e3779b97f4a7c15ULL); }

 private:
  std::mt19937_64 engine_;
};

// A protocol endpoint the scheduler drives: it reports when it next needs to
// run and is woken then with the current virtual time.
//
// How the scheduler learns an actor's deadline (Scheduler::AddActor):
//  - kPolled: NextDeadline() is asked at every step (any actor works this way,
//    at a cost linear in the number of polled actors);
//  - kNotified: NextDeadline() is asked when the actor is registered, after
//    each of its Wake calls, and when someone calls
//    Scheduler::DeadlineChanged(actor); in between the scheduler keeps it in a
//    deadline-ordered index (O(log n) per change, nothing per step). The
//    actor promises that its deadline changes at no other time: input
//    arriving or a user call made outside its Wake must be followed by
//    DeadlineChanged. A deadline does not "change" by virtual time passing.
enum class DeadlineUpdates : uint8_t { kPolled, kNotified };

class Scheduler;

class Actor {
 public:
  Actor() = default;
  // A copy is a new actor: it is not registered where the original is.
  Actor(const Actor&) {}
  Actor& operator=(const Actor&) { return *this; }
  virtual ~Actor() = default;
  virtual absl::optional<TimePoint> NextDeadline() const = 0;
  virtual void Wake(TimePoint now) = 0;

 private:
  friend class Scheduler;
  // Where the scheduler that registered this actor keeps its entry, so that
  // DeadlineChanged (once per wake and per arriving MAD) finds it without a
  // hash lookup into a table as large as the fabric.
  Scheduler* scheduler_ = nullptr;
  uint32_t scheduler_slot_ = 0;
};

class Scheduler {
 public:
  using EventId = uint64_t;
  using Callback = absl::AnyInvocable<void()>;

  explicit Scheduler(uint64_t seed, TimePoint start = TimePoint::Epoch());
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  TimePoint Now() const { return clock_.Now(); }
  const mad::Clock& clock() const { return clock_; }
  Rng& rng() { return rng_; }

  // Runs `cb` at `at` (a time in the past means now). Events at the same time
  // run in the order they were scheduled.
  EventId Schedule(TimePoint at, Callback cb);
  EventId ScheduleIn(Duration d, Callback cb) { return Schedule(Now() + d, std::move(cb)); }
  // Forgets a pending event; false if it already ran or was cancelled.
  bool Cancel(EventId id);

  // Actors are not owned and must outlive their registration. At equal times
  // events run before actors; actors are woken in registration order. An
  // actor whose deadline has passed is woken at the current time. (The order
  // does not depend on how an actor reports its deadline.)
  void AddActor(Actor* actor, DeadlineUpdates updates = DeadlineUpdates::kPolled);
  void RemoveActor(Actor* actor);
  // A kNotified actor's deadline may have changed: asks it again. No-op for a
  // polled or unregistered actor. O(log actors).
  void DeadlineChanged(Actor* actor);

  // Checks at every step that the index of notified actors agrees with
  // asking every actor (what a missing DeadlineChanged breaks) and aborts
  // with the actor's registration number if not. On by default in builds
  // without NDEBUG; costs a scan per step.
  void set_verify_actor_index(bool on) { verify_ = on; }

  // One step: the earliest event or actor wake-up. False when nothing is due
  // at all (no events, no actor deadlines).
  bool Step();

  // Steps until `done()` holds (checked before every step), virtual time would
  // pass `deadline`, or `max_steps` steps ran. OK when done() held;
  // DeadlineExceeded (clock left at `deadline`) or ResourceExhausted
  // (a livelock guard) otherwise; FailedPrecondition if nothing was left to run.
  absl::Status RunUntil(absl::FunctionRef<bool()> done,
                        TimePoint deadline = TimePoint::Infinite(),
                        uint64_t max_steps = kDefaultMaxSteps);
  // Runs everything due within `d`, then leaves the clock at Now() + d.
  absl::Status RunFor(Duration d, uint64_t max_steps = kDefaultMaxSteps);
  // Runs until no event is pending and no actor has a deadline.
  absl::Status RunUntilIdle(uint64_t max_steps = kDefaultMaxSteps);

  size_t pending_events() const { return queue_.size() + tail_.size() - cancelled_.size(); }
  uint64_t steps() const { return steps_; }

  static constexpr uint64_t kDefaultMaxSteps = 10'000'000;

 private:
  struct Event {
    TimePoint at;
    uint64_t seq;
    Callback cb;
  };
  // Heap order: the smallest (at, seq) on top.
  static bool Later(const Event& a, const Event& b) {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
  // A registered actor. A notified one is in at most one of due_ (its
  // deadline has passed: all such actors tie at now, by registration order)
  // and future_ (keyed by (deadline, order), by slot).
  struct ActorEntry {
    Actor* actor = nullptr;  // null: a free slot
    uint64_t order = 0;  // registration order
    DeadlineUpdates updates = DeadlineUpdates::kPolled;
    enum class Where : uint8_t { kNone, kDue, kFuture } where = Where::kNone;
    int64_t at = 0;  // deadline in ns, when in future_
  };

  void DropCancelledTop();
  // The events are queue_ (a heap) and tail_ (sorted: an event later than
  // every one in it is appended), merged by (at, seq).
  bool HasEvent() const { return !queue_.empty() || !tail_.empty(); }
  bool TailFirst() const;
  const Event& FrontEvent() const;
  Event PopEvent();
  // The actor's entry if this scheduler registered it, else null.
  ActorEntry* EntryOf(const Actor* actor);
  const ActorEntry* EntryOf(const Actor* actor) const;
  void Unindex(Actor* actor, ActorEntry& e);
  // Asks the actor for its deadline and indexes it (e is in no index).
  void Index(Actor* actor, ActorEntry& e);
  void Insert(Actor* actor, ActorEntry& e, TimePoint deadline);
  // Moves notified actors whose deadline is now due into due_.
  void PromoteDue();
  // The earliest actor deadline (clamped to now) and the actor, if any.
  Actor* EarliestActor(TimePoint* at);
  // The same by asking every actor (the reference for verify_).
  Actor* ScanActors(TimePoint* at) const;
  void Verify(Actor* chosen, TimePoint at) const;
  // The next step: the earliest event (events first at equal times) or
  // actor; neither (at Infinite()) when nothing is due at all.
  struct NextStep {
    TimePoint at = TimePoint::Infinite();
    Actor* actor = nullptr;
    bool event = false;
  };
  NextStep PickNext();
  void Run(const NextStep& n);  // n is PickNext()'s, nothing changed since
  // Time of the next step, Infinite() if none.
  TimePoint NextTime();

  mad::VirtualClock clock_;
  Rng rng_;
  std::vector<Event> queue_;
  std::deque<Event> tail_;
  absl::flat_hash_set<EventId> cancelled_;
  std::vector<ActorEntry> actors_;      // by Actor::scheduler_slot_
  std::vector<uint32_t> free_actor_slots_;
  std::vector<std::pair<uint64_t, Actor*>> polled_;  // registration order
  absl::btree_set<std::pair<uint64_t, Actor*>> due_;
  DeadlineHeap future_;
  uint64_t next_actor_order_ = 0;
#ifdef NDEBUG
  bool verify_ = false;
#else
  bool verify_ = true;
#endif
  uint64_t next_seq_ = 0;
  uint64_t steps_ = 0;
};

}  // namespace uscm::sim

#endif  // USCM_MAD_SIM_SCHEDULER_H_
