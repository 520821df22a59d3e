// RoCE over a VLAN: a netdev and its VLAN (eth0.100 on eth0) each have their
// entries in the port's GID table, the link-local fe80:: of their one MAC in
// both. The id's address and its interface (scope_id) name the entry its MADs
// leave from, as the kernel's rdma_cm finds the GID entry of the address and
// the bound netdev; rxe sends on that entry's netdev, tagged for a VLAN.
#include <functional>
#include <memory>
#include <vector>

#include "api/rdma_cm/one_device_fixture.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/transport.h"
#include "sa/sim_sa.h"

namespace uscm {
namespace {

// rxe's table with a VLAN: eth0 is ifindex 2, eth0.100 ifindex 3.
DeviceOptions VlanPort() {
  DeviceOptions o;
  o.roce = true;
  o.roce_path_mtu = 3;
  o.roce_gids = {*mad::Gid::Parse("fe80::1"), *mad::Gid::Parse("::ffff:192.168.78.1"),
                 *mad::Gid::Parse("fe80::1"), *mad::Gid::Parse("::ffff:192.168.100.1")};
  o.roce_gid_ifindexes = {2, 2, 3, 3};
  o.local_ips = {*Address::Parse("fe80::1"), *Address::Parse("192.168.78.1"),
                 *Address::Parse("192.168.100.1")};
  return o;
}

// One global address on two netdevs: 192.168.100.1 on eth0 (2, index 2) and
// on eth0.100 (3, index 4).
DeviceOptions TwoNetdevPort() {
  DeviceOptions o = VlanPort();
  o.roce_gids = {*mad::Gid::Parse("fe80::1"), *mad::Gid::Parse("::ffff:192.168.78.1"),
                 *mad::Gid::Parse("::ffff:192.168.100.1"), *mad::Gid::Parse("fe80::1"),
                 *mad::Gid::Parse("::ffff:192.168.100.1")};
  o.roce_gid_ifindexes = {2, 2, 2, 3, 3};
  o.local_ips = {*Address::Parse("fe80::1"), *Address::Parse("192.168.100.1"),
                 *Address::Parse("192.168.78.1")};
  return o;
}

Address LinkLocal(const char* text, uint32_t scope_id) {
  Address a = *Address::Parse(text);
  a.scope_id = scope_id;
  return a;
}

TEST(RoceSourceGidIndexTest, TheInterfaceNamesTheEntryOfALinkLocalAddress) {
  const DeviceOptions o = VlanPort();
  EXPECT_EQ(RoceSourceGidIndex(o, LinkLocal("fe80::1", 3)), 2) << "eth0.100's entry";
  EXPECT_EQ(RoceSourceGidIndex(o, LinkLocal("fe80::1", 2)), 0) << "eth0's";
  EXPECT_EQ(RoceSourceGidIndex(o, *Address::Parse("fe80::1")), 0) << "no interface: the first";
  EXPECT_EQ(RoceSourceGidIndex(o, LinkLocal("fe80::1", 9)), 0) << "not this port's netdev";
  EXPECT_EQ(RoceSourceGidIndex(o, *Address::Parse("192.168.100.1")), 3);
  EXPECT_EQ(RoceSourceGidIndex(o, *Address::Parse("10.0.0.1")), -1);
  DeviceOptions unknown = o;
  unknown.roce_gid_ifindexes.clear();  // netdevs not known: the first, as before
  EXPECT_EQ(RoceSourceGidIndex(unknown, LinkLocal("fe80::1", 3)), 0);
}

// The transport under the device, recording the source GID index of each send.
class RecordingTransport : public mad::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override {
    sgid_indexes.push_back(to.sgid_index);
    return ForwardingTransport::Send(to, mad);
  }
  std::vector<uint8_t> sgid_indexes;
};

class RoceVlanTest : public testing::OneDeviceTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Open(/*seed=*/7, VlanPort())); }
  mad::Transport& Under(mad::Transport& qp1) override {
    recording_ = std::make_unique<RecordingTransport>(qp1);
    return *recording_;
  }
  // Resolves `dst` (from `src`: given, or the id's choice) and the route,
  // then connects: the REQ's source GID index.
  int ReqSourceIndex(const Address& dst, absl::optional<Address> src = absl::nullopt) {
    CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
    EXPECT_TRUE(id->ResolveAddr(src, dst).ok());
    EXPECT_EQ((*ch_->GetEvent())->event, EventType::kAddrResolved);
    EXPECT_TRUE(id->ResolveRoute().ok());
    EXPECT_EQ((*ch_->GetEvent())->event, EventType::kRouteResolved);
    recording_->sgid_indexes.clear();
    ConnParam p;
    p.qp_num = 0x123;
    EXPECT_TRUE(id->Connect(p).ok());
    f_->RunFor(mad::Duration::Millis(1));
    EXPECT_FALSE(recording_->sgid_indexes.empty()) << "no REQ sent";
    return recording_->sgid_indexes.empty() ? -1 : recording_->sgid_indexes[0];
  }

  // DeviceOptions::netdev_of of a host whose kernel puts `address` on
  // kernels_netdev_ (verbs::NeighbourTable::NetdevOfSource), counted.
  void AnswerNetdevOf(DeviceOptions& o, const char* address) {
    o.netdev_of = [this, on = *Address::Parse(address)](const Address& local) {
      ++netdev_questions_;
      return local.SameHost(on) ? kernels_netdev_ : 0;
    };
  }

  std::unique_ptr<RecordingTransport> recording_;
  int kernels_netdev_ = 2;
  int netdev_questions_ = 0;
};

TEST_F(RoceVlanTest, AReqToAVlansLinkLocalAddressLeavesFromTheVlansEntry) {
  EXPECT_EQ(ReqSourceIndex(LinkLocal("[fe80::2]:7174", 3)), 2);
  EXPECT_EQ(ReqSourceIndex(LinkLocal("[fe80::2]:7175", 2)), 0);
}

// The routing table (DeviceOptions::route_to) of TwoNetdevPort's host:
// 192.168.100.0/24 on eth0.100 (3), 192.168.78.0/24 on eth0 (2) from
// 192.168.78.1, and 10.0.0.0/8 through eth0 from 192.168.100.1;
// 172.16.0.0/12 from 10.9.9.9, an address of no RDMA port.
class RoceTwoNetdevTest : public RoceVlanTest {
 protected:
  void SetUp() override {
    DeviceOptions o = TwoNetdevPort();
    o.route_to = [](const Address& dst) -> absl::optional<DeviceOptions::Route> {
      DeviceOptions::Route r;
      const uint8_t a = dst.ip[12], b = dst.ip[13], c = dst.ip[14];
      if (a == 192 && b == 168 && c == 100) {
        r = {*Address::Parse("192.168.100.1"), 3};
      } else if (a == 192 && b == 168 && c == 78) {
        r = {*Address::Parse("192.168.78.1"), 2};
      } else if (a == 10) {
        r = {*Address::Parse("192.168.100.1"), 2};
      } else if (a == 172) {
        r = {*Address::Parse("10.9.9.9"), 2};
      } else {
        return absl::nullopt;
      }
      return r;
    };
    // The netdev 192.168.100.1 was added to last (the kernel's __ip_dev_find).
    AnswerNetdevOf(o, "192.168.100.1");
    ASSERT_NO_FATAL_FAILURE(Open(/*seed=*/7, o));
  }
};

// An unbound id takes the routing table's source and the route's netdev,
// whose GID entry its REQ leaves from, as the kernel's rdma_resolve_ip
// (bound_dev_if = the route's output interface). Before, the port's first
// IPv4 address and that address's first entry: index 2 (eth0's) for
// 192.168.100.2, and 192.168.100.1 for 192.168.78.2.
TEST_F(RoceTwoNetdevTest, AnUnboundIdTakesTheRoutesSourceAndNetdev) {
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("192.168.100.2:7174")), 4) << "eth0.100's entry";
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("10.1.1.1:7174")), 2) << "eth0's entry";
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("192.168.78.2:7174")), 1) << "the route's source";
  // The route's source is on no RDMA port: the port's first IPv4 address.
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("172.16.0.1:7174")), 2);
}

// A given source is bound as rdma_bind_addr binds it: on the netdev the
// address was added to last (the kernel's __ip_dev_find), not the route's.
// Before, the address's first entry (2, eth0's) whichever it was.
TEST_F(RoceTwoNetdevTest, AGivenSourceIsOnTheNetdevItWasAddedToLast) {
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("192.168.100.2:7174"),
                           *Address::Parse("192.168.100.1")),
            2)
      << "eth0's entry (the route's netdev is eth0.100)";
  kernels_netdev_ = 3;
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("192.168.100.2:7174"),
                           *Address::Parse("192.168.100.1")),
            4)
      << "eth0.100's entry";
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("10.1.1.1:7174"), *Address::Parse("192.168.100.1")), 4)
      << "whatever the route";
  const int asked = netdev_questions_;
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("192.168.78.2:7174"), *Address::Parse("192.168.78.1")),
            1);
  EXPECT_EQ(netdev_questions_, asked) << "an address on one netdev: nothing to ask";
}

// One global IPv6 address on two netdevs: fd00:100::1 on eth0 (2, index 1)
// and on eth0.100 (3, index 3). DeviceOptions::netdev_of is the kernel's
// answer (verbs::NeighbourTable::NetdevOfSource: the first netdev of its
// list that has the address, as rdma_translate_ip's for_each_netdev_rcu).
class RoceTwoNetdevIpv6Test : public RoceVlanTest {
 protected:
  void SetUp() override {
    DeviceOptions o = VlanPort();
    o.roce_gids = {*mad::Gid::Parse("fe80::1"), *mad::Gid::Parse("fd00:100::1"),
                   *mad::Gid::Parse("fe80::1"), *mad::Gid::Parse("fd00:100::1")};
    o.roce_gid_ifindexes = {2, 2, 3, 3};
    o.local_ips = {*Address::Parse("fe80::1"), *Address::Parse("fd00:100::1")};
    AnswerNetdevOf(o, "fd00:100::1");
    ASSERT_NO_FATAL_FAILURE(Open(/*seed=*/7, o));
  }
};

// A given IPv6 source takes the entry of the netdev the kernel names, as
// its rdma_bind_addr (rdma_translate_ip, then cma_acquire_dev_by_src_ip with
// that bound_dev_if). Before, the address's first entry (1, eth0's)
// whichever netdev the kernel named. A link-local source's scope id names
// its netdev (cma_check_linklocal): nothing is asked.
TEST_F(RoceTwoNetdevIpv6Test, AGivenIpv6SourceIsOnTheNetdevTheKernelNames) {
  const Address dst = *Address::Parse("[fd00:100::2]:7174");
  EXPECT_EQ(ReqSourceIndex(dst, *Address::Parse("fd00:100::1")), 1) << "eth0's entry";
  kernels_netdev_ = 3;
  EXPECT_EQ(ReqSourceIndex(dst, *Address::Parse("fd00:100::1")), 3) << "eth0.100's entry";
  EXPECT_EQ(netdev_questions_, 2);
  EXPECT_EQ(ReqSourceIndex(LinkLocal("[fe80::2]:7175", 3), LinkLocal("fe80::1", 3)), 2);
  EXPECT_EQ(ReqSourceIndex(LinkLocal("[fe80::2]:7176", 2), LinkLocal("fe80::1", 2)), 0);
  EXPECT_EQ(netdev_questions_, 2) << "a link-local source: nothing to ask";
}

TEST_F(RoceVlanTest, AReqToAVlansIpv4AddressLeavesFromItsEntry) {
  // Before, index 0 (fe80::, eth0), which the transport's RoceAddressing
  // turned into the first IPv4 GID: eth0's 192.168.78.1, untagged.
  EXPECT_EQ(ReqSourceIndex(*Address::Parse("192.168.100.2:7174"), *Address::Parse("192.168.100.1")),
            3);
}

// The transport of a port whose every MAD comes in on GID entry `index` (the
// kernel's umad reports the entry of the packet's destination GID and VLAN).
class ReceivedOn : public mad::ForwardingTransport {
 public:
  ReceivedOn(mad::Transport& inner, uint8_t index) : ForwardingTransport(inner), index_(index) {}
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) override {
    return ForwardingTransport::Drain(
        [&](const mad::ReceivedMad& r) {
          mad::ReceivedMad on = r;
          on.from.sgid_index = index_;
          sink(on);
        },
        max);
  }

 private:
  uint8_t index_;
};

// The passive side: b has VlanPort's table and every MAD comes in on GID
// entry `on` (ReceivedOn); a, on InfiniBand addressing, connects to b.
class RoceVlanPassiveTest : public ::testing::Test {
 protected:
  RoceVlanPassiveTest() : sched_(11) {}
  void Open(uint8_t on) {
    auto net = testing::OpenTwoHostQp1s(sched_);
    ASSERT_TRUE(net.ok()) << net.status();
    net_ = std::move(*net);
    sim::SimTransport* raw_a = net_.host1.get();
    sim::SimTransport* raw_b = net_.host2.get();
    on_ = std::make_unique<ReceivedOn>(*raw_b, on);
    DeviceOptions oa;
    oa.local_ips = {*Address::Parse("fe80::2"), *Address::Parse("192.168.100.2")};
    auto a = Device::CreateSimulated(sched_, *raw_a, [raw_a] { return raw_a->pending() > 0; }, oa);
    DeviceOptions ob = b_options_;
    ob.route_back_on = route_back_on_;
    auto b = Device::CreateSimulated(sched_, *on_, [raw_b] { return raw_b->pending() > 0; }, ob);
    ASSERT_TRUE(a.ok() && b.ok());
    a_ = std::move(*a);
    b_ = std::move(*b);
    for (const char* ip : {"fe80::1", "192.168.78.1", "192.168.100.1"}) {
      ASSERT_TRUE(a_->AddNeighbor(*Address::Parse(ip), b_->port().gid, b_->port().lid).ok());
    }
    auto cha = a_->CreateEventChannel();
    auto chb = b_->CreateEventChannel();
    ASSERT_TRUE(cha.ok() && chb.ok());
    cha_ = std::move(*cha);
    chb_ = std::move(*chb);
  }
  // b listens on `bind`, a connects to `dst` (a REQ, or with kUdp a SIDR_REQ):
  // the first event on either side (b's CONNECT_REQUEST or a's answer), null
  // when none came.
  Event* ListenAndConnect(const Address& bind, const Address& dst, PortSpace ps = PortSpace::kTcp) {
    absl::StatusOr<Event*> e = testing::ListenAndConnect(sched_, *chb_, *cha_, bind, dst, ps);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : nullptr;
  }

  // b has TwoNetdevPort's table, listens on 192.168.100.1, and the request
  // comes in on eth0.100's entry of it (4): the GID entry of the request's
  // id (-1: no CONNECT_REQUEST).
  int NewIdsEntryOnTwoNetdevs(PortSpace ps) {
    b_options_ = TwoNetdevPort();
    Open(4);
    if (HasFatalFailure()) return -1;
    Event* e = ListenAndConnect(*Address::Parse("192.168.100.1:7174"),
                                *Address::Parse("192.168.100.1:7174"), ps);
    EXPECT_TRUE(e != nullptr && e->event == EventType::kConnectRequest);
    return e != nullptr && e->event == EventType::kConnectRequest ? e->id->SourceGidIndex() : -1;
  }

  // With RouteAsB, a request for 192.168.78.1 from a's 192.168.100.2 that
  // comes in on eth0's entry (1), b listening on `listen`: refused (as
  // ExpectRefused) and counted.
  void ExpectMisrouted(const Address& listen, PortSpace ps, EventType type, int status) {
    RouteAsB();
    ASSERT_NO_FATAL_FAILURE(Open(1));
    ExpectRefused(ListenAndConnect(listen, *Address::Parse("192.168.78.1:7174"), ps), type, status);
    EXPECT_EQ(b_->misrouted_requests(), 1u);
  }

  // b's listener did not take the request: a got `type` with `status`, b nothing.
  void ExpectRefused(Event* e, EventType type, int status) {
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->event, type) << "b's listener took it";
    EXPECT_EQ(e->status, status);
    EXPECT_EQ(chb_->queued(), 0u);
  }

  // b's routing table for DeviceOptions::route_back_on (set before Open):
  // 192.168.100.0/24 on eth0.100 (3), everything else on eth0 (2), and no
  // route of one netdev is taken on the other (the kernel's FIB with an oif).
  // Each question: (local, remote, ifindex).
  void RouteAsB() {
    route_back_on_ = [this](const Address& local, const Address& remote, int ifindex) {
      asked_.push_back({local, remote, ifindex});
      const bool vlan = remote.family == Address::Family::kIpv4 && remote.ip[12] == 192 &&
                        remote.ip[13] == 168 && remote.ip[14] == 100;
      if (ifindex == (vlan ? 3 : 2)) return absl::OkStatus();
      return absl::FailedPreconditionError("the route leaves on the other netdev");
    };
  }
  struct Asked {
    Address local, remote;
    int ifindex;
  };

  sim::Scheduler sched_;
  DeviceOptions b_options_ = VlanPort();  // b's, set before Open
  std::function<absl::Status(const Address&, const Address&, int)> route_back_on_;
  std::vector<Asked> asked_;
  testing::TwoHostQp1s net_;
  std::unique_ptr<ReceivedOn> on_;
  std::unique_ptr<Device> a_, b_;
  std::unique_ptr<EventChannel> cha_, chb_;
};

// A REQ for the VLAN's link-local address that came in on the VLAN's entry
// (index 2) makes an id whose address names eth0.100 (3), so its QP sends
// from that entry too (librdmacm: the id's sin6_scope_id).
TEST_F(RoceVlanPassiveTest, AConnectRequestOnTheVlansEntryIsOnTheVlansInterface) {
  ASSERT_NO_FATAL_FAILURE(Open(2));
  Event* e = ListenAndConnect(LinkLocal("[fe80::1]:7174", 3), LinkLocal("[fe80::1]:7174", 5));
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, EventType::kConnectRequest);
  const Address local = e->id->GetLocalAddr();
  EXPECT_TRUE(local.is_link_local()) << local.ToString();
  EXPECT_EQ(local.scope_id, 3u) << "eth0.100, the netdev of GID entry 2";
}

// The kernel's cma_match_net_dev: a listener bound to fe80::1%eth0 does not
// take a REQ for fe80::1 that came in on eth0.100 (the address is on both);
// ib_cm answers REJ 28 (the rdma_cm handler's error: cm_destroy_id's
// IB_CM_REJ_CONSUMER_DEFINED), and the listener sees nothing. Before, it
// took it (CONNECT_REQUEST on eth0.100).
TEST_F(RoceVlanPassiveTest, AListenerOnTheBaseNetdevRefusesARequestFromItsVlan) {
  ASSERT_NO_FATAL_FAILURE(Open(2));
  ExpectRefused(ListenAndConnect(LinkLocal("[fe80::1]:7174", 2), LinkLocal("[fe80::1]:7174", 5)),
                EventType::kRejected, 28);
}

// A wildcard listener is bound to no netdev (bound_dev_if 0): it takes a
// link-local request from any, on the netdev it came in on.
TEST_F(RoceVlanPassiveTest, AWildcardListenerTakesALinkLocalRequestFromAnyNetdev) {
  ASSERT_NO_FATAL_FAILURE(Open(2));
  Event* e = ListenAndConnect(*Address::Parse("[::]:7174"), LinkLocal("[fe80::1]:7174", 5));
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, EventType::kConnectRequest);
  EXPECT_EQ(e->id->GetLocalAddr().scope_id, 3u);
}

// Only a link-local destination is held to the netdev (cma_is_req_ipv6_ll):
// a listener on eth0's IPv4 address takes a request for it whichever entry
// it came in on (here eth0.100's IPv4 entry, 3).
TEST_F(RoceVlanPassiveTest, AListenerOnAGlobalAddressTakesItFromAnyNetdev) {
  ASSERT_NO_FATAL_FAILURE(Open(3));
  Event* e = ListenAndConnect(*Address::Parse("192.168.78.1:7174"),
                              *Address::Parse("192.168.78.1:7174"));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, EventType::kConnectRequest);
}

// SIDR as a REQ (the kernel's cma_ib_req_handler runs cma_find_listener for
// both): a UDP listener bound to fe80::1%eth0 does not take a SIDR_REQ that
// came in on eth0.100; ib_cm answers IB_SIDR_REJECT (status 2), which the
// active side gets as UNREACHABLE. Before, the listener took it.
TEST_F(RoceVlanPassiveTest, AUdpListenerOnTheBaseNetdevRefusesASidrRequestFromItsVlan) {
  ASSERT_NO_FATAL_FAILURE(Open(2));
  ExpectRefused(ListenAndConnect(LinkLocal("[fe80::1]:7174", 2), LinkLocal("[fe80::1]:7174", 5),
                                 PortSpace::kUdp),
                EventType::kUnreachable, 2);
}

// ... and a SIDR_REQ that came in on the VLAN's entry makes an id on the
// VLAN's netdev, as a REQ does.
TEST_F(RoceVlanPassiveTest, ASidrRequestOnTheVlansEntryIsOnTheVlansInterface) {
  ASSERT_NO_FATAL_FAILURE(Open(2));
  Event* e = ListenAndConnect(LinkLocal("[fe80::1]:7174", 3), LinkLocal("[fe80::1]:7174", 5),
                              PortSpace::kUdp);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, EventType::kConnectRequest);
  EXPECT_EQ(e->id->GetLocalAddr().scope_id, 3u) << "eth0.100, the netdev of GID entry 2";
}

// A SIDR_REQ for an address of b that no listener on the port number is
// bound to is refused (status 2), as a REQ gets REJ 28. Before, the first
// listener on the port number took it, with the other address as its own.
TEST_F(RoceVlanPassiveTest, ASidrRequestForAnAddressNoListenerIsBoundToIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Open(1));
  Event* e = ListenAndConnect(*Address::Parse("192.168.100.1:7174"),
                              *Address::Parse("192.168.78.1:7174"), PortSpace::kUdp);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, EventType::kUnreachable) << "the listener on 192.168.100.1 took it";
  EXPECT_EQ(e->status, 2);
}

// The kernel's validate_net_dev: a (here wildcard) listener does not get a
// REQ that came in on eth0's entry (1) from 192.168.100.2, which b routes on
// eth0.100 only: REJ 28, nothing for the listener, counted. b asked for the
// route back to the source from the destination, on the entry's netdev.
// Before, the listener took it.
TEST_F(RoceVlanPassiveTest, AReqWhoseRouteBackLeavesOnAnotherNetdevIsRefused) {
  ASSERT_NO_FATAL_FAILURE(
      ExpectMisrouted(*Address::Parse("0.0.0.0:7174"), PortSpace::kTcp, EventType::kRejected, 28));
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_TRUE(asked_[0].local.SameHost(*Address::Parse("192.168.78.1")))
      << asked_[0].local.ToString();
  EXPECT_TRUE(asked_[0].remote.SameHost(*Address::Parse("192.168.100.2")))
      << asked_[0].remote.ToString();
  EXPECT_EQ(asked_[0].ifindex, 2) << "eth0, the netdev of GID entry 1";
}

// ... and one that came in on the VLAN's entry (3), where the route back
// leaves, is the listener's.
TEST_F(RoceVlanPassiveTest, AReqWhoseRouteBackLeavesOnItsNetdevIsTaken) {
  RouteAsB();
  ASSERT_NO_FATAL_FAILURE(Open(3));
  Event* e = ListenAndConnect(*Address::Parse("0.0.0.0:7174"),
                              *Address::Parse("192.168.100.1:7174"));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, EventType::kConnectRequest);
  EXPECT_EQ(b_->misrouted_requests(), 0u);
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0].ifindex, 3);
}

// SIDR as a REQ (cma_ib_req_handler runs validate_net_dev for both): status 2.
TEST_F(RoceVlanPassiveTest, ASidrRequestWhoseRouteBackLeavesOnAnotherNetdevIsRefused) {
  ExpectMisrouted(*Address::Parse("192.168.78.1:7174"), PortSpace::kUdp, EventType::kUnreachable,
                  2);
}

// One global address on two netdevs: the id of a REQ that came in on the
// VLAN's entry of 192.168.100.1 (4) sends from it, as the kernel's new id
// takes the request's netdev (bound_dev_if) and its GID entry. Before, the
// address's first entry (2, eth0's: untagged).
TEST_F(RoceVlanPassiveTest, AConnectRequestsIdSendsFromTheEntryItCameInOn) {
  EXPECT_EQ(NewIdsEntryOnTwoNetdevs(PortSpace::kTcp), 4);
}

// ... and a SIDR_REQ's id.
TEST_F(RoceVlanPassiveTest, ASidrRequestsIdSendsFromTheEntryItCameInOn) {
  EXPECT_EQ(NewIdsEntryOnTwoNetdevs(PortSpace::kUdp), 4);
}

// A table that cannot be asked (no netlink socket) refuses nothing.
TEST_F(RoceVlanPassiveTest, ARouteThatCannotBeAskedRefusesNothing) {
  route_back_on_ = [](const Address&, const Address&, int) {
    return absl::UnavailableError("netlink: cannot open NETLINK_ROUTE");
  };
  ASSERT_NO_FATAL_FAILURE(Open(1));
  Event* e = ListenAndConnect(*Address::Parse("0.0.0.0:7174"),
                              *Address::Parse("192.168.78.1:7174"));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, EventType::kConnectRequest);
  EXPECT_EQ(b_->misrouted_requests(), 0u);
}

}  // namespace
}  // namespace uscm
