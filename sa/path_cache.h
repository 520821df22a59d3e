// A PathRecord cache so that a reconnect asks the SA nothing: keyed by what
// selects a path (SGID, DGID, P_Key, ServiceID, SL, TClass), with expiry and
// invalidation by GID (either end) or wholesale (SM change, port event).
// Lookups are one hash probe (tests/bench/path_cache_bench.cc measures them).
#ifndef USCM_SA_PATH_CACHE_H_
#define USCM_SA_PATH_CACHE_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/types/optional.h"
#include "mad/gid.h"
#include "mad/time.h"
#include "mad/wire/path_record.h"

namespace uscm::sa {

struct PathCacheKey {
  mad::Gid sgid;
  mad::Gid dgid;
  uint16_t pkey = 0xFFFF;
  uint64_t service_id = 0;
  uint8_t sl = 0xFF;      // 0xFF: any
  uint8_t tclass = 0;

  friend bool operator==(const PathCacheKey&, const PathCacheKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const PathCacheKey& k) {
    return H::combine(std::move(h), k.sgid, k.dgid, k.pkey, k.service_id, k.sl, k.tclass);
  }
};

struct PathCacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t expired = 0;
  uint64_t invalidated = 0;
  uint64_t evicted = 0;
};

class PathCache {
 public:
  // At most `capacity` entries; when full, an insert first drops the expired
  // ones and then, if still full, the entry closest to expiry.
  explicit PathCache(size_t capacity = 65536) : capacity_(capacity) {}

  // The cached path if present and not expired at `now` (an expired entry is
  // removed and counts as a miss).
  absl::optional<mad::wire::PathRecord> Lookup(mad::TimePoint now, const PathCacheKey& key);
  void Insert(mad::TimePoint now, const PathCacheKey& key, const mad::wire::PathRecord& path,
              mad::Duration ttl);
  // Drops every path from or to `gid`; returns how many.
  size_t InvalidateGid(const mad::Gid& gid);
  void Clear();

  size_t size() const { return entries_.size(); }
  const PathCacheCounters& counters() const { return counters_; }

 private:
  struct Entry {
    mad::wire::PathRecord path;
    mad::TimePoint expires;
  };
  void MakeRoom(mad::TimePoint now);

  size_t capacity_;
  absl::flat_hash_map<PathCacheKey, Entry> entries_;
  PathCacheCounters counters_;
};

}  // namespace uscm::sa

#endif  // USCM_SA_PATH_CACHE_H_
