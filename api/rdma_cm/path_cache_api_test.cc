// The path cache as the rdma_cm-style API uses it (issue 6): a reconnect to
// the same destination asks the SA nothing, and the cached path to a
// destination is dropped when a connect over it times out or is rejected
// with a reason that blames the path (REJ 12..17, 26, 32), so the next
// ResolveRoute asks the SA again. A route given with the IB_PATH option never
// touches the cache.
#include <cerrno>
#include <memory>
#include <vector>

#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "cm/runtime.h"
#include "gtest/gtest.h"
#include "mad/wire/cma_header.h"

namespace uscm {
namespace {

using testing::SimFabric;

constexpr uint16_t kPort = 7471;

// Host 2 without the rdma_cm layer: a bare node whose CM listens on the
// rdma_cm TCP ServiceID for kPort and rejects every REQ with `reason`.
class RejectingPeer : public cm::NodeObserver {
 public:
  void OnProgress(mad::TimePoint now) override {
    cm::CmEvent e;
    while (node->cm().PollEvent(&e)) {
      if (e.type == cm::CmEventType::kConnectRequest) {
        ++requests;
        (void)node->cm().Reject(now, e.conn, reason, {});
      }
    }
  }
  std::unique_ptr<cm::SimNode> node;
  cm::RejReason reason = cm::RejReason::kConsumerReject;
  int requests = 0;
};

class PathCacheApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = SimFabric::Create(/*seed=*/23);
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = std::move(*f);
  }
  void TearDown() override {
    if (peer_ && peer_->node) peer_->node->set_observer(nullptr);
    peer_.reset();
  }

  EventChannel& ch(int i) { return *f_->host(i).channel; }
  Device& dev(int i) { return *f_->host(i).device; }
  const sa::SaClientCounters& sa_client() { return dev(0).node().sa().counters(); }
  uint64_t sa_requests() { return f_->sa().counters().requests; }
  uint64_t agent_sent() { return dev(0).node().agent().counters().sent; }
  const sa::PathCacheCounters& cache() { return dev(0).node().path_cache().counters(); }

  Event Next(int host, EventType want) {
    absl::StatusOr<Event> e = f_->Next(ch(host));
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return Event{};
    EXPECT_EQ(e->event, want) << EventTypeName(e->event) << " status " << e->status << " "
                              << e->detail;
    return *e;
  }

  CmId* Listener() {
    CmId* l = *ch(1).CreateId(nullptr, PortSpace::kTcp);
    Address a = f_->host(1).ip;
    a.port = kPort;
    EXPECT_TRUE(l->BindAddr(a).ok());
    EXPECT_TRUE(l->Listen(16).ok());
    return l;
  }

  // Replaces host 2's rdma_cm device by a RejectingPeer on the same QP1.
  void UseRejectingPeer() {
    f_->host(1).channel.reset();
    f_->host(1).device.reset();
    peer_ = std::make_unique<RejectingPeer>();
    cm::NodeOptions o;
    o.seed = 99;
    o.cm.timer_tick = mad::Duration::Micros(1);
    sim::SimTransport* raw = f_->host(1).qp1.get();
    peer_->node = std::make_unique<cm::SimNode>(f_->scheduler(), *raw,
                                                [raw] { return raw->pending() > 0; }, o);
    peer_->node->set_observer(peer_.get());
    std::lock_guard<std::mutex> lock(peer_->node->mutex());
    auto l = peer_->node->cm().Listen(
        mad::wire::ServiceIdFor(mad::wire::PortSpace::kTcp, kPort), ~uint64_t{0}, 16, false);
    ASSERT_TRUE(l.ok()) << l.status();
  }

  // An id on host 1 at ADDR_RESOLVED towards host 2 port kPort.
  CmId* AddrResolved() {
    CmId* id = *ch(0).CreateId(nullptr, PortSpace::kTcp);
    Address dst = f_->host(1).ip;
    dst.port = kPort;
    EXPECT_TRUE(id->ResolveAddr(absl::nullopt, dst).ok());
    Next(0, EventType::kAddrResolved);
    return id;
  }

  // What one ResolveRoute cost: SA requests the SA received, MADs host 1's
  // agent sent, cache hits the client counted.
  struct RouteCost {
    uint64_t sa_requests = 0, sent = 0, cache_hits = 0;
  };
  CmId* Resolved(RouteCost* cost) {
    CmId* id = AddrResolved();
    const uint64_t req0 = sa_requests(), sent0 = agent_sent(), hits0 = sa_client().cache_hits;
    EXPECT_TRUE(id->ResolveRoute().ok());
    Next(0, EventType::kRouteResolved);
    cost->sa_requests = sa_requests() - req0;
    cost->sent = agent_sent() - sent0;
    cost->cache_hits = sa_client().cache_hits - hits0;
    return id;
  }

  // Quick CM timeouts: a lost REQ ends in UNREACHABLE within a second.
  static void QuickTimeouts(CmId* id) {
    IdOptions o = id->options();
    o.response_timeout = mad::Duration::Millis(50);
    o.max_cm_retries = 2;
    ASSERT_TRUE(id->SetOption(o).ok());
  }

  std::unique_ptr<SimFabric> f_;
  std::unique_ptr<RejectingPeer> peer_;
};

TEST_F(PathCacheApiTest, ReconnectToTheSameDestinationAsksTheSaNothing) {
  CmId* listener = Listener();
  RouteCost first;
  CmId* a = Resolved(&first);
  // The first route is an SA query (so the counters below can move).
  EXPECT_EQ(first.sa_requests, 1u);
  EXPECT_GE(first.sent, 1u);
  EXPECT_EQ(first.cache_hits, 0u);
  const cm::PathInfo path1 = *a->route();
  ASSERT_TRUE(a->Connect(ConnParam{}).ok());
  Event req = Next(1, EventType::kConnectRequest);
  ASSERT_TRUE(req.id->Accept(ConnParam{}).ok());
  Next(0, EventType::kConnectResponse);
  ASSERT_TRUE(a->Establish().ok());
  Next(1, EventType::kEstablished);
  ASSERT_TRUE(a->Disconnect().ok());
  Next(1, EventType::kDisconnected);
  ASSERT_TRUE(req.id->Disconnect().ok());
  Next(0, EventType::kDisconnected);
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  ASSERT_TRUE(ch(1).DestroyId(req.id).ok());

  // Reconnect with a new id: the route comes from the cache, no SA MAD.
  RouteCost second;
  CmId* b = Resolved(&second);
  EXPECT_EQ(second.sa_requests, 0u);
  EXPECT_EQ(second.sent, 0u);
  EXPECT_EQ(second.cache_hits, 1u);
  EXPECT_EQ(cache().invalidated, 0u);
  ASSERT_TRUE(b->route().has_value());
  EXPECT_EQ(b->route()->remote_lid, path1.remote_lid);
  EXPECT_EQ(b->route()->remote_gid, path1.remote_gid);
  ASSERT_TRUE(b->Connect(ConnParam{}).ok());
  Event req2 = Next(1, EventType::kConnectRequest);
  ASSERT_TRUE(req2.id->Accept(ConnParam{}).ok());
  Next(0, EventType::kConnectResponse);
  ASSERT_TRUE(b->Establish().ok());
  Next(1, EventType::kEstablished);
  ASSERT_TRUE(ch(0).DestroyId(b).ok());
  ASSERT_TRUE(ch(1).DestroyId(req2.id).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
}

TEST_F(PathCacheApiTest, ConnectTimeoutInvalidatesTheCachedPath) {
  CmId* listener = Listener();
  RouteCost first;
  CmId* a = Resolved(&first);
  EXPECT_EQ(first.sa_requests, 1u);
  EXPECT_EQ(dev(0).node().path_cache().size(), 1u);
  QuickTimeouts(a);
  // Host 2's link goes down after the route was resolved: every REQ is lost.
  ASSERT_TRUE(f_->fabric().SetLinkUp("host2", 1, false).ok());
  ASSERT_TRUE(a->Connect(ConnParam{}).ok());
  Event un = Next(0, EventType::kUnreachable);
  EXPECT_EQ(un.status, -ETIMEDOUT);
  EXPECT_EQ(cache().invalidated, 1u);
  EXPECT_EQ(dev(0).node().path_cache().size(), 0u);
  ASSERT_TRUE(ch(0).DestroyId(a).ok());

  // The link is back: the next route to host 2 is asked of the SA again.
  ASSERT_TRUE(f_->fabric().SetLinkUp("host2", 1, true).ok());
  RouteCost again;
  CmId* b = Resolved(&again);
  EXPECT_EQ(again.sa_requests, 1u);
  EXPECT_GE(again.sent, 1u);
  EXPECT_EQ(again.cache_hits, 0u);
  // ... and cached again: the one after that is a hit.
  RouteCost third;
  CmId* c = Resolved(&third);
  EXPECT_EQ(third.sa_requests, 0u);
  EXPECT_EQ(third.cache_hits, 1u);
  ASSERT_TRUE(ch(0).DestroyId(b).ok());
  ASSERT_TRUE(ch(0).DestroyId(c).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
}

TEST_F(PathCacheApiTest, IbPathRouteTimeoutLeavesTheCacheAlone) {
  CmId* listener = Listener();
  RouteCost first;
  CmId* a = Resolved(&first);  // fills the cache
  const cm::PathInfo path = *a->route();
  ASSERT_TRUE(ch(0).DestroyId(a).ok());
  // Same destination, route given by IB_PATH: its timeout is not the
  // cache's business.
  CmId* b = AddrResolved();
  IdOptions o = b->options();
  o.ib_path = path;
  ASSERT_TRUE(b->SetOption(o).ok());
  QuickTimeouts(b);
  ASSERT_TRUE(b->ResolveRoute().ok());
  Next(0, EventType::kRouteResolved);
  ASSERT_TRUE(f_->fabric().SetLinkUp("host2", 1, false).ok());
  ASSERT_TRUE(b->Connect(ConnParam{}).ok());
  Event un = Next(0, EventType::kUnreachable);
  EXPECT_EQ(un.status, -ETIMEDOUT);
  EXPECT_EQ(cache().invalidated, 0u);
  EXPECT_EQ(dev(0).node().path_cache().size(), 1u);
  ASSERT_TRUE(ch(0).DestroyId(b).ok());
  ASSERT_TRUE(f_->fabric().SetLinkUp("host2", 1, true).ok());
  RouteCost next;
  CmId* c = Resolved(&next);
  EXPECT_EQ(next.sa_requests, 0u);
  EXPECT_EQ(next.cache_hits, 1u);
  ASSERT_TRUE(ch(0).DestroyId(c).ok());
  ASSERT_TRUE(ch(1).DestroyId(listener).ok());
}

TEST_F(PathCacheApiTest, PathRejectReasonsInvalidateOthersDoNot) {
  UseRejectingPeer();
  struct Case {
    cm::RejReason reason;
    bool invalidates;
  };
  const std::vector<Case> cases = {
      {cm::RejReason::kConsumerReject, false},
      {cm::RejReason::kInvalidPrimaryGid, true},
      {cm::RejReason::kNoResources, false},
      {cm::RejReason::kInvalidPrimaryLid, true},
      {cm::RejReason::kInvalidServiceId, false},
      {cm::RejReason::kInvalidPrimarySl, true},
      {cm::RejReason::kInvalidAlternateGid, false},
      {cm::RejReason::kInvalidPrimaryTrafficClass, true},
      {cm::RejReason::kInvalidAlternateLid, false},
      {cm::RejReason::kInvalidPrimaryHopLimit, true},
      {cm::RejReason::kVendorOptionNotSupported, false},
      {cm::RejReason::kInvalidPrimaryPacketRate, true},
      {cm::RejReason::kInsufficientResponderResources, false},
      {cm::RejReason::kInvalidMtu, true},
      {cm::RejReason::kInvalidAlternateFlowLabel, false},
      {cm::RejReason::kInvalidPrimaryFlowLabel, true},
  };
  bool cached = false;  // whether the previous case left the path cached
  uint64_t invalidated = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "REJ " << static_cast<int>(c.reason));
    RouteCost cost;
    CmId* id = Resolved(&cost);
    EXPECT_EQ(cost.sa_requests, cached ? 0u : 1u);
    EXPECT_EQ(cost.cache_hits, cached ? 1u : 0u);
    peer_->reason = c.reason;
    ASSERT_TRUE(id->Connect(ConnParam{}).ok());
    Event rej = Next(0, EventType::kRejected);
    EXPECT_EQ(rej.status, static_cast<int>(c.reason));
    if (c.invalidates) ++invalidated;
    EXPECT_EQ(cache().invalidated, invalidated);
    EXPECT_EQ(dev(0).node().path_cache().size(), c.invalidates ? 0u : 1u);
    cached = !c.invalidates;
    ASSERT_TRUE(ch(0).DestroyId(id).ok());
  }
  EXPECT_EQ(peer_->requests, static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace uscm
