// Devices and ports that appear after the program started (devices.h
// SyncDevices, ports.h PortOfAddressLocked): libibverbs' device list, the
// device and port queries and the ports' addresses are the test's fakes, so a
// test adds a device, brings a port up or removes a device between two calls,
// as `rdma link add`, a link coming up or `rdma link del` would.
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/ports.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

// What the "kernel" has: three devices (dev0 with two ports), which are
// listed, which ports are ACTIVE, and each port's one address.
constexpr int kDevices = 3;
ibv_device g_dev[kDevices];
ibv_context g_ctx[kDevices];
bool g_listed[kDevices];
bool g_active[kDevices][3];  // [device][port]
int g_opens = 0;
int g_port_queries = 0;

// Port `port` of device `device` has the one address 10.0.<device>.<port>
// (IPv4-mapped, as the drop-in passes it).
uscm_addr AddressOf(int device, int port) {
  uscm_addr a = {};
  a.family = USCM_AF_INET;
  a.ip[10] = a.ip[11] = 0xff;
  a.ip[12] = 10;
  a.ip[14] = static_cast<uint8_t>(device);
  a.ip[15] = static_cast<uint8_t>(port);
  return a;
}

int IndexOf(const ibv_context* verbs) { return static_cast<int>(verbs - g_ctx); }

ibv_device** FakeList(int* count) {
  auto** list = static_cast<ibv_device**>(calloc(kDevices + 1, sizeof(ibv_device*)));
  int n = 0;
  for (int i = 0; i < kDevices; ++i) {
    if (g_listed[i]) list[n++] = &g_dev[i];
  }
  *count = n;
  return list;
}
void FakeFree(ibv_device** list) { free(list); }
ibv_context* FakeOpen(ibv_device* device) {
  ++g_opens;
  return &g_ctx[device - g_dev];
}

int FakeQueryDevice(ibv_context* verbs, ibv_device_attr* attr) {
  *attr = {};
  attr->phys_port_cnt = IndexOf(verbs) == 0 ? 2 : 1;
  return 0;
}

int FakeQueryPort(ibv_context* verbs, uint8_t port, ibv_port_attr* attr) {
  ++g_port_queries;
  *attr = {};
  attr->state = g_active[IndexOf(verbs)][port] ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  attr->gid_tbl_len = 16;
  return 0;
}

// Each reading 1 s later than the last: every miss may list (the 100 ms
// spacing is AMissWithin100MsOfTheLastListingListsNothing's).
int64_t g_now_ns = 0;
int64_t g_step_ns = 0;
int64_t FakeNow() { return g_now_ns += g_step_ns; }

uint64_t FakeGeneration(const Port&) { return 0; }
uint64_t FakeChanges() { return 0; }  // no address change: only misses list again
void FakeRead(Port* p) { p->ips = {KeyOf(AddressOf(IndexOf(p->verbs), p->port_num))}; }

class DeviceSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kDevices; ++i) {
      g_dev[i] = {};
      snprintf(g_dev[i].name, sizeof g_dev[i].name, "dev%d", i);
      g_ctx[i] = {};
      g_ctx[i].device = &g_dev[i];
      g_listed[i] = false;
      for (bool& a : g_active[i]) a = false;
    }
    g_opens = g_port_queries = 0;
    g_now_ns = 0;
    g_step_ns = 1000000000;
    static const DeviceListOps ops = {FakeList, FakeFree, FakeOpen};
    SetDeviceListForTesting(&ops);
    SetQueryDeviceForTesting(FakeQueryDevice);
    SetPortQueryForTesting(FakeQueryPort, FakeNow);
    SetPortAddressesForTesting(FakeGeneration, FakeRead, FakeChanges);
  }
  void TearDown() override {
    ResetPortsForTesting();
    SetPortAddressesForTesting(nullptr, nullptr, nullptr);
    SetPortQueryForTesting(nullptr, nullptr);
    SetQueryDeviceForTesting(nullptr);
    SetDeviceListForTesting(nullptr);
  }

  // The port PortOfAddressLocked puts the id of AddressOf(device, port) on:
  // "devN:P", or "none".
  static std::string PortOf(int device, int port) {
    Port* p = PortOfAddressLocked(AddressOf(device, port));
    if (p == nullptr) return "none";
    return p->ca + ":" + std::to_string(p->port_num);
  }

  // The device names rdma_get_devices lists now.
  static std::vector<std::string> Listed() {
    std::vector<std::string> names;
    int n = -1;
    ibv_context** devs = rdma_get_devices(&n);
    for (int i = 0; devs != nullptr && devs[i] != nullptr; ++i) {
      names.push_back(ibv_get_device_name(devs[i]->device));
    }
    EXPECT_EQ(n, static_cast<int>(names.size()));
    rdma_free_devices(devs);
    return names;
  }
};

using Names = std::vector<std::string>;

TEST_F(DeviceSyncTest, RdmaGetDevicesListsAddedAndLeavesOutRemovedDevices) {
  g_listed[0] = true;
  EXPECT_EQ(Listed(), Names{"dev0"});
  g_listed[1] = true;  // rdma link add
  EXPECT_EQ(Listed(), Names({"dev0", "dev1"}));
  EXPECT_EQ(g_opens, 2) << "each device opened once";

  int n = 0;
  ibv_context** held = rdma_get_devices(&n);
  ASSERT_EQ(n, 2);
  g_listed[0] = false;  // rdma link del
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(held[0], &g_ctx[0]) << "an array given before stays as it was";
  EXPECT_TRUE(DeviceGone(&g_ctx[0]));
  EXPECT_FALSE(DeviceGone(&g_ctx[1]));
  rdma_free_devices(held);
  EXPECT_EQ(OpenDeviceCount(), 1);
}

// As librdmacm (ucma_init lists, ucma_init_device opens): no device is
// opened by listing or by rdma_create_id, the port listing opens only the
// devices USCM_DEVICE allows, rdma_get_devices opens the rest and hands out
// the contexts the ports have.
TEST_F(DeviceSyncTest, ADeviceIsOpenedOnlyWhenACallNeedsIt) {
  for (int i = 0; i < kDevices; ++i) {
    g_listed[i] = true;
    g_active[i][1] = true;
  }
  ASSERT_EQ(EnsureDevices("test"), 0) << strerror(errno);
  ASSERT_EQ(EnsureDevicesListedLocked("test"), 0) << strerror(errno);
  EXPECT_EQ(g_opens, 0) << "listing opens no device (rdma_create_event_channel, rdma_create_id)";
  EXPECT_EQ(OpenDeviceCount(), 0);

  setenv("USCM_DEVICE", "dev1", 1);
  const int listed = EnsurePortsLocked("test");
  unsetenv("USCM_DEVICE");
  ASSERT_EQ(listed, 0) << strerror(errno);
  EXPECT_EQ(g_opens, 1) << "the port listing opens dev1 alone";
  ASSERT_EQ(PortsLocked().size(), 1u);
  EXPECT_EQ(PortsLocked()[0]->verbs, &g_ctx[1]);

  EXPECT_EQ(Listed(), Names({"dev0", "dev1", "dev2"}));
  EXPECT_EQ(g_opens, 3) << "rdma_get_devices opens the two others, dev1 not again";
  EXPECT_EQ(OpenContexts(), (std::vector<ibv_context*>{&g_ctx[0], &g_ctx[1], &g_ctx[2]}));
}

TEST_F(DeviceSyncTest, ADeviceRemovedBeforeItWasOpenedIsForgotten) {
  g_listed[0] = g_listed[1] = true;
  ASSERT_EQ(EnsureDevices("test"), 0) << strerror(errno);
  g_listed[0] = false;  // rdma link del dev0, never opened
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(g_opens, 1) << "dev1 alone, for rdma_get_devices";
  EXPECT_FALSE(DeviceGone(&g_ctx[0])) << "no context of it: nothing kept";
  g_listed[1] = false;
  errno = 0;
  EXPECT_NE(SyncDevices("test"), 0);
  EXPECT_EQ(errno, ENODEV);
}

TEST_F(DeviceSyncTest, NoDeviceAtFirstThenOneIsENODEVThenListed) {
  int n = -1;
  errno = 0;
  EXPECT_EQ(rdma_get_devices(&n), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_EQ(n, 0);
  EXPECT_NE(EnsureDevices("test"), 0);
  g_listed[2] = true;
  EXPECT_EQ(EnsureDevices("test"), 0) << "a device that appears is listed at the next call";
  EXPECT_EQ(Listed(), Names{"dev2"});
}

// librdmacm's rdma_create_id needs a device (ucma_init: ENODEV when
// libibverbs lists none), the kernel's no port; the calls that need a port
// fail until one is ACTIVE, and the id is destroyed without one.
TEST_F(DeviceSyncTest, CreateIdNeedsADeviceNotAnActivePort) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_EQ(ch, nullptr) << "no device";
  rdma_cm_id* id = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), -1);
  EXPECT_EQ(errno, ENODEV) << "no device at all";

  g_listed[0] = true;  // dev0: both ports DOWN
  ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr) << strerror(errno);
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x0a000001);  // 10.0.0.1 (dev0 port 1's, once ACTIVE)
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)), -1);
  EXPECT_EQ(errno, ENODEV) << "no ACTIVE port";
  rdma_cm_id* moved = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &moved, nullptr, RDMA_PS_UDP), 0) << strerror(errno);
  EXPECT_EQ(rdma_migrate_id(moved, nullptr), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(moved), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
  rdma_destroy_event_channel(ch);
}

TEST_F(DeviceSyncTest, APortThatBecomesActiveIsServedAtTheNextLookup) {
  g_listed[0] = true;
  g_active[0][1] = true;
  ASSERT_EQ(EnsurePortsLocked("test"), 0) << strerror(errno);
  EXPECT_EQ(PortsLocked().size(), 1u) << "port 2 is DOWN: not listed";
  EXPECT_EQ(PortOf(0, 1), "dev0:1");
  EXPECT_EQ(PortOf(0, 2), "none") << "a DOWN port's address is on no port";

  g_active[0][2] = true;  // the link comes up
  EXPECT_EQ(PortOf(0, 2), "dev0:2");
  EXPECT_EQ(PortOf(0, 1), "dev0:1");
  EXPECT_EQ(PortsLocked().size(), 2u);
}

TEST_F(DeviceSyncTest, ADeviceAddedLaterIsServedAndARemovedOneIsNot) {
  g_listed[0] = true;
  g_active[0][1] = true;
  g_active[1][1] = true;
  ASSERT_EQ(EnsurePortsLocked("test"), 0) << strerror(errno);
  EXPECT_EQ(PortOf(1, 1), "none");

  g_listed[1] = true;  // rdma link add dev1
  EXPECT_EQ(PortOf(1, 1), "dev1:1");
  Port* dev1 = PortOfAddressLocked(AddressOf(1, 1));

  g_listed[1] = false;  // rdma link del dev1
  EXPECT_EQ(PortOf(0, 2), "none");  // a miss lists the devices again
  EXPECT_TRUE(dev1->gone) << "its ids stay, pointing at the port";
  EXPECT_EQ(PortOf(1, 1), "none") << "no new id on a removed device";
  EXPECT_EQ(PortOf(0, 1), "dev0:1");
  EXPECT_EQ(PortsLocked().size(), 2u) << "the port itself is kept for its ids";
  ASSERT_EQ(LivePortsLocked().size(), 1u) << "where a new id may go: not the removed device's";
  EXPECT_EQ(LivePortsLocked()[0]->ca, "dev0");
}

TEST_F(DeviceSyncTest, AHitListsNothingAMissListsOnce) {
  g_listed[0] = true;
  g_active[0][1] = true;
  ASSERT_EQ(EnsurePortsLocked("test"), 0) << strerror(errno);
  const uint64_t listings = DeviceListings();
  const int queries = g_port_queries;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(PortOf(0, 1), "dev0:1");
  EXPECT_EQ(DeviceListings(), listings) << "no listing per lookup";
  EXPECT_EQ(g_port_queries, queries) << "no port query per lookup";

  EXPECT_EQ(PortOf(2, 1), "none");
  EXPECT_EQ(DeviceListings(), listings + 1);
  EXPECT_EQ(g_port_queries, queries + 1) << "only dev0's port 2, the one not listed";
  EXPECT_EQ(PortListSyncs(), 1u);
}

TEST_F(DeviceSyncTest, AMissWithin100MsOfTheLastListingListsNothing) {
  g_listed[0] = true;
  g_active[0][1] = true;
  ASSERT_EQ(EnsurePortsLocked("test"), 0) << strerror(errno);
  g_step_ns = 0;  // the clock stands still
  const uint64_t listings = DeviceListings();
  for (int i = 0; i < 100; ++i) ASSERT_EQ(PortOf(2, 1), "none");
  EXPECT_EQ(DeviceListings(), listings + 1) << "a foreign address in a loop: one listing";

  g_listed[2] = true;
  g_active[2][1] = true;
  g_now_ns += 99 * 1000 * 1000;
  EXPECT_EQ(PortOf(2, 1), "none") << "99 ms later: not listed again";
  g_now_ns += 1000 * 1000;
  EXPECT_EQ(PortOf(2, 1), "dev2:1") << "100 ms later: listed again";
  EXPECT_EQ(DeviceListings(), listings + 2);
}

}  // namespace
}  // namespace uscm::librdmacm
