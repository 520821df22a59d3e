// SimWorldOptions::warm_hosts (sim::ArrivalWarmer, SimHost::Warm, the
// workload's warming of its next clients) only prefetches: a run gives the
// same connections, times and MADs with it and without it, on a fat tree
// (last hops after several switches), with loss and jitter (retransmissions,
// reordering).
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mad/sim/fat_tree.h"
#include "tools/sim_world.h"
#include "tools/workload.h"

namespace uscm::tools {
namespace {

std::string RunAndDigest(bool warm_hosts) {
  SimWorldOptions wo;
  wo.seed = 4;
  wo.link.loss = 0.02;
  wo.link.jitter = Duration::Nanos(300);
  wo.max_hosts = 40;
  auto topo = sim::DefaultTopology(40);
  EXPECT_TRUE(topo.ok()) << topo.status();
  if (!topo.ok()) return "";
  wo.topology = *topo;
  wo.warm_hosts = warm_hosts;
  auto w = SimWorld::Create(wo, nullptr);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return "";
  WorkloadOptions o;
  o.connections = 400;
  o.spread = true;
  o.pattern = WorkloadOptions::Pattern::kRandomPairs;
  o.arrivals = WorkloadOptions::Arrivals::kStorm;
  o.seed = 6;
  auto r = RunWorkload(**w, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  std::string s = absl::StrCat((*w)->fabric().trace_digest(), " ", r->fabric_sent, " ",
                               r->fabric_dropped, " ", r->elapsed.nanos(), "\n");
  int established = 0;
  for (const ConnResult& c : r->conns) {
    established += c.established ? 1 : 0;
    absl::StrAppend(&s, c.index, " ", c.client, " ", c.server, " ", c.established, c.rejected, " ",
                    c.error, " ", c.setup_us, " ", c.retransmissions, "\n");
  }
  EXPECT_EQ(established, 400);
  EXPECT_GT(r->fabric_dropped, 0u);  // the loss did happen
  return s;
}

TEST(WarmHostsTest, ARunIsTheSameWithAndWithoutWarmingItsHosts) {
  const std::string warm = RunAndDigest(true);
  const std::string cold = RunAndDigest(false);
  ASSERT_FALSE(warm.empty());
  EXPECT_EQ(warm, cold);
}

}  // namespace
}  // namespace uscm::tools
