// LocalRouter: the router's frame interface without the socket. The clients
// are LocalRouterClients on host1 of a simulated fabric, the peer a plain
// CmEndpoint on host2. Virtual time only.
#include "cm/router/local_router.h"

#include <memory>
#include <vector>

#include "cm/cm_testing.h"
#include "cm/endpoint.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/wire/cm_message.h"

namespace uscm::router {
namespace {

constexpr uint64_t kSid = 0x0000000001060000ull | 7471;
constexpr uint16_t kRouterLid = 2;  // host1 (TwoHostsOneSwitch)
constexpr uint16_t kPeerLid = 3;    // host2

class LocalRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::make_unique<sim::Scheduler>(11);
    auto f = sim::Fabric::Create(*sched_, sim::TwoHostsOneSwitch());
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    wire_ = *fabric_->Open("host1");
    peer_tx_ = *fabric_->Open("host2");
    router_ = std::make_unique<LocalRouter>(*wire_);
    peer_ = std::make_unique<cm::CmEndpoint>(peer_tx_->port(), cm::testing::TestConfig(), 99);
  }

  std::unique_ptr<LocalRouterClient> Connect() {
    auto c = router_->Connect();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // A REQ from the peer to service `sid` on the router's host, delivered to
  // the router and routed.
  void PeerConnects(uint64_t sid, uint32_t qpn) {
    cm::ConnectParams p = cm::testing::MakeConnect(qpn);
    p.service_id = sid;
    p.primary.local_lid = kPeerLid;
    p.primary.remote_lid = kRouterLid;
    p.primary.local_gid = peer_tx_->port().gid;
    p.primary.remote_gid = wire_->port().gid;
    ASSERT_TRUE(peer_->Connect(sched_->Now(), p).ok());
    cm::OutgoingMad m;
    while (peer_->PollTransmit(&m)) ASSERT_TRUE(peer_tx_->Send(m.to, m.mad).ok());
    ASSERT_TRUE(sched_->RunUntilIdle().ok());
    router_->PollWire();
  }

  static uint64_t ServiceIdOf(const mad::ReceivedMad& m) {
    auto req = mad::wire::ParseAnyCm(m.data);
    EXPECT_TRUE(req.ok());
    const auto* r = req.ok() ? std::get_if<mad::wire::ReqRepr>(&*req) : nullptr;
    return r == nullptr ? 0 : r->service_id;
  }

  std::unique_ptr<sim::Scheduler> sched_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<sim::SimTransport> wire_, peer_tx_;
  std::unique_ptr<LocalRouter> router_;
  std::unique_ptr<cm::CmEndpoint> peer_;
};

TEST_F(LocalRouterTest, ClientsGetTheirOwnSlotAndCommIdRangeOnTheWirePort) {
  auto a = Connect();
  auto b = Connect();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->slot(), b->slot());
  EXPECT_EQ(a->caps().comm_id_prefix_bits, 8);
  EXPECT_EQ(a->caps().comm_id_prefix, a->slot());
  EXPECT_EQ(b->caps().comm_id_prefix, b->slot());
  EXPECT_EQ(a->port().lid, wire_->port().lid);
  EXPECT_EQ(a->fd(), -1);
  EXPECT_EQ(router_->router().client_count(), 2u);
}

TEST_F(LocalRouterTest, ClaimsAreAnsweredAtOnceAndAnotherClientsOverlapIsRefused) {
  auto a = Connect();
  auto b = Connect();
  ASSERT_TRUE(a->ClaimService(kSid, ~uint64_t{0}, false).ok());
  absl::Status s = b->ClaimService(kSid, ~uint64_t{0}, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  a->ReleaseService(kSid, ~uint64_t{0});
  EXPECT_TRUE(b->ClaimService(kSid, ~uint64_t{0}, false).ok());
  EXPECT_EQ(router_->counters().claim_conflicts, 1u);
}

TEST_F(LocalRouterTest, ARequestGoesToTheClientThatClaimedItsServiceId) {
  auto a = Connect();
  auto b = Connect();
  int a_arrivals = 0, b_arrivals = 0;
  a->set_on_arrival([&] { ++a_arrivals; });
  b->set_on_arrival([&] { ++b_arrivals; });
  ASSERT_TRUE(a->ClaimService(kSid, ~uint64_t{0}, false).ok());
  ASSERT_TRUE(b->ClaimService(kSid + 1, ~uint64_t{0}, false).ok());
  PeerConnects(kSid + 1, 0x301);
  EXPECT_EQ(a->pending(), 0u);
  ASSERT_EQ(b->pending(), 1u);
  EXPECT_EQ(b_arrivals, 1);
  EXPECT_EQ(a_arrivals, 0);
  std::vector<uint64_t> sids;
  EXPECT_EQ(b->Drain([&](const mad::ReceivedMad& m) {
    EXPECT_EQ(m.from.lid, kPeerLid);
    sids.push_back(ServiceIdOf(m));
  }),
            1u);
  EXPECT_EQ(sids, std::vector<uint64_t>{kSid + 1});
  EXPECT_EQ(b->pending(), 0u);
  PeerConnects(kSid, 0x302);
  EXPECT_EQ(a->pending(), 1u);
  EXPECT_EQ(router_->counters().to_clients, 2u);
  EXPECT_EQ(b->counters().received, 1u);
  EXPECT_EQ(a->counters().received, 1u);
}

// Both ends of a connection on the router's one port (rping -s and rping -c
// on the host's own address): the REQ leaves through the wire to the port's
// own LID, comes back from the wire and goes to the listener; every later
// MAD goes to the client its RemoteCommID names. Ends with nothing tracked.
TEST_F(LocalRouterTest, TwoClientsOfOnePortConnectToEachOtherThroughTheWire) {
  auto a = Connect();
  auto b = Connect();
  auto endpoint_of = [&](LocalRouterClient& c, uint64_t seed) {
    cm::CmConfig cfg = cm::testing::TestConfig();
    cfg.comm_id_prefix_bits = c.caps().comm_id_prefix_bits;
    cfg.comm_id_prefix = c.caps().comm_id_prefix;
    return std::make_unique<cm::CmEndpoint>(c.port(), cfg, seed);
  };
  auto ea = endpoint_of(*a, 5), eb = endpoint_of(*b, 6);
  ASSERT_TRUE(b->ClaimService(kSid, ~uint64_t{0}, false).ok());
  ASSERT_TRUE(eb->Listen(kSid, ~uint64_t{0}, 8, false).ok());
  std::vector<cm::CmEvent> events_a, events_b;
  // One turn: each endpoint's MADs to its client, the fabric until idle, the
  // wire routed, each client's arrivals to its endpoint.
  auto turn = [&] {
    for (auto [e, c] : {std::pair{ea.get(), a.get()}, std::pair{eb.get(), b.get()}}) {
      cm::OutgoingMad m;
      while (e->PollTransmit(&m)) ASSERT_TRUE(c->Send(m.to, m.mad).ok());
    }
    ASSERT_TRUE(sched_->RunUntilIdle().ok());
    router_->PollWire();
    for (auto [e, c] : {std::pair{ea.get(), a.get()}, std::pair{eb.get(), b.get()}}) {
      c->Drain([&](const mad::ReceivedMad& m) { e->HandleMad(sched_->Now(), m.from, m.data); });
    }
    for (cm::CmEvent ev; ea->PollEvent(&ev);) events_a.push_back(ev);
    for (cm::CmEvent ev; eb->PollEvent(&ev);) events_b.push_back(ev);
  };
  cm::ConnectParams p = cm::testing::MakeConnect(0x600);
  p.service_id = kSid;
  p.primary.local_lid = p.primary.remote_lid = kRouterLid;
  p.primary.local_gid = p.primary.remote_gid = wire_->port().gid;
  auto active = ea->Connect(sched_->Now(), p);
  ASSERT_TRUE(active.ok()) << active.status();
  turn();
  ASSERT_EQ(cm::testing::Types(events_b),
            std::vector<cm::CmEventType>{cm::CmEventType::kConnectRequest});
  const cm::ConnId passive = events_b[0].conn;
  ASSERT_TRUE(eb->Accept(sched_->Now(), passive, cm::testing::MakeAccept(0x601)).ok());
  turn();
  ASSERT_EQ(cm::testing::Types(events_a),
            std::vector<cm::CmEventType>{cm::CmEventType::kConnectResponse});
  ASSERT_TRUE(ea->Rtu(sched_->Now(), *active).ok());
  turn();
  EXPECT_EQ(cm::testing::Types(events_b),
            (std::vector<cm::CmEventType>{cm::CmEventType::kConnectRequest,
                                          cm::CmEventType::kEstablished}));
  ASSERT_TRUE(ea->Disconnect(sched_->Now(), *active).ok());
  turn();
  ASSERT_EQ(events_b.back().type, cm::CmEventType::kDisconnected);
  ASSERT_TRUE(eb->Disconnect(sched_->Now(), passive).ok());
  turn();
  EXPECT_EQ(events_a.back().type, cm::CmEventType::kDisconnected);
  EXPECT_EQ(router_->counters().wire_unroutable, 0u);
  EXPECT_EQ(router_->counters().refused_mads, 0u);
  EXPECT_EQ(router_->router().tracked(a->slot()), 0u);
  EXPECT_EQ(router_->router().tracked(b->slot()), 0u);
}

TEST_F(LocalRouterTest, ACmMadOutsideTheClientsRangeIsRefusedAndNothingGoesOnTheWire) {
  auto a = Connect();
  auto b = Connect();
  // An endpoint allocating in b's range, sending through a.
  cm::CmConfig cfg = cm::testing::TestConfig();
  cfg.comm_id_prefix_bits = b->caps().comm_id_prefix_bits;
  cfg.comm_id_prefix = b->caps().comm_id_prefix;
  cm::CmEndpoint wrong(a->port(), cfg, 5);
  cm::ConnectParams p = cm::testing::MakeConnect(0x400);
  p.service_id = kSid;
  p.primary.local_lid = kRouterLid;
  p.primary.remote_lid = kPeerLid;
  ASSERT_TRUE(wrong.Connect(sched_->Now(), p).ok());
  cm::OutgoingMad m;
  ASSERT_TRUE(wrong.PollTransmit(&m));
  ASSERT_TRUE(a->Send(m.to, m.mad).ok());
  EXPECT_EQ(a->counters().refused, 1u);
  EXPECT_EQ(a->last_refusal().code(), absl::StatusCode::kPermissionDenied) << a->last_refusal();
  EXPECT_EQ(router_->counters().to_wire, 0u);
  EXPECT_EQ(router_->counters().refused_mads, 1u);
}

TEST_F(LocalRouterTest, ADestroyedClientIsGoneFromTheRouterAndItsClaimIsFree) {
  auto a = Connect();
  auto b = Connect();
  ASSERT_TRUE(a->ClaimService(kSid, ~uint64_t{0}, false).ok());
  a.reset();
  EXPECT_EQ(router_->counters().clients_gone, 1u);
  EXPECT_EQ(router_->router().client_count(), 1u);
  EXPECT_TRUE(b->ClaimService(kSid, ~uint64_t{0}, false).ok());
  PeerConnects(kSid, 0x500);
  EXPECT_EQ(b->pending(), 1u);
}

TEST_F(LocalRouterTest, AClientOutlivingItsRouterFailsCleanly) {
  auto a = Connect();
  router_.reset();
  std::vector<uint8_t> mad(256, 0);
  EXPECT_EQ(a->Send(mad::MadAddress{}, mad).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(a->ClaimService(kSid, ~uint64_t{0}, false).code(), absl::StatusCode::kUnavailable);
  a.reset();  // no use of the freed router
}

}  // namespace
}  // namespace uscm::router
