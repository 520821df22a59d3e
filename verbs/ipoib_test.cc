#include "verbs/ipoib.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::verbs {
namespace {

using ::testing::ElementsAre;

constexpr char kIbHw[] = "00:00:10:49:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c3";

TEST(IpoibTest, GidOfTheHardwareAddress) {
  absl::optional<mad::Gid> g = GidOfIpoibHwAddr(std::string(kIbHw) + "\n");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->ToString(), "fe80::2:c903:a1:b2c3");
  EXPECT_FALSE(GidOfIpoibHwAddr("52:54:00:12:34:56").has_value()) << "an Ethernet MAC";
  EXPECT_FALSE(GidOfIpoibHwAddr("00:00:10:49:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:zz"));
  EXPECT_FALSE(GidOfIpoibHwAddr(""));
}

TEST(IpoibTest, GidOfTheHardwareAddressBytes) {
  std::vector<uint8_t> hw = {0x00, 0x00, 0x10, 0x49, 0xfe, 0x80, 0, 0, 0, 0,
                             0,    0,    0,    0x02, 0xc9, 0x03, 0, 0xa1, 0xb2, 0xc3};
  absl::optional<mad::Gid> g = GidOfIpoibLladdr(hw);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->ToString(), "fe80::2:c903:a1:b2c3");
  EXPECT_FALSE(GidOfIpoibLladdr(std::vector<uint8_t>(6, 0x52)).has_value()) << "an Ethernet MAC";
  EXPECT_FALSE(GidOfIpoibLladdr({}).has_value());
}

// A fake sysfs: ib0 on the port kIbHw names, ib1 on another, eth0 Ethernet.
std::string FakeSysfs() {
  const std::string root = std::string(getenv("TEST_TMPDIR")) + "/sys";
  for (const char* dir : {"", "/class", "/class/net", "/class/net/ib0", "/class/net/ib1",
                          "/class/net/eth0"}) {
    mkdir((root + dir).c_str(), 0755);
  }
  std::ofstream(root + "/class/net/ib0/address") << kIbHw << "\n";
  std::ofstream(root + "/class/net/ib1/address")
      << "00:00:10:49:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c4\n";
  std::ofstream(root + "/class/net/eth0/address") << "52:54:00:12:34:56\n";
  return root;
}

TEST(IpoibTest, InterfacesOfAPortFromSysfs) {
  const std::string root = FakeSysfs();
  absl::optional<mad::Gid> port = GidOfIpoibHwAddr(kIbHw);
  ASSERT_TRUE(port.has_value());
  EXPECT_THAT(IpoibInterfacesOf(*port, root), ElementsAre("ib0"));
  EXPECT_TRUE(IpoibInterfacesOf(*port, root + "/nowhere").empty());
}

int g_asked = 0;
std::vector<InterfaceAddress> FakeHostAddresses() {
  ++g_asked;
  auto at = [](const char* name, uint8_t last, bool ipv6) {
    InterfaceAddress a;
    a.interface = name;
    a.ipv6 = ipv6;
    a.ip[15] = last;
    return a;
  };
  return {at("eth0", 1, false), at("ib0", 2, false), at("ib1", 3, false), at("ib0", 4, true)};
}

TEST(IpoibTest, AddressesOfAPortAreItsInterfaces) {
  const std::string root = FakeSysfs();
  absl::optional<mad::Gid> port = GidOfIpoibHwAddr(kIbHw);
  ASSERT_TRUE(port.has_value());
  g_asked = 0;
  std::vector<InterfaceAddress> got = IpoibAddressesOf(*port, root, FakeHostAddresses);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].interface, "ib0");
  EXPECT_EQ(got[0].ip[15], 2);
  EXPECT_FALSE(got[0].ipv6);
  EXPECT_EQ(got[1].ip[15], 4);
  EXPECT_TRUE(got[1].ipv6);
  EXPECT_EQ(g_asked, 1);
  mad::Gid other;
  other.raw[0] = 0xfe;
  EXPECT_TRUE(IpoibAddressesOf(other, root, FakeHostAddresses).empty());
  EXPECT_EQ(g_asked, 1) << "no IPoIB interface of the port: the host's addresses not asked";
}

// ib0 (P_Key 0xffff, up), its child ib0.8001 (0x8001, up), ib0.0001
// (0x0001: a limited member of 0x8001's partition, down) on the port, ib1
// on another port (a sysfs of its own: FakeSysfs's tests see ib0 alone).
std::string FakeSysfsWithPkeys() {
  const std::string root = std::string(getenv("TEST_TMPDIR")) + "/sys-pkeys";
  for (const char* dir : {"", "/class", "/class/net"}) mkdir((root + dir).c_str(), 0755);
  auto netdev = [&](const char* name, const char* hw, const char* index, const char* pkey,
                    const char* flags) {
    mkdir((root + "/class/net/" + name).c_str(), 0755);
    const std::string dir = root + "/class/net/" + name + "/";
    std::ofstream(dir + "address") << hw << "\n";
    std::ofstream(dir + "ifindex") << index << "\n";
    std::ofstream(dir + "pkey") << pkey << "\n";
    std::ofstream(dir + "flags") << flags << "\n";
  };
  netdev("ib0", kIbHw, "4", "0xffff", "0x1003");
  netdev("ib0.8001", "00:00:10:4a:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c3", "5",
         "0x8001", "0x1003");
  netdev("ib0.0001", "00:00:10:4b:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c3", "6",
         "0x0001", "0x1002");
  netdev("ib1", "00:00:10:49:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c4", "7", "0xffff",
         "0x1003");
  return root;
}

TEST(IpoibTest, NetdevsOfAPortFromSysfs) {
  const std::string root = FakeSysfsWithPkeys();
  absl::optional<mad::Gid> port = GidOfIpoibHwAddr(kIbHw);
  ASSERT_TRUE(port.has_value());
  std::vector<IpoibNetdev> got = IpoibNetdevsOf(*port, root);
  std::sort(got.begin(), got.end(),
            [](const IpoibNetdev& a, const IpoibNetdev& b) { return a.ifindex < b.ifindex; });
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].name, "ib0");
  EXPECT_EQ(got[0].pkey, 0xffff);
  EXPECT_TRUE(got[0].up);
  EXPECT_EQ(got[1].name, "ib0.8001");
  EXPECT_EQ(got[1].ifindex, 5);
  EXPECT_EQ(got[1].pkey, 0x8001);
  EXPECT_EQ(got[2].name, "ib0.0001");
  EXPECT_FALSE(got[2].up);
  std::ofstream(root + "/class/net/ib0.8001/pkey") << "junk\n";
  EXPECT_EQ(IpoibNetdevsOf(*port, root).size(), 2u) << "a P_Key that does not parse: left out";
}

std::vector<InterfaceAddress> TwoChildAddresses() {
  ++g_asked;
  auto at = [](const char* name, uint8_t last) {
    InterfaceAddress a;
    a.interface = name;
    a.ip[10] = a.ip[11] = 0xff;
    a.ip[12] = 10;
    a.ip[15] = last;
    return a;
  };
  return {at("ib0", 1), at("ib0.8001", 2), at("ib0.0001", 3)};
}

// The kernel's ipoib_get_net_dev_by_params: the P_Key alone when one netdev
// has it (15 bits), the destination address among several, none otherwise.
TEST(IpoibTest, TheRequestsNetdevIsItsPkeysThenItsDestinations) {
  const std::vector<IpoibNetdev> netdevs = {
      {"ib0", 4, 0xffff, true}, {"ib0.8001", 5, 0x8001, true}, {"ib0.0001", 6, 0x0001, false}};
  std::array<uint8_t, 16> ip{};
  ip[10] = ip[11] = 0xff;
  ip[12] = 10;
  ip[15] = 9;  // held by none
  g_asked = 0;
  const IpoibNetdev* n = IpoibNetdevOfRequest(netdevs, 0xffff, false, ip, TwoChildAddresses);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->name, "ib0") << "the one of P_Key 0xffff, whatever its addresses";
  n = IpoibNetdevOfRequest(netdevs, 0x7fff, false, ip, TwoChildAddresses);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->name, "ib0") << "the membership bit is not compared";
  EXPECT_EQ(g_asked, 0) << "one netdev of the P_Key: no address asked";
  EXPECT_EQ(IpoibNetdevOfRequest(netdevs, 0x8002, false, ip, TwoChildAddresses), nullptr);
  EXPECT_EQ(IpoibNetdevOfRequest(netdevs, 0x8001, false, ip, TwoChildAddresses), nullptr)
      << "two netdevs of the P_Key, neither holds the destination";
  ip[15] = 3;
  n = IpoibNetdevOfRequest(netdevs, 0x8001, false, ip, TwoChildAddresses);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->name, "ib0.0001");
  EXPECT_EQ(IpoibNetdevOfRequest(netdevs, 0x8001, true, ip, TwoChildAddresses), nullptr)
      << "an IPv6 destination is not the IPv4 address";
  EXPECT_EQ(IpoibNetdevOfRequest({}, 0xffff, false, ip, TwoChildAddresses), nullptr);
}

// The netdevs are read again only when the generation moves (a link
// changed: RouteBackCache::Generation) or another port asks.
TEST(IpoibTest, TheNetdevsAreKeptWhileTheGenerationStays) {
  const std::string root = FakeSysfsWithPkeys();
  absl::optional<mad::Gid> port = GidOfIpoibHwAddr(kIbHw);
  ASSERT_TRUE(port.has_value());
  IpoibNetdevCache cache(root);
  EXPECT_EQ(cache.Of(*port, 1).size(), 3u);
  std::ofstream(root + "/class/net/ib0/flags") << "0x1002\n";  // ib0 down
  for (const IpoibNetdev& n : cache.Of(*port, 1)) {
    if (n.name == "ib0") {
      EXPECT_TRUE(n.up) << "kept: no change notified";
    }
  }
  EXPECT_EQ(cache.reads(), 1u);
  for (const IpoibNetdev& n : cache.Of(*port, 2)) {
    if (n.name == "ib0") {
      EXPECT_FALSE(n.up) << "read again after a change";
    }
  }
  EXPECT_EQ(cache.reads(), 2u);
  mad::Gid other;
  other.raw[0] = 0xfe;
  EXPECT_TRUE(cache.Of(other, 2).empty());
  EXPECT_EQ(cache.reads(), 3u);
}

}  // namespace
}  // namespace uscm::verbs
