#include "api/librdmacm/ud_ah.h"

#include <arpa/inet.h>
#include <string.h>

#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

ibv_gid Gid(const char* text) {
  ibv_gid g{};
  EXPECT_EQ(inet_pton(AF_INET6, text, g.raw), 1) << text;
  return g;
}

TEST(UdAhTest, GidOfAnIpv4AddressIsItsMappedGid) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  inet_pton(AF_INET, "192.168.78.2", &in.sin_addr);
  ibv_gid g;
  ASSERT_TRUE(GidOfAddress(reinterpret_cast<sockaddr*>(&in), &g));
  EXPECT_EQ(memcmp(g.raw, Gid("::ffff:192.168.78.2").raw, 16), 0);
}

TEST(UdAhTest, GidOfAnIpv6AddressIsTheAddress) {
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "fd00::2", &in6.sin6_addr);
  ibv_gid g;
  ASSERT_TRUE(GidOfAddress(reinterpret_cast<sockaddr*>(&in6), &g));
  EXPECT_EQ(memcmp(g.raw, Gid("fd00::2").raw, 16), 0);
}

TEST(UdAhTest, NoGidForOtherFamilies) {
  sockaddr sa{};
  sa.sa_family = AF_UNIX;
  ibv_gid g;
  EXPECT_FALSE(GidOfAddress(&sa, &g));
  EXPECT_FALSE(GidOfAddress(nullptr, &g));
}

TEST(UdAhTest, IndexPrefersTheRoceV2Entry) {
  // A dual-mode port: fe80:: (v1, v2), then the IPv4 address as v1 and v2.
  const std::vector<GidEntry> table = {
      {Gid("fe80::1"), false},
      {Gid("fe80::1"), true},
      {Gid("::ffff:192.168.78.2"), false},
      {Gid("::ffff:192.168.78.2"), true},
  };
  EXPECT_EQ(GidIndexIn(table, Gid("::ffff:192.168.78.2")), 3);
  EXPECT_EQ(GidIndexIn(table, Gid("fe80::1")), 1);
  EXPECT_EQ(GidIndexIn(table, Gid("::ffff:10.0.0.1")), -1);
}

TEST(UdAhTest, IndexOfAV1OnlyEntry) {
  const std::vector<GidEntry> table = {
      {Gid("fe80::1"), true},
      {Gid("::ffff:192.168.78.2"), false},
  };
  EXPECT_EQ(GidIndexIn(table, Gid("::ffff:192.168.78.2")), 1);
}

TEST(UdAhTest, WithoutADeviceOnlyThePortIsSet) {
  ibv_ah_attr ah{};
  CompleteAh(nullptr, 1, nullptr, &ah);
  EXPECT_EQ(ah.port_num, 1);
  EXPECT_EQ(ah.is_global, 0);
}

}  // namespace
}  // namespace uscm::librdmacm
