// RoCE address and route resolution without ARP or SA (DeviceOptions::roce):
// the destination's GID is its IP, the path comes from the two IPs.
#include <memory>

#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/one_device_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm {
namespace {

class RoceResolveTest : public testing::OneDeviceTest {
 protected:
  void SetUp() override {
    DeviceOptions o;
    o.roce = true;
    o.roce_path_mtu = 3;  // 1024: a 1500-byte Ethernet MTU
    // As rxe's GID table lists them: the link-local address first (GID 0).
    o.local_ips = {*Address::Parse("fe80::1"), *Address::Parse("192.168.78.1"),
                   *Address::Parse("fd00::1")};
    ASSERT_NO_FATAL_FAILURE(Open(/*seed=*/5, o));
  }
};

TEST_F(RoceResolveTest, Ipv4PathFromTheAddressesWithoutSa) {
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  IdOptions o = id->options();
  o.tos = 0x20;
  ASSERT_TRUE(id->SetOption(o).ok());
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("192.168.78.2:7174")).ok());
  Next(EventType::kAddrResolved);
  EXPECT_EQ(id->GetPeerAddr().gid.ToString(), "::ffff:192.168.78.2");
  EXPECT_EQ(id->GetPeerAddr().lid, 0xFFFF);
  EXPECT_EQ(id->GetLocalAddr().ToString().rfind("192.168.78.1:", 0), 0u);
  ASSERT_TRUE(id->ResolveRoute().ok());
  Next(EventType::kRouteResolved);
  ASSERT_TRUE(id->route().has_value());
  const cm::PathInfo p = *id->route();
  EXPECT_EQ(p.local_gid.ToString(), "::ffff:192.168.78.1");
  EXPECT_EQ(p.remote_gid.ToString(), "::ffff:192.168.78.2");
  EXPECT_EQ(p.local_lid, 0xFFFF);
  EXPECT_EQ(p.remote_lid, 0xFFFF);
  EXPECT_EQ(p.hop_limit, 64);
  EXPECT_EQ(p.traffic_class, 0x20);
  EXPECT_EQ(p.mtu, 3);
  EXPECT_EQ(p.local_ack_timeout, 19);
  const uint32_t source_port = id->GetLocalAddr().port;
  EXPECT_NE(source_port, 0u);
  EXPECT_EQ(p.flow_label, (source_port * 31 + 7174) & 0xFFFFF)
      << "the kernel's cma_get_roce_udp_flow_label (0 before: the passive side's AV differed)";
  EXPECT_EQ(f_->sa().counters().requests, 0u) << "no SA on RoCE";
  ASSERT_TRUE(ch_->DestroyId(id).ok());
}

// The figure the kernel's rdma_cm set in 68-dropin-fio (pyverbs, kernel
// client from port 38157 to 7481): its REQ's flow label, 141772.
TEST(RoceFlowLabelTest, AsTheKernelsFromThePorts) {
  EXPECT_EQ(RoceFlowLabel(38157, 7481), 141772u);
  EXPECT_EQ(RoceFlowLabel(65535, 65535), (65535u * 32) & 0xFFFFF) << "20 bits";
}

TEST_F(RoceResolveTest, Ipv6GidIsTheAddress) {
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("[fd00::2]:7174")).ok());
  Next(EventType::kAddrResolved);
  EXPECT_EQ(id->GetPeerAddr().gid.ToString(), "fd00::2");
  ASSERT_TRUE(id->ResolveRoute().ok());
  Next(EventType::kRouteResolved);
  EXPECT_EQ(id->route()->local_gid.ToString(), "fd00::1");
  ASSERT_TRUE(ch_->DestroyId(id).ok());
}

// A link-local address with its interface, as getaddrinfo("fe80::2%eth0")
// gives it (sin6_scope_id).
Address LinkLocal(const char* text, uint32_t scope_id) {
  Address a = *Address::Parse(text);
  a.scope_id = scope_id;
  return a;
}

TEST_F(RoceResolveTest, ALinkLocalDestinationIsReachedFromTheLinkLocalAddress) {
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, LinkLocal("[fe80::2]:7174", 3)).ok());
  Next(EventType::kAddrResolved);
  const Address local = id->GetLocalAddr();
  EXPECT_TRUE(local.is_link_local()) << local.ToString();
  EXPECT_EQ(local.scope_id, 3u) << "the destination's interface, as the kernel's cma_bind_addr";
  EXPECT_EQ(id->GetPeerAddr().gid.ToString(), "fe80::2");
  ASSERT_TRUE(id->ResolveRoute().ok());
  Next(EventType::kRouteResolved);
  EXPECT_EQ(id->route()->local_gid.ToString(), "fe80::1");
  EXPECT_EQ(id->route()->hop_limit, 1);
  ASSERT_TRUE(ch_->DestroyId(id).ok());
}

TEST_F(RoceResolveTest, AGlobalDestinationIsNotReachedFromTheLinkLocalAddress) {
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("[fd00::9]:7174")).ok());
  Next(EventType::kAddrResolved);
  EXPECT_EQ(id->GetLocalAddr().ToString().rfind("[fd00::1]:", 0), 0u)
      << id->GetLocalAddr().ToString();
  ASSERT_TRUE(ch_->DestroyId(id).ok());
}

TEST_F(RoceResolveTest, ALinkLocalBindNamesItsInterface) {
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  absl::Status no_scope = id->BindAddr(*Address::Parse("[fe80::1]:7174"));
  EXPECT_EQ(no_scope.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_scope.message()), ::testing::HasSubstr("names no interface"))
      << "the kernel's cma_check_linklocal: EINVAL";
  ASSERT_TRUE(id->BindAddr(LinkLocal("[fe80::1]:7174", 3)).ok());
  EXPECT_EQ(id->GetLocalAddr().scope_id, 3u);
  EXPECT_EQ(id->GetLocalAddr().ToString(), "[fe80::1%3]:7174");
  CmId* other = *ch_->CreateId(nullptr, PortSpace::kTcp);
  EXPECT_THAT(std::string(other->BindAddr(LinkLocal("[fe80::7]:7175", 3)).message()),
              ::testing::HasSubstr("is not an address of"));
  ASSERT_TRUE(ch_->DestroyId(other).ok());
  ASSERT_TRUE(ch_->DestroyId(id).ok());
}

// The kernel's cma_get_roce_udp_flow_label: an IPv6 source's sin6_flowinfo,
// its 20 bits, when not 0, instead of the ports' hash.
TEST_F(RoceResolveTest, AnIpv6SourcesFlowInfoIsTheFlowLabel) {
  CmId* id = *ch_->CreateId(nullptr, PortSpace::kTcp);
  Address here = *Address::Parse("[fd00::1]:0");
  here.flowinfo = 0x123456;  // beyond 20 bits: the kernel masks it
  ASSERT_TRUE(id->BindAddr(here).ok());
  ASSERT_TRUE(id->ResolveAddr(absl::nullopt, *Address::Parse("[fd00::2]:7174")).ok());
  Next(EventType::kAddrResolved);
  ASSERT_TRUE(id->ResolveRoute().ok());
  Next(EventType::kRouteResolved);
  EXPECT_EQ(id->route()->flow_label, 0x23456u);
  ASSERT_TRUE(ch_->DestroyId(id).ok());
}

TEST(RoceFlowLabelTest, AZeroFlowInfoLeavesThePortsHash) {
  Address local = *Address::Parse("[fd00::1]:38157");
  EXPECT_EQ(RoceFlowLabel(local, *Address::Parse("[fd00::2]:7481")), 141772u);
  local.flowinfo = 0x100000;  // only bits above the label's 20
  EXPECT_EQ(RoceFlowLabel(local, *Address::Parse("[fd00::2]:7481")), 141772u);
}

TEST(RocePathTest, LinkLocalIpv6StaysOnTheLink) {
  cm::PathInfo p = RocePath(*Address::Parse("fe80::1"), *Address::Parse("fe80::2"), 9, 0);
  EXPECT_EQ(p.hop_limit, 1);
  EXPECT_EQ(p.mtu, 3) << "an MTU that is no IBA enum becomes 1024";
}

}  // namespace
}  // namespace uscm
