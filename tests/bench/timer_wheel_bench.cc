// TimerWheel against two baselines measured in the same process:
//   heap:  std::push_heap/pop_heap on a vector (what std::priority_queue does)
//          with lazy deletion (cancel bumps a generation; dead entries are
//          dropped when they reach the top or by a rebuild once they outnumber
//          the live ones, so memory stays bounded);
//   btree: absl::btree_multimap<deadline, id>; cancel erases by (deadline, id).
// Scenarios, each with 1k, 100k and 1M timers pending:
//   ScheduleCancel  one schedule + one cancel per iteration (a CM timer that
//                   is answered in time);
//   ScheduleExpire  one schedule per iteration, time moves so that on average
//                   one timer expires per iteration (steady state);
//   OpLatency       median (and p90) time of a single schedule and of a single
//                   cancel, from timed batches of 64 (cancelled in shuffled
//                   order).
//
// Instruction counts: `timer_wheel_bench --ops=SCENARIO:IMPL:PENDING:N` runs N
// iterations outside the benchmark framework; run it under
// `valgrind --tool=callgrind` with N and 2N and divide the difference by N.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "benchmark/benchmark.h"
#include "mad/time.h"
#include "mad/timer_wheel.h"

namespace uscm::mad {
namespace {

constexpr TimePoint kStart = TimePoint::FromNanos(1000000000);
constexpr Duration kTick = Duration::Micros(1);
constexpr size_t kDelayCount = 1 << 16;

// The adapters below are benchmark glue: forced inline for all three, so that
// no implementation pays (or is spared) an out-of-line wrapper call depending
// on the compiler's inlining budget.
#define ALWAYS_INLINE __attribute__((always_inline)) inline

// The same pseudo-random delays for every implementation.
std::vector<int64_t> Delays(int64_t lo_ns, int64_t hi_ns) {
  std::vector<int64_t> d(kDelayCount);
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int64_t> dist(lo_ns, hi_ns);
  for (int64_t& x : d) x = dist(rng);
  return d;
}

class WheelImpl {
 public:
  using Handle = TimerHandle;
  static constexpr const char* kName = "wheel";
  explicit WheelImpl(size_t reserve) : w_(kStart, kTick) {
    w_.Reserve(reserve);
  }
  ALWAYS_INLINE Handle Schedule(TimePoint t, uint64_t payload) {
    return w_.Schedule(t, payload);
  }
  ALWAYS_INLINE bool Cancel(Handle h) { return w_.Cancel(h); }
  ALWAYS_INLINE size_t Advance(TimePoint now) {
    return w_.Advance(
        now, [](TimerHandle, uint64_t p) { benchmark::DoNotOptimize(p); });
  }
  size_t size() const { return w_.size(); }

 private:
  TimerWheel w_;
};

class HeapImpl {
 public:
  struct Handle {
    uint32_t slot;
    uint32_t gen;
  };
  static constexpr const char* kName = "heap";
  explicit HeapImpl(size_t reserve) {
    heap_.reserve(2 * reserve + 2048);
    gens_.reserve(reserve);
  }
  ALWAYS_INLINE Handle Schedule(TimePoint t, uint64_t payload) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<uint32_t>(gens_.size());
      gens_.push_back(0);
      payloads_.push_back(0);
    }
    payloads_[slot] = payload;
    heap_.push_back({t.nanos(), slot, gens_[slot]});
    std::push_heap(heap_.begin(), heap_.end(), Later);
    ++live_;
    return {slot, gens_[slot]};
  }
  ALWAYS_INLINE bool Cancel(Handle h) {
    if (gens_[h.slot] != h.gen) return false;
    ++gens_[h.slot];
    free_.push_back(h.slot);
    --live_;
    if (heap_.size() - live_ > live_ + 1024) Rebuild();
    return true;
  }
  ALWAYS_INLINE size_t Advance(TimePoint now) {
    size_t fired = 0;
    while (!heap_.empty() && heap_.front().deadline <= now.nanos()) {
      const Entry e = heap_.front();
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      heap_.pop_back();
      if (gens_[e.slot] != e.gen) continue;  // cancelled
      ++gens_[e.slot];
      free_.push_back(e.slot);
      --live_;
      ++fired;
      benchmark::DoNotOptimize(payloads_[e.slot]);
    }
    return fired;
  }
  size_t size() const { return live_; }

 private:
  struct Entry {
    int64_t deadline;
    uint32_t slot;
    uint32_t gen;
  };
  static bool Later(const Entry& a, const Entry& b) {
    return a.deadline > b.deadline;
  }
  void Rebuild() {
    heap_.erase(
        std::remove_if(heap_.begin(), heap_.end(),
                       [&](const Entry& e) { return gens_[e.slot] != e.gen; }),
        heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), Later);
  }
  std::vector<Entry> heap_;
  std::vector<uint32_t> gens_;
  std::vector<uint64_t> payloads_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

class BtreeImpl {
 public:
  struct Handle {
    int64_t deadline;
    uint64_t id;
  };
  static constexpr const char* kName = "btree";
  explicit BtreeImpl(size_t) {}
  ALWAYS_INLINE Handle Schedule(TimePoint t, uint64_t payload) {
    const uint64_t id = next_id_++;
    map_.emplace(t.nanos(), Value{id, payload});
    return {t.nanos(), id};
  }
  ALWAYS_INLINE bool Cancel(Handle h) {
    auto [it, end] = map_.equal_range(h.deadline);
    for (; it != end; ++it) {
      if (it->second.id == h.id) {
        map_.erase(it);
        return true;
      }
    }
    return false;
  }
  ALWAYS_INLINE size_t Advance(TimePoint now) {
    size_t fired = 0;
    while (!map_.empty() && map_.begin()->first <= now.nanos()) {
      benchmark::DoNotOptimize(map_.begin()->second.payload);
      map_.erase(map_.begin());
      ++fired;
    }
    return fired;
  }
  size_t size() const { return map_.size(); }

 private:
  struct Value {
    uint64_t id;
    uint64_t payload;
  };
  absl::btree_multimap<int64_t, Value> map_;
  uint64_t next_id_ = 0;
};

// CM-like delays: 1 ms .. 60 s (REQ timers of a few seconds, TimeWait, MRA).
template <typename Impl>
void Prefill(Impl& impl, int64_t n, TimePoint now, int64_t lo, int64_t hi) {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (int64_t i = 0; i < n; ++i) {
    impl.Schedule(now + Duration::Nanos(dist(rng)), static_cast<uint64_t>(i));
  }
}

// The steady state of "one schedule per step, lifetimes uniform in [0, 2L]":
// a pending timer's remaining time r has density proportional to P(life > r),
// i.e. (2L - r) / 2L^2 on [0, 2L]; sampled by inversion as r = 2L(1 - sqrt(u)).
// With this prefill the expiry rate is one per step from the first iteration,
// so the pending count stays at n (a uniform prefill fires only half as fast
// at first and the pending count drifts upward).
template <typename Impl>
void PrefillSteadyState(Impl& impl, int64_t n, TimePoint now, int64_t life) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    const double r =
        2.0 * static_cast<double>(life) * (1.0 - std::sqrt(u(rng)));
    impl.Schedule(now + Duration::Nanos(static_cast<int64_t>(r)),
                  static_cast<uint64_t>(i));
  }
}

constexpr int64_t kCancelLo = 1000000;            // 1 ms
constexpr int64_t kCancelHi = 60LL * 1000000000;  // 60 s
constexpr int64_t kLife = 1000000000;             // mean 1 s before expiry

// --- Loops shared by the benchmarks and the --ops mode -----------------------

template <typename Impl>
struct ScheduleCancelLoop {
  explicit ScheduleCancelLoop(int64_t pending)
      : impl(static_cast<size_t>(pending) + 16),
        delays(Delays(kCancelLo, kCancelHi)) {
    Prefill(impl, pending, kStart, kCancelLo, kCancelHi);
  }
  __attribute__((noinline)) void Run(int64_t iterations) {
    for (int64_t i = 0; i < iterations; ++i) {
      const auto h = impl.Schedule(
          kStart + Duration::Nanos(delays[next++ & (kDelayCount - 1)]), 7);
      benchmark::DoNotOptimize(impl.Cancel(h));
    }
  }
  Impl impl;
  std::vector<int64_t> delays;
  // Persists across Run calls (the benchmarks call Run(1) per iteration).
  uint64_t next = 0;
};

template <typename Impl>
struct ScheduleExpireLoop {
  explicit ScheduleExpireLoop(int64_t pending)
      : impl(static_cast<size_t>(pending) * 2 + 1024),
        delays(Delays(0, 2 * kLife)),
        step(Duration::Nanos(kLife / pending)) {
    PrefillSteadyState(impl, pending, kStart, kLife);
  }
  __attribute__((noinline)) void Run(int64_t iterations) {
    for (int64_t i = 0; i < iterations; ++i) {
      impl.Schedule(now + Duration::Nanos(delays[next++ & (kDelayCount - 1)]),
                    7);
      now += step;
      fired += impl.Advance(now);
    }
  }
  Impl impl;
  std::vector<int64_t> delays;
  uint64_t next = 0;  // persists across Run calls
  Duration step;
  TimePoint now = kStart;
  int64_t fired = 0;
};

// One benchmark iteration runs kOpsPerIter operations (pairs), so the call
// into the noinline loop and the framework's loop cost the same small share
// for every implementation; `per_op` is CPU time per pair.
constexpr int kOpsPerIter = 16;

benchmark::Counter PerOp() {
  return benchmark::Counter(kOpsPerIter,
                            benchmark::Counter::kIsIterationInvariantRate |
                                benchmark::Counter::kInvert);
}

template <typename Impl>
void BM_ScheduleCancel(benchmark::State& state) {
  ScheduleCancelLoop<Impl> loop(state.range(0));
  for (auto _ : state) loop.Run(kOpsPerIter);
  state.counters["pending"] = static_cast<double>(loop.impl.size());
  state.counters["per_op"] = PerOp();
}

template <typename Impl>
void BM_ScheduleExpire(benchmark::State& state) {
  ScheduleExpireLoop<Impl> loop(state.range(0));
  for (auto _ : state) loop.Run(kOpsPerIter);
  state.counters["pending"] = static_cast<double>(loop.impl.size());
  state.counters["fired_per_op"] =
      static_cast<double>(loop.fired) /
      static_cast<double>(state.iterations() * kOpsPerIter);
  state.counters["per_op"] = PerOp();
}

// Single-operation latency: batches of kLatencyBatch schedules, then their
// cancels in a shuffled order, each batch timed with steady_clock. A sample is
// batch time / kLatencyBatch, less the clock's own cost (the median of
// back-to-back reads, spread over the batch). The counters are the median
// (p50) and 90th percentile of the samples, in ns per operation; medians, not
// means, so that batches hit by preemption on a loaded machine do not count.
constexpr int kLatencyBatch = 64;

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

double ClockCostNs() {
  std::vector<double> d(1001);
  for (double& x : d) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto t1 = std::chrono::steady_clock::now();
    x = std::chrono::duration<double, std::nano>(t1 - t0).count();
  }
  return Percentile(d, 0.5);
}

template <typename Impl>
void BM_OpLatency(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  ScheduleCancelLoop<Impl> loop(state.range(0));
  std::vector<typename Impl::Handle> handles(kLatencyBatch);
  // A few fixed cancel orders, used in turn.
  constexpr int kOrders = 16;
  std::vector<std::vector<int>> orders(kOrders);
  std::mt19937_64 rng(7);
  for (auto& o : orders) {
    for (int i = 0; i < kLatencyBatch; ++i) o.push_back(i);
    std::shuffle(o.begin(), o.end(), rng);
  }
  const double clock_ns = ClockCostNs();
  std::vector<double> schedule_ns, cancel_ns;
  int round = 0;
  for (auto _ : state) {
    const std::vector<int>& order = orders[round++ % kOrders];
    const auto t0 = Clock::now();
    for (int i = 0; i < kLatencyBatch; ++i) {
      handles[i] = loop.impl.Schedule(
          kStart +
              Duration::Nanos(loop.delays[loop.next++ & (kDelayCount - 1)]),
          7);
    }
    const auto t1 = Clock::now();
    for (int i = 0; i < kLatencyBatch; ++i) {
      benchmark::DoNotOptimize(loop.impl.Cancel(handles[order[i]]));
    }
    const auto t2 = Clock::now();
    schedule_ns.push_back(
        (std::chrono::duration<double, std::nano>(t1 - t0).count() - clock_ns) /
        kLatencyBatch);
    cancel_ns.push_back(
        (std::chrono::duration<double, std::nano>(t2 - t1).count() - clock_ns) /
        kLatencyBatch);
  }
  state.counters["pending"] = static_cast<double>(loop.impl.size());
  state.counters["clock_ns"] = clock_ns;
  state.counters["schedule_p50"] = Percentile(schedule_ns, 0.5);
  state.counters["schedule_p90"] = Percentile(schedule_ns, 0.9);
  state.counters["cancel_p50"] = Percentile(cancel_ns, 0.5);
  state.counters["cancel_p90"] = Percentile(cancel_ns, 0.9);
}

#define TIMER_BENCH(fn, impl) \
  BENCHMARK_TEMPLATE(fn, impl)->Arg(1000)->Arg(100000)->Arg(1000000)
TIMER_BENCH(BM_ScheduleCancel, WheelImpl);
TIMER_BENCH(BM_ScheduleCancel, HeapImpl);
TIMER_BENCH(BM_ScheduleCancel, BtreeImpl);
TIMER_BENCH(BM_ScheduleExpire, WheelImpl);
TIMER_BENCH(BM_ScheduleExpire, HeapImpl);
TIMER_BENCH(BM_ScheduleExpire, BtreeImpl);
// Per-operation latency: see the schedule_p50 / cancel_p50 counters.
TIMER_BENCH(BM_OpLatency, WheelImpl);
TIMER_BENCH(BM_OpLatency, HeapImpl);
TIMER_BENCH(BM_OpLatency, BtreeImpl);

// --ops=SCENARIO:IMPL:PENDING:N (for callgrind instruction counts).
template <typename Impl>
int RunOps(const std::string& scenario, int64_t pending, int64_t n) {
  if (scenario == "ScheduleCancel") {
    ScheduleCancelLoop<Impl> loop(pending);
    loop.Run(n);
  } else if (scenario == "ScheduleExpire") {
    ScheduleExpireLoop<Impl> loop(pending);
    loop.Run(n);
    std::fprintf(stderr, "%s: pending %zu after %lld iterations, %lld fired\n",
                 Impl::kName, loop.impl.size(), static_cast<long long>(n),
                 static_cast<long long>(loop.fired));
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  return 0;
}

int OpsMode(const char* spec) {
  char scenario[64], impl[64];
  long long pending, n;
  if (std::sscanf(spec, "%63[^:]:%63[^:]:%lld:%lld", scenario, impl, &pending,
                  &n) != 4 ||
      pending <= 0 || n < 0) {
    std::fprintf(stderr,
                 "--ops wants SCENARIO:IMPL:PENDING:N, e.g. "
                 "ScheduleCancel:wheel:1000000:1000000\n");
    return 2;
  }
  const std::string s = scenario, i = impl;
  if (i == WheelImpl::kName) return RunOps<WheelImpl>(s, pending, n);
  if (i == HeapImpl::kName) return RunOps<HeapImpl>(s, pending, n);
  if (i == BtreeImpl::kName) return RunOps<BtreeImpl>(s, pending, n);
  std::fprintf(stderr, "unknown impl %s (wheel, heap, btree)\n", impl);
  return 2;
}

}  // namespace
}  // namespace uscm::mad

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--ops=", 6) == 0) {
      return uscm::mad::OpsMode(argv[i] + 6);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
