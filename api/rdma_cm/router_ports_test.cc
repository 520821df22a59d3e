// Port binding between processes that share a port through the router
// (cm/router): the kernel's bind list is the host's, so rdma_bind_addr in
// one process is refused an address another process has bound, at the bind
// (cma_get_port -> cma_use_port -> cma_check_port), not at a later listen.
// Two Devices stand for two processes: each on its own LocalRouterClient of
// one LocalRouter on host 1's QP1, in virtual time.
#include <cerrno>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "cm/router/local_router.h"
#include "gtest/gtest.h"
#include "mad/status_errno.h"

namespace uscm {
namespace {

struct Process {
  std::unique_ptr<router::LocalRouterClient> client;
  std::unique_ptr<Device> device;
  std::unique_ptr<EventChannel> ch;
};

class RouterPortsTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  // The fabric, the router with `options` and the two processes (again: the
  // old ones are torn down first).
  void Start(router::RouterOptions options) {
    TearDown();
    auto f = testing::SimFabric::Create(/*seed=*/9);
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
    router_ = std::make_unique<router::LocalRouter>(*f_->host(0).qp1, options);
    for (Process& p : procs_) {
      auto c = router_->Connect();
      ASSERT_TRUE(c.ok()) << c.status();
      p.client = std::move(*c);
      DeviceOptions o;
      o.roce = true;
      o.local_ips = {At("192.168.78.1"), At("192.168.78.3")};
      router::LocalRouterClient* raw = p.client.get();
      auto dev = Device::CreateSimulated(f_->scheduler(), *p.client,
                                         [raw] { return raw->pending() > 0; }, o);
      ASSERT_TRUE(dev.ok()) << dev.status();
      p.device = std::move(*dev);
      auto ch = p.device->CreateEventChannel();
      ASSERT_TRUE(ch.ok()) << ch.status();
      p.ch = std::move(*ch);
    }
  }
  void TearDown() override {
    for (Process& p : procs_) {
      p.ch.reset();
      p.device.reset();
      p.client.reset();
    }
    router_.reset();
    f_.reset();
  }

  static Address At(const char* text) { return *Address::Parse(text); }
  CmId* Id(Process& p, bool reuse = false) {
    CmId* id = *p.ch->CreateId(nullptr, PortSpace::kTcp);
    IdOptions o = id->options();
    o.reuse_addr = reuse;
    EXPECT_TRUE(id->SetOption(o).ok());
    return id;
  }
  size_t Claims() const { return router_->router().claim_count(); }

  std::unique_ptr<testing::SimFabric> f_;
  std::unique_ptr<router::LocalRouter> router_;
  Process procs_[2];
};

TEST_F(RouterPortsTest, AnAddressAnotherProcessBoundIsRefusedAtBind) {
  CmId* a = Id(procs_[0]);
  ASSERT_TRUE(a->BindAddr(At("192.168.78.1:7000")).ok());
  EXPECT_EQ(Claims(), 1u) << "the bind claimed its address";
  CmId* b = Id(procs_[1]);
  absl::Status s = b->BindAddr(At("192.168.78.1:7000"));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  EXPECT_NE(s.message().find("bind_addr"), absl::string_view::npos) << s;
  s = b->BindAddr(At("0.0.0.0:7000"));
  EXPECT_EQ(mad::ErrnoOf(s), EADDRNOTAVAIL) << s;
  // The failed id is unbound: it binds another address of the port.
  ASSERT_TRUE(b->BindAddr(At("192.168.78.3:7000")).ok());
  ASSERT_TRUE(b->Listen(4).ok());
  // Destroying the first id frees its address for the other process.
  ASSERT_TRUE(procs_[0].ch->DestroyId(a).ok());
  CmId* c = Id(procs_[1]);
  EXPECT_TRUE(c->BindAddr(At("192.168.78.1:7000")).ok());
  EXPECT_EQ(Claims(), 3u) << "b's bind and listen, c's bind";
  ASSERT_TRUE(procs_[1].ch->DestroyId(b).ok());
  ASSERT_TRUE(procs_[1].ch->DestroyId(c).ok());
  EXPECT_EQ(Claims(), 0u);
}

TEST_F(RouterPortsTest, ReuseaddrOnBothSharesABindButNotAListen) {
  CmId* a = Id(procs_[0], /*reuse=*/true);
  CmId* b = Id(procs_[1], /*reuse=*/true);
  ASSERT_TRUE(a->BindAddr(At("192.168.78.1:7000")).ok());
  ASSERT_TRUE(b->BindAddr(At("192.168.78.1:7000")).ok());
  absl::Status s = a->Listen(4);
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  ASSERT_TRUE(procs_[1].ch->DestroyId(b).ok());
  CmId* again = Id(procs_[0], /*reuse=*/true);  // a's listen failed: a new id listens
  ASSERT_TRUE(procs_[0].ch->DestroyId(a).ok());
  ASSERT_TRUE(again->BindAddr(At("192.168.78.1:7000")).ok());
  ASSERT_TRUE(again->Listen(4).ok());
  // A listener shares with no bind, REUSEADDR or not.
  CmId* late = Id(procs_[1], /*reuse=*/true);
  EXPECT_EQ(mad::ErrnoOf(late->BindAddr(At("192.168.78.1:7000"))), EADDRINUSE);
}

// The kernel's rdma_set_reuseaddr allows REUSEADDR on after the bind, and
// cma_check_port reads the flag when another id binds later: between
// processes the router's bind claim learns it.
TEST_F(RouterPortsTest, ReuseaddrTurnedOnAfterTheBindLetsAnotherProcessShare) {
  CmId* a = Id(procs_[0]);
  ASSERT_TRUE(a->BindAddr(At("192.168.78.1:7000")).ok());
  CmId* b = Id(procs_[1], /*reuse=*/true);
  EXPECT_EQ(mad::ErrnoOf(b->BindAddr(At("192.168.78.1:7000"))), EADDRINUSE);
  IdOptions on = a->options();
  on.reuse_addr = true;
  ASSERT_TRUE(a->SetOption(on).ok());
  EXPECT_EQ(Claims(), 1u);
  ASSERT_TRUE(b->BindAddr(At("192.168.78.1:7000")).ok());
  EXPECT_EQ(Claims(), 2u);
  // Off after the bind is EINVAL, as the kernel's.
  EXPECT_EQ(a->SetReuseAddr(false).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(procs_[1].ch->DestroyId(b).ok());
  ASSERT_TRUE(a->Listen(4).ok());
  EXPECT_EQ(a->SetReuseAddr(true).code(), absl::StatusCode::kFailedPrecondition);
  CmId* late = Id(procs_[1], /*reuse=*/true);
  EXPECT_EQ(mad::ErrnoOf(late->BindAddr(At("192.168.78.1:7000"))), EADDRINUSE);
}

// rdma_resolve_addr binds too: a source with a port reserves it as a bind;
// an ephemeral source port (port 0) is the active id's own (the kernel's
// cma_port_is_unique lets active ids to different destinations share one).
TEST_F(RouterPortsTest, ResolveAddrReservesAnExplicitSourcePortOnly) {
  ASSERT_TRUE(procs_[0].device->AddNeighbor(At("192.168.78.2"), mad::Gid{}, 3).ok());
  CmId* eph = Id(procs_[0]);
  ASSERT_TRUE(eph->ResolveAddr(At("192.168.78.1"), At("192.168.78.2:7000")).ok());
  EXPECT_NE(eph->GetLocalAddr().port, 0);
  EXPECT_EQ(Claims(), 0u);
  CmId* fixed = Id(procs_[0]);
  ASSERT_TRUE(fixed->ResolveAddr(At("192.168.78.1:7001"), At("192.168.78.2:7000")).ok());
  EXPECT_EQ(Claims(), 1u);
  CmId* other = Id(procs_[1]);
  absl::Status s = other->ResolveAddr(At("192.168.78.1:7001"), At("192.168.78.2:7000"));
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
}

// Binds to port 0 on a shared port take ports of blocks the router leased
// (docs/ROUTER.md "Port blocks"): no claim each, so no bound on claims per
// process (1,024 on main: the 1,025th bind failed with ENOMEM).
TEST_F(RouterPortsTest, TwoThousandBindsToPortZeroAreDistinctAndTakeNoClaim) {
  absl::flat_hash_set<uint16_t> ports;
  std::vector<CmId*> ids;
  for (int i = 0; i < 2000; ++i) {
    CmId* id = Id(procs_[0]);
    absl::Status s = id->BindAddr(At("192.168.78.1:0"));
    ASSERT_TRUE(s.ok()) << "bind " << i << ": " << s;
    ports.insert(id->GetLocalAddr().port);
    ids.push_back(id);
  }
  EXPECT_EQ(ports.size(), 2000u);
  EXPECT_EQ(Claims(), 0u);
  EXPECT_EQ(procs_[0].device->leased_blocks(), 8u);  // 256 ports a block
  EXPECT_EQ(router_->counters().leases, 8u);
  // Destroyed ids give their ports back to the block: binding again leases
  // nothing more.
  for (CmId* id : ids) ASSERT_TRUE(procs_[0].ch->DestroyId(id).ok());
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(Id(procs_[0])->BindAddr(At("192.168.78.1:0")).ok());
  EXPECT_EQ(router_->counters().leases, 8u);
}

// Once the blocks the router allows are all held and full, a bind to port 0
// looks at none of their ports (it goes port by port, AllocPort): each block
// counts the ports its ids hold. Before, each such bind looked at every port
// of every full block twice, a hash lookup each (2 x 512 here, 2 x 8,192 at
// 32 blocks).
TEST_F(RouterPortsTest, BindsPastFullBlocksScanNoneOfTheirPorts) {
  router::RouterOptions o;
  o.max_blocks_per_client = 2;
  Start(o);
  Device& dev = *procs_[0].device;
  std::vector<CmId*> ids;
  for (int i = 0; i < 512; ++i) {
    ids.push_back(Id(procs_[0]));
    ASSERT_TRUE(ids.back()->BindAddr(At("192.168.78.1:0")).ok()) << i;
  }
  ASSERT_EQ(dev.leased_blocks(), 2u);
  EXPECT_EQ(dev.lease_ports_scanned(), 512u) << "one port a bind while the blocks fill";
  for (int i = 0; i < 64; ++i) {
    CmId* id = Id(procs_[0]);
    ASSERT_TRUE(id->BindAddr(At("192.168.78.1:0")).ok()) << i;
    EXPECT_NE(id->GetLocalAddr().port, 0);
  }
  EXPECT_EQ(dev.lease_ports_scanned(), 512u) << "binds past the full blocks scanned them";
  EXPECT_EQ(Claims(), 64u) << "port by port";
  // A port given back is found again.
  const uint16_t freed = ids[300]->GetLocalAddr().port;
  ASSERT_TRUE(procs_[0].ch->DestroyId(ids[300]).ok());
  CmId* again = Id(procs_[0]);
  ASSERT_TRUE(again->BindAddr(At("192.168.78.1:0")).ok());
  EXPECT_EQ(again->GetLocalAddr().port, freed) << "the only free port of the blocks";
  EXPECT_LE(dev.lease_ports_scanned(), 512u + 256u) << "at most one block's bytes loaded";
}

// A port given back is not the next one a bind to port 0 gets while the
// block has others free: the kernel's cma_alloc_any_port avoids re-using a
// port immediately after it is closed (last_used_port).
TEST_F(RouterPortsTest, AFreedPortIsNotTheNextOneGiven) {
  std::vector<CmId*> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(Id(procs_[0]));
    ASSERT_TRUE(ids.back()->BindAddr(At("192.168.78.1:0")).ok()) << i;
  }
  const uint16_t freed = ids[1]->GetLocalAddr().port;
  ASSERT_TRUE(procs_[0].ch->DestroyId(ids[1]).ok());
  CmId* again = Id(procs_[0]);
  ASSERT_TRUE(again->BindAddr(At("192.168.78.1:0")).ok());
  EXPECT_NE(again->GetLocalAddr().port, freed);
  EXPECT_NE(again->GetLocalAddr().port, 0);
}

// Another process's bind of a port in the block: at once when the lessee
// has not bound it, EADDRINUSE when it has (on any address: the page does not
// say which one the lessee bound), free again once the lessee's id is gone.
TEST_F(RouterPortsTest, AnotherProcessBindsAPortOfTheBlockUnlessTheLesseeBoundIt) {
  CmId* a = Id(procs_[0]);
  ASSERT_TRUE(a->BindAddr(At("192.168.78.1:0")).ok());
  const uint16_t port = a->GetLocalAddr().port;
  ASSERT_EQ(procs_[0].device->leased_blocks(), 1u);
  CmId* b = Id(procs_[1]);
  absl::Status s = b->BindAddr(At(absl::StrCat("192.168.78.3:", port).c_str()));
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  s = b->BindAddr(At(absl::StrCat("0.0.0.0:", port).c_str()));
  EXPECT_EQ(mad::ErrnoOf(s), EADDRNOTAVAIL) << s;
  // The next port of the block is still free: the other process gets it.
  ASSERT_TRUE(b->BindAddr(At(absl::StrCat("192.168.78.1:", port + 1).c_str())).ok());
  EXPECT_EQ(router_->counters().leased_taken, 1u);
  // ... and the lessee's next bind to port 0 skips it.
  CmId* a2 = Id(procs_[0]);
  ASSERT_TRUE(a2->BindAddr(At("192.168.78.1:0")).ok());
  EXPECT_NE(a2->GetLocalAddr().port, port + 1);
  EXPECT_NE(a2->GetLocalAddr().port, port);
  ASSERT_TRUE(procs_[0].ch->DestroyId(a).ok());
  CmId* c = Id(procs_[1]);
  EXPECT_TRUE(c->BindAddr(At(absl::StrCat("192.168.78.3:", port).c_str())).ok());
}

// A listen on a leased port is claimed at the router as any listen: requests
// for it reach the lessee, and another process cannot listen there.
TEST_F(RouterPortsTest, AListenOnALeasedPortIsClaimed) {
  CmId* a = Id(procs_[0]);
  ASSERT_TRUE(a->BindAddr(At("0.0.0.0:0")).ok());
  ASSERT_TRUE(a->Listen(4).ok());
  EXPECT_EQ(Claims(), 1u);
  const uint16_t port = a->GetLocalAddr().port;
  absl::Status s = Id(procs_[1])->BindAddr(At(absl::StrCat("192.168.78.3:", port).c_str()));
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  ASSERT_TRUE(procs_[0].ch->DestroyId(a).ok());
  EXPECT_EQ(Claims(), 0u);
  EXPECT_TRUE(Id(procs_[1])->BindAddr(At(absl::StrCat("192.168.78.3:", port).c_str())).ok());
}

}  // namespace
}  // namespace uscm
