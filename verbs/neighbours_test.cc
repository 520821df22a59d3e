#include "verbs/neighbours.h"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mad/status_errno.h"
#include "verbs/ipoib.h"

namespace uscm::verbs {
namespace {

IpAddr Ip(const char* text) {
  IpAddr a;
  a.family = strchr(text, ':') != nullptr ? AF_INET6 : AF_INET;
  EXPECT_EQ(inet_pton(a.family, text, a.ip.data()), 1) << text;
  return a;
}

void PutAttr(std::vector<uint8_t>& m, uint16_t type, const void* data, size_t len) {
  rtattr a = {};
  a.rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
  a.rta_type = type;
  const size_t at = m.size();
  m.resize(at + RTA_SPACE(len));
  memcpy(&m[at], &a, sizeof(a));
  memcpy(&m[at + RTA_LENGTH(0)], data, len);
}

// An RTM_NEWNEIGH as the kernel sends it: header, ndmsg, NDA_DST, NDA_LLADDR.
std::vector<uint8_t> NeighMessage(const IpAddr& dst, const std::vector<uint8_t>& lladdr,
                                  uint16_t state, int ifindex = 7) {
  std::vector<uint8_t> m(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(ndmsg)));
  ndmsg nd = {};
  nd.ndm_family = static_cast<uint8_t>(dst.family);
  nd.ndm_ifindex = ifindex;
  nd.ndm_state = state;
  memcpy(&m[NLMSG_HDRLEN], &nd, sizeof(nd));
  PutAttr(m, NDA_DST, dst.ip.data(), dst.family == AF_INET ? 4 : 16);
  PutAttr(m, NDA_LLADDR, lladdr.data(), lladdr.size());
  nlmsghdr h = {};
  h.nlmsg_len = static_cast<uint32_t>(m.size());
  h.nlmsg_type = RTM_NEWNEIGH;
  memcpy(m.data(), &h, sizeof(h));
  return m;
}

const std::vector<uint8_t> kIpoibHw = {0x00, 0x00, 0x10, 0x49, 0xfe, 0x80, 0,    0,    0,    0,
                                       0,    0,    0,    0x02, 0xc9, 0x03, 0x00, 0xa1, 0xb2, 0xc3};

TEST(NeighbourMessageTest, AnIpoibEntryGivesThePeersGid) {
  const IpAddr dst = Ip("10.1.0.3");
  auto e = ParseNeighbourMessage(NeighMessage(dst, kIpoibHw, NUD_REACHABLE), dst);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->ifindex, 7);
  EXPECT_TRUE(e->usable());
  absl::optional<mad::Gid> gid = GidOfIpoibLladdr(e->lladdr);
  ASSERT_TRUE(gid.has_value());
  EXPECT_EQ(gid->ToString(), "fe80::2:c903:a1:b2c3");
}

TEST(NeighbourMessageTest, IncompleteAndFailedEntriesAreNotUsable) {
  const IpAddr dst = Ip("fd00::8");
  for (uint16_t state : {NUD_INCOMPLETE, NUD_FAILED, NUD_NONE}) {
    auto e = ParseNeighbourMessage(NeighMessage(dst, {2, 0, 0, 0, 0, 8}, state), dst);
    ASSERT_TRUE(e.has_value()) << state;
    EXPECT_FALSE(e->usable()) << state;
  }
  for (uint16_t state : {NUD_STALE, NUD_PERMANENT, NUD_DELAY, NUD_PROBE, NUD_NOARP}) {
    auto e = ParseNeighbourMessage(NeighMessage(dst, {2, 0, 0, 0, 0, 8}, state), dst);
    ASSERT_TRUE(e.has_value()) << state;
    EXPECT_TRUE(e->usable()) << state;
  }
}

TEST(NeighbourMessageTest, OtherAddressesAndMalformedMessagesAreRefused) {
  const IpAddr dst = Ip("10.1.0.3");
  const std::vector<uint8_t> good = NeighMessage(dst, kIpoibHw, NUD_REACHABLE);
  EXPECT_FALSE(ParseNeighbourMessage(good, Ip("10.1.0.4")).has_value()) << "another address";
  EXPECT_FALSE(ParseNeighbourMessage(good, Ip("::ffff:10.1.0.3")).has_value()) << "another family";
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ParseNeighbourMessage(std::span(good).first(n), dst).has_value()) << n << " bytes";
  }
  std::vector<uint8_t> bad_attr = good;
  bad_attr[NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(ndmsg))] = 0xFF;  // NDA_DST's length past the end
  EXPECT_FALSE(ParseNeighbourMessage(bad_attr, dst).has_value());
  std::vector<uint8_t> route = good;
  reinterpret_cast<nlmsghdr*>(route.data())->nlmsg_type = RTM_NEWROUTE;
  EXPECT_FALSE(ParseNeighbourMessage(route, dst).has_value());
}

// The kernel's tables for real, in a network namespace of this test's own:
// veth vt0 10.9.0.1/24 + fd00::1/64, a permanent neighbour 10.9.0.8 / fd00::8,
// 10.20.0.0/16 through 10.9.0.8; veth vt2 10.8.0.1/24 + fd08::1/64.
class NeighbourTableTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (unshare(CLONE_NEWNET) != 0) {
      skip_ = std::string("unshare(CLONE_NEWNET): ") + strerror(errno) + " (needs root)";
      return;
    }
    // No IPv6 link-local address on the veths (addr_gen_mode 1, "none"),
    // their fe80::/64 routes added by hand: an address made at link-up
    // finishes DAD a second or two later, and that RTM_NEWADDR dropped the
    // route-back cache in the middle of the tests that count its drops
    // (under ASan, where they run later).
    const int rc = system(
        "set -e; exec >/dev/null 2>&1; ip link set lo up;"
        " echo 1 > /proc/sys/net/ipv6/conf/default/addr_gen_mode;"
        " ip link add vt0 type veth peer name vt1; ip link set vt0 up; ip link set vt1 up;"
        " ip addr add 10.9.0.1/24 dev vt0; ip -6 addr add fd00::1/64 dev vt0 nodad;"
        " ip neigh add 10.9.0.8 lladdr 02:00:00:00:00:08 dev vt0 nud permanent;"
        " ip -6 neigh add fd00::8 lladdr 02:00:00:00:00:09 dev vt0 nud permanent;"
        " ip route add 10.20.0.0/16 via 10.9.0.8;"
        " ip link add vt2 type veth peer name vt3; ip link set vt2 up; ip link set vt3 up;"
        " ip addr add 10.8.0.1/24 dev vt2; ip -6 addr add fd08::1/64 dev vt2 nodad;"
        " ip -6 route add fe80::/64 dev vt0; ip -6 route add fe80::/64 dev vt2");
    if (rc != 0) skip_ = "ip link add ... type veth failed (no iproute2 or veth here)";
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    auto t = NeighbourTable::Open();
    ASSERT_TRUE(t.ok()) << t.status();
    table_ = std::make_unique<NeighbourTable>(std::move(*t));
  }
  static inline std::string skip_;
  std::unique_ptr<NeighbourTable> table_;
};

constexpr auto kShort = std::chrono::milliseconds(50);

TEST_F(NeighbourTableTest, APermanentEntryResolvesToItsMac) {
  auto hw = table_->Resolve(Ip("10.9.0.8"), absl::nullopt, kShort);
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(*hw, (std::vector<uint8_t>{2, 0, 0, 0, 0, 8}));
  auto hw6 = table_->Resolve(Ip("fd00::8"), Ip("fd00::1"), kShort);
  ASSERT_TRUE(hw6.ok()) << hw6.status();
  EXPECT_EQ(*hw6, (std::vector<uint8_t>{2, 0, 0, 0, 0, 9}));
}

TEST_F(NeighbourTableTest, ARoutedDestinationResolvesItsGateway) {
  auto route = table_->Route(Ip("10.20.1.1"), absl::nullopt);
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->ifindex, static_cast<int>(if_nametoindex("vt0")));
  EXPECT_EQ(route->next_hop.ToString(), "10.9.0.8");
  auto hw = table_->Resolve(Ip("10.20.1.1"), Ip("10.9.0.1"), kShort);
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(*hw, (std::vector<uint8_t>{2, 0, 0, 0, 0, 8}));
}

TEST_F(NeighbourTableTest, ALocalAddressNeedsNoNeighbour) {
  auto hw = table_->Resolve(Ip("10.9.0.1"), absl::nullopt, kShort);
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_TRUE(hw->empty());
}

TEST_F(NeighbourTableTest, NoRouteIsEnetunreachAtOnce) {
  auto hw = table_->Resolve(Ip("10.99.0.1"), absl::nullopt, std::chrono::seconds(10));
  ASSERT_FALSE(hw.ok());
  EXPECT_EQ(mad::ErrnoOf(hw.status()), ENETUNREACH) << hw.status();
  EXPECT_NE(hw.status().message().find("no route to 10.99.0.1"), std::string::npos)
      << hw.status();
}

TEST_F(NeighbourTableTest, ASilentHostTimesOutAfterTheKernelWasAskedToResolve) {
  auto hw = table_->Resolve(Ip("10.9.0.9"), absl::nullopt, kShort);
  ASSERT_FALSE(hw.ok());
  EXPECT_EQ(hw.status().code(), absl::StatusCode::kDeadlineExceeded) << hw.status();
  EXPECT_EQ(mad::ErrnoOf(hw.status()), ETIMEDOUT);
  // NTF_USE created the entry and started ARP: it is in the table, not usable.
  auto e = table_->Lookup(static_cast<int>(if_nametoindex("vt0")), Ip("10.9.0.9"));
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->usable());
}

// An unbound rdma_cm id's source and netdev, as rdma_resolve_ip takes them.
TEST_F(NeighbourTableTest, TheRouteNamesItsSourceAndNetdev) {
  auto v4 = table_->Route(Ip("10.8.0.7"), absl::nullopt);
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->ifindex, static_cast<int>(if_nametoindex("vt2")));
  EXPECT_EQ(v4->source.ToString(), "10.8.0.1");
  auto v6 = table_->Route(Ip("fd00::7"), absl::nullopt);
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->ifindex, static_cast<int>(if_nametoindex("vt0")));
  EXPECT_EQ(v6->source.ToString(), "fd00::1");
}

// The kernel's validate_net_dev: the route back to a request's source,
// asked on the netdev the request came in on, must leave on it.
TEST_F(NeighbourTableTest, TheRouteBackLeavesOnTheRequestsNetdevOrNot) {
  const int vt0 = static_cast<int>(if_nametoindex("vt0"));
  const int vt2 = static_cast<int>(if_nametoindex("vt2"));
  // 10.8.0.0/24 is vt2's: asked on vt0, IPv4's FIB has no route (the output
  // route would have assumed 10.8.0.7 on vt0's link).
  EXPECT_TRUE(table_->RouteLeavesOn(Ip("10.8.0.7"), Ip("10.8.0.1"), vt2).ok());
  absl::Status v4 = table_->RouteLeavesOn(Ip("10.8.0.7"), Ip("10.9.0.1"), vt0);
  EXPECT_EQ(v4.code(), absl::StatusCode::kFailedPrecondition) << v4;
  EXPECT_NE(v4.message().find("No route to host"), std::string::npos) << v4;
  // A gateway's route on vt0 does.
  EXPECT_TRUE(table_->RouteLeavesOn(Ip("10.20.1.1"), Ip("10.9.0.1"), vt0).ok());
  // IPv6 answers with vt2's route, which is not vt0.
  EXPECT_TRUE(table_->RouteLeavesOn(Ip("fd08::7"), Ip("fd08::1"), vt2).ok());
  absl::Status v6 = table_->RouteLeavesOn(Ip("fd08::7"), Ip("fd00::1"), vt0);
  EXPECT_EQ(v6.code(), absl::StatusCode::kFailedPrecondition) << v6;
  EXPECT_NE(v6.message().find(absl::StrCat("leaves on ifindex ", vt2)), std::string::npos) << v6;
  // A link-local source is on whichever netdev it is asked on (strict).
  EXPECT_TRUE(table_->RouteLeavesOn(Ip("fe80::5"), Ip("fd00::1"), vt0).ok());
  EXPECT_TRUE(table_->RouteLeavesOn(Ip("fe80::5"), Ip("fd08::1"), vt2).ok());
  // This host's own address: IPv4's local route is on the address's netdev,
  // IPv6's on the loopback device (the kernel refuses that one too).
  EXPECT_TRUE(table_->RouteLeavesOn(Ip("10.9.0.1"), Ip("10.9.0.1"), vt0).ok());
  EXPECT_EQ(table_->RouteLeavesOn(Ip("fd00::1"), Ip("fd00::1"), vt0).code(),
            absl::StatusCode::kFailedPrecondition);
  // validate_ipv4_net_dev's refusals without a look-up.
  EXPECT_EQ(table_->RouteLeavesOn(Ip("127.0.0.1"), Ip("10.9.0.1"), vt0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(table_->RouteLeavesOn(Ip("10.9.0.8"), Ip("224.0.0.1"), vt0).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A given IPv4 source on two netdevs is on the one it was added to last, as
// the kernel's __ip_dev_find finds it (rdma_bind_addr's netdev).
TEST_F(NeighbourTableTest, AnIpv4AddressOnTwoNetdevsIsOnTheOneItWasAddedToLast) {
  const int vt0 = static_cast<int>(if_nametoindex("vt0"));
  const int vt2 = static_cast<int>(if_nametoindex("vt2"));
  EXPECT_EQ(*table_->NetdevOfSource(Ip("10.8.0.1")), vt2);
  ASSERT_EQ(system("ip addr add 10.8.0.1/32 dev vt0"), 0);
  EXPECT_EQ(*table_->NetdevOfSource(Ip("10.8.0.1")), vt0) << "vt0's, added last";
  ASSERT_EQ(system("ip addr del 10.8.0.1/24 dev vt2 && ip addr add 10.8.0.1/24 dev vt2"), 0);
  EXPECT_EQ(*table_->NetdevOfSource(Ip("10.8.0.1")), vt2) << "vt2's again, added back last";
  ASSERT_EQ(system("ip addr del 10.8.0.1/32 dev vt0"), 0);
  EXPECT_EQ(*table_->NetdevOfSource(Ip("10.8.0.1")), vt2);
  EXPECT_EQ(table_->NetdevOfSource(Ip("10.77.0.1")).status().code(), absl::StatusCode::kNotFound);
}

// A given IPv6 source on two netdevs is on the first netdev of the kernel's
// list that has it, not tentative (rdma_translate_ip's for_each_netdev_rcu
// with ipv6_chk_addr): the lower ifindex, whichever it was added to last.
// A link-local source is on the netdev its scope id names
// (cma_check_linklocal's bound_dev_if).
TEST_F(NeighbourTableTest, AnIpv6AddressOnTwoNetdevsIsOnTheFirstNetdevThatHasIt) {
  // The answer's netdev, or -1 (with the status in the failure message).
  auto NetdevOf = [this](const IpAddr& a) {
    absl::StatusOr<int> n = table_->NetdevOfSource(a);
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  };
  const int vt0 = static_cast<int>(if_nametoindex("vt0"));
  const int vt2 = static_cast<int>(if_nametoindex("vt2"));
  ASSERT_LT(vt0, vt2);
  EXPECT_EQ(NetdevOf(Ip("fd08::1")), vt2);
  EXPECT_EQ(NetdevOf(Ip("fd00::1")), vt0);
  ASSERT_EQ(system("ip -6 addr add fd00::1/128 dev vt2 nodad"), 0);
  EXPECT_EQ(NetdevOf(Ip("fd00::1")), vt0) << "vt0's, though added to vt2 last";
  ASSERT_EQ(system("ip -6 addr del fd00::1/64 dev vt0"), 0);
  EXPECT_EQ(NetdevOf(Ip("fd00::1")), vt2) << "vt2's alone";
  ASSERT_EQ(system("ip -6 addr add fd00::1/64 dev vt0 nodad && ip -6 addr del fd00::1/128 dev vt2"),
            0);
  EXPECT_EQ(NetdevOf(Ip("fd00::1")), vt0);
  // A tentative address (on a netdev that is down, DAD not done) is passed
  // over: vt4's, though first, is not the answer.
  ASSERT_EQ(system("set -e; exec >/dev/null 2>&1; ip link add vt4 type veth peer name vt5;"
                   " ip link add vt6 type veth peer name vt7; ip link set vt6 up; ip link set vt7 up;"
                   " ip -6 addr add fd0b::1/64 dev vt4; ip -6 addr add fd0b::1/64 dev vt6 nodad"),
            0);
  const int vt4 = static_cast<int>(if_nametoindex("vt4"));
  const int vt6 = static_cast<int>(if_nametoindex("vt6"));
  EXPECT_LT(vt4, vt6);
  EXPECT_EQ(NetdevOf(Ip("fd0b::1")), vt6) << "vt4's is tentative";
  ASSERT_EQ(system("ip link del vt4 && ip link del vt6"), 0);
  EXPECT_EQ(table_->NetdevOfSource(Ip("fd0b::1")).status().code(), absl::StatusCode::kNotFound);
  IpAddr link_local = Ip("fe80::5");
  EXPECT_EQ(table_->NetdevOfSource(link_local).status().code(), absl::StatusCode::kInvalidArgument)
      << "a link-local address names no netdev without its scope id";
  link_local.scope_id = static_cast<uint32_t>(vt2);
  EXPECT_EQ(NetdevOf(link_local), vt2);
}

// The answers are kept until the kernel says a route or an address changed:
// a request's source with no route on vt0 is refused, then taken once a route
// through vt0's gateway is added, refused again once it is deleted; an
// address added and deleted drops the kept answers too.
TEST_F(NeighbourTableTest, TheRouteBackIsKeptUntilARouteOrAnAddressChanges) {
  const int vt0 = static_cast<int>(if_nametoindex("vt0"));
  RouteBackCache cache;
  ASSERT_TRUE(cache.watching());
  const IpAddr from = Ip("10.31.0.5"), to = Ip("10.9.0.1");
  EXPECT_EQ(cache.RouteLeavesOn(*table_, from, to, vt0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.RouteLeavesOn(*table_, from, to, vt0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.asked(), 1u) << "the second answer is the kept one";
  ASSERT_EQ(system("ip route add 10.31.0.0/16 via 10.9.0.8"), 0);
  EXPECT_TRUE(cache.RouteLeavesOn(*table_, from, to, vt0).ok());
  EXPECT_TRUE(cache.RouteLeavesOn(*table_, from, to, vt0).ok());
  EXPECT_EQ(cache.asked(), 2u);
  ASSERT_EQ(system("ip route del 10.31.0.0/16 via 10.9.0.8"), 0);
  EXPECT_EQ(cache.RouteLeavesOn(*table_, from, to, vt0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.asked(), 3u);
  ASSERT_EQ(system("ip addr add 10.31.0.1/16 dev vt0"), 0);
  EXPECT_TRUE(cache.RouteLeavesOn(*table_, from, to, vt0).ok()) << "the address's prefix route";
  ASSERT_EQ(system("ip addr del 10.31.0.1/16 dev vt0"), 0);
  EXPECT_EQ(cache.RouteLeavesOn(*table_, from, to, vt0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.asked(), 5u);
  EXPECT_EQ(cache.dropped(), 4u);
}

// Generation moves with a link change (what the port's IPoIB netdev list,
// kept beside the answers, compares) and with a route change; the changes
// it read drop the kept answers, as RouteLeavesOn's own read would.
TEST_F(NeighbourTableTest, TheGenerationMovesWithALinkOrRouteChange) {
  const int vt0 = static_cast<int>(if_nametoindex("vt0"));
  RouteBackCache cache;
  ASSERT_TRUE(cache.watching());
  const uint64_t first = cache.Generation();
  EXPECT_EQ(cache.Generation(), first) << "nothing changed";
  const IpAddr from = Ip("10.31.0.5"), to = Ip("10.9.0.1");
  EXPECT_EQ(cache.RouteLeavesOn(*table_, from, to, vt0).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(system("ip link set vt0 mtu 1400"), 0);
  const uint64_t second = cache.Generation();
  EXPECT_NE(second, first) << "a link changed";
  ASSERT_EQ(system("ip route add 10.31.0.0/16 via 10.9.0.8"), 0);
  EXPECT_NE(cache.Generation(), second) << "a route changed";
  EXPECT_TRUE(cache.RouteLeavesOn(*table_, from, to, vt0).ok())
      << "the refusal kept before was dropped with the changes Generation read";
  EXPECT_EQ(cache.asked(), 2u);
  ASSERT_EQ(system("ip route del 10.31.0.0/16 via 10.9.0.8"), 0);
  ASSERT_EQ(system("ip link set vt0 mtu 1500"), 0);
}

// A full cache is dropped: requests from many sources keep at most kMaxKept.
TEST_F(NeighbourTableTest, AFullRouteBackCacheIsDropped) {
  const int vt0 = static_cast<int>(if_nametoindex("vt0"));
  RouteBackCache cache;
  ASSERT_TRUE(cache.watching());
  IpAddr from = Ip("10.20.0.0");
  for (size_t i = 0; i <= RouteBackCache::kMaxKept; ++i) {
    from.ip[2] = static_cast<uint8_t>(i >> 8);
    from.ip[3] = static_cast<uint8_t>(i);
    ASSERT_TRUE(cache.RouteLeavesOn(*table_, from, Ip("10.9.0.1"), vt0).ok());
  }
  EXPECT_EQ(cache.asked(), RouteBackCache::kMaxKept + 1);
  EXPECT_EQ(cache.dropped(), 1u);
  from.ip[2] = from.ip[3] = 0;
  ASSERT_TRUE(cache.RouteLeavesOn(*table_, from, Ip("10.9.0.1"), vt0).ok());
  EXPECT_EQ(cache.asked(), RouteBackCache::kMaxKept + 2) << "10.20.0.0 was dropped with the rest";
}

}  // namespace
}  // namespace uscm::verbs
