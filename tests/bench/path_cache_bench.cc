// PathCache lookups (the reconnect fast path) against an ordered std::map of
// the same keys as the in-process baseline, plus a full SaClient::GetPath
// served from the cache (query build, lookup, result queue, PollResult).
//
//   bazel run -c opt //tests/bench:path_cache_bench
//
// Compare items_per_second of BM_PathCacheLookup with BM_StdMapLookup at the
// same size; the goal is >= 1M lookups/s for BM_ClientCachedGetPath.
#include <map>
#include <tuple>
#include <vector>

#include "benchmark/benchmark.h"
#include "mad/agent.h"
#include "sa/client.h"
#include "sa/path_cache.h"

namespace uscm::sa {
namespace {

mad::Gid G(uint64_t id) { return mad::Gid::FromParts(0xfe80000000000000ULL, id); }

PathCacheKey Key(uint64_t i) {
  PathCacheKey k;
  k.sgid = G(1);
  k.dgid = G(2 + i);
  k.service_id = 0x1060000 + (i & 0xFF);
  return k;
}

void BM_PathCacheLookup(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  PathCache cache(n);
  const mad::TimePoint now = mad::TimePoint::Epoch();
  for (size_t i = 0; i < n; ++i) {
    cache.Insert(now, Key(i), mad::wire::PathRecord{}, mad::Duration::Seconds(3600));
  }
  std::vector<PathCacheKey> keys;
  for (size_t i = 0; i < 1024; ++i) keys.push_back(Key((i * 7919) % n));
  size_t i = 0;
  for (auto _ : state) {
    auto hit = cache.Lookup(now, keys[i++ & 1023]);
    benchmark::DoNotOptimize(hit);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PathCacheLookup)->Arg(1024)->Arg(65536);

// Baseline: the same keys in an ordered map.
void BM_StdMapLookup(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  using K = std::tuple<mad::Gid, mad::Gid, uint16_t, uint64_t, uint8_t, uint8_t>;
  auto tuple = [](const PathCacheKey& k) {
    return K{k.sgid, k.dgid, k.pkey, k.service_id, k.sl, k.tclass};
  };
  std::map<K, std::pair<mad::wire::PathRecord, mad::TimePoint>> map;
  for (size_t i = 0; i < n; ++i) map[tuple(Key(i))] = {mad::wire::PathRecord{}, {}};
  std::vector<K> keys;
  for (size_t i = 0; i < 1024; ++i) keys.push_back(tuple(Key((i * 7919) % n)));
  size_t i = 0;
  for (auto _ : state) {
    auto it = map.find(keys[i++ & 1023]);
    benchmark::DoNotOptimize(it);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StdMapLookup)->Arg(1024)->Arg(65536);

// A reconnect asking the client for a path that is cached: no MAD is sent.
void BM_ClientCachedGetPath(benchmark::State& state) {
  mad::Agent agent(mad::AgentConfig{}, mad::TimePoint::Epoch());
  PathCache cache;
  SaClientConfig cfg;
  cfg.path_cache = &cache;
  SaClient client(&agent, cfg);
  const mad::TimePoint now = mad::TimePoint::Epoch();
  const PathQuery q = PathQuery::RdmaCm(G(1), G(2), 0xFFFF, 0x1060000);
  PathCacheKey k;
  k.sgid = G(1);
  k.dgid = G(2);
  k.pkey = 0xFFFF;
  k.service_id = 0x1060000;
  cache.Insert(now, k, mad::wire::PathRecord{}, mad::Duration::Seconds(3600));
  for (auto _ : state) {
    auto id = client.GetPath(now, q);
    auto r = client.PollResult();
    benchmark::DoNotOptimize(id);
    benchmark::DoNotOptimize(r);
  }
  if (agent.counters().sent != 0) state.SkipWithError("a cached lookup sent a MAD");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClientCachedGetPath);

}  // namespace
}  // namespace uscm::sa
