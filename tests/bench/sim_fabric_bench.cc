// MADs per second through the simulated fabric on one core: send, route
// hop by hop on virtual time, deliver and drain. Baselines in the same
// process: the bare scheduler (one event per MAD) and copying a MAD into a
// queue and out again, the floor any transport pays.
//   bazel run -c opt //tests/bench:sim_fabric_bench
#include <array>
#include <deque>
#include <memory>

#include "benchmark/benchmark.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"

namespace uscm::sim {
namespace {

constexpr int kBatch = 64;

std::array<uint8_t, mad::kMadSize> Mad() {
  std::array<uint8_t, mad::kMadSize> m{};
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<uint8_t>(i);
  return m;
}

void BM_Baseline_CopyThroughQueue(benchmark::State& state) {
  const auto m = Mad();
  std::deque<std::array<uint8_t, mad::kMadSize>> q;
  uint64_t sum = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) q.push_back(m);
    while (!q.empty()) {
      sum += q.front()[sum % mad::kMadSize];
      q.pop_front();
    }
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_Baseline_SchedulerEvent(benchmark::State& state) {
  Scheduler s(1);
  uint64_t n = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) s.ScheduleIn(Duration::Nanos(100 + i), [&n] { n++; });
    benchmark::DoNotOptimize(s.RunUntilIdle().ok());
  }
  benchmark::DoNotOptimize(n);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

// Two hosts, one switch: each MAD is two hops (two events) and one drain.
void BM_SimFabric_TwoHosts(benchmark::State& state) {
  Scheduler s(1);
  FabricOptions o;
  if (state.range(0) != 0) {  // with faults: 1% loss, 1% duplication, jitter
    o.link.loss = 0.01;
    o.link.duplicate = 0.01;
    o.link.jitter = Duration::Nanos(200);
  }
  std::unique_ptr<Fabric> f = *Fabric::Create(s, TwoHostsOneSwitch(), o);
  std::unique_ptr<SimTransport> a = *f->Open("host1");
  std::unique_ptr<SimTransport> b = *f->Open("host2");
  const auto m = Mad();
  mad::MadAddress to;
  to.lid = b->port().lid;
  uint64_t got = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(a->Send(to, m).ok());
    benchmark::DoNotOptimize(s.RunUntilIdle().ok());
    got += b->Drain([](const mad::ReceivedMad& r) { benchmark::DoNotOptimize(r.data[0]); });
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["delivered_per_sent"] = static_cast<double>(got) / (state.iterations() * kBatch);
}
BENCHMARK(BM_SimFabric_TwoHosts)->Arg(0)->Arg(1);

// 500 CAs behind 17 switches: CA i sends to CA i+1 (another leaf, 4 hops).
void BM_SimFabric_500Cas(benchmark::State& state) {
  Scheduler s(1);
  std::unique_ptr<Fabric> f = *Fabric::Create(s, *GenerateTopology(500, 17));
  std::vector<std::unique_ptr<SimTransport>> qps;
  for (const Endpoint& ep : f->endpoints()) {
    if (ep.type == NodeType::kCa) qps.push_back(*f->Open(ep.node_id, ep.port));
  }
  const auto m = Mad();
  size_t next = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      SimTransport& from = *qps[next % qps.size()];
      mad::MadAddress to;
      to.lid = qps[(next + 1) % qps.size()]->port().lid;
      benchmark::DoNotOptimize(from.Send(to, m).ok());
      ++next;
    }
    benchmark::DoNotOptimize(s.RunUntilIdle().ok());
    for (auto& q : qps) {
      if (q->pending() > 0) q->Drain([](const mad::ReceivedMad&) {});
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

BENCHMARK(BM_Baseline_CopyThroughQueue);
BENCHMARK(BM_Baseline_SchedulerEvent);
BENCHMARK(BM_SimFabric_500Cas);

}  // namespace
}  // namespace uscm::sim
