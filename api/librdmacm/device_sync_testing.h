// The fixtures of device_sync_test and lost_port_test: libibverbs' device
// list, the device and port queries and the ports' addresses are the test's
// fakes (three devices, dev0 with two ports), so a test adds a device, brings a
// port up or removes a device between two calls, as `rdma link add`, a link
// coming up or `rdma link del` would; SimulatedPortsTest's ports are the
// simulated hosts of api/c/uscm_sim_c.h, and a SimPeer is a uscm id there.
#ifndef USCM_API_LIBRDMACM_DEVICE_SYNC_TESTING_H_
#define USCM_API_LIBRDMACM_DEVICE_SYNC_TESTING_H_

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
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
#include "gtest/gtest.h"

namespace uscm::librdmacm {

// What the "kernel" has: three devices (dev0 with two ports), which are
// listed, which ports are ACTIVE, and each port's one address.
inline constexpr int kDevices = 3;
inline ibv_device g_dev[kDevices];
inline ibv_context g_ctx[kDevices];
inline bool g_listed[kDevices];
inline bool g_active[kDevices][3];  // [device][port]
inline int g_opens = 0;
inline int g_closes = 0;
inline ibv_context* g_closed_ctx = nullptr;
inline int g_port_queries = 0;

// Port `port` of device `device` has the one address 10.0.<device>.<port>
// (IPv4-mapped, as the drop-in passes it).
inline uscm_addr AddressOf(int device, int port) {
  uscm_addr a = {};
  a.family = USCM_AF_INET;
  a.ip[10] = a.ip[11] = 0xff;
  a.ip[12] = 10;
  a.ip[14] = static_cast<uint8_t>(device);
  a.ip[15] = static_cast<uint8_t>(port);
  return a;
}

inline int IndexOf(const ibv_context* verbs) { return static_cast<int>(verbs - g_ctx); }

inline ibv_device** FakeList(int* count) {
  auto** list = static_cast<ibv_device**>(calloc(kDevices + 1, sizeof(ibv_device*)));
  int n = 0;
  for (int i = 0; i < kDevices; ++i) {
    if (g_listed[i]) list[n++] = &g_dev[i];
  }
  *count = n;
  return list;
}
inline void FakeFree(ibv_device** list) { free(list); }
inline ibv_context* FakeOpen(ibv_device* device) {
  ++g_opens;
  return &g_ctx[device - g_dev];
}
inline int FakeClose(ibv_context* verbs) {
  ++g_closes;
  g_closed_ctx = verbs;
  return 0;
}

// The GID watch of a device the library has open (as NeedOf: a removed one
// is not watched), with no context or thread; the kept GID tables' reader.
inline WatchNeed WatchOpenDevices(ibv_context* verbs) {
  const std::vector<ibv_context*> open = OpenContexts();
  return std::find(open.begin(), open.end(), verbs) != open.end() ? WatchNeed::kHasEthernet
                                                                   : WatchNeed::kNotOurs;
}
inline void FakeWatchStart(ibv_context*, bool* following) { *following = true; }
// The shared PD, and a port's uscm device (SimulatedPortsTest); closes
// counted.
inline ibv_pd g_pd;
inline int g_pds = 0;
inline ibv_pd* FakeAllocPd(ibv_context*) {
  ++g_pds;
  return &g_pd;
}
inline int FakeDeallocPd(ibv_pd*) {
  --g_pds;
  return 0;
}
inline uscm_sim* g_sim = nullptr;
inline int g_port_devices_closed = 0;
inline int g_port_devices_opened = 0;
// The fabric devN's port is opened on again once its uscmd was killed (the
// new uscmd's MAD path), or NULL: g_sim.
inline uscm_sim* g_reopen_sim[kDevices] = {};
// How many more opens of devN's port fail (a new uscmd that did not start).
inline int g_failing_opens[kDevices] = {};
inline uscm_device* SimHostOfDevice(ibv_context* verbs, int) {  // devN on simulated host N
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
inline std::vector<std::vector<std::string>> g_router_starts;
inline int g_opened_at_router_start = -1;
inline void RecordRouterStart(const std::vector<const Port*>& ports) {
  std::vector<std::string> names;
  for (const Port* p : ports) names.push_back(p->ca + ":" + std::to_string(p->port_num));
  g_router_starts.push_back(names);
  g_opened_at_router_start = g_port_devices_opened;
}
inline int CountPortDeviceClose(uscm_device*) {
  ++g_port_devices_closed;
  return 0;
}

inline PortGids FakePortGids(ibv_context*, uint8_t) {
  PortGids g;
  g.ethernet = true;
  g.table.resize(1);
  return g;
}

inline int FakeQueryDevice(ibv_context* verbs, ibv_device_attr* attr) {
  *attr = {};
  attr->phys_port_cnt = IndexOf(verbs) == 0 ? 2 : 1;
  return 0;
}

inline int FakeQueryPort(ibv_context* verbs, uint8_t port, ibv_port_attr* attr) {
  ++g_port_queries;
  *attr = {};
  attr->state = g_active[IndexOf(verbs)][port] ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  attr->gid_tbl_len = 16;
  return 0;
}

// Each reading 1 s later than the last: every miss may list (the 100 ms
// spacing is AMissWithin100MsOfTheLastListingListsNothing's).
inline int64_t g_now_ns = 0;
inline int64_t g_step_ns = 0;
inline int64_t FakeNow() { return g_now_ns += g_step_ns; }

inline uint64_t FakeGeneration(const Port&) { return 0; }
inline uint64_t FakeChanges() { return 0; }  // no address change: only misses list again
inline void FakeRead(Port* p) { p->ips = {KeyOf(AddressOf(IndexOf(p->verbs), p->port_num))}; }

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

// Whether a wildcard bind of `addr` ("0.0.0.0:PORT") is held on simulated
// host `host` (of g_sim unless `sim`): a probe's bind there is refused.
inline bool HeldOnHost(int host, const char* addr, uscm_sim* sim = nullptr) {
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
  // `ps` and `qp_type` as uscm_create_id and uscm_set_qp_type take them
  // (a UD id's Connect sends a SIDR_REQ).
  SimPeer(uscm_sim* sim, int host, uscm_port_space ps = USCM_PS_TCP,
          uscm_qp_type qp_type = USCM_QPT_RC)
      : sim_(sim) {
    ch_ = uscm_create_event_channel_on(uscm_sim_device(sim, host));
    EXPECT_NE(ch_, nullptr);
    if (ch_ != nullptr) {
      EXPECT_EQ(uscm_create_id(ch_, &id_, nullptr, ps), 0) << uscm_last_error();
    }
    if (id_ != nullptr && qp_type != USCM_QPT_RC) {
      EXPECT_EQ(uscm_set_qp_type(id_, qp_type), 0) << uscm_last_error();
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
inline rdma_cm_event* NextOfDropIn(rdma_event_channel* ch, uscm_sim* sim) {
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
inline void TakeAndRejectRequest(rdma_event_channel* ch, uscm_sim* sim, rdma_cm_id* listener,
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

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_DEVICE_SYNC_TESTING_H_
