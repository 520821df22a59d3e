// Binds of different processes: the kernel's rdma_cm reserves the port at
// rdma_bind_addr (cma_get_port -> cma_use_port -> cma_check_port), so the
// router holds a bind claim (ClaimKind::kBind) from the bind on, and a listen
// claim on top of it from rdma_listen. A bind takes no request; two binds
// share an address only when both set REUSEADDR; a listen never shares.
// Fixture: router_test_fixture.h.
#include <cerrno>

#include "cm/router/router_test_fixture.h"
#include "mad/status_errno.h"
#include "mad/wire/cma_header.h"

namespace uscm::router {
namespace {

using mad::ClaimKind;
using mad::ListenAddress;

constexpr uint32_t kAddrA = 0xC0A84D64;  // 192.168.77.100
constexpr uint32_t kAddrB = 0xC0A84D65;  // 192.168.77.101
constexpr uint32_t kPeerIp = 0xC0A84D66;
constexpr uint64_t kAll = ~uint64_t{0};

class RouterBindTest : public RouterTest {
 protected:
  absl::Status Bind(TestClient& c, bool reuse, const ListenAddress& a) {
    return Claim(c, kSid, kAll, reuse, a, ClaimKind::kBind);
  }
  absl::Status Listen(TestClient& c, const ListenAddress& a) {
    return Claim(c, kSid, kAll, false, a, ClaimKind::kListen);
  }
  void Release(TestClient& c, const ListenAddress& a, ClaimKind kind) {
    router_->HandleFrame(c.slot, EncodeClaim(FrameType::kRelease,
                                             ClaimFrame{3, kSid, kAll, false, a, kind}));
    Deliver();
    c.replies.clear();
  }
  // A REQ from the peer to `dst` with rdma_cm's IP header.
  ConnId ConnectTo(uint32_t dst, uint32_t qpn) {
    cm::ConnectParams p = ToRouterHost(kSid, qpn);
    p.private_data.resize(mad::wire::cma::kHeaderBytes);
    EXPECT_TRUE(mad::wire::CmaHeader::Ipv4(kPeerIp, 40000, dst).Emit(p.private_data).ok());
    auto id = peer_->Connect(sched_->Now(), p);
    EXPECT_TRUE(id.ok()) << id.status();
    return *id;
  }
};

TEST_F(RouterBindTest, ABoundAddressIsRefusedToAnotherProcessAtItsBind) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  ASSERT_TRUE(Bind(a, false, ListenAddress::Ipv4(kAddrA)).ok());
  for (bool reuse : {false, true}) {
    absl::Status s = Bind(b, reuse, ListenAddress::Ipv4(kAddrA));
    EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
    EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
    EXPECT_NE(s.message().find("has bound"), absl::string_view::npos) << s;
  }
  EXPECT_EQ(mad::ErrnoOf(Bind(b, false, ListenAddress::Ipv4(0))), EADDRNOTAVAIL);
  // A listen without a bind of its own meets the bind too.
  EXPECT_EQ(mad::ErrnoOf(Listen(b, ListenAddress::Ipv4(kAddrA))), EADDRINUSE);
  // Another address of the port is free.
  EXPECT_TRUE(Bind(b, false, ListenAddress::Ipv4(kAddrB)).ok());
  EXPECT_EQ(router_->counters().claim_conflicts, 4u);
  EXPECT_EQ(router_->claim_count(), 2u);
}

TEST_F(RouterBindTest, TwoBindsWithReuseaddrShareAnAddressAndAListenDoesNot) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  TestClient& c = AddClient();
  ASSERT_TRUE(Bind(a, true, ListenAddress::Ipv4(kAddrA)).ok());
  // cma_check_port skips an owner when both set REUSEADDR, wildcard or not.
  EXPECT_TRUE(Bind(b, true, ListenAddress::Ipv4(kAddrA)).ok());
  EXPECT_TRUE(Bind(c, true, ListenAddress::Ipv4(0)).ok());
  // rdma_listen checks again without REUSEADDR: the others' binds are in the way.
  absl::Status s = Listen(a, ListenAddress::Ipv4(kAddrA));
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  EXPECT_NE(s.message().find("REUSEADDR or not"), absl::string_view::npos) << s;
  Release(b, ListenAddress::Ipv4(kAddrA), ClaimKind::kBind);
  EXPECT_EQ(mad::ErrnoOf(Listen(a, ListenAddress::Ipv4(kAddrA))), EADDRNOTAVAIL);  // c's [0.0.0.0]
  Crash(c);
  ASSERT_TRUE(Listen(a, ListenAddress::Ipv4(kAddrA)).ok());
  // A listener shares its address with no bind, REUSEADDR or not (its bind
  // claim would share: the message names the listen).
  s = Bind(b, true, ListenAddress::Ipv4(kAddrA));
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
  EXPECT_NE(s.message().find("a listener shares it with no one"), absl::string_view::npos) << s;
  EXPECT_EQ(mad::ErrnoOf(Bind(b, true, ListenAddress::Ipv4(0))), EADDRNOTAVAIL);
}

// rdma_set_option(REUSEADDR) after rdma_bind_addr (the kernel's
// rdma_set_reuseaddr in ADDR_BOUND): the client claims its bind again with
// the bit, and the router updates the claim it holds instead of adding one.
TEST_F(RouterBindTest, AReclaimTurnsReuseaddrOnForLaterBindsOfOthers) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  ASSERT_TRUE(Bind(a, false, ListenAddress::Ipv4(kAddrA)).ok());
  EXPECT_EQ(mad::ErrnoOf(Bind(b, true, ListenAddress::Ipv4(kAddrA))), EADDRINUSE);
  ASSERT_TRUE(Bind(a, true, ListenAddress::Ipv4(kAddrA)).ok());  // REUSEADDR on
  EXPECT_EQ(router_->claim_count(), 1u) << "a re-claim adds no claim";
  EXPECT_EQ(router_->counters().claim_updates, 1u);
  ASSERT_TRUE(Bind(b, true, ListenAddress::Ipv4(kAddrA)).ok());
  // b's bind without REUSEADDR would still be refused: the bits of both count.
  TestClient& c = AddClient();
  EXPECT_EQ(mad::ErrnoOf(Bind(c, false, ListenAddress::Ipv4(kAddrA))), EADDRINUSE);
  // Off again while b shares it: refused (the kernel refuses it after the
  // bind anyway), and the claim keeps the bit.
  absl::Status off = Bind(a, false, ListenAddress::Ipv4(kAddrA));
  EXPECT_EQ(mad::ErrnoOf(off), EADDRINUSE) << off;
  EXPECT_TRUE(Bind(c, true, ListenAddress::Ipv4(kAddrA)).ok());
  // One release frees a's one claim.
  Release(a, ListenAddress::Ipv4(kAddrA), ClaimKind::kBind);
  EXPECT_EQ(router_->claim_count(), 2u);
}

TEST_F(RouterBindTest, ABindTakesNoRequestAndTheListenOnItDoes) {
  TestClient& a = AddClient();
  ASSERT_TRUE(Bind(a, false, ListenAddress::Ipv4(kAddrA)).ok());
  ASSERT_TRUE(a.cm->Listen(kSid, kAll, 4, false).ok());  // the endpoint would take it
  const uint64_t unroutable = router_->counters().wire_unroutable;
  const ConnId early = ConnectTo(kAddrA, 0x301);
  Deliver();
  EXPECT_EQ(router_->counters().wire_unroutable, unroutable + 1);
  EXPECT_EQ(Count(a.events, CmEventType::kConnectRequest), 0);
  EXPECT_EQ(*peer_->State(early), cm::CmState::kReqSent);
  ASSERT_TRUE(Listen(a, ListenAddress::Ipv4(kAddrA)).ok());
  const ConnId late = ConnectTo(kAddrA, 0x302);
  Deliver();
  EXPECT_EQ(Count(a.events, CmEventType::kConnectRequest), 1);
  EXPECT_EQ(*peer_->State(late), cm::CmState::kEstablished);
}

TEST_F(RouterBindTest, AReleaseNamesItsKindAndAnExitReleasesEverything) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  ASSERT_TRUE(Bind(a, false, ListenAddress::Ipv4(kAddrA)).ok());
  ASSERT_TRUE(Listen(a, ListenAddress::Ipv4(kAddrA)).ok());
  EXPECT_EQ(router_->claim_count(), 2u);
  Release(a, ListenAddress::Ipv4(kAddrA), ClaimKind::kListen);
  EXPECT_EQ(router_->claim_count(), 1u);
  // The bind stays (and takes no request); the listen went.
  EXPECT_EQ(mad::ErrnoOf(Bind(b, false, ListenAddress::Ipv4(kAddrA))), EADDRINUSE);
  ASSERT_TRUE(a.cm->Listen(kSid, kAll, 4, false).ok());
  const uint64_t unroutable = router_->counters().wire_unroutable;
  ConnectTo(kAddrA, 0x303);
  Deliver();
  EXPECT_EQ(router_->counters().wire_unroutable, unroutable + 1);
  ASSERT_TRUE(Listen(a, ListenAddress::Ipv4(kAddrA)).ok());
  Crash(a);
  EXPECT_EQ(router_->claim_count(), 0u);
  EXPECT_TRUE(Bind(b, false, ListenAddress::Ipv4(kAddrA)).ok());
}

TEST_F(RouterBindTest, ABindBelow1024NeedsCapNetBindServiceLikeAListen) {
  ClientCredentials nobody;
  nobody.uid = 65534;
  nobody.may_bind_privileged_ports = false;
  TestClient& a = AddClient(nobody);
  constexpr uint64_t kPort80 = 0x0000000001060000ull | 80;
  absl::Status s = Claim(a, kPort80, kAll, false, ListenAddress::Ipv4(kAddrA), ClaimKind::kBind);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("binding port 80"), absl::string_view::npos) << s;
  EXPECT_EQ(router_->counters().claims_denied, 1u);
}

// uscmd reads claims from any local user: each client holds at most
// RouterOptions::max_claims_per_client; the next is refused with ENOMEM (the
// kernel's cma_alloc_port when it cannot allocate), a re-claim is no new one.
class RouterClaimLimitTest : public RouterBindTest {
 protected:
  RouterClaimLimitTest() { router_options_.max_claims_per_client = 3; }
};

TEST_F(RouterClaimLimitTest, AClientHoldsAtMostItsBoundOfClaims) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  ASSERT_TRUE(Bind(a, false, ListenAddress::Ipv4(kAddrA)).ok());
  ASSERT_TRUE(Listen(a, ListenAddress::Ipv4(kAddrA)).ok());
  ASSERT_TRUE(Bind(a, false, ListenAddress::Ipv4(kAddrB)).ok());
  absl::Status s = Bind(a, false, ListenAddress::Ipv4(kPeerIp));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(mad::ErrnoOf(s), ENOMEM) << s;
  EXPECT_NE(s.message().find("holds 3 claims"), absl::string_view::npos) << s;
  EXPECT_EQ(router_->counters().claims_over_limit, 1u);
  EXPECT_EQ(router_->claim_count(), 3u);
  // REUSEADDR turned on is an update, not a claim; other clients have their own.
  EXPECT_TRUE(Bind(a, true, ListenAddress::Ipv4(kAddrB)).ok());
  EXPECT_TRUE(Bind(b, true, ListenAddress::Ipv4(kAddrB)).ok());
  EXPECT_TRUE(Bind(b, false, ListenAddress::Ipv4(kPeerIp)).ok());
  Release(a, ListenAddress::Ipv4(kAddrA), ClaimKind::kListen);
  EXPECT_TRUE(Listen(a, ListenAddress::Ipv4(kAddrA)).ok()) << "a release makes room";
  EXPECT_EQ(router_->counters().claims_over_limit, 1u);
}

TEST_F(RouterBindTest, TheDefaultBoundIs1024ClaimsAClient) {
  TestClient& a = AddClient();
  constexpr uint64_t kTcpPs = 0x0000000001060000ull;
  for (uint64_t port = 1; port <= 1024; ++port) {
    ASSERT_TRUE(Claim(a, kTcpPs | (port + 2000), kAll, false, ListenAddress::Ipv4(kAddrA),
                      ClaimKind::kBind).ok())
        << port;
  }
  absl::Status s =
      Claim(a, kTcpPs | 5000, kAll, false, ListenAddress::Ipv4(kAddrA), ClaimKind::kBind);
  EXPECT_EQ(mad::ErrnoOf(s), ENOMEM) << s;
  EXPECT_EQ(router_->counters().claims_over_limit, 1u);
}

}  // namespace
}  // namespace uscm::router
