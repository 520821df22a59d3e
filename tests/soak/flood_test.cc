// A REQ flood (100k/s of valid REQs from random comm IDs / GUIDs) against a
// listener whose application serves 50k requests/s: the legitimate client
// still connects every time, the listener never holds more than its backlog
// plus the legitimate connections, and every flood REQ is counted.
#include "gtest/gtest.h"
#include "tests/soak/scenarios.h"

namespace uscm::soak {
namespace {

TEST(FloodTest, LegitimatePeerGetsThroughWithBoundedMemory) {
  FloodConfig c;
  c.duration = Duration::Millis(100);
  c.legit_connections = 10;
  const Result r = RunFlood(c);
  EXPECT_TRUE(r.violations.empty()) << r.Summary();
}

TEST(FloodTest, DropPolicyBoundsMemoryAndCountsTheDrops) {
  // Linux's silent drop: memory stays bounded and every drop is counted;
  // the legitimate client relies on REQ retries (may lose, not asserted).
  FloodConfig c;
  c.duration = Duration::Millis(100);
  c.legit_connections = 10;
  c.policy = cm::BacklogPolicy::kDrop;
  const Result r = RunFlood(c);
  EXPECT_TRUE(r.violations.empty()) << r.Summary();
  bool counted = false;
  for (const auto& [k, v] : r.figures) {
    if (k == "listener backlog dropped") counted = v != "0";
  }
  EXPECT_TRUE(counted) << r.Summary();
}

TEST(FloodTest, SmallBacklogBoundsTheListener) {
  FloodConfig c;
  c.duration = Duration::Millis(50);
  c.legit_connections = 5;
  c.backlog = 8;
  const Result r = RunFlood(c);
  EXPECT_TRUE(r.violations.empty()) << r.Summary();
}

}  // namespace
}  // namespace uscm::soak
