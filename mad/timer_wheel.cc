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

// Room for `want` elements in `array` (of which `used` are in use), growing
// it as a vector does: at least twice the old capacity.
template <typename T>
void GrowTo(std::unique_ptr<T[]>& array, uint32_t used, uint32_t* capacity,
            size_t want) {
  if (want <= *capacity) return;
  const size_t grown = std::max<size_t>(want, size_t{*capacity} * 2);
  ABSL_RAW_CHECK(grown < UINT32_MAX, "TimerWheel: too many timers");
  auto bigger = std::make_unique_for_overwrite<T[]>(grown);
  std::copy(array.get(), array.get() + used, bigger.get());
  array = std::move(bigger);
  *capacity = static_cast<uint32_t>(grown);
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

// A bucket of k entries spans at most k/16 + 1 chunks (a partly used tail);
// a cascade frees each chunk before relinking its entries, so it holds no
// more. So n pending timers never need more than n/16 + 1 per bucket chunks
// (Reserve allows 2 per bucket).
// Moves the sparse table's records to the array, for good.
// The occupancy bitmap starts here too (a sparse wheel keeps none).
void TimerWheel::AllocBuckets() {
  array_ = std::make_unique<BucketArray>();
  for (int i = 0; i < sparse_size_; ++i) {
    const uint16_t b = sparse_id_[i];
    array_->buckets[b] = sparse_[i];
    if (b != kFiringBucket) array_->occupied[b >> 6] |= uint64_t{1} << (b & 63);
  }
  sparse_size_ = 0;
}

TimerWheel::Bucket& TimerWheel::Add(uint16_t bucket) {
  if (sparse_size_ == kSparseBuckets) {
    AllocBuckets();
    return array_->buckets[bucket];
  }
  const int i = sparse_size_++;
  sparse_id_[i] = bucket;
  sparse_[i] = Bucket{};
  return sparse_[i];
}

void TimerWheel::Erase(uint16_t bucket) {
  if (array_ != nullptr) {
    array_->buckets[bucket] = Bucket{};
    return;
  }
  for (int i = 0; i < sparse_size_; ++i) {
    if (sparse_id_[i] != bucket) continue;
    const int last = --sparse_size_;
    sparse_id_[i] = sparse_id_[last];
    sparse_[i] = sparse_[last];
    return;
  }
}

void TimerWheel::Reserve(size_t n) {
  if (array_ == nullptr) AllocBuckets();
  GrowTo(nodes_, node_count_, &node_capacity_, n);
  GrowChunks(n / kChunk + 2 * size_t{kNumBuckets});
}

// The entries array grows with the chunk records (kChunk entries each).
void TimerWheel::GrowChunks(size_t want) {
  uint32_t entry_capacity = chunk_capacity_ * kChunk;
  GrowTo(entries_, chunk_count_ * kChunk, &entry_capacity, want * kChunk);
  GrowTo(chunks_, chunk_count_, &chunk_capacity_, entry_capacity / kChunk);
}

TimePoint TimerWheel::TickToTime(uint64_t tick) const {
  const __int128 ns =
      static_cast<__int128>(start_ns_) + static_cast<__int128>(tick) * tick_ns_;
  if (ns >= INT64_MAX) return TimePoint::Infinite();
  return TimePoint::FromNanos(static_cast<int64_t>(ns));
}

uint32_t TimerWheel::GrowNode() {
  ABSL_RAW_CHECK(node_count_ < kNil - 1, "TimerWheel: too many timers");
  GrowTo(nodes_, node_count_, &node_capacity_, size_t{node_count_} + 1);
  nodes_[node_count_] = Node{0, 1, kNil};
  return node_count_++;
}

// A new chunk's entries are left unwritten: every entry is written (Append)
// before it is read (reads stop at a bucket's end).
uint32_t TimerWheel::GrowChunk() {
  ABSL_RAW_CHECK(chunk_count_ < kNil / kChunk - 1,
                 "TimerWheel: too many timers");
  const uint32_t c = chunk_count_;
  GrowChunks(size_t{c} + 1);
  chunks_[c] = ChunkLinks{kNil, kNil, 0};
  ++chunk_count_;
  return c;
}

uint32_t TimerWheel::AppendChunk(uint16_t bucket, Bucket& b) {
  const uint32_t c = AllocChunk(bucket);
  if (b.head == kNil) {
    b.head = c;
    chunks_[c].prev = kNil;
    SetBit(bucket);
  } else {
    chunks_[b.tail].next = c;
    chunks_[c].prev = b.tail;
  }
  b.tail = c;
  return c << kChunkShift;
}

void TimerWheel::ShrinkTail(uint16_t bucket, Bucket& b) {
  if (b.tail == b.head) return FreeBucket(bucket, b);
  // The tail chunk is empty and is not the head: the chunk before it is full.
  const uint32_t empty = b.tail;
  b.tail = chunks_[empty].prev;
  chunks_[b.tail].next = kNil;
  b.end = (b.tail << kChunkShift) + kChunk;
  FreeChunk(empty);
}

bool TimerWheel::PopBack(uint16_t bucket, Entry* out) {
  Bucket* b = Find(bucket);
  if (b == nullptr || b->head == kNil) return false;
  const uint32_t last = b->end - 1;
  *out = entries_[last];
  b->end = last;
  if ((last & kChunkMask) == 0) ShrinkTail(bucket, *b);
  return true;
}

// `from` is non-empty (its bit is set), `to` empty.
void TimerWheel::MoveBucket(uint16_t from, uint16_t to) {
  ClearBit(from);
  Bucket b;
  if (array_ != nullptr) {
    b = array_->buckets[from];
    array_->buckets[from] = Bucket{};
    array_->buckets[to] = b;
  } else {
    Bucket* record = Find(from);
    if (record == nullptr) return;
    b = *record;
    sparse_id_[record - sparse_.data()] = to;  // the record now names `to`
  }
  for (uint32_t c = b.head; c != kNil; c = chunks_[c].next) chunks_[c].owner = to;
}

void TimerWheel::FreeBucket(uint16_t bucket, Bucket& b) {
  uint32_t c = b.head;
  while (c != kNil) {
    const uint32_t next = chunks_[c].next;
    FreeChunk(c);
    c = next;
  }
  Erase(bucket);
  ClearBit(bucket);
}

void TimerWheel::LinkFar(uint32_t index, uint64_t expire) {
  if (TopDistance(expire, now_) < kSlots) {
    // The top level is a ring: the slot may lie in its next revolution.
    const uint64_t slot = (expire >> kTopShift) & kSlotMask;
    Append(static_cast<uint16_t>(kTopLevel * kSlots + slot), expire, index);
    return;
  }
  if ((level_mask_ & (1u << kLevels)) == 0) overflow_min_ = UINT64_MAX;
  overflow_min_ = std::min(overflow_min_, expire);
  Append(kOverflowBucket, expire, index);
}

int TimerWheel::AheadInBitmap(int level, int now_slot) const {
  const uint64_t* words = &array_->occupied[level * kWordsPerLevel];
  const unsigned first = static_cast<unsigned>(now_slot) / 64;
  for (unsigned k = 0; k <= kWordsPerLevel; ++k) {
    const unsigned w = (first + k) & (kWordsPerLevel - 1);
    uint64_t bits = words[w];
    if (k == 0) bits &= ~uint64_t{0} << (now_slot & 63);
    if (k == kWordsPerLevel) bits &= ~(~uint64_t{0} << (now_slot & 63));
    if (bits != 0) {
      const unsigned slot = w * 64 + std::countr_zero(bits);
      return static_cast<int>((slot - static_cast<unsigned>(now_slot)) &
                              kSlotMask);
    }
  }
  return 0;
}

// The same answer from the sparse table's bucket numbers (the firing
// bucket's level, kLevels, is never asked for).
int TimerWheel::AheadInSparse(int level, int now_slot) const {
  int ahead = kSlots;
  for (int i = 0; i < sparse_size_; ++i) {
    const int id = sparse_id_[i];
    if (id / kSlots != level) continue;
    ahead = std::min(ahead, static_cast<int>((id - now_slot) & kSlotMask));
  }
  return ahead == kSlots ? 0 : ahead;
}

// Levels are ordered in time: every level-L bucket starts before the next
// 256^(L+1)-tick boundary, every level-(L+1) bucket at or after it. So the
// next event is the first occupied bucket (from the current slot on) of the
// lowest occupied level, or the overflow re-examination if that comes first.
TimerWheel::Event TimerWheel::NextEvent() const {
  Event ev;
  if (size_ == 0) return ev;  // nothing pending (the overflow bucket too)
  if (const unsigned levels = level_mask_ & ((1u << kLevels) - 1); levels != 0) {
    const int level = std::countr_zero(levels);  // the lowest occupied level
    const int shift = kBitsPerLevel * level;
    const int now_slot = static_cast<int>((now_ >> shift) & kSlotMask);
    // First occupied slot at or after now_slot, cyclically.
    const int ahead = array_ != nullptr ? AheadInBitmap(level, now_slot)
                                          : AheadInSparse(level, now_slot);
    const int raw_slot = now_slot + ahead;
    const int block_shift = shift + kBitsPerLevel;
    uint64_t tick = (now_ >> block_shift) << block_shift;
    tick += static_cast<uint64_t>(raw_slot) << shift;  // may pass the block end
    ev.kind = level == 0 ? EventKind::kFire : EventKind::kCascade;
    ev.tick = std::max(tick, now_);
    ev.level = level;
    ev.slot = raw_slot & static_cast<int>(kSlotMask);
  }
  if ((level_mask_ & (1u << kLevels)) != 0) {
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
// overlap. The bucket is detached first; relinks land on lower levels. Each
// chunk's entries are copied out and the chunk freed before they are
// relinked, so that the first chunk a relink needs is that one (the free
// list is last in, first out), whose lines were just read, not a cold one.
void TimerWheel::Cascade(int level, int slot) {
  const uint16_t bucket = static_cast<uint16_t>(level * kSlots + slot);
  const Bucket b = Occupied(bucket);
  Erase(bucket);
  ClearBit(bucket);
  // Entries [from, to) of chunk c.
  auto span = [&b](uint32_t c, uint32_t* from, uint32_t* to) {
    *from = c << kChunkShift;
    *to = c == b.tail ? b.end : (c << kChunkShift) + kChunk;
  };
  auto prefetch_nodes = [this, &span](uint32_t c) {
    uint32_t from, to;
    span(c, &from, &to);
    for (uint32_t k = from; k < to; ++k) {
      __builtin_prefetch(&nodes_[entries_[k].index], 1);
    }
  };
  prefetch_nodes(b.head);
  for (uint32_t c = b.head; c != kNil;) {
    const uint32_t next = c == b.tail ? kNil : chunks_[c].next;
    if (next != kNil) {
      const Entry* n = &entries_[next << kChunkShift];
      __builtin_prefetch(n);
      __builtin_prefetch(n + 4);
      __builtin_prefetch(n + 8);
      __builtin_prefetch(n + 12);
    }
    uint32_t from, to;
    span(c, &from, &to);
    std::array<Entry, kChunk> moved;
    std::copy(&entries_[from], &entries_[to], moved.begin());
    FreeChunk(c);
    for (uint32_t k = 0; k < to - from; ++k) Link(moved[k].index, moved[k].expire);
    if (next != kNil) prefetch_nodes(next);
    c = next;
  }
}

void TimerWheel::DrainOverflow() {
  // Move the overflow bucket aside so that timers still out of range can be
  // appended to it again.
  MoveBucket(kOverflowBucket, kFiringBucket);
  overflow_min_ = UINT64_MAX;
  Entry e;
  while (PopBack(kFiringBucket, &e)) {
    if (e.expire <= now_ || TopDistance(e.expire, now_) < kSlots) {
      Link(e.index, e.expire);
    } else {
      LinkFar(e.index, e.expire);  // back to overflow; updates overflow_min_
    }
  }
}

// Fires a level-0 bucket (all its timers are due at this tick; they fire from
// the back). Its timers move to the firing bucket first, so a callback may
// cancel one not yet fired (its chunk's owner says where it is) or schedule a
// due timer into the (now empty) level-0 bucket, which the Advance loop then
// fires too.
void TimerWheel::Fire(uint16_t bucket, Callback on_expire, size_t* fired) {
  MoveBucket(bucket, kFiringBucket);
  Entry e;
  while (PopBack(kFiringBucket, &e)) {
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

// A cascade is bookkeeping, not an expiry: answering its tick wakes the
// owner for nothing (a simulated host with one pending CM timer woke once per
// level the timer moved down: 2 of its 11 wakes per connection at 10,240
// hosts). The first bucket of the lowest occupied level holds the earliest
// timer (levels and, within a level, buckets are ordered in time), so when
// that bucket is a single chunk its minimum is the exact answer for at most
// 16 reads. A larger bucket is shared by many timers, and so is its cascade.
absl::optional<TimePoint> TimerWheel::NextDeadline() const {
  const Event ev = NextEvent();
  if (ev.kind == EventKind::kNone) return absl::nullopt;
  if (ev.kind != EventKind::kCascade) return TickToTime(ev.tick);
  const Bucket& b = *Find(static_cast<uint16_t>(ev.level * kSlots + ev.slot));
  if (b.head != b.tail) return TickToTime(ev.tick);
  uint64_t earliest = UINT64_MAX;
  for (uint32_t k = b.head << kChunkShift; k < b.end; ++k) {
    earliest = std::min(earliest, entries_[k].expire);
  }
  return TickToTime(std::max(earliest, ev.tick));
}

}  // namespace uscm::mad
