// The ports' addresses follow the kernel's (ports.h PortOfAddressLocked): two
// simulated ports whose address lists a test changes, with a generation it
// moves as the GID watch or rtnetlink would.
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_sim_c.h"
#include "api/librdmacm/gid_watch.h"
#include "api/librdmacm/ports.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

// An IPv4 address as the drop-in passes it (IPv4-mapped), and its key.
uscm_addr Ip(const char* ip) {
  uscm_addr a = {};
  a.family = USCM_AF_INET;
  a.ip[10] = a.ip[11] = 0xff;
  inet_pton(AF_INET, ip, &a.ip[12]);
  return a;
}
Addr16 V4(const char* ip) { return KeyOf(Ip(ip)); }

// What the kernel has now: each port's IPs, and the generation its watch
// counted (events), as the fakes give them.
std::vector<std::vector<Addr16>> g_kernel;
uint64_t g_generation = 0;

uint64_t FakeGeneration(const Port&) { return g_generation; }
void FakeRead(Port* p) { p->ips = g_kernel[p->port_num - 1]; }
// The process's count of changes (gid_watch.h AddressChanges) moves with the
// one generation the fakes have.
uint64_t FakeChanges() { return g_generation; }

// A device the GID watch follows with no thread (gid_watch.h
// FollowForTesting): the real generation and count of changes, moved by
// CountGidChangeForTesting as the watch's thread moves them.
ibv_context g_watched = {};
uint64_t WatchedGeneration(const Port&) { return GidTableGeneration(&g_watched); }

class PortAddressesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = uscm_sim_create(7);
    ASSERT_NE(sim_, nullptr);
    g_kernel = {{V4("10.0.0.1")}, {V4("10.0.0.2")}};
    g_generation = 0;
    SetPortAddressesForTesting(FakeGeneration, FakeRead, FakeChanges);
    ASSERT_EQ(UsePortsForTesting({uscm_sim_device(sim_, 0), uscm_sim_device(sim_, 1)}, g_kernel),
              0)
        << strerror(errno);
  }
  void TearDown() override {
    ResetPortsForTesting();
    SetPortAddressesForTesting(nullptr, nullptr, nullptr);
    uscm_sim_destroy(sim_);
  }
  // The port number `ip` belongs to, 0 for none.
  static int PortOf(const char* ip) {
    Port* p = PortOfAddressLocked(Ip(ip));
    return p == nullptr ? 0 : p->port_num;
  }

  // The ports on the real count of changes and a watched device's real
  // generation; then 10.0.0.2 moves from port 2 to port 1 (found on its old
  // port in the kept lists, so no miss re-read hides a skipped change).
  static void WatchAndMoveAnAddress() {
    FollowForTesting(&g_watched);
    SetPortAddressesForTesting(WatchedGeneration, FakeRead, nullptr);
    EXPECT_EQ(PortOf("10.0.0.2"), 2);
    g_kernel[0].push_back(V4("10.0.0.2"));
    g_kernel[1] = {V4("10.0.0.3")};
  }

  uscm_sim* sim_ = nullptr;
};

TEST_F(PortAddressesTest, UnchangedAddressesAreNotReadAgain) {
  const uint64_t before = PortAddressRereads();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(PortOf("10.0.0.1"), 1);
    EXPECT_EQ(PortOf("10.0.0.2"), 2);
  }
  EXPECT_EQ(PortAddressRereads(), before) << "a read per lookup";
}

// An address added to port 2's netdev after the listing: bind and resolve
// find it (the kernel's rdma_translate_ip would); on main EADDRNOTAVAIL.
TEST_F(PortAddressesTest, AnAddressAddedLaterIsFound) {
  EXPECT_EQ(PortOf("10.0.0.9"), 0);
  g_kernel[1].push_back(V4("10.0.0.9"));
  ++g_generation;
  EXPECT_EQ(PortOf("10.0.0.9"), 2);
}

// The address moved from port 2 to port 1: the kept list answers until the
// generation moves (its event), then the port that holds it now.
TEST_F(PortAddressesTest, AnAddressThatMovedGoesToItsNewPort) {
  g_kernel[0].push_back(V4("10.0.0.2"));
  g_kernel[1] = {V4("10.0.0.3")};
  EXPECT_EQ(PortOf("10.0.0.2"), 2) << "no event yet: the kept lists";
  ++g_generation;
  EXPECT_EQ(PortOf("10.0.0.2"), 1);
  EXPECT_EQ(PortOf("10.0.0.3"), 2);
}

// A removed address belongs to no port (the kernel refuses the bind).
TEST_F(PortAddressesTest, ARemovedAddressIsNoPorts) {
  g_kernel[1].clear();
  ++g_generation;
  EXPECT_EQ(PortOf("10.0.0.2"), 0);
}

// The table changed before the watch counted it: a miss reads again, once per
// generation, so a foreign address costs no read per lookup.
TEST_F(PortAddressesTest, AMissReadsAgainOncePerGeneration) {
  g_kernel[0].push_back(V4("10.0.0.7"));
  EXPECT_EQ(PortOf("10.0.0.7"), 1) << "not counted yet: the miss read";
  const uint64_t before = PortAddressRereads();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(PortOf("192.0.2.1"), 0);
  EXPECT_EQ(PortAddressRereads(), before) << "a foreign address read the lists again";
  ++g_generation;
  EXPECT_EQ(PortOf("192.0.2.1"), 0);
  EXPECT_EQ(PortAddressRereads(), before + 4) << "each port for the generation, and the miss";
  EXPECT_EQ(PortOf("192.0.2.1"), 0);
  EXPECT_EQ(PortAddressRereads(), before + 4);
}

TEST_F(PortAddressesTest, NotFollowedIsReadAtEveryLookup) {
  SetPortAddressesForTesting([](const Port&) { return kGidsNotFollowed; }, FakeRead, FakeChanges);
  const uint64_t before = PortAddressRereads();
  g_kernel[1].push_back(V4("10.0.0.9"));
  EXPECT_EQ(PortOf("10.0.0.9"), 2);
  g_kernel[1].pop_back();
  EXPECT_EQ(PortOf("10.0.0.9"), 0);
  EXPECT_EQ(PortAddressRereads(), before + 4);
}

// While the process's count of changes stays, a lookup asks no port its
// generation (each ask is a mutex and a lookup in gid_watch.cc).
TEST_F(PortAddressesTest, AnUnchangedCountAsksNoGeneration) {
  EXPECT_EQ(PortOf("10.0.0.1"), 1);
  const uint64_t before = PortGenerationsAsked();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(PortOf("10.0.0.2"), 2);
  EXPECT_EQ(PortGenerationsAsked(), before) << "generations asked with nothing changed";
  ++g_generation;
  EXPECT_EQ(PortOf("10.0.0.2"), 2);
  EXPECT_EQ(PortGenerationsAsked(), before + 2) << "each port once the count moved";
}

// The GID watch's count, through the real AddressChanges: an event the
// watch counted is seen at the next lookup.
TEST_F(PortAddressesTest, AGidChangeTheWatchCountedIsSeen) {
  WatchAndMoveAnAddress();
  EXPECT_EQ(PortOf("10.0.0.2"), 2) << "no event yet: the kept lists";
  CountGidChangeForTesting(&g_watched);
  EXPECT_EQ(PortOf("10.0.0.2"), 1) << "the event was not seen";
}

// In a child of fork() the watch's thread stayed in the parent: the child
// asks its generations again (kGidsNotFollowed: read at every lookup) though
// no event came.
TEST_F(PortAddressesTest, AChildOfForkReadsAtEveryLookup) {
  WatchAndMoveAnAddress();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(PortOf("10.0.0.2") == 1 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child kept the parent's lists";
  EXPECT_EQ(PortOf("10.0.0.2"), 2) << "the parent: no event yet";
}

}  // namespace
}  // namespace uscm::librdmacm
