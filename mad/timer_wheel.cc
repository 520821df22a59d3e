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
}

// Chunks in use never exceed n/8 + 4 per bucket: a bucket holds at most
// 2 * live + kCompactMin entries (Remove compacts beyond that) plus two partly
// used chunks at its ends; a cascade or overflow drain frees each source chunk
// as it is consumed.
void TimerWheel::Reserve(size_t n) {
  nodes_.reserve(n);
  const size_t chunks = n / 8 + 5 * size_t{kNumBuckets};
  entries_.reserve(chunks * kChunk);
  chunk_next_.reserve(chunks);
}

TimePoint TimerWheel::TickToTime(uint64_t tick) const {
  const __int128 ns = static_cast<__int128>(start_ns_) +
                      static_cast<__int128>(tick) * tick_ns_;
  if (ns >= INT64_MAX) return TimePoint::Infinite();
  return TimePoint::FromNanos(static_cast<int64_t>(ns));
}

uint32_t TimerWheel::GrowNode() {
  ABSL_RAW_CHECK(node_count_ < kNil - 1, "TimerWheel: too many timers");
  nodes_.push_back(Node{0, 1, kNil});
  return node_count_++;
}

uint32_t TimerWheel::GrowChunk() {
  ABSL_RAW_CHECK(chunk_next_.size() < kNil / kChunk - 1,
                 "TimerWheel: too many timers");
  const uint32_t c = static_cast<uint32_t>(chunk_next_.size());
  chunk_next_.push_back(kNil);
  entries_.resize(entries_.size() + kChunk);
  return c;
}

bool TimerWheel::PopFront(uint16_t bucket, Entry* out) {
  Bucket& b = buckets_[bucket];
  while (b.head != kNil) {
    if (b.head == b.tail && b.begin == b.end) {
      FreeChunk(b.head);
      b = Bucket{};
      return false;
    }
    if (b.begin == kChunk) {
      const uint32_t next = chunk_next_[b.head];
      FreeChunk(b.head);
      b.head = next;
      b.begin = 0;
      continue;
    }
    const Entry& e = entries_[b.head * kChunk + b.begin++];
    if (e.index == kNil) {
      --b.dead;
      continue;
    }
    *out = e;
    --b.live;
    return true;
  }
  return false;
}

void TimerWheel::FreeBucket(uint16_t bucket) {
  Bucket& b = buckets_[bucket];
  uint32_t c = b.head;
  while (c != kNil) {
    const uint32_t next = chunk_next_[c];
    FreeChunk(c);
    c = next;
  }
  b = Bucket{};
  ClearBit(bucket);
}

// Slides the live entries of `bucket` to its front, in order, and frees the
// chunks left over.
void TimerWheel::Compact(uint16_t bucket) {
  Bucket& b = buckets_[bucket];
  uint32_t rc = b.head, rb = b.begin;  // read cursor
  uint32_t wc = b.head, wb = b.begin;  // write cursor (never ahead of it)
  while (!(rc == b.tail && rb == b.end)) {
    if (rb == kChunk) {
      rc = chunk_next_[rc];
      rb = 0;
      continue;
    }
    const Entry e = entries_[rc * kChunk + rb++];
    if (e.index == kNil) continue;
    if (wb == kChunk) {
      wc = chunk_next_[wc];
      wb = 0;
    }
    const uint32_t slot = wc * kChunk + wb++;
    entries_[slot] = e;
    nodes_[e.index].slot = slot;
  }
  uint32_t c = chunk_next_[wc];
  while (c != kNil) {
    const uint32_t next = chunk_next_[c];
    FreeChunk(c);
    c = next;
  }
  chunk_next_[wc] = kNil;
  b.tail = wc;
  b.end = wb;
  b.dead = 0;
}

void TimerWheel::LinkFar(uint32_t index, uint64_t expire) {
  if (TopDistance(expire, now_) < kSlots) {
    // The top level is a ring: the slot may lie in its next revolution.
    const uint64_t slot = (expire >> kTopShift) & kSlotMask;
    Append(static_cast<uint16_t>(kTopLevel * kSlots + slot), expire, index);
    return;
  }
  if ((occupied_[kOverflowWord] & 1) == 0) overflow_min_ = UINT64_MAX;
  overflow_min_ = std::min(overflow_min_, expire);
  Append(kOverflowBucket, expire, index);
}

// Levels are ordered in time: every level-L bucket starts before the next
// 256^(L+1)-tick boundary, every level-(L+1) bucket at or after it. So the
// next event is the first occupied bucket (from the current slot on) of the
// lowest occupied level, or the overflow re-examination if that comes first.
TimerWheel::Event TimerWheel::NextEvent() const {
  Event ev;
  for (int level = 0; level < kLevels; ++level) {
    const uint64_t* words = &occupied_[level * kWordsPerLevel];
    uint64_t any = 0;
    for (int w = 0; w < kWordsPerLevel; ++w) any |= words[w];
    if (any == 0) continue;
    const int shift = kBitsPerLevel * level;
    const int now_slot = static_cast<int>((now_ >> shift) & kSlotMask);
    // First occupied slot at or after now_slot, cyclically.
    int ahead = 0;
    const unsigned first = static_cast<unsigned>(now_slot) / 64;
    for (unsigned k = 0; k <= kWordsPerLevel; ++k) {
      const unsigned w = (first + k) & (kWordsPerLevel - 1);
      uint64_t bits = words[w];
      if (k == 0) bits &= ~uint64_t{0} << (now_slot & 63);
      if (k == kWordsPerLevel) bits &= ~(~uint64_t{0} << (now_slot & 63));
      if (bits != 0) {
        const unsigned slot = w * 64 + std::countr_zero(bits);
        ahead = static_cast<int>((slot - static_cast<unsigned>(now_slot)) &
                                 kSlotMask);
        break;
      }
    }
    const int raw_slot = now_slot + ahead;
    const int block_shift = shift + kBitsPerLevel;
    uint64_t tick = (now_ >> block_shift) << block_shift;
    tick += static_cast<uint64_t>(raw_slot) << shift;  // may pass the block end
    ev.kind = level == 0 ? EventKind::kFire : EventKind::kCascade;
    ev.tick = std::max(tick, now_);
    ev.level = level;
    ev.slot = raw_slot & static_cast<int>(kSlotMask);
    break;
  }
  if ((occupied_[kOverflowWord] & 1) != 0) {
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

// Walks the bucket's chunks front to back, prefetching the next chunk's
// entries and the nodes whose position the relink writes, so the misses
// overlap. The bucket is detached first; relinks land on lower levels.
void TimerWheel::Cascade(int level, int slot) {
  const uint16_t bucket = static_cast<uint16_t>(level * kSlots + slot);
  const Bucket b = buckets_[bucket];
  buckets_[bucket] = Bucket{};
  ClearBit(bucket);
  auto prefetch_nodes = [this](uint32_t c) {
    for (uint32_t k = 0; k < kChunk; ++k) {
      const uint32_t i = entries_[c * kChunk + k].index;
      if (i < node_count_) __builtin_prefetch(&nodes_[i], 1);
    }
  };
  prefetch_nodes(b.head);
  for (uint32_t c = b.head, at = b.begin; c != kNil;) {
    const bool last = c == b.tail;
    const uint32_t next = last ? kNil : chunk_next_[c];
    if (next != kNil) {
      __builtin_prefetch(&entries_[next * kChunk]);
      __builtin_prefetch(&entries_[next * kChunk + 4]);
      __builtin_prefetch(&entries_[next * kChunk + 8]);
      __builtin_prefetch(&entries_[next * kChunk + 12]);
    }
    const uint32_t stop = last ? b.end : kChunk;
    for (; at < stop; ++at) {
      const Entry e = entries_[c * kChunk + at];
      if (e.index != kNil) Link(e.index, e.expire);
    }
    if (next != kNil) prefetch_nodes(next);
    FreeChunk(c);
    c = next;
    at = 0;
  }
}

void TimerWheel::DrainOverflow() {
  // Move the overflow bucket aside so that timers still out of range can be
  // appended to it again. No callback runs, so the stale bucket field of the
  // moved entries is never read.
  buckets_[kFiringBucket] = buckets_[kOverflowBucket];
  buckets_[kOverflowBucket] = Bucket{};
  ClearBit(kOverflowBucket);
  overflow_min_ = UINT64_MAX;
  Entry e;
  while (PopFront(kFiringBucket, &e)) {
    if (e.expire <= now_ || TopDistance(e.expire, now_) < kSlots) {
      Link(e.index, e.expire);
    } else {
      LinkFar(e.index, e.expire);  // back to overflow; updates overflow_min_
    }
  }
}

// Fires a level-0 bucket. Its timers move to the firing bucket first, so a
// callback may cancel one not yet fired (found through its entry's bucket
// field) or schedule a due timer into the (now empty) level-0 bucket, which
// the Advance loop then fires too.
void TimerWheel::Fire(uint16_t bucket, Callback on_expire, size_t* fired) {
  Bucket& f = buckets_[kFiringBucket];
  f = buckets_[bucket];
  buckets_[bucket] = Bucket{};
  ClearBit(bucket);
  for (uint32_t c = f.head, at = f.begin; c != kNil;) {
    const uint32_t stop = c == f.tail ? f.end : kChunk;
    for (; at < stop; ++at) entries_[c * kChunk + at].bucket = kFiringBucket;
    c = c == f.tail ? kNil : chunk_next_[c];
    at = 0;
  }
  Entry e;
  while (PopFront(kFiringBucket, &e)) {
    const uint32_t index = e.index;
    const TimerHandle handle(index, nodes_[index].generation);
    const uint64_t payload = nodes_[index].payload;
    Release(index);
    ++*fired;
    on_expire(handle, payload);
  }
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
      case EventKind::kFire:
        Fire(static_cast<uint16_t>(ev.slot), on_expire, &fired);
        break;
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
