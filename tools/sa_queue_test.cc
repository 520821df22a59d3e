// The simulated SA as one server (SimSaConfig::service_time): with Poisson
// arrivals of PathRecord queries and a fixed service time D it is an M/D/1
// queue, whose mean wait is W = rho * D / (2 (1 - rho)) (Pollaczek-Khinchine).
// The measured mean wait (SimSaCounters, arrival to start of service) is
// within 5 % of it for utilisations 0.1 .. 0.9; and with a queue limit the
// SA drops what does not fit and the clients' retries still get every answer.
#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "mad/sim/fat_tree.h"
#include "mad/sim/scheduler.h"
#include "tools/sim_world.h"

namespace uscm::tools {
namespace {

constexpr int kHosts = 256;
// Long against a MAD's time on a link (0.3 us), so the fabric barely reshapes the
// Poisson arrivals.
constexpr int64_t kServiceUs = 100;
constexpr uint64_t kServiceId = 0x0000000001060000ULL | 7471;

struct QueueRun {
  double mean_wait_us = 0;
  uint64_t dropped = 0;
  size_t max_queue = 0;
  int answered = 0;
  int failed = 0;
};

// `queries` PathRecord queries with exponential gaps of mean D / rho, from
// host k % 256 to a destination that changes every time (so no query is
// coalesced with one in flight).
QueueRun Measure(double rho, int queries, uint64_t seed, size_t queue_limit = 0) {
  const Duration d = Duration::Micros(kServiceUs);
  SimWorldOptions wo;
  wo.seed = seed;
  auto topo = sim::DefaultTopology(kHosts);
  EXPECT_TRUE(topo.ok()) << topo.status();
  wo.topology = *topo;
  wo.max_hosts = kHosts;
  wo.sa.service_time = d;
  wo.sa.queue_limit = queue_limit;
  auto world = SimWorld::Create(wo, nullptr);
  EXPECT_TRUE(world.ok()) << world.status();
  SimWorld& w = **world;
  w.scheduler().set_verify_actor_index(false);  // 256 hosts: the scan would dominate
  QueueRun run;
  for (auto& h : w.hosts()) {
    h->on_sa_result = [&run](SimHost&, TimePoint, sa::SaResult r) {
      ++(r.status.ok() ? run.answered : run.failed);
    };
  }
  sim::Rng rng(seed * 7919 + 1);
  double t_ns = 0;
  const TimePoint t0 = w.scheduler().Now();
  for (int k = 0; k < queries; ++k) {
    t_ns += -std::log1p(-rng.Uniform01()) * d.nanos() / rho;
    const int src = k % kHosts;
    const int dst = (src + 1 + (k / kHosts) % (kHosts - 1)) % kHosts;
    w.scheduler().Schedule(t0 + Duration::Nanos(static_cast<int64_t>(t_ns)), [&w, src, dst] {
      SimHost& h = *w.hosts()[src];
      auto q = h.sa().GetPath(w.scheduler().Now(),
                              sa::PathQuery::RdmaCm(h.port().gid, w.hosts()[dst]->port().gid,
                                                    0xFFFF, kServiceId));
      EXPECT_TRUE(q.ok()) << q.status();
      h.Touch();
    });
  }
  absl::Status s = w.scheduler().RunUntil([&] { return run.answered + run.failed == queries; },
                                          TimePoint::Infinite(), 100'000'000);
  EXPECT_TRUE(s.ok()) << s;
  const sa::SimSaCounters& c = w.sa().counters();
  run.mean_wait_us = c.served == 0 ? 0 : c.wait_ns_total / 1e3 / c.served;
  run.dropped = c.dropped;
  run.max_queue = c.max_queue;
  return run;
}

TEST(SaQueueTest, MeanWaitFollowsMD1) {
  struct Point {
    double rho;
    int queries;
  };
  // More queries where the wait is more correlated (near saturation).
  for (const Point& p : {Point{0.1, 50000}, Point{0.3, 50000}, Point{0.5, 50000},
                         Point{0.7, 60000}, Point{0.9, 200000}}) {
    const double want_us = p.rho * kServiceUs / (2 * (1 - p.rho));
    QueueRun r = Measure(p.rho, p.queries, 1);
    EXPECT_EQ(r.answered, p.queries) << "rho " << p.rho;
    EXPECT_EQ(r.dropped, 0u);
    EXPECT_NEAR(r.mean_wait_us, want_us, 0.05 * want_us) << "rho " << p.rho;
    std::printf("rho %.1f: mean wait %.3f us, M/D/1 %.3f us (%+.1f %%), max queue %zu\n", p.rho,
                r.mean_wait_us, want_us, 100 * (r.mean_wait_us / want_us - 1), r.max_queue);
  }
}

TEST(SaQueueTest, QueueLimitDropsAndClientsRetry) {
  QueueRun r = Measure(0.9, 3000, 2, /*queue_limit=*/4);
  EXPECT_GT(r.dropped, 0u);
  EXPECT_LE(r.max_queue, 4u);
  EXPECT_EQ(r.answered + r.failed, 3000);
  EXPECT_GT(r.answered, 2900);  // the agents' retries get (nearly) everything through
}

}  // namespace
}  // namespace uscm::tools
