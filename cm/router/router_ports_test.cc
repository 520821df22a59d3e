// Port blocks (router_ports.cc): the router leases blocks of the ephemeral
// range; the lessee claims ports in the block's page without a frame; another
// client's claim of a port in the block takes it when free (the kernel's
// bind would succeed) and is refused when the lessee claimed it. Clients are
// LocalRouterClients (the page on the heap, the same atomics as the memfd).
#include <cerrno>
#include <memory>

#include "cm/router/local_router.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/status_errno.h"

namespace uscm::router {
namespace {

using mad::ClaimKind;
using mad::ListenAddress;
using State = mad::PortPage::State;

constexpr uint16_t kTcp = 0x0106;
constexpr uint64_t kAll = ~uint64_t{0};
constexpr uint32_t kAddrA = 0xC0A84D64;  // 192.168.77.100
constexpr uint32_t kAddrB = 0xC0A84D65;

uint64_t Sid(uint16_t port) { return uint64_t{kTcp} << 16 | port; }

class RouterPortsTest : public ::testing::Test {
 protected:
  // Ports 40000..40009: blocks 40000-40003, 40004-40007, 40008-40009.
  void SetUp() override { Start(/*max_blocks=*/2); }
  void Start(size_t max_blocks) {
    // Again (a test's own bound): the old world goes first, users before
    // what they use.
    router_.reset();
    wire_.reset();
    fabric_.reset();
    sched_ = std::make_unique<sim::Scheduler>(5);
    auto f = sim::Fabric::Create(*sched_, sim::TwoHostsOneSwitch());
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    wire_ = *fabric_->Open("host1");
    RouterOptions o;
    o.ephemeral_low = 40000;
    o.ephemeral_high = 40009;
    o.lease_ports = 4;
    o.max_blocks_per_client = max_blocks;
    router_ = std::make_unique<LocalRouter>(*wire_, o);
  }
  std::unique_ptr<LocalRouterClient> Connect() {
    auto c = router_->Connect();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  static absl::Status Bind(LocalRouterClient& c, uint16_t port, uint32_t ip = kAddrB) {
    return c.ClaimService(Sid(port), kAll, false, ListenAddress::Ipv4(ip), ClaimKind::kBind);
  }
  const RouterCounters& counters() const { return router_->counters(); }

  std::unique_ptr<sim::Scheduler> sched_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<mad::Transport> wire_;
  std::unique_ptr<LocalRouter> router_;
};

TEST_F(RouterPortsTest, BlocksAreDistinctAndBoundedPerClientAndInAll) {
  auto a = Connect();
  auto b = Connect();
  auto l1 = a->LeasePorts(kTcp);
  ASSERT_TRUE(l1.ok()) << l1.status();
  EXPECT_EQ(l1->first_port, 40000);
  EXPECT_EQ(l1->page->size(), 4u);
  auto l2 = a->LeasePorts(kTcp);
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ(l2->first_port, 40004);
  // Two blocks is this client's most.
  auto l3 = a->LeasePorts(kTcp);
  EXPECT_EQ(l3.status().code(), absl::StatusCode::kResourceExhausted) << l3.status();
  // The last block is what is left of the range.
  auto l4 = b->LeasePorts(kTcp);
  ASSERT_TRUE(l4.ok()) << l4.status();
  EXPECT_EQ(l4->first_port, 40008);
  EXPECT_EQ(l4->page->size(), 2u);
  auto l5 = b->LeasePorts(kTcp);
  EXPECT_EQ(l5.status().code(), absl::StatusCode::kResourceExhausted) << l5.status();
  EXPECT_NE(l5.status().message().find("is leased"), absl::string_view::npos) << l5.status();
  // Another port space has blocks of its own.
  auto udp = b->LeasePorts(0x0111);
  ASSERT_TRUE(udp.ok()) << udp.status();
  EXPECT_EQ(udp->first_port, 40000);
  EXPECT_EQ(counters().leases, 4u);
  EXPECT_EQ(counters().leases_refused, 2u);
  EXPECT_EQ(router_->router().blocks_of(a->slot(), kTcp), 2u);
}

TEST_F(RouterPortsTest, AnotherClientsBindOfAFreePortInABlockTakesItAtOnce) {
  auto a = Connect();
  auto b = Connect();
  auto lease = a->LeasePorts(kTcp);
  ASSERT_TRUE(lease.ok()) << lease.status();
  mad::PortPage& page = *lease->page;
  ASSERT_TRUE(page.Claim(1));  // a's bind to port 0 got 40001
  // 40000 is free in a's block: b's bind succeeds, as the kernel's would,
  // and the port is no longer a's to claim.
  EXPECT_TRUE(Bind(*b, 40000).ok());
  EXPECT_EQ(page.Load(0), static_cast<uint8_t>(State::kTaken));
  EXPECT_FALSE(page.Claim(0));
  // 40001 is a's: a bind on an address fails with EADDRINUSE, a wildcard
  // listen with EADDRNOTAVAIL, as against a bound port in the kernel.
  absl::Status s = Bind(*b, 40001);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  s = b->ClaimService(Sid(40001), kAll, false, ListenAddress::Ipv4(0), ClaimKind::kListen);
  EXPECT_EQ(mad::ErrnoOf(s), EADDRNOTAVAIL) << s;
  EXPECT_EQ(page.Load(1), static_cast<uint8_t>(State::kClaimed));
  EXPECT_EQ(counters().leased_taken, 1u);
  EXPECT_EQ(counters().leased_conflicts, 2u);
  // a destroys its id: the port is free for b now.
  ASSERT_TRUE(page.Free(1));
  EXPECT_TRUE(Bind(*b, 40001).ok());
  // b's claims gone: the ports come back to a.
  b->ReleaseService(Sid(40000), kAll, ListenAddress::Ipv4(kAddrB), ClaimKind::kBind);
  EXPECT_EQ(page.Load(0), static_cast<uint8_t>(State::kFree));
  EXPECT_TRUE(page.Claim(0));
  EXPECT_EQ(counters().leased_given_back, 1u);
}

TEST_F(RouterPortsTest, AClaimThatFailsGivesBackThePortsItTook) {
  auto a = Connect();
  auto b = Connect();
  auto c = Connect();
  auto lease = a->LeasePorts(kTcp);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(lease->page->Claim(1));
  // A masked claim covering 40000 (free) and 40001 (a's): refused, and 40000
  // stays a's.
  absl::Status s = b->ClaimService(Sid(40000), ~uint64_t{1}, false, {}, ClaimKind::kListen);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(lease->page->Load(0), static_cast<uint8_t>(State::kFree));
  // A claim refused by another claim (not by the page) gives it back too:
  // a's explicit bind of 40003 in its own block leaves the page free there.
  ASSERT_TRUE(Bind(*a, 40003, kAddrA).ok());
  s = Bind(*c, 40003, kAddrA);
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  EXPECT_NE(s.message().find("has bound"), absl::string_view::npos) << s;
  EXPECT_EQ(lease->page->Load(3), static_cast<uint8_t>(State::kFree));
  EXPECT_EQ(counters().leased_taken, 2u);  // 40000, then 40003: each given back
}

TEST_F(RouterPortsTest, PortsOthersHoldAreTakenInANewBlockAndItsLesseesOwnAreNot) {
  auto a = Connect();
  auto b = Connect();
  ASSERT_TRUE(Bind(*b, 40001).ok());
  ASSERT_TRUE(Bind(*a, 40002).ok());
  auto lease = a->LeasePorts(kTcp);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->page->Load(1), static_cast<uint8_t>(State::kTaken));
  // a's own bind is its endpoint's business (its bind lists), not the page's.
  EXPECT_EQ(lease->page->Load(2), static_cast<uint8_t>(State::kFree));
  // And a's explicit binds inside its own block never touch the page.
  EXPECT_TRUE(Bind(*a, 40003).ok());
  EXPECT_EQ(lease->page->Load(3), static_cast<uint8_t>(State::kFree));
}

TEST_F(RouterPortsTest, AClientsExitReturnsItsBlocks) {
  Start(/*max_blocks=*/3);
  auto a = Connect();
  auto b = Connect();
  auto l1 = a->LeasePorts(kTcp);
  ASSERT_TRUE(l1.ok());
  ASSERT_TRUE(a->LeasePorts(kTcp).ok());
  ASSERT_TRUE(a->LeasePorts(kTcp).ok());
  ASSERT_TRUE(l1->page->Claim(0));
  ASSERT_TRUE(Bind(*b, 40001).ok());  // taken from a's block
  EXPECT_EQ(b->LeasePorts(kTcp).status().code(), absl::StatusCode::kResourceExhausted);
  a.reset();  // exits without freeing its port
  EXPECT_EQ(router_->router().blocks_of(1, kTcp), 0u);
  std::vector<mad::PortLease> got;
  for (int i = 0; i < 3; ++i) {
    auto l = b->LeasePorts(kTcp);
    ASSERT_TRUE(l.ok()) << l.status();
    got.push_back(*l);
  }
  for (const mad::PortLease& l : got) {
    if (l.first_port != 40000) continue;
    EXPECT_EQ(l.page->Load(0), static_cast<uint8_t>(State::kFree));  // a's claim is gone
    // b's own bind: its endpoint's business, not taken from itself.
    EXPECT_EQ(l.page->Load(1), static_cast<uint8_t>(State::kFree));
  }
}

TEST_F(RouterPortsTest, AHostilePageValueOnlyKeepsTheLesseesOwnPorts) {
  auto a = Connect();
  auto b = Connect();
  auto lease = a->LeasePorts(kTcp);
  ASSERT_TRUE(lease.ok());
  // Values a lessee may write: garbage counts as claimed; "taken" written by
  // the lessee gives the port away.
  lease->page->StoreRawForTesting(0, 0x77);
  lease->page->StoreRawForTesting(1, static_cast<uint8_t>(State::kTaken));
  absl::Status s = Bind(*b, 40000);
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  EXPECT_TRUE(Bind(*b, 40001).ok());
  EXPECT_FALSE(lease->page->Free(0));  // not a state Free knows
  b->ReleaseService(Sid(40001), kAll, ListenAddress::Ipv4(kAddrB), ClaimKind::kBind);
  EXPECT_EQ(lease->page->Load(1), static_cast<uint8_t>(State::kFree));
  // Ports outside a's block do not look at its page.
  EXPECT_TRUE(Bind(*b, 40004).ok());
  EXPECT_TRUE(Bind(*b, 50000).ok());
}

}  // namespace
}  // namespace uscm::router
