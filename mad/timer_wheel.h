// A hierarchical timing wheel for the CM and SA timers (response timeouts,
// retries, MRA extensions, TimeWait). Sans-IO: time is passed in; the owner
// arms one OS timer (or jumps virtual time) to NextDeadline() and calls
// Advance.
//
// Time is counted in ticks of a fixed length from `start`. A deadline d is
// rounded UP to a tick boundary: its timer fires during the first
// Advance(now) with now >= start + ceil((d - start) / tick) * tick. So a timer
// never fires before its deadline and never more than one tick after the first
// Advance at or past it (exactly: the firing tick is < d + tick). A deadline
// already due when scheduled fires at the next Advance.
//
// Structure: kLevels levels of 256 buckets; level L buckets are 256^L ticks
// wide. A timer sits at the level of the highest 8-bit digit in which its
// expiry tick differs from the current tick (Linux/tokio style). When time
// reaches a bucket at level L > 0 its timers cascade to lower levels (each
// timer cascades at most kLevels - 1 times; a 1 s timer at a 1 us tick twice).
// The top level is a ring; timers more than 256^kLevels ticks ahead wait in an
// overflow bucket that is re-examined when time comes within range, so the
// range is unbounded. Occupancy bitmaps (one bit per bucket) make finding the
// next non-empty bucket O(1), so a jump of hours costs O(timers touched +
// levels), not O(elapsed ticks).
//
// Buckets are arrays, not linked lists: each bucket is a chain of 16-entry
// chunks of (expiry, node index) taken from one shared pool, so a cascade
// reads its source sequentially (prefetching the nodes it will update) and a
// schedule appends at the bucket's tail. Cancel moves the bucket's last entry
// into the hole (order within a bucket carries no meaning), so buckets stay
// dense: no tombstones, no compaction, and an emptied bucket is released at
// once, so the occupancy bits (and NextDeadline) only see live timers. A
// chunk's owner is kept in a 12-byte record beside the chunk's links, so a
// cancel touches the timer's node, that record, its bucket and the bucket's
// tail, but not its own entry.
// Bucket records: while at most kSparseBuckets buckets are non-empty (a wheel
// holding a few timers), their records sit in a small table inside the wheel,
// found by bucket number, instead of in the 1,538-record array (24 KB, one
// cache line per bucket touched: on a cold wheel a miss per schedule, cancel
// and cascade). The array is allocated when a bucket beyond that is needed
// (or by Reserve) and used from then on. Only where a record is stored
// changes: chunks, entries and every order are the same either way.
// Timer state (payload, generation, entry position) is a 16-byte node in one
// vector with a free list. After Reserve(n), up to n pending timers need no
// allocation. Handles carry a 32-bit generation, so Cancel of a fired,
// cancelled or never-issued handle returns false in O(1). (A stale handle
// could alias only after exactly 2^32 reuses of its node.)
//
// Not thread-safe. Callbacks run inside Advance and may Schedule, Cancel and
// Reschedule (any timer, including ones due in the same Advance); they must
// not call Advance.
#ifndef USCM_MAD_TIMER_WHEEL_H_
#define USCM_MAD_TIMER_WHEEL_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/functional/function_ref.h"
#include "absl/types/optional.h"
#include "mad/time.h"

namespace uscm::mad {

class TimerHandle {
 public:
  constexpr TimerHandle() = default;  // refers to no timer; Cancel is false
  constexpr bool operator==(const TimerHandle&) const = default;

 private:
  friend class TimerWheel;
  constexpr TimerHandle(uint32_t index, uint32_t generation)
      : index_(index), generation_(generation) {}
  uint32_t index_ = UINT32_MAX;
  uint32_t generation_ = 0;
};

class alignas(64) TimerWheel {
 public:
  static constexpr int kBitsPerLevel = 8;
  static constexpr int kSlots = 1 << kBitsPerLevel;  // buckets per level
  static constexpr int kLevels = 6;  // 256^6 = 2^48 ticks before overflow
  static constexpr int kRangeBits = kBitsPerLevel * kLevels;
  // Non-empty buckets whose records fit the wheel's own table (below).
  static constexpr int kSparseBuckets = 16;

  using Callback = absl::FunctionRef<void(TimerHandle, uint64_t payload)>;

  // `tick` must be positive. Time before `start` counts as `start`.
  TimerWheel(TimePoint start, Duration tick);
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  // Room for `n` pending timers without further allocation.
  void Reserve(size_t n);

  TimerHandle Schedule(TimePoint deadline, uint64_t payload);
  // True if the timer was pending (now it is not); false for a handle that
  // fired, was cancelled, or is default-constructed.
  bool Cancel(TimerHandle handle);
  // Moves a pending timer to a new deadline; the handle stays valid. False (and
  // nothing happens) if the handle is not pending.
  bool Reschedule(TimerHandle handle, TimePoint deadline);
  bool IsPending(TimerHandle handle) const;

  // Moves time forward to `now` (an earlier `now` is treated as the current
  // time) and calls `on_expire` once for every timer that became due, in tick
  // order (ties in unspecified but deterministic order). Timers scheduled by a
  // callback that are due by `now` also fire in this call (so a callback that
  // always schedules an already-due timer never returns). Returns the number
  // fired. Cost: O(fired + cascaded + levels), independent of how far time
  // jumped.
  size_t Advance(TimePoint now, Callback on_expire);

  // When Advance next has work, or nullopt when nothing is pending. Guarantee:
  // never later than the firing time (start + tick * ceil-tick) of the earliest
  // pending timer, or than now() if that timer is already due (a past deadline
  // scheduled since the last Advance). It is exact when that timer is within
  // 256 ticks of the current tick or shares its bucket with at most 15 others
  // (so a wheel with few timers never asks for a wake that fires nothing);
  // otherwise it is the start of the bucket that must be cascaded first.
  // Advance(NextDeadline()) always makes progress; at most kLevels + 2 such
  // calls reach the earliest timer. Returns a time <= the
  // current time if a timer is already due. O(1) (at most 16 entries read);
  // an empty wheel answers without looking at the bitmaps.
  absl::optional<TimePoint> NextDeadline() const;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Whether the bucket records moved to the 24 KB array (more than
  // kSparseBuckets buckets were non-empty at once, or Reserve was called).
  bool uses_bucket_array() const { return array_ != nullptr; }
  Duration tick() const { return Duration::Nanos(tick_ns_); }
  // The current time, rounded down to a tick.
  TimePoint now() const { return TickToTime(now_); }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  static constexpr int kWordsPerLevel = kSlots / 64;
  static constexpr uint16_t kOverflowBucket = kLevels * kSlots;
  // Holds the timers of the level-0 bucket being fired, so that callbacks can
  // schedule into that (now empty) bucket and cancel the ones not yet fired.
  static constexpr uint16_t kFiringBucket = kOverflowBucket + 1;
  static constexpr uint16_t kNumBuckets = kFiringBucket + 1;
  static constexpr int kOverflowWord = kOverflowBucket / 64;
  static_assert(kOverflowBucket % 64 == 0);
  static constexpr uint32_t kChunk = 16;  // entries per chunk
  static constexpr uint32_t kChunkMask = kChunk - 1;
  static constexpr int kChunkShift = 4;
  static_assert(kChunk == 1u << kChunkShift);

  struct Node {
    uint64_t payload;
    uint32_t generation;
    uint32_t slot;  // pending: its entry in entries_; free: next free node
  };
  struct Entry {
    uint64_t expire;  // tick
    uint32_t index;   // node
  };
  static_assert(sizeof(Node) == 16 && sizeof(Entry) == 16);
  struct ChunkLinks {
    uint32_t next;   // chain link (or free list link)
    uint32_t prev;   // chain link back (unused at the head)
    uint16_t owner;  // the bucket the chunk belongs to
  };
  // A chain of chunks holding entries [head * kChunk, end) in chain order,
  // where end is a position in entries_ (chunk * kChunk + offset) in the tail
  // chunk: all chunks but the tail are full, the tail holds at least one
  // entry. So `end % kChunk == 0` means "no room at the tail" (or no chunk at
  // all). Entries are taken from the back (Remove, firing, draining), never
  // from the front. Empty bucket: no chunk, head = tail = kNil, end = 0.
  struct alignas(16) Bucket {
    uint32_t head = kNil;
    uint32_t tail = kNil;
    uint32_t end = 0;
  };
  static_assert(sizeof(Bucket) == 16);
  // The array mode's records. Bit b of the bitmap: bucket b is non-empty
  // (level L owns words [L * kWordsPerLevel, (L + 1) * kWordsPerLevel); the
  // overflow bucket is bit 0 of word kOverflowWord). A sparse wheel has no
  // bitmap: its bucket numbers are in sparse_id_ (AllocBuckets fills the
  // bitmap in from them).
  struct BucketArray {
    alignas(64) std::array<uint64_t, kOverflowWord + 1> occupied{};  // a level in one line
    std::array<Bucket, kNumBuckets> buckets{};
  };
  enum class EventKind { kNone, kFire, kCascade, kOverflow };
  struct Event {
    EventKind kind = EventKind::kNone;
    uint64_t tick = 0;
    int level = 0;
    int slot = 0;
  };

  uint64_t DeadlineToTick(TimePoint deadline) const;  // rounded up
  uint64_t TimeToTick(TimePoint t) const;             // rounded down
  TimePoint TickToTime(uint64_t tick) const;
  uint64_t DivTick(uint64_t n, uint64_t* remainder) const;

  uint32_t GrowNode();  // a new node at the end of nodes_ (allocates)
  void AllocBuckets();
  bool Valid(TimerHandle h) const;

  // Puts node `index` in the bucket its expiry calls for.
  void Link(uint32_t index, uint64_t expire);
  void LinkFar(uint32_t index, uint64_t expire);  // top ring or overflow
  void Append(uint16_t bucket, uint64_t expire, uint32_t index);
  // Makes room for one entry at the tail of a bucket whose tail chunk is full
  // or that has no chunk; returns the position to write.
  uint32_t AppendChunk(uint16_t bucket, Bucket& b);
  void Remove(uint32_t slot);  // a pending timer's entry
  // The tail chunk became empty: frees it (and the bucket if that was all).
  void ShrinkTail(uint16_t bucket, Bucket& b);
  void Release(uint32_t index);  // node -> free list

  uint32_t AllocChunk(uint16_t owner);
  uint32_t GrowChunk();  // allocates
  void GrowChunks(size_t want);  // room for `want` chunks (allocates)
  void FreeChunk(uint32_t chunk) {
    chunks_[chunk].next = free_chunk_;
    free_chunk_ = chunk;
  }
  // Takes the last entry of `bucket` (freeing emptied chunks), or false when
  // it is empty (then it holds no chunk).
  bool PopBack(uint16_t bucket, Entry* out);
  // Moves bucket `from` (its chunks relabelled) to the empty bucket `to`.
  void MoveBucket(uint16_t from, uint16_t to);
  void FreeBucket(uint16_t bucket, Bucket& b);

  // Bucket records (sparse table or array; see the top of this file).
  // The record of `bucket`, or null if it is empty (the array's records of
  // empty buckets are returned too: they read head == kNil).
  const Bucket* Find(uint16_t bucket) const;
  Bucket* Find(uint16_t bucket) {
    return const_cast<Bucket*>(static_cast<const TimerWheel*>(this)->Find(bucket));
  }
  // The record of a non-empty bucket.
  Bucket& Occupied(uint16_t bucket) { return *Find(bucket); }
  // The record of `bucket`, added empty if absent (may move every record to
  // the array: a reference to another record does not survive this call).
  Bucket& FindOrAdd(uint16_t bucket);
  Bucket& Add(uint16_t bucket);  // absent from the sparse table
  // `bucket` is empty now: its record is forgotten (the array's is reset).
  void Erase(uint16_t bucket);
  // The occupancy bitmap (array mode) and its summary (one bit per level
  // and the overflow bucket), so that NextEvent reads one level's words, not
  // all. A sparse wheel keeps the summary only: its bucket numbers are in
  // sparse_id_, in the line it reads anyway.
  void SetBit(uint16_t b) {
    if (array_ != nullptr) array_->occupied[b >> 6] |= uint64_t{1} << (b & 63);
    level_mask_ |= static_cast<uint8_t>(1u << (b / kSlots));
  }
  void ClearBit(uint16_t b) {
    const int level = b / kSlots;
    uint64_t any = 0;
    if (array_ != nullptr) {
      array_->occupied[b >> 6] &= ~(uint64_t{1} << (b & 63));
      for (int w = 0; w < kWordsPerLevel && level * kWordsPerLevel + w <= kOverflowWord; ++w) {
        any |= array_->occupied[level * kWordsPerLevel + w];
      }
    } else {
      // `b` may still be listed (MoveBucket relabels it after this); the
      // firing bucket is never counted (its number is past the overflow's).
      for (int i = 0; i < sparse_size_; ++i) {
        const uint16_t id = sparse_id_[i];
        any |= id != b && id < kFiringBucket && id / kSlots == level;
      }
    }
    if (any == 0) level_mask_ &= static_cast<uint8_t>(~(1u << level));
  }

  Event NextEvent() const;
  // How many slots after `now_slot` (cyclically, 0 for itself) the first
  // non-empty bucket of `level` lies, from the bitmap or the sparse table.
  int AheadInBitmap(int level, int now_slot) const;
  int AheadInSparse(int level, int now_slot) const;
  void Cascade(int level, int slot);
  void DrainOverflow();
  void Fire(uint16_t bucket, Callback on_expire, size_t* fired);

  // Where the fields sit matters more than their count: a simulated host's
  // wheel is cold at each use (10,000 others ran since), so each cache line
  // an operation touches is a miss. The class starts a line; a wheel in
  // sparse mode touches line 0 (the counters and the node pointer), line 1
  // (the entry and chunk pointers and the sparse table's bucket numbers) and
  // the lines of the records it uses (the first four share line 2); the
  // occupancy bitmap lives with the array mode's records.
  // Line 0.
  uint64_t now_ = 0;  // current tick
  const int64_t start_ns_;
  const uint64_t tick_ns_;
  const uint64_t tick_reciprocal_;  // floor((2^64 - 1) / tick_ns_)
  uint32_t size_ = 0;
  uint32_t node_count_ = 0;  // nodes in use or on the free list
  uint32_t free_head_ = kNil;
  uint32_t free_chunk_ = kNil;
  bool in_advance_ = false;
  uint8_t level_mask_ = 0;  // bit L: level L has a non-empty bucket; bit kLevels: overflow
  // The records of non-empty buckets while there are few (sparse_size_ of
  // them, in no particular order), unused once array_ is allocated.
  uint8_t sparse_size_ = 0;
  std::unique_ptr<Node[]> nodes_;  // node_capacity_ of them
  // Line 1.
  std::unique_ptr<Entry[]> entries_;  // kChunk per chunk
  // One record per chunk (its links and owner side by side: one cache line
  // to touch, where three arrays cost three misses on a cold wheel).
  std::unique_ptr<ChunkLinks[]> chunks_;  // chunk_capacity_ of them
  std::array<uint16_t, kSparseBuckets> sparse_id_{};
  // Every bucket's record (24 KB) and the occupancy bitmap, allocated when
  // more than kSparseBuckets buckets are non-empty at once: a wheel that
  // holds a few timers at a time (an idle or lightly used simulated host's
  // CM endpoint and agent) never allocates them.
  std::unique_ptr<BucketArray> array_;
  uint32_t chunk_count_ = 0;  // chunks in use or on the free list
  // Lines 2 to 5.
  alignas(64) std::array<Bucket, kSparseBuckets> sparse_{};
  // Line 6: read when an array grows or a timer is years ahead.
  uint32_t node_capacity_ = 0;
  uint32_t chunk_capacity_ = 0;
  uint64_t overflow_min_ = UINT64_MAX;  // <= min expiry in the overflow list
};

// ---- Hot path, inline so callers pay no call or PIC interposition cost. ----

// n / tick_ns_ without a hardware divide: the reciprocal estimate is at most a
// few units low, fixed up by subtraction.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint64_t TimerWheel::DivTick(
    uint64_t n, uint64_t* remainder) const {
  uint64_t q = static_cast<uint64_t>(
      (static_cast<unsigned __int128>(n) * tick_reciprocal_) >> 64);
  uint64_t r = n - q * tick_ns_;
  while (r >= tick_ns_) {
    ++q;
    r -= tick_ns_;
  }
  *remainder = r;
  return q;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint64_t TimerWheel::TimeToTick(
    TimePoint t) const {
  if (t.nanos() <= start_ns_) return 0;
  uint64_t r;
  return DivTick(
      static_cast<uint64_t>(t.nanos()) - static_cast<uint64_t>(start_ns_), &r);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint64_t TimerWheel::DeadlineToTick(
    TimePoint deadline) const {
  if (deadline.nanos() <= start_ns_) return 0;
  uint64_t r;
  const uint64_t q = DivTick(static_cast<uint64_t>(deadline.nanos()) -
                                 static_cast<uint64_t>(start_ns_),
                             &r);
  return q + (r != 0 ? 1 : 0);
}

// The generation is bumped when a node is freed, so a handle matches only
// while its timer is pending.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool TimerWheel::Valid(
    TimerHandle h) const {
  return h.index_ < node_count_ && nodes_[h.index_].generation == h.generation_;
}

inline bool TimerWheel::IsPending(TimerHandle handle) const {
  return Valid(handle);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline const TimerWheel::Bucket* TimerWheel::Find(
    uint16_t bucket) const {
  if (array_ != nullptr) return &array_->buckets[bucket];
  for (int i = 0; i < sparse_size_; ++i) {
    if (sparse_id_[i] == bucket) return &sparse_[i];
  }
  return nullptr;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline TimerWheel::Bucket& TimerWheel::FindOrAdd(
    uint16_t bucket) {
  if (Bucket* b = Find(bucket)) return *b;
  return Add(bucket);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t TimerWheel::AllocChunk(
    uint16_t owner) {
  uint32_t c = free_chunk_;
  if (c == kNil) {
    c = GrowChunk();
  } else {
    free_chunk_ = chunks_[c].next;
  }
  chunks_[c].next = kNil;
  chunks_[c].owner = owner;
  return c;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void TimerWheel::Append(uint16_t bucket,
                                                            uint64_t expire,
                                                            uint32_t index) {
  Bucket& b = FindOrAdd(bucket);
  uint32_t slot = b.end;
  if ((slot & kChunkMask) == 0) [[unlikely]]
    slot = AppendChunk(bucket, b);
  b.end = slot + 1;
  entries_[slot] = Entry{expire, index};
  nodes_[index].slot = slot;
}

// Swap-remove: the bucket's last entry fills the hole.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void TimerWheel::Remove(uint32_t slot) {
  const uint16_t bucket = chunks_[slot >> kChunkShift].owner;
  Bucket& b = Occupied(bucket);
  const uint32_t last = b.end - 1;
  if (slot != last) {
    const Entry moved = entries_[last];
    entries_[slot] = moved;
    nodes_[moved.index].slot = slot;
  }
  b.end = last;
  if ((last & kChunkMask) == 0) [[unlikely]]
    ShrinkTail(bucket, b);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void TimerWheel::Release(uint32_t index) {
  Node& n = nodes_[index];
  ++n.generation;
  n.slot = free_head_;
  free_head_ = index;
  --size_;
}

// A timer sits at the level of the highest 8-bit digit in which its expiry
// differs from the current tick; a due one in the current level-0 bucket.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void TimerWheel::Link(uint32_t index,
                                                          uint64_t expire) {
  if (expire <= now_) {
    return Append(static_cast<uint16_t>(now_ & (kSlots - 1)), expire, index);
  }
  const int bit = 63 - std::countl_zero((expire ^ now_) | (kSlots - 1));
  const int level = bit / kBitsPerLevel;
  if (level >= kLevels) return LinkFar(index, expire);
  const uint64_t slot = (expire >> (kBitsPerLevel * level)) & (kSlots - 1);
  Append(static_cast<uint16_t>(level * kSlots + slot), expire, index);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline TimerHandle TimerWheel::Schedule(
    TimePoint deadline, uint64_t payload) {
  uint32_t index = free_head_;
  if (index != kNil) {
    free_head_ = nodes_[index].slot;
  } else {
    index = GrowNode();
  }
  nodes_[index].payload = payload;
  Link(index, DeadlineToTick(deadline));
  ++size_;
  return TimerHandle(index, nodes_[index].generation);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool TimerWheel::Cancel(
    TimerHandle handle) {
  if (!Valid(handle)) return false;
  Remove(nodes_[handle.index_].slot);
  Release(handle.index_);
  return true;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool TimerWheel::Reschedule(
    TimerHandle handle, TimePoint deadline) {
  if (!Valid(handle)) return false;
  Remove(nodes_[handle.index_].slot);
  Link(handle.index_, DeadlineToTick(deadline));
  return true;
}

}  // namespace uscm::mad

#endif  // USCM_MAD_TIMER_WHEEL_H_
