// Listeners of one port on different addresses in different processes: the
// router applies the kernel's rules to their claims (cma_check_port) and
// routes each REQ / SIDR_REQ by the destination in its rdma_cm IP header
// (cma_find_listener). Fixture: router_test_fixture.h.
#include <cerrno>

#include "cm/router/listen_address.h"
#include "cm/router/router_test_fixture.h"
#include "mad/status_errno.h"
#include "mad/wire/cma_header.h"

namespace uscm::router {
namespace {

using mad::ListenAddress;

constexpr uint32_t kAddrA = 0xC0A84D64;  // 192.168.77.100
constexpr uint32_t kAddrB = 0xC0A84D65;  // 192.168.77.101
constexpr uint32_t kPeerIp = 0xC0A84D66;

ListenAddress Ipv6(uint8_t last, bool af_only) {
  ListenAddress a;
  a.family = ListenAddress::Family::kIpv6;
  if (last != 0) {
    a.ip[0] = 0xFE;
    a.ip[1] = 0x80;
    a.ip[15] = last;
  }
  a.af_only = af_only;
  return a;
}

// REQ private data as rdma_cm writes it: the IP header, then the user's bytes.
std::vector<uint8_t> CmaPrivateData(const mad::wire::CmaHeader& h) {
  std::vector<uint8_t> pd(mad::wire::cma::kHeaderBytes);
  EXPECT_TRUE(h.Emit(pd).ok());
  pd.push_back(0x42);
  return pd;
}

class ListenAddressTest : public RouterTest {
 protected:
  // A REQ from the peer to `dst` (its IP header); the id.
  ConnId ConnectTo(const mad::wire::CmaHeader& h, uint32_t qpn) {
    cm::ConnectParams p = ToRouterHost(kSid, qpn);
    p.private_data = CmaPrivateData(h);
    auto id = peer_->Connect(sched_->Now(), p);
    EXPECT_TRUE(id.ok()) << id.status();
    return *id;
  }
};

TEST_F(ListenAddressTest, TwoProcessesOnOnePortOnTwoAddressesEachGetTheirRequests) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  ASSERT_TRUE(Claim(a, kSid, ~uint64_t{0}, false, ListenAddress::Ipv4(kAddrA)).ok());
  ASSERT_TRUE(Claim(b, kSid, ~uint64_t{0}, false, ListenAddress::Ipv4(kAddrB)).ok());
  ASSERT_TRUE(a.cm->Listen(kSid, ~uint64_t{0}, 4, false).ok());
  ASSERT_TRUE(b.cm->Listen(kSid, ~uint64_t{0}, 4, false).ok());
  const ConnId to_b = ConnectTo(mad::wire::CmaHeader::Ipv4(kPeerIp, 40000, kAddrB), 0x301);
  const ConnId to_a = ConnectTo(mad::wire::CmaHeader::Ipv4(kPeerIp, 40001, kAddrA), 0x302);
  Deliver();
  EXPECT_EQ(*peer_->State(to_a), cm::CmState::kEstablished);
  EXPECT_EQ(*peer_->State(to_b), cm::CmState::kEstablished);
  ASSERT_EQ(Count(a.events, CmEventType::kConnectRequest), 1);
  ASSERT_EQ(Count(b.events, CmEventType::kConnectRequest), 1);
  for (TestClient* c : {&a, &b}) {
    for (const CmEvent& e : c->events) {
      if (e.type != CmEventType::kConnectRequest) continue;
      auto h = mad::wire::CmaHeader::Parse(e.private_data.bytes());
      ASSERT_TRUE(h.ok());
      EXPECT_EQ(h->dst_ipv4(), c == &a ? kAddrA : kAddrB) << "slot " << int{c->slot};
    }
  }
  // A third address of the port: nobody listens there.
  const uint64_t unroutable = router_->counters().wire_unroutable;
  const ConnId to_none = ConnectTo(mad::wire::CmaHeader::Ipv4(kPeerIp, 40002, kPeerIp), 0x303);
  Deliver();
  EXPECT_EQ(*peer_->State(to_none), cm::CmState::kReqSent);
  EXPECT_EQ(router_->counters().wire_unroutable, unroutable + 1);
  EXPECT_EQ(router_->counters().refused_mads, 0u);
}

TEST_F(ListenAddressTest, AWildcardAndAnAddressOfItsFamilyConflictEitherWay) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  const ListenAddress any4 = ListenAddress::Ipv4(0);
  ASSERT_TRUE(Claim(a, kSid, ~uint64_t{0}, true, any4).ok());
  absl::Status s = Claim(b, kSid, ~uint64_t{0}, true, ListenAddress::Ipv4(kAddrB));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(mad::ErrnoOf(s), EADDRNOTAVAIL) << s;
  EXPECT_NE(s.message().find("0.0.0.0"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("slot 1"), absl::string_view::npos) << s;
  // Loopback is a wildcard too (cma_any_addr).
  EXPECT_EQ(mad::ErrnoOf(Claim(b, kSid, ~uint64_t{0}, false, ListenAddress::Ipv4(0x7F000001))),
            EADDRNOTAVAIL);
  // An IPv6 wildcard that takes IPv4 (not AFONLY) conflicts; an AFONLY one does not.
  EXPECT_EQ(mad::ErrnoOf(Claim(b, kSid, ~uint64_t{0}, false, Ipv6(0, false))), EADDRNOTAVAIL);
  EXPECT_TRUE(Claim(b, kSid, ~uint64_t{0}, false, Ipv6(0, true)).ok());
  EXPECT_EQ(router_->counters().claim_conflicts, 3u);
  // The other order: a specific address first, then a wildcard.
  TestClient& c = AddClient();
  TestClient& d = AddClient();
  const uint64_t other = kSid + 1;
  ASSERT_TRUE(Claim(c, other, ~uint64_t{0}, false, ListenAddress::Ipv4(kAddrA)).ok());
  EXPECT_EQ(mad::ErrnoOf(Claim(d, other, ~uint64_t{0}, false, any4)), EADDRNOTAVAIL);
  // A claim without address (AF_IB) is the whole service.
  s = Claim(d, other, ~uint64_t{0}, false, ListenAddress{});
  EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
}

TEST_F(ListenAddressTest, TheSameAddressIsRefusedAndFreedWhenItsProcessGoesAway) {
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  ASSERT_TRUE(Claim(a, kSid, ~uint64_t{0}, true, ListenAddress::Ipv4(kAddrA)).ok());
  for (bool reuse : {false, true}) {
    absl::Status s = Claim(b, kSid, ~uint64_t{0}, reuse, ListenAddress::Ipv4(kAddrA));
    EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
    EXPECT_EQ(mad::ErrnoOf(s), EADDRINUSE) << s;
    EXPECT_NE(s.message().find("192.168.77.100"), absl::string_view::npos) << s;
  }
  // A process may hold the same service on two addresses (two listeners).
  ASSERT_TRUE(Claim(a, kSid, ~uint64_t{0}, true, ListenAddress::Ipv4(kAddrB)).ok());
  EXPECT_EQ(router_->claim_count(), 2u);
  // A release names the address: only that claim goes.
  router_->HandleFrame(a.slot, EncodeClaim(FrameType::kRelease,
                                           ClaimFrame{2, kSid, ~uint64_t{0}, false,
                                                      ListenAddress::Ipv4(kAddrB)}));
  EXPECT_EQ(router_->claim_count(), 1u);
  EXPECT_TRUE(Claim(b, kSid, ~uint64_t{0}, false, ListenAddress::Ipv4(kAddrB)).ok());
  Crash(a);
  EXPECT_EQ(router_->claim_count(), 1u);
  EXPECT_TRUE(Claim(b, kSid, ~uint64_t{0}, false, ListenAddress::Ipv4(kAddrA)).ok());
}

// Across families with AFONLY: an IPv6 wildcard and an IPv4 address share
// the port; each REQ goes by the version and address of its IP header, and
// one without an IP header (AF_IB) matches neither.
TEST_F(ListenAddressTest, RequestsGoByTheFamilyAndAddressOfTheirIpHeader) {
  TestClient& v6 = AddClient();
  TestClient& v4 = AddClient();
  ASSERT_TRUE(Claim(v6, kSid, ~uint64_t{0}, false, Ipv6(0, true)).ok());
  ASSERT_TRUE(Claim(v4, kSid, ~uint64_t{0}, false, ListenAddress::Ipv4(kAddrB)).ok());
  ASSERT_TRUE(v6.cm->Listen(kSid, ~uint64_t{0}, 4, false).ok());
  ASSERT_TRUE(v4.cm->Listen(kSid, ~uint64_t{0}, 4, false).ok());
  ConnectTo(mad::wire::CmaHeader::Ipv4(kPeerIp, 40000, kAddrB), 0x301);
  ConnectTo(mad::wire::CmaHeader::Ipv6(Ipv6(2, false).ip, 40001, Ipv6(1, false).ip), 0x302);
  Deliver();
  EXPECT_EQ(Count(v4.events, CmEventType::kConnectRequest), 1);
  EXPECT_EQ(Count(v6.events, CmEventType::kConnectRequest), 1);
  const uint64_t unroutable = router_->counters().wire_unroutable;
  ASSERT_TRUE(peer_->Connect(sched_->Now(), ToRouterHost(kSid, 0x303)).ok());  // no header
  Deliver();
  EXPECT_EQ(router_->counters().wire_unroutable, unroutable + 1);
  EXPECT_EQ(Count(v4.events, CmEventType::kConnectRequest), 1);
  EXPECT_EQ(Count(v6.events, CmEventType::kConnectRequest), 1);
}

// SIDR_REQ (RDMA_PS_UDP) is routed the same way.
TEST_F(ListenAddressTest, SidrRequestsGoToTheListenerOfTheirAddress) {
  constexpr uint64_t kUdSid = 0x0000000001110000ull | 4791;
  TestClient& a = AddClient();
  TestClient& b = AddClient();
  ASSERT_TRUE(Claim(a, kUdSid, ~uint64_t{0}, false, ListenAddress::Ipv4(kAddrA)).ok());
  ASSERT_TRUE(Claim(b, kUdSid, ~uint64_t{0}, false, ListenAddress::Ipv4(kAddrB)).ok());
  ASSERT_TRUE(a.cm->Listen(kUdSid, ~uint64_t{0}, 4, false).ok());
  ASSERT_TRUE(b.cm->Listen(kUdSid, ~uint64_t{0}, 4, false).ok());
  cm::SidrRequestParams p;
  p.service_id = kUdSid;
  p.peer.lid = kRouterLid;
  p.timeout = 10;
  p.max_retries = 2;
  p.private_data = CmaPrivateData(mad::wire::CmaHeader::Ipv4(kPeerIp, 40000, kAddrB));
  ASSERT_TRUE(peer_->SidrRequest(sched_->Now(), p).ok());
  Deliver();
  EXPECT_EQ(Count(a.events, CmEventType::kSidrRequest), 0);
  EXPECT_EQ(Count(b.events, CmEventType::kSidrRequest), 1);
  ASSERT_EQ(Count(peer_events_, CmEventType::kSidrReply), 1);
  EXPECT_EQ(peer_events_.back().sidr_qpn, 0x6000u + b.slot);
}

// The rules alone, as cma.c states them.
TEST(ListenAddressRules, AsTheKernelDecides) {
  const ListenAddress a = ListenAddress::Ipv4(kAddrA), b = ListenAddress::Ipv4(kAddrB);
  EXPECT_EQ(Overlap(a, b), ListenOverlap::kNone);
  EXPECT_EQ(Overlap(a, a), ListenOverlap::kSameAddress);
  EXPECT_EQ(Overlap(a, ListenAddress::Ipv4(0)), ListenOverlap::kWildcard);
  EXPECT_EQ(Overlap(a, ListenAddress::Ipv4(0x00010203)), ListenOverlap::kWildcard);  // 0/8
  EXPECT_EQ(Overlap(Ipv6(0, true), ListenAddress::Ipv4(0)), ListenOverlap::kNone);
  EXPECT_EQ(Overlap(Ipv6(0, false), a), ListenOverlap::kWildcard);
  EXPECT_EQ(Overlap(Ipv6(1, false), a), ListenOverlap::kNone);  // different families
  EXPECT_EQ(Overlap(Ipv6(0, true), Ipv6(1, true)), ListenOverlap::kWildcard);
  EXPECT_EQ(Overlap(ListenAddress{}, a), ListenOverlap::kSameAddress);
  const ListenAddress dst_a = RequestDestination(
      CmaPrivateData(mad::wire::CmaHeader::Ipv4(kPeerIp, 1, kAddrA)));
  EXPECT_EQ(dst_a, ListenAddress::Ipv4(kAddrA, false));
  EXPECT_EQ(Match(a, dst_a), ListenMatch::kExact);
  EXPECT_EQ(Match(b, dst_a), ListenMatch::kNo);
  EXPECT_EQ(Match(ListenAddress::Ipv4(0), dst_a), ListenMatch::kWildcard);
  EXPECT_EQ(Match(Ipv6(0, true), dst_a), ListenMatch::kNo);
  EXPECT_EQ(Match(Ipv6(0, false), dst_a), ListenMatch::kWildcard);
  EXPECT_EQ(Match(ListenAddress{}, dst_a), ListenMatch::kWildcard);
  EXPECT_EQ(RequestDestination(std::vector<uint8_t>{1, 2, 3}).family,
            ListenAddress::Family::kNone);
  EXPECT_EQ(Match(a, ListenAddress{}), ListenMatch::kNo);
}

}  // namespace
}  // namespace uscm::router
