// 500 connections between one pair at once, then DREQ/DREP for all: no
// retransmission, no setup or disconnect anywhere near one REQ timeout.
#include "gtest/gtest.h"
#include "tests/soak/scenarios.h"

namespace uscm::soak {
namespace {

TEST(PairTest, FiveHundredConnectionsNoStall) {
  PairConfig c;
  c.connections = 500;
  const Result r = RunPair(c);
  EXPECT_TRUE(r.violations.empty()) << r.Summary();
}

TEST(PairTest, LowLatencyProfileNoStall) {
  PairConfig c;
  c.connections = 500;
  c.profile = LowLatencyProfile();
  const Result r = RunPair(c);
  EXPECT_TRUE(r.violations.empty()) << r.Summary();
}

}  // namespace
}  // namespace uscm::soak
