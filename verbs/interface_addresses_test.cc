#include "verbs/interface_addresses.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>

#include <vector>

#include "gtest/gtest.h"

namespace uscm::verbs {
namespace {

// A getifaddrs list as the kernel's dump gives it: lo (IPv4), eth0's link
// (AF_PACKET), ib0 (IPv4, IPv6), tun0 with no address.
TEST(InterfaceAddressesTest, TheListsIpAddressesInOrder) {
  sockaddr_in lo4 = {}, ib4 = {};
  lo4.sin_family = ib4.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &lo4.sin_addr);
  inet_pton(AF_INET, "10.0.0.1", &ib4.sin_addr);
  sockaddr_in6 ib6 = {};
  ib6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "fd00::1", &ib6.sin6_addr);
  sockaddr_ll link = {};
  link.sll_family = AF_PACKET;
  char lo[] = "lo", eth0[] = "eth0", ib0[] = "ib0", tun0[] = "tun0";
  ifaddrs e[5] = {};
  auto entry = [](ifaddrs* next, char* name, unsigned flags, void* addr) {
    ifaddrs i = {};
    i.ifa_next = next;
    i.ifa_name = name;
    i.ifa_flags = flags;
    i.ifa_addr = static_cast<sockaddr*>(addr);
    return i;
  };
  e[0] = entry(&e[1], lo, IFF_UP | IFF_LOOPBACK, &lo4);
  e[1] = entry(&e[2], eth0, IFF_UP, &link);
  e[2] = entry(&e[3], ib0, IFF_UP, &ib4);
  e[3] = entry(&e[4], ib0, IFF_UP, &ib6);
  e[4] = entry(nullptr, tun0, IFF_UP, nullptr);

  const std::vector<InterfaceAddress> got = AddressesOfList(&e[0]);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].interface, "lo");
  EXPECT_TRUE(got[0].loopback);
  EXPECT_FALSE(got[0].ipv6);
  const std::array<uint8_t, 16> lo_mapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  EXPECT_EQ(got[0].ip, lo_mapped);
  EXPECT_EQ(got[1].interface, "ib0");
  EXPECT_FALSE(got[1].loopback);
  const std::array<uint8_t, 16> ib_mapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  EXPECT_EQ(got[1].ip, ib_mapped);
  EXPECT_TRUE(got[2].ipv6);
  const std::array<uint8_t, 16> fd = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_EQ(got[2].ip, fd);
  EXPECT_TRUE(AddressesOfList(nullptr).empty());
}

}  // namespace
}  // namespace uscm::verbs
