#include "mad/sim/fat_tree.h"

#include <string>

#include "gmock/gmock.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"

namespace uscm::sim {
namespace {

using ::testing::HasSubstr;

int Count(const Topology& t, NodeType type) {
  int n = 0;
  for (const TopoNode& node : t.nodes) n += node.type == type;
  return n;
}

TEST(FatTreeTest, TwoLevelsLeavesAndSpines) {
  FatTreeOptions o;
  o.radix = 8;
  o.hosts = 24;
  absl::StatusOr<FatTreeShape> s = FatTreeShapeFor(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->down, 4);
  EXPECT_EQ(s->up, 4);
  EXPECT_EQ(s->leaves, 6);
  EXPECT_EQ(s->spines, 4);
  EXPECT_EQ(s->max_hosts, 32);
  absl::StatusOr<Topology> t = GenerateFatTree(o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Count(*t, NodeType::kSwitch), 10);
  EXPECT_EQ(Count(*t, NodeType::kCa), 24);
  EXPECT_EQ(t->nodes[0].desc, "spine 1");
  EXPECT_EQ(t->nodes[0].num_ports, 6);  // one port per leaf
}

TEST(FatTreeTest, ThreeLevelsPodsAndCores) {
  FatTreeOptions o;
  o.radix = 8;
  o.levels = 3;
  o.hosts = 48;
  absl::StatusOr<FatTreeShape> s = FatTreeShapeFor(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->leaves, 12);
  EXPECT_EQ(s->pods, 3);
  EXPECT_EQ(s->aggs, 12);
  EXPECT_EQ(s->cores, 16);
  EXPECT_EQ(s->max_hosts, 128);
  absl::StatusOr<Topology> t = GenerateFatTree(o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Count(*t, NodeType::kSwitch), 40);
  EXPECT_EQ(t->nodes[0].num_ports, 3);  // a core: one port per pod
}

TEST(FatTreeTest, OversubscriptionSplitsLeafPorts) {
  FatTreeOptions o;
  o.radix = 8;
  o.hosts = 30;
  o.oversubscription = 3;
  absl::StatusOr<FatTreeShape> s = FatTreeShapeFor(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->down, 6);
  EXPECT_EQ(s->up, 2);
  EXPECT_EQ(s->leaves, 5);
  EXPECT_EQ(s->spines, 2);
}

TEST(FatTreeTest, LimitsAreExplained) {
  FatTreeOptions o;
  o.radix = 36;
  o.hosts = 700;
  EXPECT_THAT(std::string(FatTreeShapeFor(o).status().message()),
              HasSubstr("700 hosts need 39 leaves; a 2-level fat tree of radix 36 has at most 36 "
                        "leaves (648 hosts): use 3 levels"));
  o.levels = 3;
  EXPECT_TRUE(FatTreeShapeFor(o).ok());
  o.hosts = 11665;
  EXPECT_THAT(std::string(FatTreeShapeFor(o).status().message()), HasSubstr("at most 36 pods"));
  o.radix = 300;
  EXPECT_FALSE(FatTreeShapeFor(o).ok());
  o.radix = 8;
  o.oversubscription = 0.5;
  EXPECT_FALSE(FatTreeShapeFor(o).ok());
  o.oversubscription = 1;
  o.levels = 4;
  EXPECT_FALSE(FatTreeShapeFor(o).ok());
}

// The checked-in files (in tests/ibsim:netfile_ibsim_test's set) are what
// the generator writes.
TEST(FatTreeTest, CheckedInFilesMatchTheGenerator) {
  struct Case {
    const char* file;
    int hosts, radix, levels;
  };
  for (const Case& c : {Case{"tests/topologies/fattree2-r8-h24.net", 24, 8, 2},
                        Case{"tests/topologies/fattree3-r8-h48.net", 48, 8, 3}}) {
    FatTreeOptions o;
    o.hosts = c.hosts;
    o.radix = c.radix;
    o.levels = c.levels;
    absl::StatusOr<Topology> t = GenerateFatTree(o);
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<Topology> file = LoadNetFile(c.file);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(FormatNetFile(*file), FormatNetFile(*t)) << c.file;
  }
}

// Routes: 2 hops within a leaf, 4 across a two-level tree, 6 across pods.
TEST(FatTreeTest, FabricRoutesEveryPairThroughTheTree) {
  for (int levels : {2, 3}) {
    FatTreeOptions o;
    o.radix = 8;
    o.levels = levels;
    o.hosts = levels == 2 ? 24 : 48;
    absl::StatusOr<Topology> t = GenerateFatTree(o);
    ASSERT_TRUE(t.ok()) << t.status();
    Scheduler sched(1);
    auto fabric = Fabric::Create(sched, *t);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    auto lid = [&](int host) {
      return (*fabric)->FindEndpoint(absl::StrFormat("H-%016x", 0x100000 + 2 * host), 1)->lid;
    };
    auto hops = [&](int a, int b) {
      absl::StatusOr<PathInfo> p = (*fabric)->Path(lid(a), lid(b));
      EXPECT_TRUE(p.ok()) << p.status();
      return p.ok() ? p->hops : -1;
    };
    EXPECT_EQ(hops(0, 1), 2) << levels;
    EXPECT_EQ(hops(0, 4), 4) << levels;  // the next leaf (same pod)
    if (levels == 3) {
      EXPECT_EQ(hops(0, 47), 6);
    }
    for (int a = 0; a < o.hosts; a += 5) {
      for (int b = 0; b < o.hosts; b += 7) EXPECT_GT(hops(a, b), a == b ? -1 : 1);
    }
  }
}

TEST(FatTreeTest, DefaultTopologyKeepsTheOldShapesUpTo508Hosts) {
  absl::StatusOr<Topology> small = DefaultTopology(508);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(Count(*small, NodeType::kSwitch), 3);
  absl::StatusOr<Topology> two = DefaultTopology(509);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->nodes[0].desc, "spine 1");
  absl::StatusOr<Topology> three = DefaultTopology(1024);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->nodes[0].desc, "core 1");
  EXPECT_EQ(Count(*three, NodeType::kCa), 1024);
}

}  // namespace
}  // namespace uscm::sim
