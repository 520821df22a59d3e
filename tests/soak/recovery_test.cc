// One lost REQ, REP, RTU, DREQ or DREP is recovered in under 20 ms of virtual
// time with the low-latency profile; with the Linux-like profile the same loss
// costs a full response timeout (seconds), which the bound would catch.
#include <vector>

#include "gtest/gtest.h"
#include "mad/wire/cm_common.h"
#include "tests/soak/scenarios.h"

namespace uscm::soak {
namespace {

using mad::wire::CmAttr;

class RecoveryTest : public ::testing::TestWithParam<CmAttr> {};

TEST_P(RecoveryTest, LowLatencyRecoversUnder20ms) {
  RecoveryConfig c;
  c.attr = GetParam();
  c.trials = 20;
  std::vector<Duration> times;
  const Result r = RunRecovery(c, &times);
  EXPECT_TRUE(r.violations.empty()) << r.Summary();
  ASSERT_EQ(times.size(), 20u);
  // The loss really cost a retransmission: far slower than no loss at all.
  EXPECT_GT(Percentile(times, 0), RecoveryBaseline(c) * 100) << r.Summary();
}

TEST_P(RecoveryTest, LinuxProfileMissesTheBound) {
  RecoveryConfig c;
  c.attr = GetParam();
  c.trials = 2;
  c.profile = LinuxProfile();
  const Result r = RunRecovery(c);
  EXPECT_EQ(r.violations.size(), 2u) << r.Summary();
}

INSTANTIATE_TEST_SUITE_P(EachMessage, RecoveryTest,
                         ::testing::Values(CmAttr::kReq, CmAttr::kRep, CmAttr::kRtu,
                                           CmAttr::kDreq, CmAttr::kDrep),
                         [](const auto& info) {
                           return std::string(mad::wire::CmAttrName(info.param));
                         });

}  // namespace
}  // namespace uscm::soak
