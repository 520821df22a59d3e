// Several uscm processes per simulated host (SimWorldOptions::procs_per_host):
// each host's QP1 belongs to the real router (cm/router, through LocalRouter),
// each process has its own endpoint, agent, SA client and comm ID range, and
// the workload's server processes each listen on their own service ID. A REQ
// that the router hands to the wrong process meets no listener there and is
// rejected, so "every connection established" checks the routing.
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mad/sim/fat_tree.h"
#include "tools/sim_router_host.h"
#include "tools/sim_world.h"
#include "tools/workload.h"

namespace uscm::tools {
namespace {

std::unique_ptr<SimWorld> MakeWorld(size_t hosts, size_t procs, double loss, uint64_t seed = 3) {
  SimWorldOptions wo;
  wo.seed = seed;
  wo.link.loss = loss;
  wo.max_hosts = hosts;
  if (hosts > 2) {
    auto topo = sim::DefaultTopology(static_cast<int>(hosts));
    EXPECT_TRUE(topo.ok()) << topo.status();
    wo.topology = *topo;
  }
  wo.procs_per_host = procs;
  auto w = SimWorld::Create(wo, nullptr);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? std::move(*w) : nullptr;
}

WorkloadOptions Storm(int connections, WorkloadOptions::Pattern pattern) {
  WorkloadOptions o;
  o.connections = connections;
  o.spread = true;
  o.pattern = pattern;
  o.arrivals = WorkloadOptions::Arrivals::kStorm;
  o.seed = 5;
  o.profile.name = "lowlat";
  (void)CmProfileByName("lowlat", &o.profile);
  return o;
}

// Every field of every connection, and the fabric's totals, as text.
std::string Digest(const WorkloadResult& r) {
  std::string s = absl::StrCat(r.fabric_sent, " ", r.fabric_dropped, " ", r.elapsed.nanos(), "\n");
  for (const ConnResult& c : r.conns) {
    absl::StrAppend(&s, c.index, " ", c.client, " ", c.server, " ", c.established, c.rejected, " ",
                    c.error, " ", c.setup_us, " ", c.retransmissions, "\n");
  }
  return s;
}

TEST(ProcsPerHostTest, FourProcessesPerHostConnectEveryConnectionThroughTheirRouters) {
  auto w = MakeWorld(4, 4, 0);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->hosts().size(), 16u);
  ASSERT_EQ(w->routers().size(), 4u);
  auto r = RunWorkload(*w, Storm(256, WorkloadOptions::Pattern::kRing));
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::string> clients, servers;
  for (const ConnResult& c : r->conns) {
    EXPECT_TRUE(c.established) << "#" << c.index << " " << c.client << " -> " << c.server << ": "
                               << c.error;
    clients.insert(c.client);
    servers.insert(c.server);
  }
  // Every process of every host was a client and a server.
  EXPECT_EQ(clients.size(), 16u);
  EXPECT_EQ(servers.size(), 16u);
  for (const auto& router : w->routers()) {
    const router::RouterCounters& c = router->counters();
    EXPECT_EQ(router->router().router().client_count(), 4u);
    EXPECT_EQ(c.claims, 4u) << router->name();
    EXPECT_EQ(c.wire_unroutable, 0u) << router->name();
    EXPECT_EQ(c.refused_mads, 0u) << router->name();
    EXPECT_EQ(c.claim_conflicts, 0u) << router->name();
    EXPECT_GT(c.to_clients, 0u) << router->name();
    // Every connection ended (DREQ / DREP): the router tracks none.
    for (const auto& h : w->hosts()) {
      if (h->router_client() == nullptr) continue;
      EXPECT_EQ(router->router().router().tracked(h->router_client()->slot()), 0u)
          << router->name() << " " << h->name();
    }
  }
  // The frames the routers handed out reached each process: PathRecord
  // answers, and the REQ / REP / RTU / DREQ / DREP of its connections.
  uint64_t to_processes = 0;
  for (const auto& h : w->hosts()) {
    const router::LocalRouterClient* rc = h->router_client();
    ASSERT_NE(rc, nullptr) << h->name();
    EXPECT_GT(rc->counters().received, 0u) << h->name();
    EXPECT_EQ(rc->counters().refused, 0u) << h->name();
    to_processes += rc->counters().received;
  }
  uint64_t routed = 0;
  for (const auto& router : w->routers()) routed += router->counters().to_clients;
  EXPECT_EQ(to_processes, routed);
  // No loss: per connection REQ, REP, RTU, DREQ, DREP on one side or the
  // other, and one answer per PathRecord query a process's agent sent (its SA
  // client coalesces identical queries in flight).
  EXPECT_EQ(routed, 5u * 256 + r->sa_on_wire);
}

TEST(ProcsPerHostTest, IncastSpreadsTheServerEndsOverTheServerHostsProcesses) {
  auto w = MakeWorld(3, 4, 0);
  ASSERT_NE(w, nullptr);
  auto r = RunWorkload(*w, Storm(64, WorkloadOptions::Pattern::kIncast));
  ASSERT_TRUE(r.ok()) << r.status();
  std::map<std::string, int> per_server;
  for (const ConnResult& c : r->conns) {
    EXPECT_TRUE(c.established) << c.error;
    ++per_server[c.server];
  }
  ASSERT_EQ(per_server.size(), 4u);  // the four processes of host 0
  for (const auto& [name, n] : per_server) EXPECT_EQ(n, 16) << name;
}

TEST(ProcsPerHostTest, TheSameSeedGivesTheSameRunByteForByte) {
  std::string digest[2];
  for (int i = 0; i < 2; ++i) {
    auto w = MakeWorld(6, 3, 0.05, 9);
    ASSERT_NE(w, nullptr);
    auto r = RunWorkload(*w, Storm(300, WorkloadOptions::Pattern::kRandomPairs));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->fabric_dropped, 0u);
    for (const ConnResult& c : r->conns) EXPECT_TRUE(c.established) << c.error;
    digest[i] = Digest(*r);
  }
  EXPECT_EQ(digest[0], digest[1]);
  auto w = MakeWorld(6, 3, 0.05, 10);
  ASSERT_NE(w, nullptr);
  auto other = RunWorkload(*w, Storm(300, WorkloadOptions::Pattern::kRandomPairs));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(Digest(*other), digest[0]) << "another seed, another run";
}

TEST(ProcsPerHostTest, OneProcessPerHostOwnsQp1WithoutARouter) {
  auto w = MakeWorld(4, 1, 0.02);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->routers().empty());
  ASSERT_EQ(w->hosts().size(), 4u);
  for (const auto& h : w->hosts()) EXPECT_EQ(h->router_client(), nullptr);
  auto r = RunWorkload(*w, Storm(100, WorkloadOptions::Pattern::kRing));
  ASSERT_TRUE(r.ok()) << r.status();
  // Host names as before (no "/p0"): the CSVs of one process per host are
  // unchanged (tools/uscm_test.sh compares one with its snapshot).
  EXPECT_EQ(r->conns[0].client.find('/'), std::string::npos) << r->conns[0].client;
}

TEST(ProcsPerHostTest, AProcessCountTheRouterCannotSlotIsAnError) {
  for (size_t n : {size_t{0}, size_t{256}}) {
    SimWorldOptions wo;
    wo.procs_per_host = n;
    auto w = SimWorld::Create(wo, nullptr);
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_NE(w.status().message().find("1..255"), absl::string_view::npos) << w.status();
  }
}

}  // namespace
}  // namespace uscm::tools
