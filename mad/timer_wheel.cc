#include "mad/timer_wheel.h"

#include <algorithm>
#include <bit>

#include "absl/base/internal/raw_logging.h"

namespace uscm::mad {
namespace {

constexpr int kTopLevel = TimerWheel::kLevels - 1;
constexpr int kTopShift = TimerWheel::kBitsPerLevel * kTopLevel;
constexpr uint64_t kSlotMask = TimerWheel::kSlots - 1;

uint64_t MulHi(uint64_t a, uint64_t b) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
}

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

// n / tick_ns_ without a hardware divide: the reciprocal estimate is at most a
// few units low, fixed up by subtraction.
uint64_t TimerWheel::DivTick(uint64_t n, uint64_t* remainder) const {
  uint64_t q = MulHi(n, tick_reciprocal_);
  uint64_t r = n - q * tick_ns_;
  while (r >= tick_ns_) {
    ++q;
    r -= tick_ns_;
  }
  *remainder = r;
  return q;
}

uint64_t TimerWheel::DeadlineToTick(TimePoint deadline) const {
  if (deadline.nanos() <= start_ns_) return 0;
  const uint64_t offset = static_cast<uint64_t>(deadline.nanos()) -
                          static_cast<uint64_t>(start_ns_);
  uint64_t r;
  const uint64_t q = DivTick(offset, &r);
  return q + (r != 0 ? 1 : 0);
}

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

uint32_t TimerWheel::AllocNode() {
  if (free_head_ != kNil) {
    const uint32_t index = free_head_;
    free_head_ = nodes_[index].next;
    return index;
  }
  ABSL_RAW_CHECK(nodes_.size() < kNil - 1, "TimerWheel: too many timers");
  nodes_.push_back(Node{0, 0, kNil, kNil, 1, kFreeBucket});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void TimerWheel::FreeNode(uint32_t index) {
  Node& n = nodes_[index];
  ++n.generation;
  n.bucket = kFreeBucket;
  n.next = free_head_;
  free_head_ = index;
}

bool TimerWheel::Valid(TimerHandle h) const {
  return h.index_ < nodes_.size() &&
         nodes_[h.index_].generation == h.generation_ &&
         nodes_[h.index_].bucket != kFreeBucket;
}

bool TimerWheel::IsPending(TimerHandle handle) const { return Valid(handle); }

void TimerWheel::PushFront(uint16_t bucket, uint32_t index) {
  Node& n = nodes_[index];
  const uint32_t head = heads_[bucket];
  n.bucket = bucket;
  n.prev = kNil;
  n.next = head;
  if (head != kNil) nodes_[head].prev = index;
  heads_[bucket] = index;
  if (bucket < kOverflowBucket) {
    const int level = bucket >> kBitsPerLevel;
    occupied_[level] |= uint64_t{1} << (bucket & kSlotMask);
    levels_occupied_ |= 1u << level;
  }
}

void TimerWheel::Unlink(uint32_t index) {
  const Node& n = nodes_[index];
  const uint16_t bucket = n.bucket;
  if (n.prev != kNil) {
    nodes_[n.prev].next = n.next;
  } else {
    heads_[bucket] = n.next;
  }
  if (n.next != kNil) nodes_[n.next].prev = n.prev;
  if (heads_[bucket] != kNil) return;
  if (bucket < kOverflowBucket) {
    const int level = bucket >> kBitsPerLevel;
    occupied_[level] &= ~(uint64_t{1} << (bucket & kSlotMask));
    if (occupied_[level] == 0) levels_occupied_ &= ~(1u << level);
  } else {
    overflow_min_ = UINT64_MAX;
  }
}

void TimerWheel::Link(uint32_t index) {
  const uint64_t expire = nodes_[index].expire;
  if (expire <= now_) {  // due: the current level-0 bucket
    PushFront(static_cast<uint16_t>(now_ & kSlotMask), index);
    return;
  }
  const uint64_t diff = (expire ^ now_) | kSlotMask;
  const int level = (63 - std::countl_zero(diff)) / kBitsPerLevel;
  if (level < kLevels) {
    const uint64_t slot = (expire >> (kBitsPerLevel * level)) & kSlotMask;
    PushFront(static_cast<uint16_t>(level * kSlots + slot), index);
  } else if (TopDistance(expire, now_) < kSlots) {
    // The top level is a ring: the slot may lie in its next revolution.
    const uint64_t slot = (expire >> kTopShift) & kSlotMask;
    PushFront(static_cast<uint16_t>(kTopLevel * kSlots + slot), index);
  } else {
    PushFront(kOverflowBucket, index);
    overflow_min_ = std::min(overflow_min_, expire);
  }
}

TimerHandle TimerWheel::Schedule(TimePoint deadline, uint64_t payload) {
  const uint32_t index = AllocNode();
  Node& n = nodes_[index];
  n.expire = DeadlineToTick(deadline);
  n.payload = payload;
  Link(index);
  ++size_;
  return TimerHandle(index, n.generation);
}

bool TimerWheel::Cancel(TimerHandle handle) {
  if (!Valid(handle)) return false;
  Unlink(handle.index_);
  FreeNode(handle.index_);
  --size_;
  return true;
}

bool TimerWheel::Reschedule(TimerHandle handle, TimePoint deadline) {
  if (!Valid(handle)) return false;
  Unlink(handle.index_);
  nodes_[handle.index_].expire = DeadlineToTick(deadline);
  Link(handle.index_);
  return true;
}

// Levels are ordered in time: every level-L bucket starts before the next
// 64^(L+1)-tick boundary, every level-(L+1) bucket at or after it. So the next
// event is the first occupied bucket (from the current slot on) of the lowest
// occupied level, or the overflow re-examination if that comes first.
TimerWheel::Event TimerWheel::NextEvent() const {
  Event ev;
  if (levels_occupied_ != 0) {
    const int level = std::countr_zero(levels_occupied_);
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
  if (heads_[kOverflowBucket] != kNil) {
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
  if (occupied_[level] == 0) levels_occupied_ &= ~(1u << level);
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
          FreeNode(index);
          --size_;
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
