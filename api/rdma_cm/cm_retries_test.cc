// The CM retries an rdma_cm id causes, as the kernel's rdma_cm: a REQ or REP
// that waits for its user is answered with an MRA only when it comes again
// (IB_CM_MRA_FLAG_DELAY | 24 in cma.c), so the peer retries it at most once.
// On the simulated fabric, in virtual time.
#include <cstdint>

#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"

namespace uscm {
namespace {

using testing::SimFabric;

constexpr uint16_t kPort = 7473;
constexpr int kReq = 0, kMra = 1, kRep = 3;  // CmCounters index: AttributeID - 0x10

class CmRetriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = SimFabric::Create(/*seed=*/17);
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
  }
  EventChannel& ch(int i) { return *f_->host(i).channel; }
  const cm::CmCounters& counters(int i) { return f_->host(i).device->node().cm().counters(); }

  Event Next(int host, EventType want) {
    absl::StatusOr<Event> e = f_->Next(ch(host));
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return Event{};
    EXPECT_EQ(e->event, want) << EventTypeName(e->event) << " " << e->detail;
    return *e;
  }

  // A listener on host 1 and an id on host 0 connecting to it.
  CmId* Connecting() {
    CmId* l = *ch(1).CreateId(nullptr, PortSpace::kTcp);
    Address a = f_->host(1).ip;
    a.port = kPort;
    EXPECT_TRUE(l->BindAddr(a).ok());
    EXPECT_TRUE(l->Listen(16).ok());
    CmId* id = *ch(0).CreateId(nullptr, PortSpace::kTcp);
    EXPECT_TRUE(id->ResolveAddr(absl::nullopt, a).ok());
    Next(0, EventType::kAddrResolved);
    EXPECT_TRUE(id->ResolveRoute().ok());
    Next(0, EventType::kRouteResolved);
    EXPECT_TRUE(id->Connect(ConnParam{}).ok());
    return id;
  }

  std::unique_ptr<SimFabric> f_;
};

// The REQ's timeout is 2 * 1.07 s (packet lifetime 18) + 4.3 s (20): the
// listener's user takes 30 s. One duplicate REQ, one MRA, then quiet; before,
// the CM's own MRA went out at half the timeout from the listener's receipt.
TEST_F(CmRetriesTest, SlowAcceptCostsOneDuplicateReqAndOneMra) {
  Connecting();
  Event req = Next(1, EventType::kConnectRequest);
  EXPECT_EQ(counters(1).sent[kMra], 0u) << "no MRA before a duplicate";
  f_->RunFor(mad::Duration::Seconds(30));
  EXPECT_EQ(counters(0).retransmitted[kReq], 1u);
  EXPECT_EQ(counters(1).duplicates[kReq], 1u);
  EXPECT_EQ(counters(1).sent[kMra], 1u);
  EXPECT_EQ(counters(1).auto_mra, 0u);
  EXPECT_EQ(counters(1).mra_held, 1u);
  ASSERT_TRUE(req.id->Accept(ConnParam{}).ok());
  Next(0, EventType::kConnectResponse);
}

// The active side's user takes 30 s to move its own QP and call Establish:
// the REP (timeout 4.3 s) comes once more and is answered with an MRA.
TEST_F(CmRetriesTest, SlowEstablishCostsOneDuplicateRepAndOneMra) {
  CmId* a = Connecting();
  Event req = Next(1, EventType::kConnectRequest);
  ASSERT_TRUE(req.id->Accept(ConnParam{}).ok());
  Next(0, EventType::kConnectResponse);
  EXPECT_EQ(counters(0).sent[kMra], 0u);
  f_->RunFor(mad::Duration::Seconds(30));
  EXPECT_EQ(counters(1).retransmitted[kRep], 1u);
  EXPECT_EQ(counters(0).duplicates[kRep], 1u);
  EXPECT_EQ(counters(0).sent[kMra], 1u);
  EXPECT_EQ(counters(0).auto_mra, 0u);
  ASSERT_TRUE(a->Establish().ok());
  Next(1, EventType::kEstablished);
}

}  // namespace
}  // namespace uscm
