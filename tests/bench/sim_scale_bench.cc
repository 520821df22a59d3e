// How the simulator's cost grows with the fabric (issue 14). Not a Google
// Benchmark: each point builds a fabric, runs `uscm sim`'s workload on it and
// reports events (scheduler steps) per second, the time per connection
// (process CPU time, so a loaded machine does not skew it, and wall time
// beside it), and the heap a host costs: idle (after the fabric, the SA and
// the hosts are built, before any connection) and after the run. Every point
// runs in the same process, so the ratio of the per-connection times at the
// largest and the smallest fabric compares like with like (goal: <= 1.5).
//
// Wall and CPU time cover the same window, the measured run alone. What wall
// time has beyond CPU time is accounted for beside it: wait_s, the time the
// process was runnable but another process had the CPU (the kernel's
// run-queue delay, /proc/self/schedstat), and minflt/conn, page faults.
// On a loaded machine wait_s is the gap; blocked time (I/O) would be the rest.
//
// A host's first connection costs more than the next ones: the CM endpoint
// allocates its first slot-map chunk (256 connections, 96 KB, every page
// touched), the timer wheels their buckets, the receive ring its slots. That
// is O(hosts) set-up, not a cost per connection, so by default each point
// first runs a warm-up workload of one connection per host (every host once
// client, once server; its own service ID) and reports its CPU time apart
// (warm_us/host); the per-connection figures are the measured run's after
// it. --warmup=0 measures cold hosts as before; --warmup=N runs N connections
// per host first (each host N times client, N times server), so that its
// containers (timer wheel entries, hash maps) have grown to what the
// measured run needs before it starts. --warm-hosts=0 / 1 turns
// SimWorldOptions::warm_hosts (the prefetching of a host a MAD is on its way
// to, and of the workload's next clients) off / on at every point (auto: the
// world's choice, on from tools::kWarmHostsFrom hosts); ab switches it
// within each measured run and prints on / off.
//
//   bazel run -c opt //tests/bench:sim_scale_bench                 (2, 128, 1024, 10240 hosts)
//   bazel run -c opt //tests/bench:sim_scale_bench -- --hosts=10240 --connections=1000000
//
// To profile the measured runs alone (not the set-up and warm-up):
//   mkfifo ctl; perf record -D -1 --control=fifo:ctl -g -- sim_scale_bench --perf-fifo=ctl
// The bench writes "enable" to the fifo before each measured run, "disable" after.
//
// Topologies: uscm sim --hosts=N's (mad/sim/fat_tree.h DefaultTopology).
// Connections go host k -> k+1 (mod N), one every --interval-us of virtual
// time, each a PathRecord query, REQ / REP / RTU and a disconnect.
#include <dlfcn.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "mad/sim/fat_tree.h"
#include "tools/sim_world.h"
#include "tools/workload.h"

namespace uscm::tools {
namespace {

// The heap in use, from whichever allocator serves malloc: the bench runs
// under glibc's and, linked or by LD_PRELOAD, under tcmalloc, jemalloc or
// mimalloc, whose heaps glibc's mallinfo2 does not see (it reads 0 there). Each
// allocator's own counter is looked up with dlsym, so the run itself pays
// nothing (a counting operator new would add a call to every allocation the
// bench times, and miss malloc's callers).
using TcmallocProperty = int (*)(const char*, size_t*);
using JemallocCtl = int (*)(const char*, void*, size_t*, void*, size_t);
using MimallocProcessInfo = void (*)(size_t*, size_t*, size_t*, size_t*, size_t*, size_t*,
                                     size_t*, size_t*);

struct HeapCounter {
  const char* source = "glibc mallinfo2 (uordblks + hblkhd)";
  TcmallocProperty tcmalloc = nullptr;
  JemallocCtl jemalloc = nullptr;
  MimallocProcessInfo mimalloc = nullptr;
};

const HeapCounter& Heap() {
  static const HeapCounter counter = [] {
    HeapCounter c;
    if (auto* f = reinterpret_cast<TcmallocProperty>(
            dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty"))) {
      c.tcmalloc = f;
      c.source = "tcmalloc generic.current_allocated_bytes";
    } else if (auto* g = reinterpret_cast<JemallocCtl>(dlsym(RTLD_DEFAULT, "mallctl"))) {
      c.jemalloc = g;
      c.source = "jemalloc stats.allocated";
    } else if (auto* h = reinterpret_cast<MimallocProcessInfo>(
                   dlsym(RTLD_DEFAULT, "mi_process_info"))) {
      c.mimalloc = h;
      c.source = "mimalloc mi_process_info current_commit (pages, not bytes in use)";
    }
    return c;
  }();
  return counter;
}

size_t HeapInUse() {
  const HeapCounter& c = Heap();
  size_t bytes = 0;
  if (c.tcmalloc != nullptr) {
    c.tcmalloc("generic.current_allocated_bytes", &bytes);
  } else if (c.jemalloc != nullptr) {
    uint64_t epoch = 1;  // stats are a snapshot taken when the epoch advances
    size_t len = sizeof(epoch);
    c.jemalloc("epoch", &epoch, &len, &epoch, len);
    len = sizeof(bytes);
    c.jemalloc("stats.allocated", &bytes, &len, nullptr, 0);
  } else if (c.mimalloc != nullptr) {
    size_t unused = 0;
    c.mimalloc(&unused, &unused, &unused, &unused, &unused, &bytes, &unused, &unused);
  } else {
    struct mallinfo2 m = mallinfo2();
    bytes = m.uordblks + m.hblkhd;
  }
  return bytes;
}

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

long MaxRssKb() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

long MinorFaults() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Seconds this (single-threaded) process spent runnable but not running: the
// second field of /proc/self/schedstat (ns on the run queue); 0 if unreadable.
double RunQueueWaitSeconds() {
  FILE* f = std::fopen("/proc/self/schedstat", "r");
  if (f == nullptr) return 0;
  unsigned long long on_cpu = 0, waiting = 0;
  const int n = std::fscanf(f, "%llu %llu", &on_cpu, &waiting);
  std::fclose(f);
  return n == 2 ? static_cast<double>(waiting) * 1e-9 : 0;
}

struct Point {
  int hosts = 0;
  int connections = 0;
  double setup_s = 0;      // building the fabric and hosts
  double run_s = 0;        // the measured workload, wall
  double run_cpu_s = 0;    // the measured workload, process CPU time
  double run_wait_s = 0;   // the measured workload, runnable but not running
  long run_faults = 0;     // the measured workload, minor page faults
  double warm_cpu_s = 0;   // the warm-up workload (one connection per host), CPU
  uint64_t events = 0;     // scheduler steps in the run
  uint64_t wakes = 0;      // host wakes in the run
  uint64_t idle_wakes = 0; // of which nothing happened (e.g. a timer wheel's cascade)
  double idle_bytes = 0;   // heap per host before any connection
  double after_bytes = 0;  // heap per host after the run (the world, not the results)
  int established = 0;
  double p50_us = 0;
};

// perf's control fifo (perf record --control=fifo:PATH), or null.
FILE* perf_ctl = nullptr;

void PerfControl(const char* command) {
  if (perf_ctl == nullptr) return;
  std::fprintf(perf_ctl, "%s\n", command);
  std::fflush(perf_ctl);
}

// The measured workload, out of line so that a profiler can select it alone:
//   valgrind --tool=callgrind --cache-sim=yes --toggle-collect='*MeasuredRun*' sim_scale_bench
// --warm-hosts=ab: SimWorldOptions::warm_hosts switched on and off every
// kAbPeriod settled connections within the measured run, each mode's CPU
// time added up (so both see the same load, drift and growth), the first
// two periods left out. Each pair of periods has one of each mode, in an
// order drawn from a fixed sequence: with strict alternation the 2-host
// point's costs that recur every 1,000 connections fell in one mode's
// periods (the same binary doing nothing when "on": 1.075 on / off when on
// came first, 0.942 when off came first).
constexpr int kAbPeriod = 500;
bool WarmInPeriod(int period) {
  const uint64_t pair = static_cast<uint64_t>(period / 2);
  const bool on_first = ((pair * 0x9E3779B97F4A7C15ULL) >> 63) != 0;
  return (period % 2 == 0) == on_first;
}
struct AbSplit {
  double cpu_s[2] = {0, 0};  // [warm off, warm on]
  int conns[2] = {0, 0};
};

__attribute__((noinline)) absl::StatusOr<WorkloadResult> MeasuredRun(SimWorld& world,
                                                                     const WorkloadOptions& o,
                                                                     AbSplit* ab) {
  if (ab == nullptr) return RunWorkload(world, o);
  int period = 0;
  world.set_warm_hosts(WarmInPeriod(period));
  double mark = CpuSeconds();
  return RunWorkload(world, o, [&](int settled, int) {
    if (settled % kAbPeriod != 0) return;
    const double now = CpuSeconds();
    if (period >= 2) {
      const bool on = WarmInPeriod(period);
      ab->cpu_s[on] += now - mark;
      ab->conns[on] += kAbPeriod;
    }
    mark = now;
    world.set_warm_hosts(WarmInPeriod(++period));
  });
}

bool RunPoint(int hosts, int connections, int64_t interval_us, int warmup,
              absl::optional<bool> warm_hosts,
              AbSplit* ab, Point* out) {
  using Clock = std::chrono::steady_clock;
  out->hosts = hosts;
  out->connections = connections;
  const size_t heap0 = HeapInUse();
  const auto t0 = Clock::now();
  auto topo = sim::DefaultTopology(hosts);
  if (!topo.ok()) {
    std::fprintf(stderr, "%d hosts: %s\n", hosts, std::string(topo.status().message()).c_str());
    return false;
  }
  SimWorldOptions wo;
  wo.seed = 1;
  wo.link.latency = Duration::Nanos(500);
  if (hosts > 2) wo.topology.emplace(std::move(*topo));  // 2: uscm sim's two hosts, one switch
  wo.max_hosts = static_cast<size_t>(hosts);
  wo.warm_hosts = warm_hosts;  // unset: SimWorld's choice by the number of hosts
  auto world = SimWorld::Create(wo, nullptr);
  if (!world.ok()) {
    std::fprintf(stderr, "%d hosts: %s\n", hosts, std::string(world.status().message()).c_str());
    return false;
  }
  const auto t1 = Clock::now();
  out->idle_bytes = static_cast<double>(HeapInUse() - heap0) / hosts;
  WorkloadOptions o;
  o.connections = connections;
  o.interval = Duration::Micros(interval_us);
  o.spread = true;
  if (warmup > 0) {
    WorkloadOptions w = o;
    w.connections = hosts * warmup;
    w.service_id = o.service_id + 1;  // its listeners stay; the run's are new
    const double cpu0 = CpuSeconds();
    auto r = RunWorkload(**world, w);
    out->warm_cpu_s = CpuSeconds() - cpu0;
    if (!r.ok()) {
      std::fprintf(stderr, "%d hosts, warm-up: %s\n", hosts,
                   std::string(r.status().message()).c_str());
      return false;
    }
  }
  const uint64_t steps0 = (*world)->scheduler().steps();
  uint64_t wakes0 = 0, idle0 = 0;
  for (const auto& h : (*world)->hosts()) {
    wakes0 += h->wakes();
    idle0 += h->idle_wakes();
  }
  PerfControl("enable");
  const long faults1 = MinorFaults();
  const double wait1 = RunQueueWaitSeconds();
  const auto t2 = Clock::now();
  const double cpu1 = CpuSeconds();
  auto r = MeasuredRun(**world, o, ab);
  out->run_cpu_s = CpuSeconds() - cpu1;
  const auto t3 = Clock::now();
  out->run_wait_s = RunQueueWaitSeconds() - wait1;
  out->run_faults = MinorFaults() - faults1;
  PerfControl("disable");
  if (!r.ok()) {
    std::fprintf(stderr, "%d hosts: %s\n", hosts, std::string(r.status().message()).c_str());
    return false;
  }
  out->events = (*world)->scheduler().steps() - steps0;
  for (const auto& h : (*world)->hosts()) {
    out->wakes += h->wakes();
    out->idle_wakes += h->idle_wakes();
  }
  out->wakes -= wakes0;
  out->idle_wakes -= idle0;
  out->setup_s = std::chrono::duration<double>(t1 - t0).count();
  out->run_s = std::chrono::duration<double>(t3 - t2).count();
  std::vector<double> setup;
  for (const ConnResult& c : r->conns) {
    if (c.established) {
      ++out->established;
      setup.push_back(c.setup_us);
    }
  }
  std::sort(setup.begin(), setup.end());
  out->p50_us = Percentile(setup, 0.5);
  r = absl::StatusOr<WorkloadResult>();  // the per-connection results are not the world's
  setup = {};
  out->after_bytes = static_cast<double>(HeapInUse() - heap0) / hosts;
  return true;
}

int Main(int argc, char** argv) {
  std::vector<int> hosts = {2, 128, 1024, 10240};
  int connections = 100000;
  int64_t interval_us = 10;
  int warmup = 1;
  absl::optional<bool> warm_hosts;  // --warm-hosts=auto
  bool ab = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::ConsumePrefix(&a, "--hosts=")) {
      hosts.clear();
      for (absl::string_view h : absl::StrSplit(a, ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(h, &n) || n < 2) {
          std::fprintf(stderr, "--hosts: '%s' is not a host count >= 2\n", std::string(h).c_str());
          return 2;
        }
        hosts.push_back(n);
      }
    } else if (absl::ConsumePrefix(&a, "--connections=")) {
      if (!absl::SimpleAtoi(a, &connections) || connections < 1) return 2;
    } else if (absl::ConsumePrefix(&a, "--warmup=")) {
      if (!absl::SimpleAtoi(a, &warmup) || warmup < 0 || warmup > 100) return 2;
    } else if (absl::ConsumePrefix(&a, "--warm-hosts=")) {
      if (a != "0" && a != "1" && a != "ab" && a != "auto") return 2;
      warm_hosts.reset();
      if (a == "0" || a == "1") warm_hosts = a == "1";
      ab = a == "ab";
    } else if (absl::ConsumePrefix(&a, "--interval-us=")) {
      if (!absl::SimpleAtoi(a, &interval_us) || interval_us < 0) return 2;
    } else if (absl::ConsumePrefix(&a, "--perf-fifo=")) {
      perf_ctl = std::fopen(std::string(a).c_str(), "w");
      if (perf_ctl == nullptr) {
        std::perror(std::string(a).c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: sim_scale_bench [--hosts=2,128,1024,10240] [--connections=100000] "
                   "[--interval-us=10] [--warmup=0..100] [--warm-hosts=auto|0|1|ab] "
                   "[--perf-fifo=PATH]\n");
      return 2;
    }
  }
  std::printf("heap bytes (idle_B/host, after_B/host) from: %s\n", Heap().source);
  std::printf("%8s %12s %9s %13s %9s %9s %9s %12s %12s %11s %11s %11s %12s %12s %12s %12s %9s\n",
              "hosts", "connections", "setup_s", "warm_us/host", "run_s", "run_cpu_s", "wait_s",
              "minflt/conn", "events", "events/s", "wakes/conn", "idle/conn", "cpu_us/conn",
              "wall_us/conn", "idle_B/host", "after_B/host", "p50_us");
  std::vector<Point> points;
  std::vector<AbSplit> splits;
  for (int h : hosts) {
    Point p;
    AbSplit split;
    if (!RunPoint(h, connections, interval_us, warmup, warm_hosts, ab ? &split : nullptr, &p)) {
      return 1;
    }
    splits.push_back(split);
    if (p.established != p.connections) {
      std::fprintf(stderr, "%d hosts: %d of %d connections established\n", h, p.established,
                   p.connections);
      return 1;
    }
    std::printf(
        "%8d %12d %9.2f %13.1f %9.2f %9.2f %9.2f %12.2f %12llu %12.0f %11.2f %11.2f %11.2f "
        "%12.2f %12.0f %12.0f %9.1f\n",
        p.hosts, p.connections, p.setup_s, 1e6 * p.warm_cpu_s / p.hosts, p.run_s, p.run_cpu_s,
        p.run_wait_s, static_cast<double>(p.run_faults) / p.connections,
        static_cast<unsigned long long>(p.events), p.events / p.run_cpu_s,
        static_cast<double>(p.wakes) / p.connections,
        static_cast<double>(p.idle_wakes) / p.connections, 1e6 * p.run_cpu_s / p.connections,
        1e6 * p.run_s / p.connections, p.idle_bytes, p.after_bytes, p.p50_us);
    std::fflush(stdout);
    points.push_back(p);
  }
  if (points.size() > 1) {
    const Point& a = points.front();
    const Point& b = points.back();
    std::printf("per-connection CPU time, %d hosts / %d hosts: %.2f\n", b.hosts, a.hosts,
                (b.run_cpu_s / b.connections) / (a.run_cpu_s / a.connections));
    std::printf("per-connection wall time, %d hosts / %d hosts: %.2f (less the run-queue "
                "wait: %.2f)\n",
                b.hosts, a.hosts, (b.run_s / b.connections) / (a.run_s / a.connections),
                ((b.run_s - b.run_wait_s) / b.connections) /
                    ((a.run_s - a.run_wait_s) / a.connections));
    if (warmup > 0) {
      std::printf("with the warm-up counted in: %.2f\n",
                  ((b.run_cpu_s + b.warm_cpu_s) / b.connections) /
                      ((a.run_cpu_s + a.warm_cpu_s) / a.connections));
    }
  }
  for (size_t i = 0; ab && i < points.size(); ++i) {
    const AbSplit& s = splits[i];
    if (s.conns[0] == 0 || s.conns[1] == 0) continue;
    const double off = 1e6 * s.cpu_s[0] / s.conns[0];
    const double on = 1e6 * s.cpu_s[1] / s.conns[1];
    std::printf("%d hosts, warm hosts on / off (%d periods of %d connections each): "
                "%.2f / %.2f us CPU a connection = %.3f\n",
                points[i].hosts, s.conns[1] / kAbPeriod, kAbPeriod, on, off, on / off);
  }
  std::printf("max RSS: %ld MB\n", MaxRssKb() / 1024);
  return 0;
}

}  // namespace
}  // namespace uscm::tools

int main(int argc, char** argv) { return uscm::tools::Main(argc, argv); }
