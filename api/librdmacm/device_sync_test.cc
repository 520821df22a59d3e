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
#include "api/librdmacm/device_sync_testing.h"
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
