#include "mad/sim/fabric.h"

#include <array>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr Duration kHop = Duration::Nanos(290 + 500);  // 4x SDR: 290 B / 1 GB/s + 500 ns

std::array<uint8_t, mad::kMadSize> Mad(uint32_t tag) {
  std::array<uint8_t, mad::kMadSize> m;
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<uint8_t>(i * 7 + tag);
  m[0] = static_cast<uint8_t>(tag);
  m[1] = static_cast<uint8_t>(tag >> 8);
  return m;
}

mad::MadAddress To(uint16_t lid, uint32_t qpn = mad::kQp1, uint32_t qkey = mad::kQp1Qkey) {
  mad::MadAddress a;
  a.lid = lid;
  a.qpn = qpn;
  a.qkey = qkey;
  return a;
}

struct Received {
  mad::MadAddress from;
  std::vector<uint8_t> data;
  TimePoint at;
};

std::vector<Received> DrainAll(SimTransport& t, TimePoint now) {
  std::vector<Received> out;
  t.Drain([&](const mad::ReceivedMad& m) {
    out.push_back(Received{m.from, std::vector<uint8_t>(m.data.begin(), m.data.end()), now});
  });
  return out;
}

// Two hosts behind one switch: switch1 = LID 1, host1 = 2, host2 = 3.
class TwoHostsTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(FabricOptions{}); }
  void Build(FabricOptions options, uint64_t seed = 1) {
    a_.reset();
    b_.reset();
    fabric_.reset();
    sched_ = std::make_unique<Scheduler>(seed);
    absl::StatusOr<std::unique_ptr<Fabric>> f = Fabric::Create(*sched_, TwoHostsOneSwitch(), options);
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    a_ = *fabric_->Open("host1");
    b_ = *fabric_->Open("host2");
  }
  uint64_t Drops(DropReason r) const { return fabric_->counters().drops(r); }

  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<SimTransport> a_, b_;
};

TEST_F(TwoHostsTest, PortsGetLidsGuidsAndTheSmLid) {
  const mad::LocalPort& p = a_->port();
  EXPECT_EQ(p.ca_name, "sim:host1");
  EXPECT_EQ(p.port_num, 1);
  EXPECT_EQ(p.lid, 2);
  EXPECT_EQ(p.sm_lid, 1);  // the first node (switch1) hosts the SM, as in ibsim
  EXPECT_EQ(p.node_guid, 0x100000u);
  EXPECT_EQ(p.gid, mad::Gid::FromParts(0xfe80000000000000ULL, 0x100001));
  EXPECT_THAT(p.pkeys, ElementsAre(0xFFFF));
  EXPECT_EQ(b_->port().lid, 3);
  EXPECT_EQ(a_->fd(), -1);
  EXPECT_EQ(a_->caps().name, "sim");
  ASSERT_EQ(fabric_->endpoints().size(), 3u);
  EXPECT_EQ(fabric_->FindByLid(1)->node_id, "switch1");
  EXPECT_EQ(fabric_->FindByGid(b_->port().gid)->lid, 3);
  EXPECT_EQ(fabric_->FindEndpoint("host2", 1)->port_guid, 0x100003u);
  EXPECT_EQ(fabric_->FindByLid(9), nullptr);
}

TEST_F(TwoHostsTest, DeliversAfterTwoHopsWithTheSourceAddressFilledIn) {
  const auto m = Mad(7);
  ASSERT_TRUE(a_->Send(To(3), m).ok());
  EXPECT_EQ(b_->pending(), 0u);  // never synchronous
  ASSERT_TRUE(sched_->RunFor(kHop * 2 - Duration::Nanos(1)).ok());
  EXPECT_EQ(b_->pending(), 0u);
  ASSERT_TRUE(sched_->RunFor(Duration::Nanos(1)).ok());
  std::vector<Received> got = DrainAll(*b_, sched_->Now());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].data, ElementsAreArray(m));
  EXPECT_EQ(got[0].from.lid, 2);
  EXPECT_EQ(got[0].from.qpn, 1u);
  EXPECT_EQ(got[0].from.qkey, mad::kQp1Qkey);
  EXPECT_EQ(got[0].from.pkey_index, 0);
  EXPECT_FALSE(got[0].from.has_grh);
  EXPECT_EQ(fabric_->counters().sent, 1u);
  EXPECT_EQ(fabric_->counters().delivered, 1u);
  EXPECT_EQ(fabric_->counters().total_dropped(), 0u);
  EXPECT_EQ(DrainAll(*a_, sched_->Now()).size(), 0u);
}

// What a warmer saw: (owner, stage, virtual time).
struct WarmCall {
  const void* owner;
  WarmStage stage;
  int64_t at_ns;
  bool operator==(const WarmCall&) const = default;
};
std::vector<WarmCall>* warm_calls = nullptr;
Scheduler* warm_clock = nullptr;
void RecordWarm(const void* owner, WarmStage stage) {
  warm_calls->push_back(WarmCall{owner, stage, warm_clock->Now().nanos()});
}

TEST_F(TwoHostsTest, AQp1sWarmerIsCalledWhenAMadIsSentToItAndOnItsLastHop) {
  std::vector<WarmCall> calls;
  warm_calls = &calls;
  warm_clock = sched_.get();
  int owner_b = 0;
  b_->set_arrival_warmer({&RecordWarm, &owner_b});
  ASSERT_TRUE(a_->Send(To(3), Mad(1)).ok());
  ASSERT_TRUE(sched_->RunFor(kHop * 2).ok());
  ASSERT_EQ(DrainAll(*b_, sched_->Now()).size(), 1u);
  // Sent at 0; the switch puts it on the link into host2 after one hop.
  EXPECT_THAT(calls, ElementsAre(WarmCall{&owner_b, WarmStage::kObject, 0},
                                 WarmCall{&owner_b, WarmStage::kParts, kHop.nanos()}));
  // host1 has no warmer; a MAD to another QP of host2 does not warm QP1's owner.
  calls.clear();
  ASSERT_TRUE(b_->Send(To(2), Mad(2)).ok());
  std::unique_ptr<SimTransport> b_qp5 = *fabric_->Open("host2", 1, 5, 0x1234);
  ASSERT_TRUE(a_->Send(To(3, 5, 0x1234), Mad(3)).ok());
  ASSERT_TRUE(sched_->RunFor(kHop * 2).ok());
  EXPECT_EQ(b_qp5->pending(), 1u);
  EXPECT_THAT(calls, ElementsAre());
  // Closing QP1 drops its warmer with it.
  b_.reset();
  ASSERT_TRUE(a_->Send(To(3), Mad(4)).ok());
  ASSERT_TRUE(sched_->RunFor(kHop * 2).ok());
  EXPECT_THAT(calls, ElementsAre());
  warm_calls = nullptr;
}

TEST_F(TwoHostsTest, WarmArrivalsFalseCallsNoWarmer) {
  FabricOptions options;
  options.warm_arrivals = false;
  Build(options);
  std::vector<WarmCall> calls;
  warm_calls = &calls;
  warm_clock = sched_.get();
  b_->set_arrival_warmer({&RecordWarm, b_.get()});
  ASSERT_TRUE(a_->Send(To(3), Mad(1)).ok());
  ASSERT_TRUE(sched_->RunFor(kHop * 2).ok());
  EXPECT_EQ(b_->pending(), 1u);
  EXPECT_THAT(calls, ElementsAre());
  // Switched on during the run, the next MAD warms.
  fabric_->set_warm_arrivals(true);
  ASSERT_TRUE(a_->Send(To(3), Mad(2)).ok());
  ASSERT_TRUE(sched_->RunFor(kHop * 2).ok());
  EXPECT_EQ(calls.size(), 2u);
  warm_calls = nullptr;
}

TEST_F(TwoHostsTest, JitterSpreadsArrivalsWithinTheBound) {
  LinkParams lp;
  lp.jitter = Duration::Micros(1);
  ASSERT_TRUE(fabric_->SetLinkParams("host1", 1, lp).ok());
  std::vector<TimePoint> at;
  b_->set_on_arrival([&] { at.push_back(sched_->Now()); });
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(a_->Send(To(3), Mad(i)).ok());
    ASSERT_TRUE(sched_->RunUntilIdle().ok());
  }
  ASSERT_EQ(at.size(), 200u);
  Duration lo = Duration::Max(), hi = Duration::Zero();
  for (int i = 0; i < 200; ++i) {
    const Duration d = at[i] - (i == 0 ? TimePoint::Epoch() : at[i - 1]);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_GE(lo, kHop * 2);
  EXPECT_LE(hi, kHop * 2 + Duration::Micros(1));
  EXPECT_GT(hi - lo, Duration::Nanos(500));  // it really varies
}

// A lossy, jittery, duplicating, reordering run; returns the digest.
uint64_t ChaosRun(uint64_t seed, FabricCounters* counters = nullptr) {
  Scheduler s(seed);
  FabricOptions o;
  o.link.loss = 0.1;
  o.link.duplicate = 0.05;
  o.link.reorder = 0.1;
  o.link.jitter = Duration::Nanos(300);
  std::unique_ptr<Fabric> f = *Fabric::Create(s, TwoHostsOneSwitch(), o);
  std::unique_ptr<SimTransport> a = *f->Open("host1");
  std::unique_ptr<SimTransport> b = *f->Open("host2");
  for (int i = 0; i < 500; ++i) {
    EXPECT_TRUE(a->Send(To(3), Mad(i)).ok());
    EXPECT_TRUE(b->Send(To(2), Mad(1000 + i)).ok());
    EXPECT_TRUE(s.RunFor(Duration::Nanos(100)).ok());
  }
  EXPECT_TRUE(s.RunUntilIdle().ok());
  if (counters != nullptr) *counters = f->counters();
  return f->trace_digest();
}

TEST(FabricDeterminismTest, SameSeedSameDigestOtherSeedDifferent) {
  FabricCounters c1, c2;
  const uint64_t d1 = ChaosRun(1, &c1);
  EXPECT_EQ(ChaosRun(1, &c2), d1);
  EXPECT_EQ(c1.delivered, c2.delivered);
  EXPECT_EQ(c1.dropped, c2.dropped);
  EXPECT_NE(ChaosRun(2), d1);
  EXPECT_GT(c1.drops(DropReason::kLoss), 0u);
  EXPECT_GT(c1.duplicated, 0u);
  EXPECT_GT(c1.reordered, 0u);
}

TEST(FabricDeterminismTest, TheDigestOfAFaultFreeRunIsPinned) {
  // A snapshot: any change to timing, addressing or hashing shows up here.
  Scheduler s(99);
  std::unique_ptr<Fabric> f = *Fabric::Create(s, TwoHostsOneSwitch());
  std::unique_ptr<SimTransport> a = *f->Open("host1");
  std::unique_ptr<SimTransport> b = *f->Open("host2");
  std::vector<TraceEvent> trace;
  f->set_trace_sink([&](const TraceEvent& e) { trace.push_back(e); });
  ASSERT_TRUE(a->Send(To(3), Mad(1)).ok());
  ASSERT_TRUE(b->Send(To(2), Mad(2)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_TRUE(trace[0].delivered);
  EXPECT_EQ(trace[0].at, TimePoint::Epoch() + kHop * 2);
  EXPECT_EQ(trace[0].slid, 2);
  EXPECT_EQ(trace[0].dlid, 3);
  EXPECT_EQ(trace[0].bytes, 256u);
  EXPECT_EQ(f->trace_digest(), 0x2bfcbc55a4f6355bULL) << std::hex << f->trace_digest();
}

TEST(FabricDeterminismTest, WithoutTheDigestTheTraceStillRunsAndReadingItIsABug) {
  Scheduler s(99);
  FabricOptions o;
  o.trace_digest = false;
  std::unique_ptr<Fabric> f = *Fabric::Create(s, TwoHostsOneSwitch(), o);
  std::unique_ptr<SimTransport> a = *f->Open("host1");
  std::unique_ptr<SimTransport> b = *f->Open("host2");
  int traced = 0;
  f->set_trace_sink([&](const TraceEvent&) { ++traced; });
  ASSERT_TRUE(a->Send(To(3), Mad(1)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(traced, 1);
  EXPECT_EQ(f->counters().delivered, 1u);
  EXPECT_DEATH((void)f->trace_digest(), "trace_digest is false");
}

TEST(FabricStatisticsTest, LossAndDuplicationRatesMatchTheirProbabilities) {
  Scheduler s(2024);
  FabricOptions o;
  o.receive_queue_depth = 100000;
  std::unique_ptr<Fabric> f = *Fabric::Create(s, TwoHostsOneSwitch(), o);
  LinkParams lp;
  lp.loss = 0.1;  // only on host1's link: one lossy hop
  lp.duplicate = 0.05;
  ASSERT_TRUE(f->SetLinkParams("host1", 1, lp).ok());
  std::unique_ptr<SimTransport> a = *f->Open("host1");
  std::unique_ptr<SimTransport> b = *f->Open("host2");
  constexpr int kN = 20000;
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(a->Send(To(3), Mad(i)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  const FabricCounters& c = f->counters();
  // Expected: 2000 lost (sd ~42), 900 duplicated of the 18000 kept (sd ~29).
  EXPECT_NEAR(static_cast<double>(c.drops(DropReason::kLoss)), 2000, 200);
  EXPECT_NEAR(static_cast<double>(c.duplicated), 900, 120);
  EXPECT_EQ(c.delivered, kN - c.drops(DropReason::kLoss) + c.duplicated);
  EXPECT_EQ(b->pending(), c.delivered);
}

TEST_F(TwoHostsTest, BandwidthQueuesBackToBackMads) {
  LinkParams slow;
  slow.latency = Duration::Zero();
  slow.bandwidth_bytes_per_s = 290'000'000;  // 290 wire bytes take 1 us
  ASSERT_TRUE(fabric_->SetLinkParams("host1", 1, slow).ok());
  std::vector<int64_t> at;
  b_->set_on_arrival([&] { at.push_back(sched_->Now().nanos()); });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(a_->Send(To(3), Mad(i)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  // Hop 1 finishes at 1, 2, 3, 4 us; hop 2 adds 290 + 500 ns each.
  EXPECT_THAT(at, ElementsAre(1790, 2790, 3790, 4790));
  std::vector<Received> got = DrainAll(*b_, sched_->Now());
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i].data[0], i);  // order kept
}

TEST_F(TwoHostsTest, GrhAddsFortyBytesOnTheWire) {
  mad::MadAddress to = To(3);
  to.has_grh = true;
  to.gid = b_->port().gid;
  std::vector<int64_t> at;
  b_->set_on_arrival([&] { at.push_back(sched_->Now().nanos()); });
  ASSERT_TRUE(a_->Send(to, Mad(1)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_THAT(at, ElementsAre(2 * (330 + 500)));
}

TEST_F(TwoHostsTest, ReorderLetsLaterMadsOvertake) {
  LinkParams lp;
  lp.reorder = 1.0;
  lp.reorder_delay = Duration::Micros(10);
  ASSERT_TRUE(fabric_->SetLinkParams("host1", 1, lp).ok());
  ASSERT_TRUE(a_->Send(To(3), Mad(1)).ok());
  ASSERT_TRUE(fabric_->SetLinkParams("host1", 1, LinkParams{}).ok());
  ASSERT_TRUE(sched_->RunFor(Duration::Micros(1)).ok());
  ASSERT_TRUE(a_->Send(To(3), Mad(2)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<Received> got = DrainAll(*b_, sched_->Now());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].data[0], 2);
  EXPECT_EQ(got[1].data[0], 1);
  EXPECT_EQ(fabric_->counters().reordered, 1u);
}

TEST_F(TwoHostsTest, LinkDownDropsAndLinkUpRestores) {
  ASSERT_TRUE(fabric_->SetLinkUp("host2", 1, false).ok());
  ASSERT_TRUE(a_->Send(To(3), Mad(1)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(Drops(DropReason::kLinkDown), 1u);
  EXPECT_EQ(b_->pending(), 0u);
  ASSERT_FALSE(fabric_->Path(2, 3)->all_links_up);

  ASSERT_TRUE(fabric_->ScheduleLinkUp(sched_->Now() + Duration::Micros(5), "switch1", 2, true).ok());
  ASSERT_TRUE(sched_->RunFor(Duration::Micros(5)).ok());
  ASSERT_TRUE(a_->Send(To(3), Mad(2)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(b_->pending(), 1u);

  // A link that goes down while a MAD is on it loses the MAD.
  ASSERT_TRUE(a_->Send(To(3), Mad(3)).ok());
  ASSERT_TRUE(fabric_->ScheduleLinkUp(sched_->Now() + Duration::Nanos(100), "host1", 1, false).ok());
  ASSERT_TRUE(fabric_->ScheduleLinkUp(sched_->Now() + Duration::Nanos(200), "host1", 1, true).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(Drops(DropReason::kLinkDown), 2u);
  EXPECT_EQ(b_->pending(), 1u);
  EXPECT_FALSE(fabric_->SetLinkUp("host1", 2, false).ok());
  EXPECT_FALSE(fabric_->SetLinkUp("nobody", 1, false).ok());
}

TEST_F(TwoHostsTest, QpnAndQkeyFiltering) {
  absl::StatusOr<std::unique_ptr<SimTransport>> ud = fabric_->Open("host2", 1, 0x100, 0x1234);
  ASSERT_TRUE(ud.ok()) << ud.status();
  ASSERT_TRUE(a_->Send(To(3, 0x100, 0x1234), Mad(1)).ok());  // delivered
  ASSERT_TRUE(a_->Send(To(3, 0x100, 0x9999), Mad(2)).ok());  // wrong Q_Key
  ASSERT_TRUE(a_->Send(To(3, 0x200, 0x1234), Mad(3)).ok());  // no such QP
  ASSERT_TRUE(a_->Send(To(3, 1, 0x1234), Mad(4)).ok());      // QP1 wants 0x80010000
  // From a UD QP, a Q_Key with the high bit set means "my own" (0x5678 here).
  std::unique_ptr<SimTransport> ud_a = *fabric_->Open("host1", 1, 0x101, 0x5678);
  ASSERT_TRUE(ud_a->Send(To(3, 1, mad::kQp1Qkey), Mad(5)).ok());
  ASSERT_TRUE(ud_a->Send(To(3, 0x100, 0x80000000), Mad(6)).ok());
  std::unique_ptr<SimTransport> ud_b = *fabric_->Open("host2", 1, 0x102, 0x5678);
  ASSERT_TRUE(ud_a->Send(To(3, 0x102, 0x80000000), Mad(7)).ok());  // delivered
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<Received> got = DrainAll(**ud, sched_->Now());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data[0], 1);
  EXPECT_EQ(got[0].from.qkey, 0x1234u);
  std::vector<Received> got_b = DrainAll(*ud_b, sched_->Now());
  ASSERT_EQ(got_b.size(), 1u);
  EXPECT_EQ(got_b[0].from.qpn, 0x101u);
  EXPECT_EQ(got_b[0].from.qkey, 0x5678u);
  EXPECT_EQ(b_->pending(), 0u);
  EXPECT_EQ(Drops(DropReason::kQkey), 4u);
  EXPECT_EQ(Drops(DropReason::kNoQp), 1u);

  // A closed QP stops receiving.
  ud->reset();
  ASSERT_TRUE(a_->Send(To(3, 0x100, 0x1234), Mad(8)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(Drops(DropReason::kNoQp), 2u);
}

TEST_F(TwoHostsTest, OpenRejectsBadQps) {
  EXPECT_TRUE(absl::IsAlreadyExists(fabric_->Open("host1").status()));
  EXPECT_EQ(fabric_->Open("host1", 1, 0).status().message(), "QP0 (SMI) is not simulated");
  EXPECT_EQ(fabric_->Open("host1", 1, 1, 0x1234).status().message(), "QP1 uses Q_Key 0x80010000");
  EXPECT_FALSE(fabric_->Open("host1", 1, 0x1000000, 1).ok());
  EXPECT_TRUE(absl::IsNotFound(fabric_->Open("host3").status()));
  EXPECT_TRUE(absl::IsNotFound(fabric_->Open("switch1", 3).status()));  // unconnected port
  EXPECT_TRUE(fabric_->Open("switch1", 0).ok());                       // the switch's own port
}

TEST_F(TwoHostsTest, SendRejectsBadAddressesAndSizes) {
  const auto m = Mad(1);
  EXPECT_EQ(a_->Send(To(3), std::span<const uint8_t>(m.data(), 0)).message(),
            "MAD is 0 bytes; the simulated fabric carries 1..256");
  std::vector<uint8_t> big(257);
  EXPECT_FALSE(a_->Send(To(3), big).ok());
  EXPECT_FALSE(a_->Send(To(0), m).ok());
  EXPECT_FALSE(a_->Send(To(0xFFFF), m).ok());
  EXPECT_FALSE(a_->Send(To(0xC001), m).ok());
  EXPECT_FALSE(a_->Send(To(3, 0x1000000), m).ok());
  mad::MadAddress bad_pkey = To(3);
  bad_pkey.pkey_index = 1;
  EXPECT_EQ(a_->Send(bad_pkey, m).message(), "P_Key index 1 is outside the 1-entry P_Key table");
  mad::MadAddress unknown_gid = To(0);
  unknown_gid.has_grh = true;
  EXPECT_FALSE(a_->Send(unknown_gid, m).ok());
  EXPECT_EQ(fabric_->counters().sent, 0u);
  // A LID nobody has is accepted (UD cannot know) and dropped in the fabric.
  EXPECT_TRUE(a_->Send(To(77), m).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(Drops(DropReason::kNoRoute), 1u);
}

TEST_F(TwoHostsTest, GrhAddressingByGidAndDgidCheck) {
  mad::MadAddress to;
  to.lid = 0;  // resolved from the DGID
  to.has_grh = true;
  to.gid = b_->port().gid;
  to.flow_label = 0x12345;
  to.traffic_class = 3;
  ASSERT_TRUE(a_->Send(to, Mad(1)).ok());
  to.lid = 3;
  to.gid = a_->port().gid;  // right LID, wrong DGID
  ASSERT_TRUE(a_->Send(to, Mad(2)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<Received> got = DrainAll(*b_, sched_->Now());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].from.has_grh);
  EXPECT_EQ(got[0].from.gid, a_->port().gid);
  EXPECT_EQ(got[0].from.flow_label, 0x12345u);
  EXPECT_EQ(got[0].from.traffic_class, 3);
  EXPECT_EQ(Drops(DropReason::kGid), 1u);
}

TEST_F(TwoHostsTest, PkeyIndexAndMembership) {
  FabricOptions o;
  o.pkeys = {0xFFFF, 0x8001, 0x0002};
  Build(o);
  mad::MadAddress to = To(3);
  to.pkey_index = 1;  // full member 0x8001
  ASSERT_TRUE(a_->Send(to, Mad(1)).ok());
  to.pkey_index = 2;  // limited 0x0002 meets limited 0x0002: no
  ASSERT_TRUE(a_->Send(to, Mad(2)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<Received> got = DrainAll(*b_, sched_->Now());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].from.pkey_index, 1);
  EXPECT_EQ(Drops(DropReason::kPkey), 1u);
}

TEST_F(TwoHostsTest, LoopbackAndTheSwitchPort) {
  ASSERT_TRUE(a_->Send(To(2), Mad(1)).ok());
  EXPECT_EQ(a_->pending(), 0u);
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(a_->pending(), 1u);
  EXPECT_EQ(sched_->Now(), TimePoint::Epoch());

  std::unique_ptr<SimTransport> sw = *fabric_->Open("switch1", 0);
  EXPECT_EQ(sw->port().lid, 1);
  ASSERT_TRUE(a_->Send(To(1), Mad(2)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  std::vector<Received> got = DrainAll(*sw, sched_->Now());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].from.lid, 2);
  ASSERT_TRUE(sw->Send(To(3), Mad(3)).ok());  // one hop from the switch
  const TimePoint sent = sched_->Now();
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(sched_->Now() - sent, kHop);
  EXPECT_EQ(b_->pending(), 1u);
}

TEST_F(TwoHostsTest, FullReceiveQueueDropsAndDrainHonoursMax) {
  FabricOptions o;
  o.receive_queue_depth = 2;
  Build(o);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a_->Send(To(3), Mad(i)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(Drops(DropReason::kQueueFull), 1u);
  EXPECT_EQ(DrainAll(*b_, sched_->Now()).size(), 2u);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a_->Send(To(3), Mad(i)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  int n = 0;
  EXPECT_EQ(b_->Drain([&](const mad::ReceivedMad&) { n++; }, 1), 1u);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(b_->pending(), 1u);
}

// A queued MAD stays in the fabric's packet pool until it is drained; the
// sink may send (here 200 MADs, so the pool grows and moves) and must still
// see the bytes and the address that arrived, in order.
TEST_F(TwoHostsTest, QueuedMadsSurviveASinkThatSends) {
  for (uint32_t tag = 10; tag < 13; ++tag) ASSERT_TRUE(a_->Send(To(3), Mad(tag)).ok());
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  ASSERT_EQ(b_->pending(), 3u);
  uint32_t tag = 10;
  const size_t n = b_->Drain([&](const mad::ReceivedMad& m) {
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(b_->Send(To(2), Mad(1000 + i)).ok());
    const std::array<uint8_t, mad::kMadSize> want = Mad(tag++);
    EXPECT_THAT(m.data, ElementsAreArray(want));
    EXPECT_EQ(m.from.lid, 2);
    EXPECT_EQ(m.from.qpn, mad::kQp1);
  });
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(b_->pending(), 0u);
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(DrainAll(*a_, sched_->Now()).size(), 600u);
}

TEST(FabricOptionsTest, BadOptionsAndLinkParamsAreRejected) {
  Scheduler s(1);
  FabricOptions o;
  o.link.loss = 1.5;
  EXPECT_FALSE(Fabric::Create(s, TwoHostsOneSwitch(), o).ok());
  o = FabricOptions{};
  o.pkeys.clear();
  EXPECT_FALSE(Fabric::Create(s, TwoHostsOneSwitch(), o).ok());
  o = FabricOptions{};
  o.sm_node = "nobody";
  EXPECT_FALSE(Fabric::Create(s, TwoHostsOneSwitch(), o).ok());
  EXPECT_FALSE(Fabric::Create(s, Topology{}).ok());
  Topology broken = TwoHostsOneSwitch();
  broken.nodes[1].ports[1].remote_node = 17;
  EXPECT_FALSE(Fabric::Create(s, broken).ok());
  broken = TwoHostsOneSwitch();
  broken.nodes[1].ports[1].remote_port = 2;  // switch1[2] links to host2, not back
  EXPECT_FALSE(Fabric::Create(s, broken).ok());
  broken = TwoHostsOneSwitch();
  broken.nodes[2].ports.pop_back();
  EXPECT_FALSE(Fabric::Create(s, broken).ok());
  std::unique_ptr<Fabric> f = *Fabric::Create(s, TwoHostsOneSwitch());
  LinkParams lp;
  lp.jitter = Duration::Nanos(-1);
  EXPECT_FALSE(f->SetLinkParams("host1", 1, lp).ok());
  lp = LinkParams{};
  lp.bandwidth_bytes_per_s = 0;
  EXPECT_FALSE(f->SetLinkParams("host1", 1, lp).ok());
}

TEST(FabricLidTest, HintsAreHonouredAndTheRestGoBreadthFirst) {
  Topology t = *TopologyBuilder()
                    .Ca("h0", 2)
                    .Switch("s", 4)
                    .Ca("h1", 1)
                    .Link("h0", 1, "s", 1)
                    .Link("s", 2, "h1", 1)
                    .Lid("h1", 1, 1)
                    .Build();
  Scheduler s(1);
  FabricOptions o;
  o.sm_node = "h1";
  std::unique_ptr<Fabric> f = *Fabric::Create(s, t, o);
  EXPECT_EQ(f->FindEndpoint("h1", 1)->lid, 1);
  EXPECT_EQ(f->FindEndpoint("h0", 1)->lid, 2);  // first in BFS order, 1 is taken
  EXPECT_EQ(f->FindEndpoint("h0", 2), nullptr);  // unconnected: no LID
  EXPECT_EQ(f->FindEndpoint("s", 0)->lid, 3);
  EXPECT_EQ(f->sm_lid(), 1);

  Topology dup = *TopologyBuilder().Ca("a", 1).Ca("b", 1).Link("a", 1, "b", 1)
                      .Lid("a", 1, 5).Lid("b", 1, 5).Build();
  EXPECT_FALSE(Fabric::Create(s, dup).ok());
}

// host "a" on s1, host "b" on s2; s1-s2 direct, and a detour s1-s3-s2.
Topology Triangle() {
  return *TopologyBuilder()
              .Switch("s1", 4).Switch("s2", 4).Switch("s3", 4)
              .Ca("a", 1).Ca("b", 1)
              .Link("s1", 1, "a", 1).Link("s2", 1, "b", 1)
              .Link("s1", 2, "s2", 2).Link("s1", 3, "s3", 1).Link("s3", 2, "s2", 3)
              .Build();
}

TEST(FabricRoutingTest, ShortestPathThenRerouteAroundADownLink) {
  Scheduler s(1);
  std::unique_ptr<Fabric> f = *Fabric::Create(s, Triangle());
  std::unique_ptr<SimTransport> a = *f->Open("a");
  std::unique_ptr<SimTransport> b = *f->Open("b");
  const uint16_t la = a->port().lid, lb = b->port().lid;
  absl::StatusOr<PathInfo> p = f->Path(la, lb);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->hops, 3);
  EXPECT_EQ(p->mtu, 4);
  EXPECT_EQ(p->rate, 3);  // 4x SDR = 10 Gb/s
  EXPECT_EQ(p->sgid, a->port().gid);

  ASSERT_TRUE(f->SetLinkUp("s1", 2, false).ok());
  ASSERT_TRUE(a->Send(To(lb), Mad(1)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(f->counters().drops(DropReason::kLinkDown), 1u);  // no SM sweep yet

  f->Reroute();
  EXPECT_EQ(f->Path(la, lb)->hops, 4);
  EXPECT_TRUE(f->Path(la, lb)->all_links_up);
  const TimePoint t0 = s.Now();
  ASSERT_TRUE(a->Send(To(lb), Mad(2)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(b->pending(), 1u);
  EXPECT_EQ(s.Now() - t0, kHop * 4);
  EXPECT_TRUE(absl::IsNotFound(f->Path(la, 99).status()));
}

TEST(FabricRoutingTest, PathRateIsTheSlowestLink) {
  Topology t = TwoHostsOneSwitch();
  for (TopoNode& n : t.nodes) {
    for (TopoPort& p : n.ports) {
      p.width_enabled = kWidth12x;
      p.speed_enabled = kSpeedQdr;
    }
  }
  Scheduler s(1);
  std::unique_ptr<Fabric> fast = *Fabric::Create(s, t);
  EXPECT_EQ(fast->Path(2, 3)->rate, 10);  // 12x QDR = 120 Gb/s
  t.nodes[2].ports[1].speed_enabled = kSpeedDdr;  // host1 (node 1) - switch link stays QDR
  t.nodes[0].ports[2].speed_enabled = kSpeedDdr | kSpeedQdr;
  std::unique_ptr<Fabric> mixed = *Fabric::Create(s, t);
  EXPECT_EQ(mixed->Path(2, 3)->rate, 8);  // 12x DDR = 60 Gb/s
  EXPECT_EQ(mixed->Path(3, 2)->rate, 8);
}

TEST(FabricScaleTest, FiveHundredCasBehindSeventeenSwitches) {
  Scheduler s(5);
  std::unique_ptr<Fabric> f = *Fabric::Create(s, *GenerateTopology(500, 17));
  ASSERT_EQ(f->endpoints().size(), 517u);
  EXPECT_EQ(f->FindByLid(1)->node_id, "S-0000000000200000");  // the core, first in the file
  const Endpoint* first = f->FindEndpoint("H-0000000000100000", 1);
  const Endpoint* second = f->FindEndpoint("H-0000000000100002", 1);  // on the next leaf
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(f->Path(first->lid, second->lid)->hops, 4);
  std::unique_ptr<SimTransport> a = *f->Open(first->node_id);
  std::unique_ptr<SimTransport> b = *f->Open(second->node_id);
  ASSERT_TRUE(a->Send(To(second->lid), Mad(1)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(b->pending(), 1u);
  EXPECT_EQ(s.Now() - TimePoint::Epoch(), kHop * 4);
}

// An actor that answers every MAD on its transport, woken through on_arrival.
class Echo : public Actor {
 public:
  explicit Echo(SimTransport& t) : t_(t) {
    t_.set_on_arrival([this] { due_ = true; });
  }
  absl::optional<TimePoint> NextDeadline() const override {
    return due_ ? absl::optional<TimePoint>(TimePoint::Epoch()) : absl::nullopt;
  }
  void Wake(TimePoint) override {
    due_ = false;
    t_.Drain([&](const mad::ReceivedMad& m) { EXPECT_TRUE(t_.Send(To(m.from.lid), m.data).ok()); });
  }

 private:
  SimTransport& t_;
  bool due_ = false;
};

TEST_F(TwoHostsTest, ActorsDrivenByArrivalsPingPong) {
  Echo echo(*b_);
  sched_->AddActor(&echo);
  int replies = 0;
  a_->set_on_arrival([&] {
    replies++;
    a_->Drain([](const mad::ReceivedMad&) {});
    if (replies < 100) {
      EXPECT_TRUE(a_->Send(To(3), Mad(replies)).ok());
    }
  });
  ASSERT_TRUE(a_->Send(To(3), Mad(0)).ok());
  ASSERT_TRUE(sched_->RunUntil([&] { return replies == 100; }).ok());
  EXPECT_EQ(sched_->Now() - TimePoint::Epoch(), kHop * 4 * 100);
  ASSERT_TRUE(sched_->RunUntilIdle().ok());
  EXPECT_EQ(fabric_->counters().delivered, 200u);
  sched_->RemoveActor(&echo);
}

}  // namespace
}  // namespace uscm::sim
