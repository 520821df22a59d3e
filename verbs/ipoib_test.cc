#include "verbs/ipoib.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::cm {
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

TEST(IpoibTest, ArpTableEntries) {
  const std::string arp = std::string(
      "IP address       HW type     Flags       HW address            Mask     Device\n"
      "10.0.0.7         0x1         0x2         52:54:00:12:34:56     *        eth0\n"
      "10.1.0.2         0x20        0x0         ") + kIbHw + "     *        ib0\n" +
      "10.1.0.3         0x20        0x2         " + kIbHw + "     *        ib0\n";
  absl::optional<mad::Gid> g = ArpTableGid(arp, 0x0a010003);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->ToString(), "fe80::2:c903:a1:b2c3");
  EXPECT_FALSE(ArpTableGid(arp, 0x0a010002).has_value()) << "incomplete (flags 0)";
  EXPECT_FALSE(ArpTableGid(arp, 0x0a000007).has_value()) << "Ethernet";
  EXPECT_FALSE(ArpTableGid(arp, 0x0a010009).has_value()) << "no entry";
}

TEST(IpoibTest, InterfacesOfAPortFromSysfs) {
  const std::string root = std::string(getenv("TEST_TMPDIR")) + "/sys";
  for (const char* dir : {"", "/class", "/class/net", "/class/net/ib0", "/class/net/ib1",
                          "/class/net/eth0"}) {
    mkdir((root + dir).c_str(), 0755);
  }
  std::ofstream(root + "/class/net/ib0/address") << kIbHw << "\n";
  std::ofstream(root + "/class/net/ib1/address")
      << "00:00:10:49:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:b2:c4\n";
  std::ofstream(root + "/class/net/eth0/address") << "52:54:00:12:34:56\n";
  absl::optional<mad::Gid> port = GidOfIpoibHwAddr(kIbHw);
  ASSERT_TRUE(port.has_value());
  EXPECT_THAT(IpoibInterfacesOf(*port, root), ElementsAre("ib0"));
  EXPECT_TRUE(IpoibInterfacesOf(*port, root + "/nowhere").empty());
}

}  // namespace
}  // namespace uscm::cm
