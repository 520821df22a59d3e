#include "api/librdmacm/ud_ah.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/librdmacm/gid_watch.h"
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

// A VLAN (ifindex 3) on the rxe's netdev (ifindex 2): the fe80:: address of
// their one MAC has an entry per netdev; rxe sends from an entry's netdev,
// tagged for the VLAN's.
const std::vector<GidEntry>& VlanTable() {
  static const auto* table = new std::vector<GidEntry>{
      {Gid("fe80::5054:ff:fe55:2"), true, 2},
      {Gid("::ffff:192.168.78.2"), true, 2},
      {Gid("fe80::5054:ff:fe55:2"), true, 3},
      {Gid("::ffff:192.168.100.2"), true, 3},
  };
  return *table;
}

TEST(UdAhTest, TheInterfaceChoosesAmongEntriesOfOneAddress) {
  EXPECT_EQ(GidIndexIn(VlanTable(), Gid("fe80::5054:ff:fe55:2"), 3), 2);
  EXPECT_EQ(GidIndexIn(VlanTable(), Gid("fe80::5054:ff:fe55:2"), 2), 0);
  EXPECT_EQ(GidIndexIn(VlanTable(), Gid("fe80::5054:ff:fe55:2")), 0) << "no interface: the first";
  EXPECT_EQ(GidIndexIn(VlanTable(), Gid("fe80::5054:ff:fe55:2"), 9), 0)
      << "no entry of that netdev: the first";
  EXPECT_EQ(GidIndexIn(VlanTable(), Gid("::ffff:192.168.100.2"), 2), 3)
      << "an address on one netdev only";
}

TEST(UdAhTest, AQpOnAVlansLinkLocalAddressSendsFromTheVlansEntry) {
  SetPortGidsReaderForTesting([](ibv_context*, uint8_t) {
    PortGids p;
    p.ethernet = true;
    p.active_mtu = IBV_MTU_1024;
    p.table = VlanTable();
    return p;
  });
  sockaddr_in6 src{};
  src.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "fe80::5054:ff:fe55:2", &src.sin6_addr);
  src.sin6_scope_id = 3;  // "fe80::5054:ff:fe55:2%eth0.100"
  uint8_t index = 0;
  int mtu = 0;
  ASSERT_TRUE(KeptSourceGid(nullptr, 1, reinterpret_cast<sockaddr*>(&src), &index, &mtu));
  EXPECT_EQ(index, 2);
  ibv_ah_attr ah{};
  CompleteAh(nullptr, 1, reinterpret_cast<sockaddr*>(&src), &ah);
  EXPECT_EQ(ah.grh.sgid_index, 2) << "a UD id's AH";
  src.sin6_scope_id = 2;  // "%eth0"
  ASSERT_TRUE(KeptSourceGid(nullptr, 1, reinterpret_cast<sockaddr*>(&src), &index, &mtu));
  EXPECT_EQ(index, 0);
  SetPortGidsReaderForTesting(nullptr);
}

// One global address on two netdevs (10.77.0.2 on eth0, 2, and eth0.100, 3):
// the address alone names the first entry; uscm's entry of the id (the
// route's netdev, or the one a request came in on: uscm_source_gid_index)
// goes to the QP and the AH instead. Before, the first entry (0: untagged).
TEST(UdAhTest, UscmsEntryOfTheIdWinsOverTheAddresssFirst) {
  SetPortGidsReaderForTesting([](ibv_context*, uint8_t) {
    PortGids p;
    p.ethernet = true;
    p.active_mtu = IBV_MTU_1024;
    p.table = {{Gid("::ffff:10.77.0.2"), true, 2}, {Gid("::ffff:10.77.0.2"), true, 3}};
    return p;
  });
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, "10.77.0.2", &src.sin_addr);
  const sockaddr* sa = reinterpret_cast<sockaddr*>(&src);
  uint8_t index = 9;
  int mtu = 0;
  ASSERT_TRUE(KeptSourceGid(nullptr, 1, sa, &index, &mtu));
  EXPECT_EQ(index, 0) << "the address's first entry";
  ASSERT_TRUE(KeptSourceGid(nullptr, 1, sa, &index, &mtu, /*own_index=*/1));
  EXPECT_EQ(index, 1);
  ibv_ah_attr ah{};
  CompleteAh(nullptr, 1, sa, &ah, /*own_index=*/1);
  EXPECT_EQ(ah.grh.sgid_index, 1) << "rdma_init_qp_attr's AV";
  CompleteAh(nullptr, 1, sa, &ah, /*own_index=*/-2);  // uscm knows none
  EXPECT_EQ(ah.grh.sgid_index, 0);
  SetPortGidsReaderForTesting(nullptr);
}

TEST(UdAhTest, WithoutADeviceOnlyThePortIsSet) {
  ibv_ah_attr ah{};
  CompleteAh(nullptr, 1, nullptr, &ah);
  EXPECT_EQ(ah.port_num, 1);
  EXPECT_EQ(ah.is_global, 0);
}

// The port's table is kept per (context, port); read again when the
// generation moved or the address is not in it. `g_table_has_address` is
// what the port holds now; `g_moved`: the address was removed, another took
// its index 1, and it came back at index 2. `g_generation`: the device's
// count of GID changes (gid_watch.h).
int g_reads = 0;
bool g_table_has_address = true;
bool g_moved = false;
bool g_ethernet = true;
uint64_t g_generation = 0;

PortGids CountingReader(ibv_context*, uint8_t) {
  ++g_reads;
  PortGids p;
  p.ethernet = g_ethernet;
  p.table = {{Gid("fe80::1"), true}};
  if (g_moved) {
    p.table.push_back({Gid("::ffff:192.168.78.3"), true});
    p.table.push_back({Gid("::ffff:192.168.78.2"), true});
  } else if (g_table_has_address) {
    p.table.push_back({Gid("::ffff:192.168.78.2"), true});
  }
  return p;
}

uint64_t FakeGeneration(ibv_context*) { return g_generation; }

class KeptTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_reads = 0;
    g_table_has_address = true;
    g_moved = false;
    g_ethernet = true;
    g_generation = 0;
    SetPortGidsReaderForTesting(CountingReader);
    SetGidGenerationForTesting(FakeGeneration);
    src_.sin_family = AF_INET;
    inet_pton(AF_INET, "192.168.78.2", &src_.sin_addr);
  }
  void TearDown() override {
    SetPortGidsReaderForTesting(nullptr);
    SetGidGenerationForTesting(nullptr);
  }

  ibv_ah_attr Complete(uint8_t port, const sockaddr* src) {
    ibv_ah_attr ah{};
    CompleteAh(nullptr, port, src, &ah);
    return ah;
  }
  const sockaddr* Src() const { return reinterpret_cast<const sockaddr*>(&src_); }

  sockaddr_in src_{};
};

TEST_F(KeptTableTest, ReadOncePerPort) {
  for (int i = 0; i < 3; ++i) {
    ibv_ah_attr ah = Complete(1, Src());
    EXPECT_EQ(ah.is_global, 1);
    EXPECT_EQ(ah.grh.sgid_index, 1);
  }
  EXPECT_EQ(g_reads, 1);
  Complete(2, Src());
  EXPECT_EQ(g_reads, 2) << "port 2 has a table of its own";
}

TEST_F(KeptTableTest, AnAddressNotInTheKeptTableReadsItAgain) {
  g_table_has_address = false;
  ibv_ah_attr ah = Complete(1, Src());
  EXPECT_EQ(ah.is_global, 1);
  EXPECT_EQ(ah.grh.sgid_index, 0) << "not in the table: left as it was";
  EXPECT_EQ(g_reads, 1);
  g_table_has_address = true;  // the address was added to the netdev
  ah = Complete(1, Src());
  EXPECT_EQ(ah.grh.sgid_index, 1);
  EXPECT_EQ(g_reads, 2);
  Complete(1, Src());
  EXPECT_EQ(g_reads, 2) << "found in the table read last";
}

TEST_F(KeptTableTest, NoAddressOrAnInfiniBandPortReadsOnce) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Complete(1, nullptr).is_global, 1);
  EXPECT_EQ(g_reads, 1) << "no GID to look for: the link layer alone";
  g_ethernet = false;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Complete(2, Src()).is_global, 0);
  EXPECT_EQ(g_reads, 2);
}

TEST_F(KeptTableTest, TheSourceGidOfAQpComesFromTheKeptTable) {
  uint8_t index = 0;
  int mtu = 0;
  EXPECT_FALSE(KeptSourceGid(nullptr, 1, Src(), &index, &mtu)) << "MTU not known";
  g_reads = 0;
  SetPortGidsReaderForTesting([](ibv_context* v, uint8_t p) {
    PortGids g = CountingReader(v, p);
    g.active_mtu = IBV_MTU_4096;
    return g;
  });
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(KeptSourceGid(nullptr, 1, Src(), &index, &mtu));
    EXPECT_EQ(index, 1);
    EXPECT_EQ(mtu, IBV_MTU_4096);
  }
  EXPECT_EQ(g_reads, 1);
  EXPECT_FALSE(KeptSourceGid(nullptr, 1, nullptr, &index, &mtu)) << "no address";
  g_ethernet = false;
  EXPECT_FALSE(KeptSourceGid(nullptr, 2, Src(), &index, &mtu)) << "InfiniBand: uscm_set_qp";
}

TEST_F(KeptTableTest, APortThatCouldNotBeQueriedIsAskedAgain) {
  SetPortGidsReaderForTesting([](ibv_context*, uint8_t) {
    ++g_reads;
    PortGids p;
    p.read = false;
    return p;
  });
  EXPECT_EQ(Complete(1, Src()).is_global, 0);
  EXPECT_EQ(Complete(1, Src()).is_global, 0);
  EXPECT_EQ(g_reads, 2);
}

// The hole the generation closes: the address went away, another address
// took its index, and it came back at another. The kept table still finds it
// (at its old index, now the other address's GID) until the device reports
// the change; then the table is read again and the index is the new one.
TEST_F(KeptTableTest, AGidChangeReadsTheTableAgain) {
  EXPECT_EQ(Complete(1, Src()).grh.sgid_index, 1);
  g_moved = true;
  EXPECT_EQ(Complete(1, Src()).grh.sgid_index, 1) << "no event yet: the kept table";
  EXPECT_EQ(g_reads, 1);
  ++g_generation;  // IBV_EVENT_GID_CHANGE
  EXPECT_EQ(Complete(1, Src()).grh.sgid_index, 2);
  EXPECT_EQ(g_reads, 2);
  uint8_t index = 0;
  int mtu = 0;
  SetPortGidsReaderForTesting([](ibv_context* v, uint8_t p) {
    PortGids g = CountingReader(v, p);
    g.active_mtu = IBV_MTU_1024;
    return g;
  });
  ASSERT_TRUE(KeptSourceGid(nullptr, 1, Src(), &index, &mtu));
  EXPECT_EQ(index, 2) << "the QP's source GID index";
  for (int i = 0; i < 3; ++i) Complete(1, Src());
  EXPECT_EQ(g_reads, 3) << "one read per change, none per lookup";
}

// The event can come while the table is being read (the read saw the old
// table): the generation is the one taken before the read, so the next
// lookup reads again.
TEST_F(KeptTableTest, AChangeDuringTheReadIsSeenAtTheNextLookup) {
  SetPortGidsReaderForTesting([](ibv_context* v, uint8_t p) {
    PortGids g = CountingReader(v, p);  // the table before the change
    if (g_reads == 1) {
      g_moved = true;
      ++g_generation;
    }
    return g;
  });
  EXPECT_EQ(Complete(1, Src()).grh.sgid_index, 1);
  EXPECT_EQ(Complete(1, Src()).grh.sgid_index, 2);
  EXPECT_EQ(g_reads, 2);
}

TEST_F(KeptTableTest, ADeviceWhoseChangesAreNotFollowedIsReadAtEveryLookup) {
  SetGidGenerationForTesting([](ibv_context*) { return kGidsNotFollowed; });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Complete(1, Src()).grh.sgid_index, 1);
  EXPECT_EQ(g_reads, 3);
}

TEST_F(KeptTableTest, ANullContextIsNotWatched) { EXPECT_EQ(GidTableGeneration(nullptr), 0u); }

// The watch's thread stays in the parent: a child reads its tables again at
// every lookup instead of trusting a generation no one bumps.
TEST_F(KeptTableTest, AChildOfForkDoesNotTrustTheParentsWatch) {
  ibv_context stand_in = {};
  FollowForTesting(&stand_in);
  ASSERT_EQ(GidTableGeneration(&stand_in), 0u);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(GidTableGeneration(&stand_in) == kGidsNotFollowed ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child trusted the parent's watch";
  EXPECT_EQ(GidTableGeneration(&stand_in), 0u);
}

// A device whose ports are all InfiniBand keeps no GID table (the link layer
// alone): no context and no thread are started for it. A device with an
// Ethernet port gets its watch once.
TEST(GidWatchTest, OnlyADeviceWithAnEthernetPortIsWatched) {
  SetWatchNeedForTesting(
      [](ibv_context*) { return WatchNeed::kInfiniBandOnly; },
      [](ibv_context*, bool* following) { *following = true; });
  static ibv_context infiniband = {};  // static: a key no other test used
  const uint64_t before = GidWatchesStarted();
  EXPECT_EQ(GidTableGeneration(&infiniband), 0u);
  EXPECT_EQ(GidTableGeneration(&infiniband), 0u);
  EXPECT_EQ(GidWatchesStarted(), before) << "an InfiniBand device got a context and a thread";
  SetWatchNeedForTesting(
      [](ibv_context*) { return WatchNeed::kHasEthernet; },
      [](ibv_context*, bool* following) { *following = true; });
  static ibv_context roce = {};
  EXPECT_EQ(GidTableGeneration(&roce), 0u);
  EXPECT_EQ(GidTableGeneration(&roce), 0u);
  EXPECT_EQ(GidWatchesStarted(), before + 1);
  EXPECT_EQ(GidTableGeneration(&infiniband), 0u) << "decided at its first call";
  EXPECT_EQ(GidWatchesStarted(), before + 1);
  SetWatchNeedForTesting(nullptr, nullptr);
}

// The rtnetlink address watch (InfiniBand ports' IPs, ports.h) starts, and a
// child of fork() does not trust it: its thread stayed in the parent.
TEST(AddressWatchTest, FollowsAndAChildOfForkReadsAgain) {
  const uint64_t generation = IpAddressGeneration();
  ASSERT_NE(generation, kGidsNotFollowed) << "no rtnetlink socket or no thread";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(IpAddressGeneration() == kGidsNotFollowed ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child trusted the watch";
  EXPECT_NE(IpAddressGeneration(), kGidsNotFollowed);
}

TEST_F(KeptTableTest, ANewReaderDropsTheKeptTables) {
  const uint64_t before = PortGidReads();
  Complete(1, Src());
  SetPortGidsReaderForTesting(CountingReader);
  Complete(1, Src());
  EXPECT_EQ(g_reads, 2);
  EXPECT_EQ(PortGidReads() - before, 2u);
}

}  // namespace
}  // namespace uscm::librdmacm
