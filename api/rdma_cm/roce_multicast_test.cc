// Multicast on a RoCE port without SA (api/rdma_cm/roce_multicast.h): the MGID and AH
// the kernel's rdma_cm derives, the netdev's IP membership (a fake netdev
// here), the QP attach, and leave / destroy undoing both.
#include "api/rdma_cm/roce_multicast.h"

#include <memory>
#include <vector>

#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/one_device_fixture.h"
#include "gtest/gtest.h"

namespace uscm {
namespace {

std::array<uint8_t, 16> Ip(const char* text) { return Address::Parse(text)->ip; }
mad::Gid G(const char* text) { return *mad::Gid::Parse(text); }

TEST(RoceMgidTest, Ipv4IsMappedOnV2AndFf0eOnV1) {
  EXPECT_EQ(cm::RoceMgid(true, Ip("239.1.2.3"), true)->ToString(), "::ffff:239.1.2.3");
  EXPECT_EQ(cm::RoceMgid(true, Ip("239.1.2.3"), false)->ToString(), "ff0e::ffff:ef01:203");
}

TEST(RoceMgidTest, Ipv6IsTheAddressOnV1AndRefusedOnV2) {
  EXPECT_EQ(cm::RoceMgid(false, Ip("ff0e::1:2"), false)->ToString(), "ff0e::1:2");
  EXPECT_EQ(cm::RoceMgid(false, Ip("ff0e::1:2"), true).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(RoceMgidTest, ZeroAddressIsRefused) {
  EXPECT_EQ(cm::RoceMgid(true, Ip("0.0.0.0"), true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cm::RoceMgid(false, Ip("::"), false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A netdev that records its IP group memberships.
class FakeNetdev final : public cm::IpMulticast {
 public:
  struct Entry : cm::IpMembership {
    Entry(FakeNetdev* n, std::array<uint8_t, 16> g) : netdev(n), group(g) { ++netdev->live; }
    ~Entry() override { --netdev->live; }
    FakeNetdev* netdev;
    std::array<uint8_t, 16> group;
  };
  absl::StatusOr<std::unique_ptr<cm::IpMembership>> Join(
      bool ipv4, const std::array<uint8_t, 16>& group,
      const std::array<uint8_t, 16>& local) override {
    if (fail) return absl::UnavailableError("cannot join IP group on the port's netdev");
    joins.push_back({group, local});
    return std::unique_ptr<cm::IpMembership>(new Entry(this, group));
  }
  std::vector<std::pair<std::array<uint8_t, 16>, std::array<uint8_t, 16>>> joins;
  int live = 0;
  bool fail = false;
};

class FakeUdQp final : public QpTransitioner {
 public:
  uint32_t qp_num() const override { return 0x42; }
  absl::Status Modify(const cm::QpAttributes&) override { return absl::OkStatus(); }
  absl::Status ToError() override { return absl::OkStatus(); }
  absl::Status AttachMulticast(const mad::Gid& mgid, uint16_t mlid) override {
    attached.push_back(mgid);
    return attach_error;
  }
  absl::Status DetachMulticast(const mad::Gid& mgid, uint16_t mlid) override {
    detached.push_back(mgid);
    return absl::OkStatus();
  }
  std::vector<mad::Gid> attached, detached;
  absl::Status attach_error;
};

class RoceMulticastTest : public testing::OneDeviceTest {
 protected:
  void SetUp() override {
    DeviceOptions o;
    o.roce = true;
    o.local_ips = {*Address::Parse("192.168.78.2"), *Address::Parse("fd00::2")};
    // As rxe on a virtio NIC: fe80 GID, then the IPv4 GID, then the IPv6 one.
    o.roce_gids = {G("fe80::1"), G("::ffff:192.168.78.2"), G("fd00::2")};
    o.ip_multicast = netdev_;
    ASSERT_NO_FATAL_FAILURE(Open(/*seed=*/7, o));
    id_ = *ch_->CreateId(nullptr, PortSpace::kUdp);
    ASSERT_TRUE(id_->BindAddr(*Address::Parse("192.168.78.2")).ok());
  }

  std::shared_ptr<FakeNetdev> netdev_ = std::make_shared<FakeNetdev>();
  FakeUdQp qp_;
  CmId* id_ = nullptr;
};

TEST_F(RoceMulticastTest, FullMemberJoinsTheIpGroupAttachesAndAddressesTheGroup) {
  ASSERT_TRUE(id_->SetQp(&qp_).ok());
  int ctx = 0;
  ASSERT_TRUE(id_->JoinMulticast(*Address::Parse("239.1.2.3"), &ctx).ok());
  const Event e = Next(EventType::kMulticastJoin);
  EXPECT_EQ(e.status, 0);
  EXPECT_EQ(e.mc_context, &ctx);
  const AhAttr& a = e.ud.ah_attr;
  EXPECT_TRUE(a.is_global);
  EXPECT_EQ(a.dgid.ToString(), "::ffff:239.1.2.3");
  EXPECT_EQ(a.hop_limit, 64);
  EXPECT_EQ(a.sgid_index, 1) << "the GID of the id's own address";
  EXPECT_EQ(a.static_rate, 0) << "IB_RATE_PORT_CURRENT";
  EXPECT_EQ(a.dlid, 0);
  EXPECT_EQ(a.sl, 0);
  EXPECT_EQ(a.flow_label, 0u);
  EXPECT_EQ(a.traffic_class, 0);
  EXPECT_EQ(e.ud.qp_num, 0xFFFFFFu);
  EXPECT_EQ(e.ud.qkey, 0x01234567u);
  ASSERT_EQ(netdev_->joins.size(), 1u);
  EXPECT_EQ(netdev_->joins[0].first, Ip("239.1.2.3"));
  EXPECT_EQ(netdev_->joins[0].second, Ip("192.168.78.2")) << "on the netdev of the id's address";
  EXPECT_EQ(netdev_->live, 1);
  ASSERT_EQ(qp_.attached.size(), 1u);
  EXPECT_EQ(qp_.attached[0].ToString(), "::ffff:239.1.2.3");
  EXPECT_EQ(f_->sa().counters().requests, 0u) << "no SA on RoCE";

  ASSERT_TRUE(id_->LeaveMulticast(*Address::Parse("239.1.2.3")).ok());
  EXPECT_EQ(netdev_->live, 0) << "leave drops the IP membership";
  ASSERT_EQ(qp_.detached.size(), 1u);
  EXPECT_EQ(qp_.detached[0].ToString(), "::ffff:239.1.2.3");
  EXPECT_EQ(ch_->queued(), 0u) << "no event for a leave";
}

TEST_F(RoceMulticastTest, SendOnlyTakesNoIpMembershipAndNoAttach) {
  ASSERT_TRUE(id_->SetQp(&qp_).ok());
  ASSERT_TRUE(
      id_->JoinMulticastEx(*Address::Parse("239.1.2.4"), nullptr, McJoinFlags::kSendOnlyFullMember)
          .ok());
  const Event e = Next(EventType::kMulticastJoin);
  EXPECT_EQ(e.ud.ah_attr.dgid.ToString(), "::ffff:239.1.2.4");
  EXPECT_TRUE(netdev_->joins.empty());
  EXPECT_TRUE(qp_.attached.empty());
  ASSERT_TRUE(id_->LeaveMulticast(*Address::Parse("239.1.2.4")).ok());
  EXPECT_TRUE(qp_.detached.empty());
}

TEST_F(RoceMulticastTest, DestroyingTheIdLeavesAndDetaches) {
  ASSERT_TRUE(id_->SetQp(&qp_).ok());
  ASSERT_TRUE(id_->JoinMulticast(*Address::Parse("239.1.2.3"), nullptr).ok());
  Next(EventType::kMulticastJoin);
  ASSERT_EQ(netdev_->live, 1);
  ASSERT_TRUE(ch_->DestroyId(id_).ok());
  EXPECT_EQ(netdev_->live, 0);
  EXPECT_EQ(qp_.detached.size(), 1u);
}

TEST_F(RoceMulticastTest, Ipv6GroupOnRoceV2IsNotSupportedAsTheKernel) {
  CmId* id6 = *ch_->CreateId(nullptr, PortSpace::kUdp);
  ASSERT_TRUE(id6->BindAddr(*Address::Parse("fd00::2")).ok());
  absl::Status s = id6->JoinMulticast(*Address::Parse("ff0e::1"), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_EQ(ch_->queued(), 0u);
  EXPECT_TRUE(netdev_->joins.empty());
}

TEST_F(RoceMulticastTest, NetdevRefusalFailsTheCallWithoutEvent) {
  netdev_->fail = true;
  absl::Status s = id_->JoinMulticast(*Address::Parse("239.1.2.3"), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(ch_->queued(), 0u);
  // Nothing is left joined: the same group can be joined once the netdev agrees.
  netdev_->fail = false;
  ASSERT_TRUE(id_->JoinMulticast(*Address::Parse("239.1.2.3"), nullptr).ok());
  Next(EventType::kMulticastJoin);
}

TEST_F(RoceMulticastTest, AttachFailureIsMulticastErrorAsLibrdmacm) {
  qp_.attach_error = absl::InternalError("ibv_attach_mcast: EINVAL");
  ASSERT_TRUE(id_->SetQp(&qp_).ok());
  ASSERT_TRUE(id_->JoinMulticast(*Address::Parse("239.1.2.3"), nullptr).ok());
  const Event e = Next(EventType::kMulticastError);
  EXPECT_EQ(e.status, -1);
  ASSERT_TRUE(id_->LeaveMulticast(*Address::Parse("239.1.2.3")).ok());
  EXPECT_TRUE(qp_.detached.empty()) << "never attached";
  EXPECT_EQ(netdev_->live, 0);
}

}  // namespace
}  // namespace uscm
