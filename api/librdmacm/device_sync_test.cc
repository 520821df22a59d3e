// Devices and ports that appear after the program started (devices.h
// SyncDevices, ports.h PortOfAddressLocked): libibverbs' device list, the
// device and port queries and the ports' addresses are the test's fakes, so a
// test adds a device, brings a port up or removes a device between two calls,
// as `rdma link add`, a link coming up or `rdma link del` would.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_sim_c.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/gid_watch.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/port_resync.h"
#include "api/librdmacm/ports.h"
#include "api/librdmacm/ud_ah.h"
#include "api/librdmacm/uevents_testing.h"
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
int g_closes = 0;
ibv_context* g_closed_ctx = nullptr;
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
int FakeClose(ibv_context* verbs) {
  ++g_closes;
  g_closed_ctx = verbs;
  return 0;
}

// The GID watch of a device the library has open (as NeedOf: a removed one
// is not watched), with no context or thread; the kept GID tables' reader.
WatchNeed WatchOpenDevices(ibv_context* verbs) {
  const std::vector<ibv_context*> open = OpenContexts();
  return std::find(open.begin(), open.end(), verbs) != open.end() ? WatchNeed::kHasEthernet
                                                                   : WatchNeed::kNotOurs;
}
void FakeWatchStart(ibv_context*, bool* following) { *following = true; }
// The shared PD, and a port's uscm device (SimulatedPortsTest); closes
// counted.
ibv_pd g_pd;
int g_pds = 0;
ibv_pd* FakeAllocPd(ibv_context*) {
  ++g_pds;
  return &g_pd;
}
int FakeDeallocPd(ibv_pd*) {
  --g_pds;
  return 0;
}
uscm_sim* g_sim = nullptr;
int g_port_devices_closed = 0;
int g_port_devices_opened = 0;
// The fabric devN's port is opened on again once its uscmd was killed (the
// new uscmd's MAD path), or NULL: g_sim.
uscm_sim* g_reopen_sim[kDevices] = {};
// How many more opens of devN's port fail (a new uscmd that did not start).
int g_failing_opens[kDevices] = {};
uscm_device* SimHostOfDevice(ibv_context* verbs, int) {  // devN on simulated host N
  ++g_port_devices_opened;
  const int n = IndexOf(verbs);
  if (g_failing_opens[n] > 0) {
    --g_failing_opens[n];
    errno = EIO;
    return nullptr;
  }
  return uscm_sim_device(g_reopen_sim[n] != nullptr ? g_reopen_sim[n] : g_sim, n);
}

// The routers the library asked to start before opening ports
// (SetPortRouterStartForTesting), and how many ports had opened then.
std::vector<std::vector<std::string>> g_router_starts;
int g_opened_at_router_start = -1;
void RecordRouterStart(const std::vector<const Port*>& ports) {
  std::vector<std::string> names;
  for (const Port* p : ports) names.push_back(p->ca + ":" + std::to_string(p->port_num));
  g_router_starts.push_back(names);
  g_opened_at_router_start = g_port_devices_opened;
}
int CountPortDeviceClose(uscm_device*) {
  ++g_port_devices_closed;
  return 0;
}

PortGids FakePortGids(ibv_context*, uint8_t) {
  PortGids g;
  g.ethernet = true;
  g.table.resize(1);
  return g;
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
    g_opens = g_closes = g_port_queries = 0;
    g_closed_ctx = nullptr;
    g_now_ns = 0;
    g_step_ns = 1000000000;
    static const DeviceListOps ops = {FakeList,  FakeFree,    FakeOpen,
                                      FakeClose, FakeAllocPd, FakeDeallocPd};
    SetDeviceListForTesting(&ops);
    SetQueryDeviceForTesting(FakeQueryDevice);
    SetPortQueryForTesting(FakeQueryPort, FakeNow);
    SetPortAddressesForTesting(FakeGeneration, FakeRead, FakeChanges);
    NoPortResyncThreadForTesting(true);  // stepped by the tests that need it
  }
  void TearDown() override {
    NoPortResyncThreadForTesting(false);
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
  EXPECT_EQ(g_closes, 1) << "dev0, removed, closed once no array holds it";
}

// librdmacm's remove_cma_dev: a removed device none of whose ports an id
// lives on is closed once no rdma_get_devices array holds it, with what held
// its context released first (its ports no longer served, its GID watch
// ended, its kept GID tables dropped); rxe's `rdma link del` waits for that.
TEST_F(DeviceSyncTest, ARemovedDeviceNoIdLivesOnIsClosedOnceNoArrayHoldsIt) {
  g_listed[0] = g_listed[1] = true;
  g_active[0][1] = g_active[1][1] = true;
  ASSERT_EQ(EnsurePortsLocked("test"), 0) << strerror(errno);
  ASSERT_EQ(PortOf(1, 1), "dev1:1");
  SetWatchNeedForTesting(WatchOpenDevices, FakeWatchStart);
  SetPortGidsReaderForTesting(FakePortGids);
  EXPECT_EQ(GidTableGeneration(&g_ctx[1]), 0u) << "dev1's GID watch started";
  const uint64_t stopped = GidWatchesStopped();
  ibv_ah_attr ah = {};
  CompleteAh(&g_ctx[1], 1, nullptr, &ah);
  const uint64_t reads = PortGidReads();

  int n = 0;
  ibv_context** held = rdma_get_devices(&n);
  ASSERT_EQ(n, 2);
  g_listed[1] = false;  // rdma link del dev1
  EXPECT_EQ(Listed(), Names{"dev0"});
  EXPECT_EQ(g_closes, 0) << "the first array still holds dev1";
  EXPECT_EQ(GidWatchesStopped(), stopped + 1) << "the watch's context and thread go first";
  EXPECT_EQ(PortOf(1, 1), "none");
  CompleteAh(&g_ctx[1], 1, nullptr, &ah);
  EXPECT_EQ(PortGidReads(), reads + 1) << "the kept tables of dev1 were dropped";
  rdma_free_devices(held);
  EXPECT_EQ(g_closes, 1) << "closed with the last array that held it";
  EXPECT_EQ(g_closed_ctx, &g_ctx[1]);
  EXPECT_EQ(DevicesClosed(), 1u);
  EXPECT_EQ(OpenContexts(), std::vector<ibv_context*>{&g_ctx[0]});
  EXPECT_EQ(Listed(), Names{"dev0"});
  EXPECT_EQ(g_closes, 1) << "once";

  g_listed[1] = true;  // the same device pointer added again: a new device, opened again
  EXPECT_EQ(Listed(), Names({"dev0", "dev1"}));
  EXPECT_EQ(PortOf(1, 1), "dev1:1") << "its port listed again on a miss";
  SetPortGidsReaderForTesting(nullptr);
  SetWatchNeedForTesting(nullptr, nullptr);
}

// dev0 and dev1 listed, each with port 1 ACTIVE, whose uscm device is the
// simulated host of the same number (dev0's port, 10.0.0.1: host 0's
// address); a program's channel and one id on it.
class SimulatedPortsTest : public DeviceSyncTest {
 protected:
  void SetUp() override {
    DeviceSyncTest::SetUp();
    g_sim = uscm_sim_create(5);
    ASSERT_NE(g_sim, nullptr);
    for (uscm_sim*& sim : g_reopen_sim) sim = nullptr;
    for (int& n : g_failing_opens) n = 0;
    SetPortDevicesForTesting(SimHostOfDevice, CountPortDeviceClose);
    g_port_devices_closed = g_port_devices_opened = 0;
    g_router_starts.clear();
    g_opened_at_router_start = -1;
    SetPortRouterStartForTesting(RecordRouterStart);
    g_listed[0] = g_listed[1] = true;
    g_active[0][1] = g_active[1][1] = true;
    ch_ = rdma_create_event_channel();
    ASSERT_NE(ch_, nullptr) << strerror(errno);
    ASSERT_EQ(rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  }
  void TearDown() override {
    if (ch_ != nullptr) rdma_destroy_event_channel(ch_);
    SetPortRouterStartForTesting(nullptr);
    SetPortDevicesForTesting(nullptr, nullptr);
    uscm_sim_destroy(g_sim);
    g_sim = nullptr;
    for (uscm_sim*& sim : g_reopen_sim) {
      uscm_sim_destroy(sim);
      sim = nullptr;
    }
    DeviceSyncTest::TearDown();
  }
  // rdma_bind_addr of `id` (NULL: id_) to IP:PORT; 0 or errno.
  int Bind(const char* ip, uint16_t port, rdma_cm_id* id = nullptr) {
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (id == nullptr) id = id_;
    return rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)) == 0 ? 0 : errno;
  }

  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
};

// A removed device an id lives on stays open, its id served, until that id
// is destroyed (librdmacm's ucma_put_device closes a dead device with its
// last reference): then the port's uscm device and the context close.
TEST_F(SimulatedPortsTest, ARemovedDeviceIsClosedWithItsLastId) {
  ASSERT_EQ(Bind("10.0.0.1", 7000), 0) << "dev0:1's address";
  EXPECT_EQ(id_->verbs, &g_ctx[0]);
  EXPECT_EQ(g_pds, 1) << "id->pd, the device's shared PD";

  g_listed[0] = false;  // rdma link del dev0
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(g_closes, 0) << "the id lives on dev0";
  EXPECT_EQ(g_port_devices_closed, 0);
  EXPECT_EQ(PortOf(0, 1), "none") << "no new id on it";
  EXPECT_EQ(rdma_get_local_addr(id_)->sa_family, AF_INET) << "the id is still served";
  // As the kernel's cma_process_remove: DEVICE_REMOVAL, status 0, once.
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(rdma_get_cm_event(ch_, &e), 0) << strerror(errno);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_DEVICE_REMOVAL);
  EXPECT_EQ(e->id, id_);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(Listed(), Names{"dev1"});
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(ch_, &e), -1) << "once";
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  EXPECT_EQ(g_pds, 0);
  EXPECT_EQ(g_port_devices_closed, 1) << "the port's uscm device, before the context";
  EXPECT_EQ(g_closes, 1) << "closed with its last id";
  EXPECT_EQ(g_closed_ctx, &g_ctx[0]);
}

// The port's MAD path lost (its uscmd exits once its umad file reads EIO on
// the device's removal), then the device's removal seen by the drop-in: the
// id gets one DEVICE_REMOVAL, status 0, as the kernel's cma_process_remove
// sends (uscm's own says -ENODEV), and not a second one from the listing.
TEST_F(SimulatedPortsTest, ALostPortAndItsRemovalAreOneDeviceRemoval) {
  ASSERT_EQ(Bind("10.0.0.1", 7000), 0) << "dev0:1's address";
  ASSERT_EQ(uscm_sim_lose_transport(g_sim, 0, "rxe0 port 1 is gone"), 0);
  std::vector<uscm_event_channel*> ports = PortChannelsForTesting();
  ASSERT_FALSE(ports.empty());
  ASSERT_EQ(uscm_sim_run_until_event(g_sim, ports.front(), 1000), 0) << "no uscm event";
  ASSERT_GT(PumpEvents(), 0);
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(rdma_get_cm_event(ch_, &e), 0) << strerror(errno);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_DEVICE_REMOVAL) << rdma_event_str(e->event);
  EXPECT_EQ(e->id, id_);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  g_listed[0] = false;  // rdma link del dev0, seen by the drop-in's listing
  EXPECT_EQ(Listed(), Names{"dev1"});
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(ch_, &e), -1) << "a second DEVICE_REMOVAL";
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  id_ = nullptr;
  EXPECT_EQ(g_closes, 1) << "closed with its last id";
}

// Whether a wildcard bind of `addr` ("0.0.0.0:PORT") is held on simulated
// host `host` (of g_sim unless `sim`): a probe's bind there is refused.
bool HeldOnHost(int host, const char* addr, uscm_sim* sim = nullptr) {
  uscm_event_channel* ch =
      uscm_create_event_channel_on(uscm_sim_device(sim != nullptr ? sim : g_sim, host));
  uscm_cm_id* probe = nullptr;
  uscm_addr a;
  const bool held = ch != nullptr && uscm_create_id(ch, &probe, nullptr, USCM_PS_TCP) == 0 &&
                    uscm_parse_addr(addr, &a) == 0 && uscm_bind_addr(probe, &a) != 0;
  if (probe != nullptr) uscm_destroy_id(probe);
  if (ch != nullptr) uscm_destroy_event_channel(ch);
  return held;
}

// A uscm id on simulated host `host` of `sim` (the fabric's, not the
// drop-in's), as the drop-in's peer.
class SimPeer {
 public:
  SimPeer(uscm_sim* sim, int host) : sim_(sim) {
    ch_ = uscm_create_event_channel_on(uscm_sim_device(sim, host));
    EXPECT_NE(ch_, nullptr);
    if (ch_ != nullptr) {
      EXPECT_EQ(uscm_create_id(ch_, &id_, nullptr, USCM_PS_TCP), 0) << uscm_last_error();
    }
  }
  ~SimPeer() {
    if (id_ != nullptr) uscm_destroy_id(id_);
    if (ch_ != nullptr) uscm_destroy_event_channel(ch_);
  }
  uscm_cm_id* id() const { return id_; }
  // The next event, run for: `want`, or NULL (a failure said why); the
  // caller acks it.
  uscm_cm_event* Next(uscm_cm_event_type want) {
    uscm_cm_event* ue = nullptr;
    EXPECT_EQ(uscm_sim_run_until_event(sim_, ch_, 120000), 0) << "no " << uscm_event_str(want);
    EXPECT_EQ(uscm_get_cm_event(ch_, &ue), 0) << uscm_last_error();
    if (ue == nullptr || ue->event == want) return ue;
    ADD_FAILURE() << uscm_event_str(ue->event) << " status " << ue->status << ", not "
                  << uscm_event_str(want);
    uscm_ack_cm_event(ue);
    return nullptr;
  }
  bool Saw(uscm_cm_event_type want) {
    uscm_cm_event* ue = Next(want);
    if (ue != nullptr) uscm_ack_cm_event(ue);
    return ue != nullptr;
  }
  // Resolves `dst` ("IP:PORT") and sends it a REQ.
  bool Connect(const char* dst) {
    uscm_addr a;
    if (uscm_parse_addr(dst, &a) != 0 || uscm_resolve_addr(id_, nullptr, &a, 2000) != 0 ||
        !Saw(USCM_CM_EVENT_ADDR_RESOLVED) || uscm_resolve_route(id_, 2000) != 0 ||
        !Saw(USCM_CM_EVENT_ROUTE_RESOLVED)) {
      return false;
    }
    uscm_conn_param cp = {};
    cp.qp_num = 0x123;
    return uscm_connect(id_, &cp) == 0;
  }

 private:
  uscm_sim* sim_;
  uscm_event_channel* ch_ = nullptr;
  uscm_cm_id* id_ = nullptr;
};

// The drop-in's next event on `ch`, its ports run on `sim` meanwhile (their
// events moved to the programs' channels); NULL when none came.
rdma_cm_event* NextOfDropIn(rdma_event_channel* ch, uscm_sim* sim) {
  for (int step = 0; step < 100 && QueuedEvents(ch) == 0; ++step) {
    for (uscm_event_channel* c : PortChannelsForTesting()) {
      if (c != nullptr) uscm_sim_run_until_event(sim, c, 50);
    }
    PumpEvents();
  }
  rdma_cm_event* e = nullptr;
  return QueuedEvents(ch) > 0 && rdma_get_cm_event(ch, &e) == 0 ? e : nullptr;
}

// The drop-in's `listener` on `ch` takes `client`'s REQ, on an id of the
// device `verbs`, and rejects it; the client gets REJECTED.
void TakeAndRejectRequest(rdma_event_channel* ch, uscm_sim* sim, rdma_cm_id* listener,
                          ibv_context* verbs, SimPeer& client) {
  rdma_cm_event* e = NextOfDropIn(ch, sim);
  ASSERT_NE(e, nullptr) << "no CONNECT_REQUEST";
  EXPECT_EQ(e->event, RDMA_CM_EVENT_CONNECT_REQUEST) << rdma_event_str(e->event);
  EXPECT_EQ(e->listen_id, listener);
  rdma_cm_id* conn = e->id;
  EXPECT_EQ(conn->verbs, verbs) << "the id's device";
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_reject(conn, nullptr, 0), 0) << strerror(errno);
  EXPECT_TRUE(client.Saw(USCM_CM_EVENT_REJECTED));
  EXPECT_EQ(rdma_destroy_id(conn), 0);
}

// A wildcard listener (id_, its own uscm id on dev0's port) and an id bound
// to dev0's address, on one channel: the kernel's cma_process_remove sends
// the bound id DEVICE_REMOVAL, status 0, and the wildcard listener nothing
// (it has no device: only its listen on dev0 goes). Each order of the
// port's lost MAD path (its uscmd exiting) and the drop-in's notice of the
// removal gives exactly that; the listener moves to dev1, where a probe
// finds its port held.
class LostPortOrderTest : public SimulatedPortsTest {
 protected:
  void SetUp() override {
    SimulatedPortsTest::SetUp();
    ASSERT_EQ(Bind("0.0.0.0", 7010), 0);
    ASSERT_EQ(rdma_listen(id_, 4), 0) << strerror(errno);
    ASSERT_EQ(rdma_create_id(ch_, &bound_, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    ASSERT_EQ(Bind("10.0.0.1", 7011, bound_), 0) << "dev0:1's address";
    ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
    ports_ = PortChannelsForTesting();
    ASSERT_EQ(ports_.size(), 2u);
  }
  // Host `host`'s MAD path lost, and uscm's events of it moved to ch_.
  void LosePath(int host) {
    ASSERT_EQ(uscm_sim_lose_transport(g_sim, host, "rxe port 1 is gone"), 0);
    ASSERT_EQ(uscm_sim_run_until_event(g_sim, ports_[host], 1000), 0) << "no uscm event";
    ASSERT_GT(PumpEvents(), 0);
  }
  // The events on ch_ now, as "ID EVENT status S" (ID: W or bound), acked.
  std::vector<std::string> Events() {
    std::vector<std::string> got;
    rdma_cm_event* e = nullptr;
    while (rdma_get_cm_event(ch_, &e) == 0) {
      got.push_back(std::string(e->id == id_        ? "W "
                                : e->id == bound_   ? "bound "
                                : e->id == listener_ ? "L "
                                                     : "? ") +
                    rdma_event_str(e->event) + " status " + std::to_string(e->status));
      rdma_ack_cm_event(e);
    }
    EXPECT_EQ(errno, EAGAIN);
    return got;
  }
  static bool Port7010HeldOn(int host) { return HeldOnHost(host, "0.0.0.0:7010"); }
  void ExpectTheEnd() {
    EXPECT_TRUE(Port7010HeldOn(1)) << "the listener listens on dev1";
    EXPECT_EQ(g_closes, 0) << "dev0 is held by the bound id";
    EXPECT_EQ(rdma_destroy_id(bound_), 0);
    EXPECT_EQ(g_closes, 1) << "dev0 closed with the bound id";
    EXPECT_EQ(g_closed_ctx, &g_ctx[0]);
    EXPECT_TRUE(Port7010HeldOn(1)) << "the listener still listens on dev1";
    EXPECT_EQ(rdma_destroy_id(id_), 0);
    id_ = nullptr;
    EXPECT_FALSE(Port7010HeldOn(1));
  }

  rdma_cm_id* bound_ = nullptr;
  rdma_cm_id* listener_ = nullptr;  // BoundListenerTest's
  std::vector<uscm_event_channel*> ports_;
};

TEST_F(LostPortOrderTest, AWildcardListenerGetsNoEventWhenItsPortsPathIsLostFirst) {
  LosePath(0);
  EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"});
  g_listed[0] = false;  // rdma link del dev0, seen by the drop-in's listing
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(Events(), std::vector<std::string>{}) << "one DEVICE_REMOVAL, none for W";
  ExpectTheEnd();
}

TEST_F(LostPortOrderTest, AWildcardListenerGetsNoEventWhenItsPortsPathIsLostLast) {
  g_listed[0] = false;  // rdma link del dev0, seen by the drop-in's listing
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"});
  LosePath(0);
  EXPECT_EQ(Events(), std::vector<std::string>{}) << "one DEVICE_REMOVAL, none for W";
  ExpectTheEnd();
}

// dev0 removed, and its uscmd's exit (its umad file reads EIO) reaching the
// drop-in before any listing saw the removal: the lost path lists the
// devices, and dev0's port is left to the removal's path, not replaced (no
// port opened again on a device that is gone).
TEST_F(LostPortOrderTest, ARemovedDevicesLostPathIsNotReplacedBeforeTheListing) {
  g_listed[0] = false;  // rdma link del dev0, not listed by the drop-in yet
  LosePath(0);
  EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"});
  for (const Port* p : PortsLocked()) EXPECT_FALSE(p->replaces_lost) << p->ca << " opened again";
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(Events(), std::vector<std::string>{}) << "one DEVICE_REMOVAL, none for W";
  ExpectTheEnd();
}

// dev1's MAD path lost while dev1 stays (its uscmd killed): the listener's
// listen there (not its own uscm id) sends it nothing either, and it still
// listens on dev0, its own port, where the bound id lives on and gets
// nothing; the uscm-ports thread's next step puts its listen back on dev1,
// through dev1's new uscmd, and closes the old uscm device.
TEST_F(LostPortOrderTest, AWildcardListenerGetsNoEventWhenAnotherPortsPathIsLost) {
  uscm_sim* sim2 = g_reopen_sim[1] = uscm_sim_create(6);  // dev1's new uscmd's fabric
  ASSERT_NE(sim2, nullptr);
  LosePath(1);
  EXPECT_EQ(Events(), std::vector<std::string>{});
  EXPECT_TRUE(Port7010HeldOn(0));
  EXPECT_FALSE(HeldOnHost(1, "0.0.0.0:7010", sim2));
  RunPortResyncForTesting();  // the uscm-ports thread's next step
  EXPECT_TRUE(HeldOnHost(1, "0.0.0.0:7010", sim2)) << "listening on dev1 through its new uscmd";
  EXPECT_EQ(g_port_devices_closed, 1) << "dev1's old uscm device: no id lives there";
  EXPECT_EQ(rdma_destroy_id(bound_), 0);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  id_ = nullptr;
  EXPECT_FALSE(Port7010HeldOn(0));
  EXPECT_EQ(g_closes, 0) << "no device removed";
}

// dev0's uscmd killed while dev0 stays: its MAD path lost, the port opened
// again through a new uscmd (its MADs on another fabric, g_reopen_sim[0]: a
// new transport to the same port), as the kernel's listener, whose CM never
// goes away, keeps listening. The bound id gets its one DEVICE_REMOVAL and
// keeps the old uscm device until destroyed; the listener gets none.
class KilledUscmdTest : public LostPortOrderTest {
 protected:
  void SetUp() override {
    LostPortOrderTest::SetUp();
    g_reopen_sim[0] = sim2_ = uscm_sim_create(6);
    ASSERT_NE(sim2_, nullptr);
    LosePath(0);
    EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"});
  }
  // Whether port 7010 is held on the new uscmd's dev0.
  bool Port7010HeldThroughTheNewUscmd() { return HeldOnHost(0, "0.0.0.0:7010", sim2_); }

  uscm_sim* sim2_ = nullptr;
};

TEST_F(KilledUscmdTest, AWildcardListenerTakesARequestOnThePortAgain) {
  EXPECT_FALSE(Port7010HeldThroughTheNewUscmd());
  RunPortResyncForTesting();  // the uscm-ports thread's next step
  EXPECT_TRUE(Port7010HeldThroughTheNewUscmd()) << "listening on dev0 through the new uscmd";
  EXPECT_EQ(id_->verbs, nullptr) << "still on no device";

  SimPeer client(sim2_, 1);
  ASSERT_TRUE(client.Connect("10.0.0.1:7010"));
  TakeAndRejectRequest(ch_, sim2_, id_, &g_ctx[0], client);

  EXPECT_EQ(Events(), std::vector<std::string>{}) << "one DEVICE_REMOVAL, none for W";
  EXPECT_EQ(g_port_devices_closed, 0) << "the old uscm device is the bound id's";
  EXPECT_EQ(rdma_destroy_id(bound_), 0);
  EXPECT_EQ(g_port_devices_closed, 1) << "closed with the bound id, its last";
  EXPECT_EQ(g_closes, 0) << "dev0 stays";
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  id_ = nullptr;
  EXPECT_FALSE(Port7010HeldThroughTheNewUscmd());
}

TEST_F(KilledUscmdTest, ANewIdBoundOnThePortConnects) {
  SimPeer server(sim2_, 1);
  uscm_addr a;
  ASSERT_EQ(uscm_parse_addr("10.0.0.2:7013", &a), 0);
  ASSERT_EQ(uscm_bind_addr(server.id(), &a), 0) << uscm_last_error();
  ASSERT_EQ(uscm_listen(server.id(), 4), 0) << uscm_last_error();

  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  ASSERT_EQ(Bind("10.0.0.1", 7012, id), 0) << "dev0:1's address";
  EXPECT_EQ(id->verbs, &g_ctx[0]);
  sockaddr_in dst = {};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(7013);
  inet_pton(AF_INET, "10.0.0.2", &dst.sin_addr);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  auto next = [&](rdma_cm_event_type want) {
    rdma_cm_event* e = NextOfDropIn(ch_, sim2_);
    if (e == nullptr) return std::string("none");
    const std::string got = rdma_event_str(e->event);
    EXPECT_EQ(e->id, id);
    rdma_ack_cm_event(e);
    return e->event == want ? std::string("ok") : got;
  };
  ASSERT_EQ(next(RDMA_CM_EVENT_ADDR_RESOLVED), "ok");
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  ASSERT_EQ(next(RDMA_CM_EVENT_ROUTE_RESOLVED), "ok");
  rdma_conn_param param = {};
  param.qp_num = 0x4242;
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
  uscm_cm_event* req = server.Next(USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr) << "the REQ went out through the new uscmd";
  uscm_cm_id* passive = req->id;
  uscm_conn_param answer = {};
  answer.qp_num = 0x4343;
  ASSERT_EQ(uscm_accept(passive, &answer), 0) << uscm_last_error();
  uscm_ack_cm_event(req);
  ASSERT_EQ(next(RDMA_CM_EVENT_CONNECT_RESPONSE), "ok");
  ASSERT_EQ(rdma_establish(id), 0) << strerror(errno);
  EXPECT_TRUE(server.Saw(USCM_CM_EVENT_ESTABLISHED));
  uscm_destroy_id(passive);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_EQ(Events(), std::vector<std::string>{}) << "one DEVICE_REMOVAL";
  EXPECT_EQ(rdma_destroy_id(bound_), 0);
}

// A listener bound to dev0's own address (rping -s -a, ucmatose -b), L, with
// the wildcard listener W and the bound id of LostPortOrderTest. When dev0's
// uscmd is killed while dev0 stays, the kernel's listener keeps listening
// (its CM never goes away): L gets no event and listens again on dev0
// through the new uscmd (g_reopen_sim[0]) at the uscm-ports thread's next
// step; when dev0 was removed, L gets its one DEVICE_REMOVAL.
class BoundListenerTest : public LostPortOrderTest {
 protected:
  void SetUp() override {
    LostPortOrderTest::SetUp();
    g_reopen_sim[0] = sim2_ = uscm_sim_create(6);
    ASSERT_NE(sim2_, nullptr);
    ASSERT_EQ(rdma_create_id(ch_, &listener_, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    ASSERT_EQ(Bind("10.0.0.1", 7014, listener_), 0) << "dev0:1's address";
    ASSERT_EQ(rdma_listen(listener_, 4), 0) << strerror(errno);
  }
  bool HeldThroughTheNewUscmd() { return HeldOnHost(0, "10.0.0.1:7014", sim2_); }

  uscm_sim* sim2_ = nullptr;
};

TEST_F(BoundListenerTest, AListenerBoundToThePortsAddressListensAgainThroughTheNewUscmd) {
  LosePath(0);
  EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"})
      << "none for L";
  EXPECT_FALSE(HeldThroughTheNewUscmd());
  RunPortResyncForTesting();  // the uscm-ports thread's next step
  EXPECT_TRUE(HeldThroughTheNewUscmd()) << "L listens on dev0 through the new uscmd";
  EXPECT_EQ(listener_->verbs, &g_ctx[0]) << "still on dev0";

  SimPeer client(sim2_, 1);
  ASSERT_TRUE(client.Connect("10.0.0.1:7014"));
  TakeAndRejectRequest(ch_, sim2_, listener_, &g_ctx[0], client);
  EXPECT_EQ(Events(), std::vector<std::string>{});
  EXPECT_EQ(g_port_devices_closed, 0) << "the old uscm device is the bound id's";
  EXPECT_EQ(rdma_destroy_id(bound_), 0);
  EXPECT_EQ(g_port_devices_closed, 1) << "closed with the bound id: L left it";
  EXPECT_EQ(rdma_destroy_id(listener_), 0);
  listener_ = nullptr;
  EXPECT_FALSE(HeldThroughTheNewUscmd());
  EXPECT_EQ(g_closes, 0) << "dev0 stays";
}

// The new uscmd does not start at the step's first tries: the step tries
// dev0's fresh entry again at the 1st, 2nd and 4th step after a failure
// (a bounded back-off), and L listens once it opens.
TEST_F(BoundListenerTest, AFailedOpenIsTriedAgainAtLaterSteps) {
  LosePath(0);
  EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"});
  g_failing_opens[0] = 3;
  std::vector<int> tried;  // the steps that opened dev0's port
  for (int step = 1; step <= 8; ++step) {
    const int before = g_port_devices_opened;
    RunPortResyncForTesting();
    if (g_port_devices_opened != before) tried.push_back(step);
  }
  EXPECT_EQ(tried, (std::vector<int>{1, 2, 4, 8})) << "tries 1 and 2 fail, then 1 and 3 steps skipped";
  EXPECT_TRUE(HeldThroughTheNewUscmd()) << "L listens once the open succeeds";
  EXPECT_TRUE(HeldOnHost(0, "0.0.0.0:7010", sim2_)) << "and W";
  EXPECT_EQ(Events(), std::vector<std::string>{});
  const int opened = g_port_devices_opened;
  RunPortResyncForTesting();
  EXPECT_EQ(g_port_devices_opened, opened) << "open: not tried again";
}

// Another process took L's address through the new uscmd before the step:
// L cannot listen there again and gets its one DEVICE_REMOVAL, as it did
// before the move existed.
TEST_F(BoundListenerTest, AListenerWhoseAddressIsTakenMeanwhileGetsDeviceRemoval) {
  LosePath(0);
  EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"});
  SimPeer other(sim2_, 0);
  uscm_addr a;
  ASSERT_EQ(uscm_parse_addr("10.0.0.1:7014", &a), 0);
  ASSERT_EQ(uscm_bind_addr(other.id(), &a), 0) << uscm_last_error();
  RunPortResyncForTesting();
  EXPECT_EQ(Events(), std::vector<std::string>{"L RDMA_CM_EVENT_DEVICE_REMOVAL status 0"});
  RunPortResyncForTesting();
  EXPECT_EQ(Events(), std::vector<std::string>{}) << "once";
  EXPECT_EQ(rdma_destroy_id(listener_), 0);
  listener_ = nullptr;
}

// dev0 removed, its uscmd's exit reaching the drop-in before any listing saw
// it: L gets its one DEVICE_REMOVAL (cma_process_remove), and is not moved.
TEST_F(BoundListenerTest, AListenerBoundToARemovedDevicesAddressGetsDeviceRemoval) {
  g_listed[0] = false;  // rdma link del dev0, not listed by the drop-in yet
  LosePath(0);
  EXPECT_EQ(Events(), (std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0",
                                                "L RDMA_CM_EVENT_DEVICE_REMOVAL status 0"}));
  RunPortResyncForTesting();
  EXPECT_EQ(Events(), std::vector<std::string>{}) << "once";
  EXPECT_FALSE(HeldThroughTheNewUscmd());
  EXPECT_EQ(rdma_destroy_id(listener_), 0);
  listener_ = nullptr;
  ExpectTheEnd();
}

// A wildcard bind opens every port: their routers (uscmds) are asked to start
// together, before the first port opens (issue 13), not one per open. A bind
// of one port's address asks nothing of the kind (its open starts its own
// router), nor does a wildcard bind that has one port left to open.
TEST_F(SimulatedPortsTest, AWildcardBindStartsEveryPortsRouterBeforeOpeningAny) {
  ASSERT_EQ(Bind("0.0.0.0", 7010), 0);
  EXPECT_EQ(g_router_starts, (std::vector<std::vector<std::string>>{{"dev0:1", "dev1:1"}}));
  EXPECT_EQ(g_opened_at_router_start, 0) << "ports opened before their routers were started";
  EXPECT_EQ(g_port_devices_opened, 2);
}

TEST_F(SimulatedPortsTest, OnlyACallThatOpensSeveralPortsStartsTheirRoutersTogether) {
  ASSERT_EQ(Bind("10.0.0.1", 7011), 0) << "dev0:1's address";
  EXPECT_EQ(g_port_devices_opened, 1);
  rdma_cm_id* wild = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &wild, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in any = {};
  any.sin_family = AF_INET;
  any.sin_port = htons(7012);
  ASSERT_EQ(rdma_bind_addr(wild, reinterpret_cast<sockaddr*>(&any)), 0) << strerror(errno);
  EXPECT_EQ(g_port_devices_opened, 2);
  EXPECT_TRUE(g_router_starts.empty()) << g_router_starts.size() << " starts";
  EXPECT_EQ(rdma_destroy_id(wild), 0);
}

// The kernel sends DEVICE_REMOVAL to every id on a device when it goes
// (cma_process_remove), with no call of the program. While a port is open the
// uscm-ports thread (port_resync.h) lists the devices when the uevent says a
// verbs device was removed (the test's socket stands in for the kernel's
// uevent socket, the thread's period is an hour): an asynchronous id and a
// synchronous one on the device each get DEVICE_REMOVAL, status 0, once,
// while the program makes no call.
// Waits (bounded, not timed) until `ch` has an event, then takes it.
rdma_cm_event* NextWithin20s(rdma_event_channel* ch) {
  pollfd p = {ch->fd, POLLIN, 0};
  if (poll(&p, 1, 20'000) != 1) return nullptr;
  rdma_cm_event* e = nullptr;
  return rdma_get_cm_event(ch, &e) == 0 ? e : nullptr;
}

TEST_F(SimulatedPortsTest, DeviceRemovalComesWhenTheDeviceGoes) {
  using namespace std::string_literals;
  const TestUevents uevents;
  ASSERT_TRUE(uevents.ok()) << strerror(errno);
  NoPortResyncThreadForTesting(false);
  ASSERT_EQ(Bind("10.0.0.1", 7005), 0) << "dev0:1's address";
  EXPECT_TRUE(PortResyncRunning()) << "a port is open: its device's removal is watched";
  rdma_cm_id* sync = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &sync, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(7006);
  inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
  ASSERT_EQ(rdma_bind_addr(sync, reinterpret_cast<sockaddr*>(&a)), 0) << strerror(errno);
  EXPECT_EQ(sync->port_num, 1);

  g_listed[0] = false;  // rdma link del dev0
  const std::string removed =
      "remove@/devices/virtual/infiniband_verbs/uverbs0\0ACTION=remove\0"
      "DEVPATH=/devices/virtual/infiniband_verbs/uverbs0\0SUBSYSTEM=infiniband_verbs\0"s;
  ASSERT_TRUE(uevents.Send(removed)) << strerror(errno);
  rdma_cm_event* e = NextWithin20s(ch_);
  ASSERT_NE(e, nullptr) << "no DEVICE_REMOVAL within 20 s: none until the program's next call";
  EXPECT_EQ(e->event, RDMA_CM_EVENT_DEVICE_REMOVAL) << rdma_event_str(e->event);
  EXPECT_EQ(e->id, id_);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  // The synchronous id's, on its own channel: its next call that waits for
  // an event reads it, as librdmacm's ucma_complete.
  e = NextWithin20s(sync->channel);
  ASSERT_NE(e, nullptr) << "the synchronous id got none";
  EXPECT_EQ(e->event, RDMA_CM_EVENT_DEVICE_REMOVAL) << rdma_event_str(e->event);
  EXPECT_EQ(e->id, sync);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(g_closes, 0) << "the ids live on dev0";

  EXPECT_EQ(Listed(), Names{"dev1"});
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(ch_, &e), -1) << "once";
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(QueuedEvents(sync->channel), 0) << "once";
  EXPECT_EQ(rdma_destroy_id(sync), 0);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  EXPECT_EQ(g_closes, 1) << "closed with its last id";
  EXPECT_FALSE(PortResyncRunning()) << "no live port open, no wildcard id: stopped";
}

// USCM_CM_COUNTERS=1's exit line per port (ports.h CmCountersLinesLocked,
// read under the library's lock): a removed device's port closed before the
// exit (with its last id) keeps the counters it had when it was released.
TEST_F(SimulatedPortsTest, TheCmCountersOfARemovedDevicesPortStayForTheExitLines) {
  ASSERT_EQ(setenv("USCM_CM_COUNTERS", "1", 1), 0);
  auto lines = [] {
    std::lock_guard<std::mutex> lock(LibraryLockForTesting());
    return CmCountersLinesLocked();
  };
  ASSERT_EQ(Bind("10.0.0.1", 7004), 0) << "dev0:1's address";
  const std::string open = lines();
  EXPECT_NE(open.find(" dev0 port 1 CM sent/received/retransmitted/duplicates:"),
            std::string::npos) << open;
  EXPECT_EQ(open.find("(device removed)"), std::string::npos) << open;

  g_listed[0] = false;  // rdma link del dev0
  EXPECT_EQ(Listed(), Names{"dev1"});
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(rdma_get_cm_event(ch_, &e), 0) << strerror(errno);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_DEVICE_REMOVAL);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  EXPECT_EQ(g_port_devices_closed, 1) << "dev0's port closed with its last id";
  const std::string after = lines();
  EXPECT_NE(after.find(" dev0 port 1 CM sent/received/retransmitted/duplicates:"),
            std::string::npos) << after;
  EXPECT_NE(after.find("(device removed)"), std::string::npos) << after;
  ASSERT_EQ(unsetenv("USCM_CM_COUNTERS"), 0);
}

// A wildcard listener listens on every device (the kernel's
// cma_listen_on_all); when one is removed, the kernel destroys the listen on
// it (cma_process_remove) and the listener stays: the drop-in's uscm id on
// the removed device's port is destroyed, then its uscm device and context
// are closed; the listener still listens on the device its id lives on.
TEST_F(SimulatedPortsTest, AWildcardListenersListenOnARemovedDeviceIsDropped) {
  ASSERT_EQ(Bind("0.0.0.0", 7001), 0);
  ASSERT_EQ(rdma_listen(id_, 4), 0) << strerror(errno);
  // Whether the listener's uscm id on dev1's port still holds port 7001 there.
  uscm_event_channel* probe_ch = uscm_create_event_channel_on(uscm_sim_device(g_sim, 1));
  ASSERT_NE(probe_ch, nullptr);
  auto port_7001_free_on_dev1 = [&] {
    uscm_cm_id* probe = nullptr;
    if (uscm_create_id(probe_ch, &probe, nullptr, USCM_PS_TCP) != 0) return false;
    uscm_addr a;
    const bool bound = uscm_parse_addr("0.0.0.0:7001", &a) == 0 && uscm_bind_addr(probe, &a) == 0;
    uscm_destroy_id(probe);
    return bound;
  };
  EXPECT_FALSE(port_7001_free_on_dev1()) << "the listener listens on dev1 too";

  g_listed[1] = false;  // rdma link del dev1
  EXPECT_EQ(Listed(), Names{"dev0"});
  EXPECT_TRUE(port_7001_free_on_dev1()) << "its listen on dev1 destroyed";
  uscm_destroy_event_channel(probe_ch);
  EXPECT_EQ(g_port_devices_closed, 1) << "dev1's port's uscm device";
  EXPECT_EQ(g_closes, 1);
  EXPECT_EQ(g_closed_ctx, &g_ctx[1]);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  EXPECT_EQ(g_closes, 1) << "dev0 is not removed";
}

// A wildcard listener's own uscm id (the one its calls use) lives on the
// first port, dev0's; librdmacm's wildcard listener has no device (id->verbs,
// pd, port_num: none) and the kernel's cma_process_remove destroys only its
// listen on a removed device and sends it no event. When dev0 goes the
// listener moves to dev1, where it listens already, and dev0 is closed (rxe's
// `rdma link del` waits for that); no event on its channel, and a client
// still reaches it on dev1.
TEST_F(SimulatedPortsTest, AWildcardListenerWhoseOwnPortIsRemovedMovesToAnother) {
  ASSERT_EQ(Bind("0.0.0.0", 7008), 0);
  ASSERT_EQ(rdma_listen(id_, 4), 0) << strerror(errno);
  EXPECT_EQ(id_->verbs, nullptr) << "as librdmacm's wildcard: no device";
  EXPECT_EQ(id_->pd, nullptr);
  EXPECT_EQ(id_->port_num, 0);

  g_listed[0] = false;  // rdma link del dev0, the listener's own port's
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(g_port_devices_closed, 1) << "dev0's port's uscm device";
  EXPECT_EQ(g_closes, 1) << "dev0 closed: the listener does not hold it";
  EXPECT_EQ(g_closed_ctx, &g_ctx[0]);
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  errno = 0;
  if (rdma_get_cm_event(ch_, &e) == 0) {
    ADD_FAILURE() << "no event for a wildcard listener; got " << rdma_event_str(e->event);
    rdma_ack_cm_event(e);
  } else {
    EXPECT_EQ(errno, EAGAIN);
  }

  // A client on host 0 (the fabric's, no longer the drop-in's) to dev1's
  // host, 10.0.0.2:7008.
  SimPeer client(g_sim, 0);
  ASSERT_TRUE(client.Connect("10.0.0.2:7008"));
  TakeAndRejectRequest(ch_, g_sim, id_, &g_ctx[1], client);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  EXPECT_EQ(g_closes, 1) << "dev1 is not removed";
}

// The same listener with no other port (dev1's is down): on no port once
// dev0 goes (the kernel's wildcard listener stays, on no device), dev0
// closed, no event; dev0 added back gets the listen again, as the kernel's
// cma_add_one puts every wildcard listener on a new device.
bool Port7009HeldOnHost0() { return HeldOnHost(0, "0.0.0.0:7009"); }

TEST_F(SimulatedPortsTest, AWildcardListenerOnItsOnlyRemovedPortListensOnItAddedBack) {
  g_active[1][1] = false;
  ASSERT_EQ(Bind("0.0.0.0", 7009), 0);
  ASSERT_EQ(rdma_listen(id_, 4), 0) << strerror(errno);
  EXPECT_TRUE(Port7009HeldOnHost0());

  g_listed[0] = false;  // rdma link del dev0
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(g_closes, 1) << "dev0 closed";
  EXPECT_FALSE(Port7009HeldOnHost0()) << "its listen there destroyed";
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch_, &e) == 0) {
    ADD_FAILURE() << "no event for a wildcard listener; got " << rdma_event_str(e->event);
    rdma_ack_cm_event(e);
  }

  g_listed[0] = true;  // rdma link add dev0
  RunPortResyncForTesting();  // the uscm-ports thread's listing
  EXPECT_TRUE(Port7009HeldOnHost0()) << "listening on dev0 again";
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  EXPECT_FALSE(Port7009HeldOnHost0());
}

// A wildcard listener's program that makes no call (waiting for events): the
// uscm-ports thread's once-a-second listing (port_resync.h) sees dev1 go and
// closes it; the ports' progress hooks do not (a progress thread cannot join
// itself).
TEST_F(SimulatedPortsTest, ARemovedDeviceIsClosedByTheListenersPortThread) {
  ASSERT_EQ(Bind("0.0.0.0", 7002), 0);
  ASSERT_EQ(rdma_listen(id_, 4), 0) << strerror(errno);
  g_listed[1] = false;  // rdma link del dev1
  RunProgressHookForTesting();
  EXPECT_EQ(g_closes, 0) << "not from a progress thread";
  RunPortResyncForTesting();  // the thread's step, a second later
  EXPECT_EQ(g_port_devices_closed, 1);
  EXPECT_EQ(g_closes, 1);
  EXPECT_EQ(g_closed_ctx, &g_ctx[1]);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
}

// The uscm-ports thread opens a new port without the library's lock; a
// removal noticed meanwhile (another thread's rdma_get_devices) must not close
// the device under that open: it is left for the thread's own step, which
// closes it once the open is installed.
int g_closes_during_open = -1;
uscm_device* OpenWhileDev1IsRemoved(ibv_context* verbs, int port) {
  if (verbs == &g_ctx[1]) {
    g_listed[1] = false;  // rdma link del dev1, seen by a call of another thread
    int n = 0;
    rdma_free_devices(rdma_get_devices(&n));
    g_closes_during_open = g_closes;
  }
  return SimHostOfDevice(verbs, port);
}

TEST_F(SimulatedPortsTest, ADeviceIsNotClosedUnderThePortThreadsOpen) {
  g_active[1][1] = false;  // dev1's port comes later
  ASSERT_EQ(Bind("0.0.0.0", 7003), 0) << "on dev0's port";
  ASSERT_EQ(rdma_listen(id_, 4), 0) << strerror(errno);
  g_active[1][1] = true;
  SetPortDevicesForTesting(OpenWhileDev1IsRemoved, CountPortDeviceClose);
  RunPortResyncForTesting();  // lists dev1, opens its port, meanwhile dev1 goes
  EXPECT_EQ(g_closes_during_open, 0) << "not under the open";
  EXPECT_EQ(g_closes, 1) << "by the step, after the open";
  EXPECT_EQ(g_closed_ctx, &g_ctx[1]);
  EXPECT_EQ(g_port_devices_closed, 1) << "the port's uscm device the open made";
  EXPECT_EQ(rdma_destroy_id(id_), 0);
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
