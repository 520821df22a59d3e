#include "verbs/ipoib.h"

#include <stdlib.h>
#include <sys/stat.h>

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

}  // namespace
}  // namespace uscm::verbs
