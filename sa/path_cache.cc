#include "sa/path_cache.h"

#include <vector>

namespace uscm::sa {

absl::optional<mad::wire::PathRecord> PathCache::Lookup(mad::TimePoint now,
                                                        const PathCacheKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++counters_.misses;
    return absl::nullopt;
  }
  if (now >= it->second.expires) {
    entries_.erase(it);
    ++counters_.expired;
    ++counters_.misses;
    return absl::nullopt;
  }
  ++counters_.hits;
  return it->second.path;
}

void PathCache::MakeRoom(mad::TimePoint now) {
  if (entries_.size() < capacity_) return;
  absl::erase_if(entries_, [&](const auto& kv) {
    if (now < kv.second.expires) return false;
    ++counters_.expired;
    return true;
  });
  if (entries_.size() < capacity_ || entries_.empty()) return;
  auto oldest = entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.expires < oldest->second.expires) oldest = it;
  }
  entries_.erase(oldest);
  ++counters_.evicted;
}

void PathCache::Insert(mad::TimePoint now, const PathCacheKey& key,
                       const mad::wire::PathRecord& path, mad::Duration ttl) {
  if (capacity_ == 0) return;
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    MakeRoom(now);
    entries_.emplace(key, Entry{path, now + ttl});
  } else {
    it->second = Entry{path, now + ttl};
  }
}

size_t PathCache::InvalidateGid(const mad::Gid& gid) {
  const size_t n = absl::erase_if(entries_, [&](const auto& kv) {
    return kv.first.sgid == gid || kv.first.dgid == gid;
  });
  counters_.invalidated += n;
  return n;
}

void PathCache::Clear() {
  counters_.invalidated += entries_.size();
  entries_.clear();
}

}  // namespace uscm::sa
