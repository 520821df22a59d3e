// The route check of a request (the kernel's validate_net_dev, DeviceOptions::
// route_back_on) per call, in a network namespace of its own (root: veth vb0
// 10.9.0.1/24, 10.20.0.0/16 through 10.9.0.8), both measured in this process:
//   Ask   NeighbourTable::RouteLeavesOn: one RTM_GETROUTE round trip (what
//         every REQ cost before RouteBackCache);
//   Kept  RouteBackCache::RouteLeavesOn of a kept answer: a non-blocking read
//         of its notification socket (EAGAIN) and a hash look-up.
// bazel run -c opt //tests/bench:route_back_bench -- --benchmark_repetitions=5
#include <net/if.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "benchmark/benchmark.h"
#include "verbs/neighbours.h"

namespace uscm::verbs {
namespace {

IpAddr V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddr ip;
  ip.family = AF_INET;
  ip.ip[0] = a;
  ip.ip[1] = b;
  ip.ip[2] = c;
  ip.ip[3] = d;
  return ip;
}

int g_ifindex = 0;

void Ask(benchmark::State& state) {
  auto table = NeighbourTable::Open();
  if (!table.ok()) return state.SkipWithError("netlink");
  for (auto _ : state) {
    benchmark::DoNotOptimize(table->RouteLeavesOn(V4(10, 20, 1, 1), V4(10, 9, 0, 1), g_ifindex));
  }
}
BENCHMARK(Ask);

void Kept(benchmark::State& state) {
  auto table = NeighbourTable::Open();
  if (!table.ok()) return state.SkipWithError("netlink");
  RouteBackCache cache;
  if (!cache.watching()) return state.SkipWithError("no notification socket");
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.RouteLeavesOn(*table, V4(10, 20, 1, 1), V4(10, 9, 0, 1),
                                                 g_ifindex));
  }
  state.counters["asked"] = static_cast<double>(cache.asked());
}
BENCHMARK(Kept);

}  // namespace
}  // namespace uscm::verbs

int main(int argc, char** argv) {
  if (unshare(CLONE_NEWNET) != 0) {
    fprintf(stderr, "unshare(CLONE_NEWNET): %s (needs root)\n", strerror(errno));
    return 1;
  }
  if (system("set -e; exec >/dev/null 2>&1; ip link set lo up;"
             " ip link add vb0 type veth peer name vb1; ip link set vb0 up; ip link set vb1 up;"
             " ip addr add 10.9.0.1/24 dev vb0; ip route add 10.20.0.0/16 via 10.9.0.8") != 0) {
    fprintf(stderr, "ip link add ... type veth failed\n");
    return 1;
  }
  uscm::verbs::g_ifindex = static_cast<int>(if_nametoindex("vb0"));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
