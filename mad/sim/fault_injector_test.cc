#include "mad/sim/fault_injector.h"

#include <algorithm>
#include <bit>
#include <deque>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"

namespace uscm::sim {
namespace {

using ::testing::ElementsAre;

// Records what is sent; hands out whatever the test queues for receive.
class FakeTransport : public mad::Transport {
 public:
  struct Mad {
    mad::MadAddress addr;
    std::vector<uint8_t> data;
  };
  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override {
    if (fail) return absl::UnavailableError("fake send failure");
    sent.push_back(Mad{to, std::vector<uint8_t>(mad.begin(), mad.end())});
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) override {
    size_t n = 0;
    while (n < max && !inbound.empty()) {
      sink(mad::ReceivedMad{inbound.front().addr, inbound.front().data});
      inbound.pop_front();
      ++n;
    }
    return n;
  }
  FakeTransport() {
    caps_.name = "fake";
    port_.ca_name = "fake0";
    port_.lid = 9;
  }
  int fd() const override { return 42; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }

  std::vector<Mad> sent;
  std::deque<Mad> inbound;
  bool fail = false;

 private:
  mad::TransportCaps caps_;
  mad::LocalPort port_;
};

std::vector<uint8_t> Payload(uint8_t tag) {
  std::vector<uint8_t> m(mad::kMadSize, 0);
  m[0] = tag;
  return m;
}

mad::MadAddress To(uint16_t lid) {
  mad::MadAddress a;
  a.lid = lid;
  return a;
}

class FaultInjectorTest : public ::testing::Test {
 protected:
  std::unique_ptr<FaultInjector> Make(FaultInjectorOptions o) {
    absl::StatusOr<std::unique_ptr<FaultInjector>> f = FaultInjector::Create(inner_, clock_, o);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? std::move(*f) : nullptr;
  }
  std::vector<uint8_t> Tags(const std::vector<FakeTransport::Mad>& v) {
    std::vector<uint8_t> t;
    for (const auto& m : v) t.push_back(m.data[0]);
    return t;
  }
  std::vector<uint8_t> DrainTags(FaultInjector& f) {
    std::vector<uint8_t> t;
    f.Drain([&](const mad::ReceivedMad& m) { t.push_back(m.data[0]); });
    return t;
  }

  FakeTransport inner_;
  mad::VirtualClock clock_;
};

TEST_F(FaultInjectorTest, NoFaultsPassesThroughAndKeepsTheInnerIdentity) {
  auto f = Make({});
  ASSERT_TRUE(f->Send(To(3), Payload(1)).ok());
  EXPECT_THAT(Tags(inner_.sent), ElementsAre(1));
  inner_.inbound.push_back({To(4), Payload(2)});
  EXPECT_THAT(DrainTags(*f), ElementsAre(2));
  EXPECT_EQ(f->fd(), 42);
  EXPECT_EQ(f->caps().name, "faults+fake");
  EXPECT_EQ(f->port().lid, 9);
  inner_.fail = true;
  EXPECT_TRUE(absl::IsUnavailable(f->Send(To(3), Payload(3))));
}

TEST_F(FaultInjectorTest, DropOnSendAndOnReceive) {
  FaultInjectorOptions o;
  o.send.drop = 1;
  o.receive.drop = 1;
  auto f = Make(o);
  ASSERT_TRUE(f->Send(To(3), Payload(1)).ok());  // the wire lost it: still OK
  EXPECT_TRUE(inner_.sent.empty());
  inner_.inbound.push_back({To(4), Payload(2)});
  EXPECT_TRUE(DrainTags(*f).empty());
  EXPECT_TRUE(inner_.inbound.empty());
  EXPECT_EQ(f->send_counters().dropped, 1u);
  EXPECT_EQ(f->receive_counters().dropped, 1u);
  EXPECT_EQ(f->receive_counters().seen, 1u);
}

TEST_F(FaultInjectorTest, DuplicateSendsTwice) {
  FaultInjectorOptions o;
  o.send.duplicate = 1;
  o.receive.duplicate = 1;
  auto f = Make(o);
  ASSERT_TRUE(f->Send(To(3), Payload(1)).ok());
  EXPECT_THAT(Tags(inner_.sent), ElementsAre(1, 1));
  inner_.inbound.push_back({To(4), Payload(2)});
  EXPECT_THAT(DrainTags(*f), ElementsAre(2, 2));
  EXPECT_EQ(f->send_counters().duplicated, 1u);
}

TEST_F(FaultInjectorTest, BitFlipChangesExactlyOneBit) {
  FaultInjectorOptions o;
  o.seed = 11;
  o.send.bit_flip = 1;
  auto f = Make(o);
  std::vector<uint8_t> m(mad::kMadSize);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<uint8_t>(i);
  for (int round = 0; round < 50; ++round) {
    ASSERT_TRUE(f->Send(To(3), m).ok());
    const std::vector<uint8_t>& got = inner_.sent.back().data;
    ASSERT_EQ(got.size(), m.size());
    int flipped = 0;
    for (size_t i = 0; i < m.size(); ++i) flipped += std::popcount(static_cast<uint8_t>(got[i] ^ m[i]));
    EXPECT_EQ(flipped, 1);
  }
  EXPECT_EQ(f->send_counters().bit_flipped, 50u);
}

TEST_F(FaultInjectorTest, DelayHoldsUntilDueAndReportsTheDeadline) {
  FaultInjectorOptions o;
  o.send.delay = Duration::Micros(10);
  o.receive.delay = Duration::Micros(20);
  auto f = Make(o);
  ASSERT_TRUE(f->Send(To(3), Payload(1)).ok());
  EXPECT_TRUE(inner_.sent.empty());
  EXPECT_EQ(f->NextDeadline(), TimePoint::Epoch() + Duration::Micros(10));
  inner_.inbound.push_back({To(4), Payload(2)});
  EXPECT_TRUE(DrainTags(*f).empty());
  EXPECT_EQ(f->held(), 2u);
  clock_.AdvanceBy(Duration::Micros(10) - Duration::Nanos(1));
  f->ReleaseDue();
  EXPECT_TRUE(inner_.sent.empty());
  clock_.AdvanceBy(Duration::Nanos(1));
  EXPECT_TRUE(DrainTags(*f).empty());  // Drain released the send, the receive is not due
  EXPECT_THAT(Tags(inner_.sent), ElementsAre(1));
  EXPECT_EQ(f->NextDeadline(), TimePoint::Epoch() + Duration::Micros(20));
  clock_.AdvanceTo(TimePoint::Epoch() + Duration::Micros(20));
  EXPECT_THAT(DrainTags(*f), ElementsAre(2));
  EXPECT_EQ(f->NextDeadline(), absl::nullopt);
  EXPECT_EQ(f->send_counters().delayed, 1u);
}

TEST_F(FaultInjectorTest, ReceiveReorderLetsLaterMadsOvertake) {
  FaultInjectorOptions o;
  o.seed = 4;
  o.receive.reorder = 0.5;
  o.receive.reorder_delay = Duration::Micros(3);
  auto f = Make(o);
  std::vector<uint8_t> got;
  for (int i = 0; i < 20; ++i) {
    inner_.inbound.push_back({To(4), Payload(static_cast<uint8_t>(i))});
    for (uint8_t t : DrainTags(*f)) got.push_back(t);
    clock_.AdvanceBy(Duration::Micros(1));
  }
  clock_.AdvanceBy(Duration::Micros(10));
  for (uint8_t t : DrainTags(*f)) got.push_back(t);
  ASSERT_EQ(got.size(), 20u);
  std::vector<uint8_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_FALSE(std::is_sorted(got.begin(), got.end()));
  EXPECT_GT(f->receive_counters().reordered, 0u);
}

TEST_F(FaultInjectorTest, PartialReorderSwapsNeighbours) {
  // With p = 0.5 some MADs are held back and overtaken: the output is a
  // permutation of the input that is not the identity.
  FaultInjectorOptions o;
  o.seed = 3;
  o.send.reorder = 0.5;
  o.send.reorder_delay = Duration::Micros(3);
  auto f = Make(o);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(f->Send(To(3), Payload(static_cast<uint8_t>(i))).ok());
    clock_.AdvanceBy(Duration::Micros(1));
    f->ReleaseDue();
  }
  clock_.AdvanceBy(Duration::Micros(10));
  f->ReleaseDue();
  std::vector<uint8_t> got = Tags(inner_.sent);
  ASSERT_EQ(got.size(), 20u);
  std::vector<uint8_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_FALSE(std::is_sorted(got.begin(), got.end()));
  EXPECT_GT(f->send_counters().reordered, 0u);
  EXPECT_LT(f->send_counters().reordered, 20u);
}

TEST_F(FaultInjectorTest, RatesFollowTheProbabilitiesAndTheSeedFixesThePattern) {
  auto run = [&](uint64_t seed) {
    FakeTransport inner;
    FaultInjectorOptions o;
    o.seed = seed;
    o.send.drop = 0.3;
    auto f = *FaultInjector::Create(inner, clock_, o);
    std::vector<uint8_t> kept;
    for (int i = 0; i < 10000; ++i) {
      EXPECT_TRUE(f->Send(To(3), Payload(static_cast<uint8_t>(i))).ok());
      kept.push_back(inner.sent.size() > kept.size() ? 1 : 0);
    }
    EXPECT_NEAR(static_cast<double>(f->send_counters().dropped), 3000, 200);  // sd ~46
    return kept;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST_F(FaultInjectorTest, HeldQueueOverflowAndInnerErrorsAreCounted) {
  FaultInjectorOptions o;
  o.send.delay = Duration::Micros(1);
  o.max_held = 2;
  auto f = Make(o);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f->Send(To(3), Payload(i)).ok());
  EXPECT_EQ(f->send_counters().overflow, 1u);
  inner_.fail = true;
  clock_.AdvanceBy(Duration::Micros(1));
  f->ReleaseDue();
  EXPECT_EQ(f->send_counters().send_errors, 2u);
  EXPECT_EQ(f->held(), 0u);
}

TEST_F(FaultInjectorTest, BadOptionsAreRejected) {
  FaultInjectorOptions o;
  o.send.drop = -0.1;
  EXPECT_EQ(FaultInjector::Create(inner_, clock_, o).status().message(),
            "send faults: probabilities must be in [0, 1]");
  o = {};
  o.receive.delay = Duration::Nanos(-1);
  EXPECT_EQ(FaultInjector::Create(inner_, clock_, o).status().message(),
            "receive faults: delays must not be negative");
}

TEST(FaultInjectorOverFabricTest, WrapsASimTransportOnVirtualTime) {
  Scheduler s(8);
  std::unique_ptr<Fabric> fabric = *Fabric::Create(s, TwoHostsOneSwitch());
  std::unique_ptr<SimTransport> a = *fabric->Open("host1");
  std::unique_ptr<SimTransport> b = *fabric->Open("host2");
  FaultInjectorOptions o;
  o.seed = 8;
  o.send.delay = Duration::Micros(100);
  auto f = *FaultInjector::Create(*a, s.clock(), o);
  ASSERT_TRUE(f->Send(To(3), Payload(1)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(b->pending(), 0u);  // held in the middleware
  ASSERT_TRUE(s.RunFor(*f->NextDeadline() - s.Now()).ok());
  f->ReleaseDue();
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(b->pending(), 1u);
  EXPECT_EQ(s.Now(), TimePoint::Epoch() + Duration::Micros(100) + Duration::Nanos(2 * 790));
}

}  // namespace
}  // namespace uscm::sim
