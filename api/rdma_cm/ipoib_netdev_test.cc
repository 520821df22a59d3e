// The kernel's validate_net_dev on InfiniBand (cma_ib_id_from_event ->
// cma_get_net_dev -> ipoib_get_net_dev_by_params, then validate_net_dev): a
// request with an IP header is taken only when an IPoIB netdev of the port
// is its (P_Key, destination; DeviceOptions::ipoib_netdev_of), up, and the
// route back to its source leaves on it (DeviceOptions::route_back_on).
// Two simulated InfiniBand hosts: a connects to b, whose two hooks are fakes.
#include <functional>
#include <memory>
#include <vector>

#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"
#include "mad/sim/scheduler.h"

namespace uscm {
namespace {

class IpoibNetdevTest : public ::testing::Test {
 protected:
  IpoibNetdevTest() : sched_(13) {}
  // b's IPoIB netdev of every request is `netdev` (ifindex, 0: none, -1: no
  // IPoIB netdev), and its route back leaves on ifindex `routes_on` alone.
  void Open(int netdev, int routes_on = 9) {
    auto net = testing::OpenTwoHostQp1s(sched_);
    ASSERT_TRUE(net.ok()) << net.status();
    net_ = std::move(*net);
    sim::SimTransport* raw_a = net_.host1.get();
    sim::SimTransport* raw_b = net_.host2.get();
    DeviceOptions oa;
    oa.local_ips = {*Address::Parse("192.168.78.2")};
    DeviceOptions ob;
    ob.local_ips = {*Address::Parse("192.168.78.1")};
    ob.ipoib_netdev_of = [this, netdev](uint16_t pkey, const Address& local) {
      netdev_asked_.push_back({pkey, local});
      return netdev;
    };
    ob.route_back_on = [this, routes_on](const Address& local, const Address& remote,
                                         int ifindex) {
      route_asked_.push_back({local, remote, ifindex});
      return ifindex == routes_on ? absl::OkStatus()
                                  : absl::FailedPreconditionError("leaves on another netdev");
    };
    auto a = Device::CreateSimulated(sched_, *raw_a, [raw_a] { return raw_a->pending() > 0; }, oa);
    auto b = Device::CreateSimulated(sched_, *raw_b, [raw_b] { return raw_b->pending() > 0; }, ob);
    ASSERT_TRUE(a.ok() && b.ok());
    a_ = std::move(*a);
    b_ = std::move(*b);
    ASSERT_TRUE(
        a_->AddNeighbor(*Address::Parse("192.168.78.1"), b_->port().gid, b_->port().lid).ok());
    auto cha = a_->CreateEventChannel();
    auto chb = b_->CreateEventChannel();
    ASSERT_TRUE(cha.ok() && chb.ok());
    cha_ = std::move(*cha);
    chb_ = std::move(*chb);
  }
  // b listens on `bind`, a connects to 192.168.78.1:7180 (kUdp: a SIDR_REQ):
  // the first event on either side.
  Event* ListenAndConnect(const char* bind, PortSpace ps = PortSpace::kTcp) {
    absl::StatusOr<Event*> e = testing::ListenAndConnect(
        sched_, *chb_, *cha_, *Address::Parse(bind), *Address::Parse("192.168.78.1:7180"), ps);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : nullptr;
  }
  // b's listener did not take the request: a got `type` with `status`, b
  // nothing, and b counted it.
  void ExpectRefused(Event* e, EventType type, int status) {
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->event, type) << "b's listener took it";
    EXPECT_EQ(e->status, status);
    EXPECT_EQ(chb_->queued(), 0u);
    EXPECT_EQ(b_->misrouted_requests(), 1u);
  }

  struct NetdevAsked {
    uint16_t pkey;
    Address local;
  };
  struct RouteAsked {
    Address local, remote;
    int ifindex;
  };

  sim::Scheduler sched_;
  std::vector<NetdevAsked> netdev_asked_;
  std::vector<RouteAsked> route_asked_;
  testing::TwoHostQp1s net_;
  std::unique_ptr<Device> a_, b_;
  std::unique_ptr<EventChannel> cha_, chb_;
};

// The request's IPoIB netdev (of its P_Key and destination) is asked, and
// the route back is asked on it: the listener takes the request.
TEST_F(IpoibNetdevTest, ARequestOnItsNetdevThatRoutesBackIsTaken) {
  ASSERT_NO_FATAL_FAILURE(Open(9));
  Event* e = ListenAndConnect("0.0.0.0:7180");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, EventType::kConnectRequest);
  ASSERT_EQ(netdev_asked_.size(), 1u);
  EXPECT_EQ(netdev_asked_[0].pkey & 0x7fff, 0x7fff) << "the default partition's";
  EXPECT_EQ(netdev_asked_[0].local.ToString(), "192.168.78.1:7180");
  ASSERT_EQ(route_asked_.size(), 1u);
  EXPECT_EQ(route_asked_[0].ifindex, 9);
  EXPECT_EQ(route_asked_[0].remote.ToString().rfind("192.168.78.2", 0), 0u)
      << route_asked_[0].remote.ToString();
  EXPECT_EQ(b_->misrouted_requests(), 0u);
}

// No IPoIB netdev of the port is the request's (or it is down): REJ 28
// before any listener is looked for, the route not asked (cma_get_net_dev's
// -ENODEV, the IFF_UP check's -EHOSTUNREACH).
TEST_F(IpoibNetdevTest, ARequestOfNoNetdevIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Open(0));
  ExpectRefused(ListenAndConnect("0.0.0.0:7180"), EventType::kRejected, 28);
  EXPECT_TRUE(route_asked_.empty());
}

// ... a SIDR_REQ: SIDR_REP status 2 (IB_SIDR_REJECT).
TEST_F(IpoibNetdevTest, ASidrRequestOfNoNetdevIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Open(0));
  ExpectRefused(ListenAndConnect("192.168.78.1:7180", PortSpace::kUdp), EventType::kUnreachable,
                2);
}

// Its netdev, but the route back to the source leaves on another one
// (validate_net_dev): refused.
TEST_F(IpoibNetdevTest, ARequestWhoseRouteBackLeavesOnAnotherNetdevIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Open(5, 9));
  ExpectRefused(ListenAndConnect("192.168.78.1:7180"), EventType::kRejected, 28);
  ASSERT_EQ(route_asked_.size(), 1u);
  EXPECT_EQ(route_asked_[0].ifindex, 5);
}

// A port with no IPoIB netdev at all (a simulated one): not checked.
TEST_F(IpoibNetdevTest, APortWithNoIpoibNetdevChecksNothing) {
  ASSERT_NO_FATAL_FAILURE(Open(-1));
  Event* e = ListenAndConnect("0.0.0.0:7180");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, EventType::kConnectRequest);
  EXPECT_TRUE(route_asked_.empty());
  EXPECT_EQ(b_->misrouted_requests(), 0u);
}

}  // namespace
}  // namespace uscm
