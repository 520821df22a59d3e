// MCMemberRecord joins of several router clients merged into one SA
// membership (router_multicast.cc), against the simulated fabric's SA: the
// SA sees a join only for bits no client holds yet and a leave only when the
// last holder leaves, and every client still gets an answer with its own TID.
#include <array>
#include <map>
#include <memory>
#include <vector>

#include "cm/router/router.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/wire/mcmember_record.h"
#include "sa/sim_sa.h"

namespace uscm::router {
namespace {

namespace w = mad::wire;
using w::McMemberRecordMask;

constexpr uint8_t kFull = w::JoinState::kFullMember;
constexpr uint8_t kSendOnlyNon = w::JoinState::kSendOnlyNonMember;

struct Answer {
  uint8_t method = 0;
  uint16_t status = 0;
  uint64_t tid = 0;
  w::McMemberRecord record;
};

class RouterMulticastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::make_unique<sim::Scheduler>(11);
    sim::FabricOptions fo;
    fo.sm_node = "host2";
    auto f = sim::Fabric::Create(*sched_, sim::TwoHostsOneSwitch(), fo);
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    auto sa = sa::SimSa::Create(*fabric_, sa::SimSaConfig{});
    ASSERT_TRUE(sa.ok()) << sa.status();
    sa_ = std::move(*sa);
    wire_ = *fabric_->Open("host1");
    router_ = std::make_unique<Router>(*wire_, RouterOptions{},
                                       [this](uint8_t slot, std::span<const uint8_t> f) {
                                         inbox_[slot].emplace_back(f.begin(), f.end());
                                       });
    mgid_.raw = {0xFF, 0x12, 0x40, 0x1B, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x17};
  }

  uint8_t AddClient() {
    auto wl = router_->AddClient();
    EXPECT_TRUE(wl.ok()) << wl.status();
    return wl->slot;
  }

  // A join (Set) or leave (Delete) as uscm's SA client sends it.
  void Send(uint8_t slot, uint8_t method, const mad::Gid& mgid, uint8_t bits, uint64_t tid) {
    w::McMemberRecordMad m;
    m.envelope.method = method;
    m.envelope.transaction_id = tid;
    m.component_mask = McMemberRecordMask::kMgid | McMemberRecordMask::kPortGid |
                       McMemberRecordMask::kJoinState;
    if (method == 0x02) {
      m.component_mask |= McMemberRecordMask::kQKey | McMemberRecordMask::kTClass |
                          McMemberRecordMask::kPKey | McMemberRecordMask::kSl |
                          McMemberRecordMask::kFlowLabel;
    }
    m.record.mgid = mgid;
    m.record.port_gid = wire_->port().gid;
    m.record.qkey = 0x11;
    m.record.pkey = 0xFFFF;
    m.record.join_state = w::JoinState(bits);
    std::array<uint8_t, mad::kMadSize> mad{};
    ASSERT_TRUE(m.Emit(mad).ok());
    mad::MadAddress sa;
    sa.lid = fabric_->sm_lid();
    std::vector<uint8_t> frame;
    EncodeMad(sa, mad, &frame);
    router_->HandleFrame(slot, frame);
  }
  void Join(uint8_t slot, uint8_t bits, uint64_t tid) { Send(slot, 0x02, mgid_, bits, tid); }
  void Leave(uint8_t slot, uint8_t bits, uint64_t tid) { Send(slot, 0x15, mgid_, bits, tid); }

  // Runs the fabric and the router until nothing moves; returns what each
  // client got.
  std::map<uint8_t, std::vector<Answer>> Settle() {
    for (int i = 0; i < 100; ++i) {
      EXPECT_TRUE(sched_->RunUntilIdle().ok());
      if (router_->PollWire() == 0) break;
    }
    std::map<uint8_t, std::vector<Answer>> out;
    for (auto& [slot, frames] : inbox_) {
      for (const auto& f : frames) {
        auto type = PeekFrame(f);
        EXPECT_TRUE(type.ok());
        if (!type.ok() || *type != FrameType::kMad) {
          refused_[slot]++;
          continue;
        }
        auto mf = DecodeMad(f);
        EXPECT_TRUE(mf.ok());
        auto parsed = w::McMemberRecordMad::Parse(mf->mad);
        EXPECT_TRUE(parsed.ok()) << parsed.status();
        if (!parsed.ok()) continue;
        out[slot].push_back(Answer{parsed->envelope.method, parsed->envelope.status,
                                   parsed->envelope.transaction_id, parsed->record});
      }
    }
    inbox_.clear();
    return out;
  }

  uint64_t SaRequests() const { return sa_->counters().requests; }
  std::unique_ptr<sim::Scheduler> sched_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<sa::SimSa> sa_;
  std::unique_ptr<sim::SimTransport> wire_;
  std::unique_ptr<Router> router_;
  std::map<uint8_t, std::vector<std::vector<uint8_t>>> inbox_;
  std::map<uint8_t, int> refused_;
  mad::Gid mgid_;
};

TEST_F(RouterMulticastTest, SecondJoinIsAnsweredLocallyAndOnlyTheLastLeaveReachesTheSa) {
  const uint8_t a = AddClient(), b = AddClient();
  Join(a, kFull, 0xA1);
  auto got = Settle();
  EXPECT_EQ(SaRequests(), 1u);
  ASSERT_EQ(got[a].size(), 1u);
  EXPECT_EQ(got[a][0].status, 0);
  EXPECT_EQ(got[a][0].tid, 0xA1u);
  const uint16_t mlid = got[a][0].record.mlid;
  EXPECT_NE(mlid, 0);

  Join(b, kFull, 0xB1);
  got = Settle();
  EXPECT_EQ(SaRequests(), 1u) << "b's join must not reach the SA";
  ASSERT_EQ(got[b].size(), 1u);
  EXPECT_EQ(got[b][0].method, 0x81);
  EXPECT_EQ(got[b][0].status, 0);
  EXPECT_EQ(got[b][0].tid, 0xB1u);
  EXPECT_EQ(got[b][0].record.mlid, mlid);
  EXPECT_EQ(got[b][0].record.mgid, mgid_);
  EXPECT_EQ(router_->counters().mc_joins_merged, 1u);
  EXPECT_EQ(router_->mc_members(mgid_.raw), 2u);

  Leave(a, kFull, 0xA2);
  got = Settle();
  EXPECT_EQ(SaRequests(), 1u) << "b still holds the group";
  ASSERT_EQ(got[a].size(), 1u);
  EXPECT_EQ(got[a][0].method, 0x95);
  EXPECT_EQ(got[a][0].status, 0);
  EXPECT_EQ(got[a][0].tid, 0xA2u);
  EXPECT_EQ(sa_->members(mgid_), 1u);

  Leave(b, kFull, 0xB2);
  got = Settle();
  EXPECT_EQ(SaRequests(), 2u);
  ASSERT_EQ(got[b].size(), 1u);
  EXPECT_EQ(got[b][0].method, 0x95);
  EXPECT_EQ(got[b][0].status, 0);
  EXPECT_EQ(got[b][0].tid, 0xB2u);
  EXPECT_EQ(sa_->members(mgid_), 0u);
  EXPECT_EQ(sa_->groups(), 0u);
  EXPECT_EQ(router_->mc_members(mgid_.raw), 0u);
}

TEST_F(RouterMulticastTest, JoinsWhileOneIsInFlightWaitForItsAnswer) {
  const uint8_t a = AddClient(), b = AddClient(), c = AddClient();
  Join(a, kFull, 1);
  Join(b, kFull, 2);
  Join(c, kFull, 3);
  Join(b, kFull, 2);  // b retries before the answer: still one waiter
  auto got = Settle();
  EXPECT_EQ(SaRequests(), 1u);
  for (uint8_t s : {a, b, c}) {
    ASSERT_EQ(got[s].size(), 1u) << "slot " << int{s};
    EXPECT_EQ(got[s][0].status, 0);
    EXPECT_EQ(got[s][0].tid, s == a ? 1u : s == b ? 2u : 3u);
  }
  EXPECT_EQ(router_->mc_members(mgid_.raw), 3u);
}

TEST_F(RouterMulticastTest, NewJoinStateBitsGoToTheSaAndALeaveDeletesOnlyBitsNoOneHolds) {
  const uint8_t a = AddClient(), b = AddClient();
  Join(a, kFull, 1);
  Settle();
  Join(b, kSendOnlyNon, 2);  // a bit the port does not hold yet
  auto got = Settle();
  EXPECT_EQ(SaRequests(), 2u);
  ASSERT_EQ(got[b].size(), 1u);
  EXPECT_EQ(got[b][0].status, 0);
  Join(a, kSendOnlyNon, 3);  // now held: answered locally
  Settle();
  EXPECT_EQ(SaRequests(), 2u);
  Leave(b, kSendOnlyNon, 4);  // a still holds SendOnlyNonMember: answered locally
  got = Settle();
  EXPECT_EQ(SaRequests(), 2u);
  ASSERT_EQ(got[b].size(), 1u);
  EXPECT_EQ(got[b][0].status, 0);
  EXPECT_EQ(got[b][0].tid, 4u);
  Leave(a, kSendOnlyNon, 5);  // nobody holds it now: the SA deletes that bit only
  got = Settle();
  EXPECT_EQ(SaRequests(), 3u);
  ASSERT_EQ(got[a].size(), 1u);
  EXPECT_EQ(got[a][0].status, 0);
  EXPECT_EQ(got[a][0].tid, 5u);
  EXPECT_EQ(sa_->members(mgid_), 1u) << "the port is still a full member";
  Leave(a, kFull, 6);
  Settle();
  EXPECT_EQ(SaRequests(), 4u);
  EXPECT_EQ(sa_->members(mgid_), 0u);
  EXPECT_EQ(router_->mc_members(mgid_.raw), 0u);
}

TEST_F(RouterMulticastTest, AClientThatGoesAwayLeavesOnlyWhenItWasTheLastMember) {
  const uint8_t a = AddClient(), b = AddClient();
  Join(a, kFull, 1);
  Settle();
  Join(b, kFull, 2);
  Settle();
  router_->RemoveClient(a);
  Settle();
  EXPECT_EQ(SaRequests(), 1u);
  EXPECT_EQ(sa_->members(mgid_), 1u);
  router_->RemoveClient(b);
  Settle();
  EXPECT_EQ(SaRequests(), 2u) << "the router's own leave";
  EXPECT_EQ(sa_->members(mgid_), 0u);
  EXPECT_EQ(router_->counters().mc_leaves_for_gone, 1u);
  EXPECT_EQ(router_->counters().wire_unroutable, 0u) << "the SA's answer to the router's leave";
}

TEST_F(RouterMulticastTest, AJoinAnsweredAfterItsClientWentAwayIsLeftAgain) {
  const uint8_t a = AddClient();
  Join(a, kFull, 1);
  router_->RemoveClient(a);  // before the SA answered
  Settle();
  EXPECT_EQ(SaRequests(), 2u);  // the join, then the router's leave
  EXPECT_EQ(sa_->members(mgid_), 0u);
  EXPECT_EQ(router_->mc_members(mgid_.raw), 0u);
}

TEST_F(RouterMulticastTest, ALeaveForAGroupTheClientDidNotJoinIsRefused) {
  const uint8_t a = AddClient(), b = AddClient();
  Join(a, kFull, 1);
  Settle();
  Leave(b, kFull, 2);
  auto got = Settle();
  EXPECT_EQ(SaRequests(), 1u);
  EXPECT_TRUE(got[b].empty());
  EXPECT_EQ(refused_[b], 1);
  EXPECT_EQ(router_->counters().refused_mads, 1u);
  EXPECT_EQ(sa_->members(mgid_), 1u);
}

TEST_F(RouterMulticastTest, AGroupCreatedWithMgidZeroIsMergedOnceTheSaNamedIt) {
  const uint8_t a = AddClient(), b = AddClient();
  Send(a, 0x02, mad::Gid{}, kFull, 1);
  auto got = Settle();
  ASSERT_EQ(got[a].size(), 1u);
  ASSERT_EQ(got[a][0].status, 0);
  const mad::Gid assigned = got[a][0].record.mgid;
  EXPECT_FALSE(assigned.is_zero());
  Send(b, 0x02, assigned, kFull, 2);
  got = Settle();
  EXPECT_EQ(SaRequests(), 1u);
  ASSERT_EQ(got[b].size(), 1u);
  EXPECT_EQ(got[b][0].record.mgid, assigned);
  EXPECT_EQ(router_->mc_members(assigned.raw), 2u);
}

TEST_F(RouterMulticastTest, ARefusedJoinReachesEveryWaiterAndLeavesNothingBehind) {
  const uint8_t a = AddClient(), b = AddClient();
  // A non-creator join of a group that does not exist: the SA refuses it.
  Join(a, kSendOnlyNon, 1);
  Join(b, kSendOnlyNon, 2);
  auto got = Settle();
  EXPECT_EQ(SaRequests(), 1u);
  ASSERT_EQ(got[a].size(), 1u);
  ASSERT_EQ(got[b].size(), 1u);
  EXPECT_NE(got[a][0].status, 0);
  EXPECT_EQ(got[b][0].status, got[a][0].status);
  EXPECT_EQ(got[b][0].tid, 2u);
  EXPECT_EQ(router_->mc_members(mgid_.raw), 0u);
}

}  // namespace
}  // namespace uscm::router
