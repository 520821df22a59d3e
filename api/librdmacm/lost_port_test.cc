// A port whose uscmd died (its MAD path lost, lost_ports.cc) while its
// device stays or goes: the ids and listeners on it, in each order of the
// loss and the drop-in's notice of the removal, and the port opened again
// through a new uscmd (port_resync.cc). The fixtures are
// device_sync_testing.h's: fake devices, ports on simulated hosts.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_sim_c.h"
#include "api/librdmacm/device_sync_testing.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/port_resync.h"
#include "api/librdmacm/ports.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

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

// `id`, on `ch` (the drop-in's ports run on `sim`), connects to a uscm id
// listening on 10.0.0.2:`port` (host 1 of `sim`), which accepts: the
// id's ADDR_RESOLVED (resolved from `src` when given, an IPv4 address),
// ROUTE_RESOLVED and CONNECT_RESPONSE, rdma_establish, the peer's
// CONNECT_REQUEST and ESTABLISHED; a failure names the step.
void ConnectToAcceptingPeer(rdma_event_channel* ch, uscm_sim* sim, rdma_cm_id* id,
                            uint16_t port, const char* src = nullptr) {
  SimPeer server(sim, 1);
  uscm_addr a;
  ASSERT_EQ(uscm_parse_addr(("10.0.0.2:" + std::to_string(port)).c_str(), &a), 0);
  ASSERT_EQ(uscm_bind_addr(server.id(), &a), 0) << uscm_last_error();
  ASSERT_EQ(uscm_listen(server.id(), 4), 0) << uscm_last_error();
  sockaddr_in dst = {};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(port);
  inet_pton(AF_INET, "10.0.0.2", &dst.sin_addr);
  sockaddr_in from = {};
  from.sin_family = AF_INET;
  if (src != nullptr) inet_pton(AF_INET, src, &from.sin_addr);
  ASSERT_EQ(rdma_resolve_addr(id, src != nullptr ? reinterpret_cast<sockaddr*>(&from) : nullptr,
                              reinterpret_cast<sockaddr*>(&dst), 2000),
            0)
      << strerror(errno);
  auto next = [&](rdma_cm_event_type want) {
    rdma_cm_event* e = NextOfDropIn(ch, sim);
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
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  ASSERT_EQ(Bind("10.0.0.1", 7012, id), 0) << "dev0:1's address";
  EXPECT_EQ(id->verbs, &g_ctx[0]);
  ConnectToAcceptingPeer(ch_, sim2_, id, 7013);
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

// A UD RDMA_PS_IB listener bound to dev0's address listens again as UD
// through the new uscmd: the peer's SIDR_REQ reaches it. (ListenAgainLocked
// made the new uscm id by port space alone, RC, which answers a SIDR_REQ
// with status 2: UNREACHABLE for the peer, nothing for the listener.)
TEST_F(BoundListenerTest, AUdIbListenerListensAgainAsUd) {
  rdma_cm_id* ud = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &ud, nullptr, RDMA_PS_IB), 0) << strerror(errno);
  ud->qp_type = IBV_QPT_UD;
  ASSERT_EQ(Bind("10.0.0.1", 7016, ud), 0) << "dev0:1's address";
  ASSERT_EQ(rdma_listen(ud, 4), 0) << strerror(errno);
  LosePath(0);
  EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"})
      << "none for L nor the UD listener";
  RunPortResyncForTesting();  // the uscm-ports thread's next step

  SimPeer client(sim2_, 1, USCM_PS_IB, USCM_QPT_UD);
  ASSERT_TRUE(client.Connect("10.0.0.1:7016"));
  rdma_cm_event* e = NextOfDropIn(ch_, sim2_);
  ASSERT_NE(e, nullptr) << "no CONNECT_REQUEST: the listener came back RC";
  EXPECT_EQ(e->event, RDMA_CM_EVENT_CONNECT_REQUEST) << rdma_event_str(e->event);
  EXPECT_EQ(e->listen_id, ud);
  rdma_cm_id* conn = e->id;
  EXPECT_EQ(conn->qp_type, IBV_QPT_UD);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_reject(conn, nullptr, 0), 0) << strerror(errno);
  EXPECT_TRUE(client.Saw(USCM_CM_EVENT_UNREACHABLE));
  EXPECT_EQ(rdma_destroy_id(conn), 0);
  EXPECT_EQ(rdma_destroy_id(ud), 0);
  EXPECT_EQ(rdma_destroy_id(listener_), 0);
  listener_ = nullptr;
  EXPECT_EQ(rdma_destroy_id(bound_), 0);
}

// One step's DEVICE_REMOVALs (bound's and L's) reach the drop-in in two
// pumps, as when a call's pump on another thread took the first while
// dev0's progress thread was still queuing the rest: the second pump finds
// the port replaced already, and L, waiting there for its move, still gets
// no event (it did: the second OnLostPathLocked sent L its DEVICE_REMOVAL).
TEST_F(BoundListenerTest, AStepsRemovalsInTwoPumpsSendTheWaitingListenerNothing) {
  ASSERT_EQ(uscm_sim_lose_transport(g_sim, 0, "rxe port 1 is gone"), 0);
  ASSERT_EQ(uscm_sim_run_until_event(g_sim, ports_[0], 1000), 0) << "no uscm event";
  int pumps = 0;
  while (uscm_event_channel_queued(ports_[0]) > 0 && pumps < 10) {
    ASSERT_EQ(PumpSomeEvents(1), 1);
    ++pumps;
  }
  EXPECT_GE(pumps, 2) << "the step's DEVICE_REMOVALs in one pump";
  EXPECT_EQ(Events(), std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"})
      << "none for L";
  RunPortResyncForTesting();  // the uscm-ports thread's next step
  EXPECT_TRUE(HeldThroughTheNewUscmd()) << "L listens on dev0 through the new uscmd";
  EXPECT_EQ(Events(), std::vector<std::string>{});
  EXPECT_EQ(rdma_destroy_id(listener_), 0);
  listener_ = nullptr;
  EXPECT_EQ(rdma_destroy_id(bound_), 0);
  EXPECT_EQ(g_port_devices_closed, 1) << "the lost entry's uscm device, with its last id";
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

// A client between two connections: its first connection's id lived on
// dev0's port (opened) and was destroyed, and no id lives there (no wildcard
// id, no listener) when dev0's uscmd is killed while dev0 stays (its new
// uscmd's MAD path on another fabric, g_reopen_sim[0]). No uscm id gets the
// loss's DEVICE_REMOVAL, so no event tells the drop-in: the next call that
// puts an id on the port asks the port's uscm device (OpenPortForIdLocked,
// uscm_device_transport_lost), replaces the port and opens its fresh entry
// through the new uscmd. Without that the id went to the lost uscm device:
// its MADs counted as send_errors, the peer unreached.
class IdlePortTest : public SimulatedPortsTest {
 protected:
  void SetUp() override {
    SimulatedPortsTest::SetUp();
    rdma_cm_id* first = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &first, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    ASSERT_EQ(Bind("10.0.0.1", 7020, first), 0) << "dev0:1's address";
    ConnectToAcceptingPeer(ch_, g_sim, first, 7021);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(rdma_disconnect(first), 0) << strerror(errno);
    ASSERT_EQ(rdma_destroy_id(first), 0);
    ASSERT_EQ(g_port_devices_opened, 1);
    g_reopen_sim[0] = sim2_ = uscm_sim_create(6);
    ASSERT_NE(sim2_, nullptr);
    ASSERT_EQ(uscm_sim_lose_transport(g_sim, 0, "uscmd rxe0:1 exited"), 0);
    ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
    while (QueuedEvents(ch_) > 0) {  // the first connection's DISCONNECTED
      rdma_cm_event* e = nullptr;
      ASSERT_EQ(rdma_get_cm_event(ch_, &e), 0) << strerror(errno);
      rdma_ack_cm_event(e);
    }
  }
  // Whether the lost entry's uscm device was closed: the thread's next step
  // (none lives on it) closes it, and dev0 stays.
  void ExpectTheLostEntryClosedAtTheStep() {
    EXPECT_EQ(g_port_devices_closed, 0);
    RunPortResyncForTesting();  // the uscm-ports thread's next step
    EXPECT_EQ(g_port_devices_closed, 1) << "the lost entry's uscm device";
    EXPECT_EQ(g_closes, 0) << "dev0 stays";
  }

  uscm_sim* sim2_ = nullptr;
};

TEST_F(IdlePortTest, ANewIdBoundToThePortsAddressConnectsThroughTheNewUscmd) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  ASSERT_EQ(Bind("10.0.0.1", 7022, id), 0) << "dev0:1's address";
  EXPECT_EQ(g_port_devices_opened, 2) << "dev0's port opened again, through its new uscmd";
  EXPECT_EQ(id->verbs, &g_ctx[0]);
  ExpectTheLostEntryClosedAtTheStep();
  ConnectToAcceptingPeer(ch_, sim2_, id, 7023);
  EXPECT_EQ(QueuedEvents(ch_), 0u) << "no DEVICE_REMOVAL: no id lived on the lost entry";
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// The id's first call that needs a port (no bind): the default port, dev0's.
TEST_F(IdlePortTest, AnIdResolvingFromNoAddressConnectsThroughTheNewUscmd) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  ConnectToAcceptingPeer(ch_, sim2_, id, 7024);
  EXPECT_EQ(id->verbs, &g_ctx[0]);
  ExpectTheLostEntryClosedAtTheStep();
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// A wildcard bind takes every port: dev0's through its new uscmd.
TEST_F(IdlePortTest, AWildcardBindHoldsThePortThroughTheNewUscmd) {
  ASSERT_EQ(Bind("0.0.0.0", 7025), 0);
  EXPECT_TRUE(HeldOnHost(0, "0.0.0.0:7025", sim2_)) << "dev0's port, through its new uscmd";
  EXPECT_TRUE(HeldOnHost(1, "0.0.0.0:7025")) << "dev1's";
  ExpectTheLostEntryClosedAtTheStep();
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  id_ = nullptr;
  EXPECT_FALSE(HeldOnHost(0, "0.0.0.0:7025", sim2_));
}

// dev0 removed, the drop-in not told yet: the call lists the devices
// (OnLostPathLocked), dev0's port is not opened again on a device that is
// gone, and a wildcard bind takes dev1's alone.
TEST_F(IdlePortTest, APortOfARemovedDeviceIsNotOpenedAgain) {
  g_listed[0] = false;  // rdma link del dev0, not listed by the drop-in yet
  ASSERT_EQ(Bind("0.0.0.0", 7026), 0) << strerror(errno);
  EXPECT_EQ(g_port_devices_opened, 2) << "dev1's port opened, dev0's not again";
  for (const Port* p : PortsLocked()) EXPECT_FALSE(p->replaces_lost) << p->ca << " opened again";
  EXPECT_TRUE(HeldOnHost(1, "0.0.0.0:7026"));
  EXPECT_FALSE(HeldOnHost(0, "0.0.0.0:7026", sim2_));
  EXPECT_EQ(Listed(), Names{"dev1"});
}

// A wildcard-bound id W (id_, 0.0.0.0:7030: its own uscm id on dev0's port,
// a bind on dev1's) and an id bound to dev0's address when dev0's uscmd is
// killed while dev0 stays, before the port's progress thread took the loss
// (g_sim not run: no DEVICE_REMOVAL queued). The kernel's W, on no device
// and on a CM that is never lost, resolves and connects from dev0's
// address as before, with no event of the loss: W's call replaces the port
// (OpenPortForIdLocked) and W goes to its fresh entry, through the new
// uscmd (g_reopen_sim[0]), not to its uscm id on the lost one.
class UnpumpedLossTest : public SimulatedPortsTest {
 protected:
  void SetUp() override {
    SimulatedPortsTest::SetUp();
    ASSERT_EQ(Bind("0.0.0.0", 7030), 0);
    ASSERT_EQ(rdma_create_id(ch_, &bound_, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    ASSERT_EQ(Bind("10.0.0.1", 7031, bound_), 0) << "dev0:1's address";
    ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
    old_ports_ = PortChannelsForTesting();
    ASSERT_EQ(old_ports_.size(), 2u);
    g_reopen_sim[0] = sim2_ = uscm_sim_create(6);
    ASSERT_NE(sim2_, nullptr);
    g_reopen_sim[1] = sim3_ = uscm_sim_create(7);
    ASSERT_NE(sim3_, nullptr);
  }
  // Host `host`'s old uscm device takes its lost MAD path's step: the
  // DEVICE_REMOVALs of the uscm ids still there, moved to ch_; the events
  // on ch_ then, as "ID EVENT status S" (ID: W, bound or ?).
  std::vector<std::string> EventsOfTheLossStep(int host) {
    uscm_sim_run_until_event(g_sim, old_ports_[host], 1000);  // none: nothing lives there
    PumpEvents();
    std::vector<std::string> got;
    rdma_cm_event* e = nullptr;
    while (rdma_get_cm_event(ch_, &e) == 0) {
      got.push_back(std::string(e->id == id_ ? "W " : e->id == bound_ ? "bound " : "? ") +
                    rdma_event_str(e->event) + " status " + std::to_string(e->status));
      rdma_ack_cm_event(e);
    }
    EXPECT_EQ(errno, EAGAIN);
    return got;
  }

  rdma_cm_id* bound_ = nullptr;
  std::vector<uscm_event_channel*> old_ports_;
  uscm_sim* sim2_ = nullptr;  // dev0's new uscmd's fabric
  uscm_sim* sim3_ = nullptr;  // dev1's
};

// W's own uscm id is on the lost port: it resolved and connected through the
// lost device (no ADDR_RESOLVED ever came through the new uscmd).
TEST_F(UnpumpedLossTest, AWildcardIdResolvingFromItsOwnPortConnectsThroughTheNewUscmd) {
  ASSERT_EQ(uscm_sim_lose_transport(g_sim, 0, "uscmd rxe0:1 exited"), 0);
  ConnectToAcceptingPeer(ch_, sim2_, id_, 7032, "10.0.0.1");
  EXPECT_EQ(id_->verbs, &g_ctx[0]);
  EXPECT_TRUE(HeldOnHost(1, "0.0.0.0:7030")) << "W's bind on dev1 kept";
  EXPECT_EQ(EventsOfTheLossStep(0),
            std::vector<std::string>{"bound RDMA_CM_EVENT_DEVICE_REMOVAL status 0"})
      << "none for W";
  EXPECT_EQ(rdma_destroy_id(bound_), 0);
  EXPECT_EQ(g_port_devices_closed, 1) << "the lost entry's uscm device, with bound";
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  id_ = nullptr;
  EXPECT_EQ(g_closes, 0) << "dev0 stays";
}

// W's bind on dev1 is on the lost port (dev1's uscmd killed): W's resolve
// from dev1's address took that uscm id as W's own on the lost device.
// Now W is bound through dev1's new uscmd and keeps its bind on dev0, and
// the loss's step sends W nothing.
TEST_F(UnpumpedLossTest, AWildcardIdResolvingFromAnotherPortTakesItsFreshEntry) {
  ASSERT_EQ(uscm_sim_lose_transport(g_sim, 1, "uscmd rxe1:1 exited"), 0);
  sockaddr_in src = {}, dst = {};
  src.sin_family = dst.sin_family = AF_INET;
  inet_pton(AF_INET, "10.0.1.1", &src.sin_addr);  // dev1:1's address
  inet_pton(AF_INET, "10.0.0.1", &dst.sin_addr);
  dst.sin_port = htons(7033);
  rdma_resolve_addr(id_, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst),
                    2000);  // uscm's answer does not matter here: where W went does
  EXPECT_TRUE(HeldOnHost(1, "0.0.0.0:7030", sim3_)) << "W bound through dev1's new uscmd";
  EXPECT_TRUE(HeldOnHost(0, "0.0.0.0:7030")) << "W's bind on dev0 kept";
  for (const std::string& e : EventsOfTheLossStep(1)) {
    EXPECT_EQ(e.rfind("W RDMA_CM_EVENT_DEVICE_REMOVAL", 0), std::string::npos) << e;
  }
  EXPECT_EQ(g_port_devices_closed, 0);
  RunPortResyncForTesting();  // the uscm-ports thread's next step
  EXPECT_EQ(g_port_devices_closed, 1) << "dev1's lost entry: no id lives there";
  EXPECT_EQ(rdma_destroy_id(bound_), 0);
  EXPECT_EQ(rdma_destroy_id(id_), 0);
  id_ = nullptr;
  EXPECT_FALSE(HeldOnHost(1, "0.0.0.0:7030", sim3_));
  EXPECT_FALSE(HeldOnHost(0, "0.0.0.0:7030"));
}


// A created id on no device (no address, not a wildcard) whose
// rdma_set_option put its placeholder uscm id on the default port, dev0's,
// when dev0's uscmd is killed while dev0 stays. The kernel's id has no
// device (cma_process_remove never sees it) and its CM is never lost: it
// gets no event, and its rdma_resolve_addr with no source works as before.
// The placeholder (the id's options alone) is dropped with no event when
// the loss is taken (OnLostPathLocked), or when the id's next call finds
// the MAD path lost first (MaterializeLocked), and the id's next call makes
// a fresh one, with its options, on the port's fresh entry.
class PlaceholderTest : public SimulatedPortsTest {
 protected:
  void SetUp() override {
    SimulatedPortsTest::SetUp();
    uint8_t tos = 32;
    ASSERT_EQ(rdma_set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos), 0)
        << strerror(errno);
    ASSERT_EQ(id_->verbs, nullptr) << "no device yet";
    ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
    ports_ = PortChannelsForTesting();
    ASSERT_EQ(ports_.size(), 2u);
    g_reopen_sim[0] = sim2_ = uscm_sim_create(6);
    ASSERT_NE(sim2_, nullptr);
    ASSERT_EQ(uscm_sim_lose_transport(g_sim, 0, "uscmd rxe0:1 exited"), 0);
  }
  // dev0's old uscm device takes its lost MAD path's step, moved to ch_.
  void TakeTheLoss() {
    uscm_sim_run_until_event(g_sim, ports_[0], 1000);
    PumpEvents();
  }
  // The events on ch_ now, acked.
  std::vector<std::string> Events() {
    std::vector<std::string> got;
    rdma_cm_event* e = nullptr;
    while (rdma_get_cm_event(ch_, &e) == 0) {
      got.push_back(std::string(e->id == id_ ? "id " : "? ") + rdma_event_str(e->event));
      rdma_ack_cm_event(e);
    }
    EXPECT_EQ(errno, EAGAIN);
    return got;
  }

  std::vector<uscm_event_channel*> ports_;
  uscm_sim* sim2_ = nullptr;  // dev0's new uscmd's fabric
};

// The loss taken first: no DEVICE_REMOVAL for the id (it got one before),
// and the lost entry, where nothing lives, closes at the thread's step.
TEST_F(PlaceholderTest, TheLossSendsTheIdNothing) {
  TakeTheLoss();
  EXPECT_EQ(Events(), std::vector<std::string>{});
  EXPECT_EQ(g_port_devices_closed, 0);
  RunPortResyncForTesting();  // the uscm-ports thread's next step
  EXPECT_EQ(g_port_devices_closed, 1) << "the lost entry: no id lives there";
  // From dev0's address (the default port is now the first live entry,
  // dev1's: the fresh one is added last), with a fresh uscm id there.
  ConnectToAcceptingPeer(ch_, sim2_, id_, 7040, "10.0.0.1");
  EXPECT_EQ(id_->verbs, &g_ctx[0]);
  EXPECT_EQ(g_closes, 0) << "dev0 stays";
}

// The id resolves with no source (and no route: simulated ports) before the
// port's progress thread took the loss: it used its placeholder on the lost
// device, whose ADDR_RESOLVED never came through the new uscmd.
TEST_F(PlaceholderTest, AResolveFromNoAddressBeforeTheLossIsTakenGoesThroughTheNewUscmd) {
  ConnectToAcceptingPeer(ch_, sim2_, id_, 7041);
  EXPECT_EQ(id_->verbs, &g_ctx[0]);
  TakeTheLoss();
  EXPECT_EQ(Events(), std::vector<std::string>{}) << "none for the id";
  RunPortResyncForTesting();
  EXPECT_EQ(g_port_devices_closed, 1) << "the lost entry: no id lives there";
}

// dev0 removed with its uscmd (the drop-in's listing sees it): the kernel's
// id, on no device, gets nothing, and dev0 is not held by the placeholder.
TEST_F(PlaceholderTest, ARemovedDeviceSendsTheIdNothingAndIsClosed) {
  g_listed[0] = false;  // rdma link del dev0
  EXPECT_EQ(Listed(), Names{"dev1"});
  EXPECT_EQ(Events(), std::vector<std::string>{});
  EXPECT_EQ(g_closes, 1) << "dev0 closed: no id lives there";
  EXPECT_EQ(g_closed_ctx, &g_ctx[0]);
}

}  // namespace
}  // namespace uscm::librdmacm
