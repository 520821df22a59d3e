#include "mad/timer_wheel.h"

#include <algorithm>
#include <bit>

#include "absl/base/internal/raw_logging.h"

namespace uscm::mad {
namespace {

constexpr int kTopLevel = TimerWheel::kLevels - 1;
constexpr int kTopShift = TimerWheel::kBitsPerLevel * kTopLevel;
constexpr uint64_t kSlotMask = TimerWheel::kSlots - 1;

// Top-level "digit" distance from `now` to `expire` (expire > now).
uint64_t TopDistance(uint64_t expire, uint64_t now) {
  return (expire >> kTopShift) - (now >> kTopShift);
}

}  // namespace

TimerWheel::TimerWheel(TimePoint start, Duration tick)
    : start_ns_(start.nanos()),
      tick_ns_(static_cast<uint64_t>(tick.nanos())),
      tick_reciprocal_(tick.nanos() > 0
                           ? UINT64_MAX / static_cast<uint64_t>(tick.nanos())
                           : 0) {
  ABSL_RAW_CHECK(tick.nanos() > 0, "TimerWheel tick must be positive");
  heads_.fill(kNil);
}

void TimerWheel::Reserve(size_t n) { nodes_.reserve(n); }

uint64_t TimerWheel::TimeToTick(TimePoint t) const {
  if (t.nanos() <= start_ns_) return 0;
  uint64_t r;
  return DivTick(
      static_cast<uint64_t>(t.nanos()) - static_cast<uint64_t>(start_ns_), &r);
}

TimePoint TimerWheel::TickToTime(uint64_t tick) const {
  const __int128 ns = static_cast<__int128>(start_ns_) +
                      static_cast<__int128>(tick) * tick_ns_;
  if (ns >= INT64_MAX) return TimePoint::Infinite();
  return TimePoint::FromNanos(static_cast<int64_t>(ns));
}

uint32_t TimerWheel::GrowNode() {
  ABSL_RAW_CHECK(node_count_ < kNil - 1, "TimerWheel: too many timers");
  nodes_.push_back(Node{0, 0, kNil, kNil, 1, kFreeBucket});
  return node_count_++;
}

void TimerWheel::LinkFar(uint32_t index) {
  const uint64_t expire = nodes_[index].expire;
  if (TopDistance(expire, now_) < kSlots) {
    // The top level is a ring: the slot may lie in its next revolution.
    const uint64_t slot = (expire >> kTopShift) & kSlotMask;
    PushFront(static_cast<uint16_t>(kTopLevel * kSlots + slot), index);
    return;
  }
  if (occupied_[kLevels] == 0) overflow_min_ = UINT64_MAX;
  overflow_min_ = std::min(overflow_min_, expire);
  PushFront(kOverflowBucket, index);
}

// Levels are ordered in time: every level-L bucket starts before the next
// 64^(L+1)-tick boundary, every level-(L+1) bucket at or after it. So the next
// event is the first occupied bucket (from the current slot on) of the lowest
// occupied level, or the overflow re-examination if that comes first.
TimerWheel::Event TimerWheel::NextEvent() const {
  Event ev;
  int level = 0;
  while (level < kLevels && occupied_[level] == 0) ++level;
  if (level < kLevels) {
    const int shift = kBitsPerLevel * level;
    const int now_slot = static_cast<int>((now_ >> shift) & kSlotMask);
    const int ahead =
        std::countr_zero(std::rotr(occupied_[level], now_slot));
    const int raw_slot = now_slot + ahead;
    const int block_shift = shift + kBitsPerLevel;
    uint64_t tick = (now_ >> block_shift) << block_shift;
    tick += static_cast<uint64_t>(raw_slot) << shift;  // may pass the block end
    ev.kind = level == 0 ? EventKind::kFire : EventKind::kCascade;
    ev.tick = std::max(tick, now_);
    ev.level = level;
    ev.slot = raw_slot & static_cast<int>(kSlotMask);
  }
  if (occupied_[kLevels] != 0) {
    // The earliest tick at which the earliest overflow timer fits the ring.
    const uint64_t top = overflow_min_ >> kTopShift;
    const uint64_t fits =
        top >= kSlots - 1 ? (top - (kSlots - 1)) << kTopShift : 0;
    const uint64_t tick = std::max(fits, now_);
    if (ev.kind == EventKind::kNone || tick < ev.tick) {
      ev.kind = EventKind::kOverflow;
      ev.tick = tick;
    }
  }
  return ev;
}

void TimerWheel::Cascade(int level, int slot) {
  const uint16_t bucket = static_cast<uint16_t>(level * kSlots + slot);
  uint32_t index = heads_[bucket];
  heads_[bucket] = kNil;
  occupied_[level] &= ~(uint64_t{1} << slot);
  while (index != kNil) {
    const uint32_t next = nodes_[index].next;
    Link(index);  // lands on a lower level: expire - now_ < 64^level
    index = next;
  }
}

void TimerWheel::DrainOverflow() {
  uint32_t index = heads_[kOverflowBucket];
  uint64_t min_left = UINT64_MAX;
  while (index != kNil) {
    const uint32_t next = nodes_[index].next;
    const uint64_t expire = nodes_[index].expire;
    if (expire <= now_ || TopDistance(expire, now_) < kSlots) {
      Unlink(index);
      Link(index);
    } else {
      min_left = std::min(min_left, expire);
    }
    index = next;
  }
  overflow_min_ = min_left;
}

size_t TimerWheel::Advance(TimePoint now, Callback on_expire) {
  ABSL_RAW_CHECK(!in_advance_, "TimerWheel::Advance called from a callback");
  const uint64_t target = std::max(TimeToTick(now), now_);
  in_advance_ = true;
  size_t fired = 0;
  for (;;) {
    const Event ev = NextEvent();
    if (ev.kind == EventKind::kNone || ev.tick > target) break;
    now_ = ev.tick;
    switch (ev.kind) {
      case EventKind::kFire: {
        // Pop one at a time: a callback may cancel a timer of this bucket or
        // add a due one to it.
        const uint16_t bucket = static_cast<uint16_t>(ev.slot);
        uint32_t index;
        while ((index = heads_[bucket]) != kNil) {
          Unlink(index);
          const TimerHandle handle(index, nodes_[index].generation);
          const uint64_t payload = nodes_[index].payload;
          Release(index);
          ++fired;
          on_expire(handle, payload);
        }
        break;
      }
      case EventKind::kCascade:
        Cascade(ev.level, ev.slot);
        break;
      case EventKind::kOverflow:
        DrainOverflow();
        break;
      case EventKind::kNone:
        break;
    }
  }
  now_ = target;
  in_advance_ = false;
  return fired;
}

absl::optional<TimePoint> TimerWheel::NextDeadline() const {
  const Event ev = NextEvent();
  if (ev.kind == EventKind::kNone) return absl::nullopt;
  return TickToTime(ev.tick);
}

}  // namespace uscm::mad
