#include "tools/sim_sweep.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace uscm::tools {
namespace {

// The values of every run, as the CSV prints them.
std::vector<std::string> AllValues(const SweepPlan& plan) {
  std::vector<std::string> v;
  for (const SweepPoint& p : plan.Points()) v.push_back(plan.Values(p));
  return v;
}

SweepPlan TwoByThree() {
  SweepPlan plan;
  plan.Add(MakeDimension("a", 1, std::vector<int64_t>{1, 2},
                         [](int64_t v, SimRunOptions& r) { r.workload.connections = v; }));
  plan.Add(MakeDimension("b", 0, std::vector<double>{0.5, 0.25, 0.125},
                         [](double v, SimRunOptions& r) { r.world.link.loss = v; }));
  return plan;
}

TEST(SweepPlanTest, TheLowestRunOrderVariesFastestAndColumnsKeepTheirOrder) {
  SweepPlan plan = TwoByThree();
  EXPECT_EQ(plan.RunCount(), 6u);
  EXPECT_EQ(plan.Header(), "a,b");
  EXPECT_EQ(AllValues(plan), (std::vector<std::string>{"1,0.5", "1,0.25", "1,0.125", "2,0.5",
                                                        "2,0.25", "2,0.125"}));
  const SweepPoint last = plan.Points().back();
  const SimRunOptions r = plan.Apply(last, SimRunOptions{});
  EXPECT_EQ(r.workload.connections, 2);
  EXPECT_EQ(r.world.link.loss, 0.125);
  EXPECT_EQ(plan.Label(last), "a 2, b 0.125");
  EXPECT_EQ(plan.Grouping(), "a x b");
  EXPECT_TRUE(plan.SweptBeyondFirst());
}

TEST(SweepPlanTest, TheFirstDimensionIsAlwaysAColumnAndLabelsWhenNothingIsSwept) {
  SweepPlan plan;
  plan.Add(MakeDimension("loss", 0, std::vector<double>{0.01}, [](double, SimRunOptions&) {}));
  plan.Add(MakeDimension("hosts", 1, std::vector<int64_t>{4}, [](int64_t, SimRunOptions&) {}));
  ASSERT_EQ(plan.RunCount(), 1u);
  const SweepPoint p = plan.Points()[0];
  EXPECT_EQ(plan.Header(), "loss");
  EXPECT_EQ(plan.Values(p), "0.01");
  EXPECT_EQ(plan.Label(p), "loss 0.01");
  EXPECT_EQ(plan.FirstValue(p), "0.01");
  EXPECT_FALSE(plan.SweptBeyondFirst());
  EXPECT_FALSE(plan.Swept("hosts"));
}

TEST(SweepPlanTest, AnUnsweptFirstDimensionStaysOutOfTheLabels) {
  SweepPlan plan;
  plan.Add(MakeDimension("loss", 0, std::vector<double>{0}, [](double, SimRunOptions&) {}));
  plan.Add(MakeDimension("pattern", 1, std::vector<std::string>{"ring", "incast"},
                         [](const std::string&, SimRunOptions&) {}));
  EXPECT_EQ(plan.Header(), "loss,pattern");
  EXPECT_EQ(AllValues(plan), (std::vector<std::string>{"0,ring", "0,incast"}));
  EXPECT_EQ(plan.Label(plan.Points()[1]), "pattern incast");
  EXPECT_EQ(plan.Grouping(), "pattern");
  EXPECT_TRUE(plan.Swept("pattern"));
}

// uscm sim's own dimensions: the historical run order (loss, duplicate,
// jitter, latency, ...) differs from the column order (latency before jitter).
TEST(PlanSimSweepTest, RunsInTheHistoricalOrderWithColumnsInTheirs) {
  SimSweepLists lists;
  lists.loss = "0,0.1";
  lists.latency_us = "1,2";
  lists.jitter_us = "0,3";
  lists.cm_retries = "1,2";
  lists.sa_queue_limit = "0,4";
  auto plan = PlanSimSweep(lists);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->Header(), "loss,latency_us,jitter_us,cm_retries,sa_queue_limit");
  const std::vector<std::string> v = AllValues(*plan);
  ASSERT_EQ(v.size(), 32u);
  EXPECT_EQ(v[0], "0,1,0,1,0");
  EXPECT_EQ(v[1], "0.1,1,0,1,0");   // loss fastest
  EXPECT_EQ(v[2], "0,1,3,1,0");     // then jitter
  EXPECT_EQ(v[4], "0,2,0,1,0");     // then latency
  EXPECT_EQ(v[8], "0,1,0,1,4");     // then the SA queue limit
  EXPECT_EQ(v[16], "0,1,0,2,0");    // then the CM retries
  const SimRunOptions r = plan->Apply(plan->Points()[31], SimRunOptions{});
  EXPECT_EQ(r.world.link.loss, 0.1);
  EXPECT_EQ(r.world.link.latency, Duration::Micros(2));
  EXPECT_EQ(r.world.link.jitter, Duration::Micros(3));
  EXPECT_EQ(r.workload.max_cm_retries, 2);
  EXPECT_EQ(r.world.sa.queue_limit, 4u);
}

TEST(PlanSimSweepTest, EveryListSetsItsOption) {
  SimSweepLists lists;
  lists.loss = "0.2";
  lists.duplicate = "0.3";
  lists.hosts = "9";
  lists.topology = "x.net";
  lists.pattern = "incast";
  lists.arrivals = "poisson";
  lists.cm_profile = "linux";
  lists.path_cache = "on";
  lists.procs_per_host = "3";
  auto plan = PlanSimSweep(lists);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->Header(), "loss");
  const SimRunOptions r = plan->Apply(plan->Points()[0], SimRunOptions{});
  EXPECT_EQ(r.world.link.duplicate, 0.3);
  EXPECT_EQ(r.world.max_hosts, 9u);
  EXPECT_EQ(r.world.topology_file, "x.net");
  EXPECT_EQ(r.workload.pattern, WorkloadOptions::Pattern::kIncast);
  EXPECT_EQ(r.workload.arrivals, WorkloadOptions::Arrivals::kPoisson);
  EXPECT_EQ(r.workload.profile.name, "linux");
  EXPECT_EQ(r.world.cm.rounding, mad::IbaTimeRounding::kLinux);
  EXPECT_TRUE(r.world.path_cache);
  EXPECT_EQ(r.world.procs_per_host, 3u);
}

TEST(PlanSimSweepTest, BadListsSayWhich) {
  SimSweepLists lists;
  lists.pattern = "ring,mesh";
  lists.arrivals = ",";
  // Both lists are checked for emptiness before either's names.
  EXPECT_EQ(PlanSimSweep(lists).status().message(), "--arrivals is empty");
  lists.arrivals = "storm";
  EXPECT_EQ(PlanSimSweep(lists).status().message(),
            "--pattern: 'mesh': expected ring, all-to-all, incast or random");
  lists = SimSweepLists{};
  lists.path_cache = "yes";
  EXPECT_EQ(PlanSimSweep(lists).status().message(), "--path-cache: 'yes': expected on or off");
  lists = SimSweepLists{};
  lists.cm_retries = "3,16";
  EXPECT_EQ(PlanSimSweep(lists).status().message(),
            "--cm-retries: '16' is not an integer in [0, 15]");
}

}  // namespace
}  // namespace uscm::tools
