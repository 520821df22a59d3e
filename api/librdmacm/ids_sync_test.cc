// The drop-in's synchronous mode (rdma_create_id with a NULL channel,
// rdma_create_ep, rdma_get_request) and rdma_migrate_id on the simulated
// fabric (ids_testing.h). The calls wait through IdsTest::Drive, which runs
// the fabric and answers for the peer.
#include <errno.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

class IdsSyncTest : public IdsTest {
 protected:
  void SetUp() override {
    IdsTest::SetUp();
    SetDriverForTesting(&IdsTest::Drive, this);
  }

  uscm_cm_id* PeerListen(const char* where) {
    uscm_cm_id* listener = nullptr;
    EXPECT_EQ(uscm_create_id(peer_ch_, &listener, nullptr, USCM_PS_TCP), 0);
    uscm_addr a;
    EXPECT_EQ(uscm_parse_addr(where, &a), 0);
    EXPECT_EQ(uscm_bind_addr(listener, &a), 0) << uscm_last_error();
    EXPECT_EQ(uscm_listen(listener, 8), 0) << uscm_last_error();
    peer_ids_.push_back(listener);
    return listener;
  }
};

// resolve_addr, resolve_route, connect and disconnect each return once their
// event is there, keeping it in id->event.
TEST_F(IdsSyncTest, ActiveCallsWaitForTheirEvent) {
  PeerListen("10.0.0.2:7100");
  int ctx = 0;
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, &ctx, RDMA_PS_TCP), 0) << strerror(errno);
  ASSERT_NE(id->channel, nullptr) << "a private channel";
  EXPECT_NE(id->channel, ch_);

  sockaddr_in dst = Ipv4("10.0.0.2", 7100);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(IpOf(&id->route.addr.src_addr), "10.0.0.1");

  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);

  rdma_conn_param param = {};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.qp_num = 0x31;
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_CONNECT_RESPONSE) << "the program's own QP";
  EXPECT_EQ(id->event->param.conn.qp_num, 0x77u);
  ASSERT_EQ(rdma_establish(id), 0) << strerror(errno);

  ASSERT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);  // acks id->event
}

TEST_F(IdsSyncTest, RejectedConnectIsEconnrefused) {
  PeerListen("10.0.0.2:7101");
  peer_rejects_ = true;
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = Ipv4("10.0.0.2", 7101);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
  rdma_conn_param param = {};
  param.qp_num = 0x32;
  errno = 0;
  EXPECT_EQ(rdma_connect(id, &param), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(id->event->status, 28);
  EXPECT_EQ(DataOf(id->event->param.conn.private_data, 2), "no");
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

// rdma_getaddrinfo + rdma_create_ep for both sides, rdma_get_request on the
// passive one (rdma_server / rdma_client's flow, without their QP).
TEST_F(IdsSyncTest, CreateEpAndGetRequest) {
  rdma_addrinfo hints = {};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("10.0.0.1", "7102", &hints, &res), 0);
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_ep(&listener, res, nullptr, nullptr), 0) << strerror(errno);
  rdma_freeaddrinfo(res);
  EXPECT_EQ(ntohs(rdma_get_src_port(listener)), 7102);
  ASSERT_EQ(rdma_listen(listener, 4), 0) << strerror(errno);

  uscm_cm_id* peer = PeerConnect(7102, 0x44, "hi");
  peer_ids_.push_back(peer);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_get_request(listener, &id), 0) << strerror(errno);
  ASSERT_NE(id, nullptr);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(id->event->listen_id, listener);
  EXPECT_EQ(DataOf(id->event->param.conn.private_data, 2), "hi");
  EXPECT_NE(id->channel, listener->channel) << "the new id waits on a channel of its own";

  rdma_conn_param param = {};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.qp_num = 0x45;
  ASSERT_EQ(rdma_accept(id, &param), 0) << strerror(errno);  // waits for the peer's RTU
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ESTABLISHED);

  rdma_cm_id* async = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &async, nullptr, RDMA_PS_TCP), 0);
  rdma_cm_id* none = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_get_request(async, &none), -1) << "only for synchronous ids";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_destroy_id(async), 0);

  ASSERT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  rdma_destroy_ep(id);
  rdma_destroy_ep(listener);

  // The active side.
  PeerListen("10.0.0.2:7103");
  ASSERT_EQ(rdma_getaddrinfo("10.0.0.2", "7103", nullptr, &res), 0);
  rdma_cm_id* active = nullptr;
  // With a qp_init_attr the QP is created after the route: the simulated
  // backend has no verbs device, so that fails and the id is gone again.
  ibv_qp_init_attr qp_attr = {};
  qp_attr.qp_type = IBV_QPT_RC;
  errno = 0;
  EXPECT_EQ(rdma_create_ep(&active, res, nullptr, &qp_attr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(active, nullptr);
  ASSERT_EQ(rdma_create_ep(&active, res, nullptr, nullptr), 0) << strerror(errno);
  rdma_freeaddrinfo(res);
  ASSERT_NE(active->event, nullptr);
  EXPECT_EQ(active->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
  EXPECT_EQ(ntohs(rdma_get_dst_port(active)), 7103);
  rdma_destroy_ep(active);
}

// rdma_migrate_id: queued events follow the id to the new channel; NULL
// makes the id synchronous (a synchronous id cannot be migrated to NULL).
TEST_F(IdsSyncTest, MigrateIdMovesQueuedEvents) {
  SetDriverForTesting(nullptr, nullptr);  // asynchronous first: events by hand
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = Ipv4("10.0.0.2", 7104);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  // The call itself moved its ADDR_RESOLVED to the program's channel: no
  // thread of the drop-in had to wake for it (cmtime's resolve addr step).
  EXPECT_EQ(PumpEvents(), 0);
  ASSERT_EQ(QueuedEvents(ch_), 1);

  rdma_event_channel* other = NewEventChannel();
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(rdma_migrate_id(id, other), 0) << strerror(errno);
  EXPECT_EQ(id->channel, other);
  EXPECT_EQ(QueuedEvents(ch_), 0);
  ASSERT_EQ(QueuedEvents(other), 1);
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(rdma_get_cm_event(other, &e), 0);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(e->id, id);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  SetDriverForTesting(&IdsTest::Drive, this);
  ASSERT_EQ(rdma_migrate_id(id, nullptr), 0) << strerror(errno);
  EXPECT_NE(id->channel, other);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);  // now waits
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
  errno = 0;
  EXPECT_EQ(rdma_migrate_id(id, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(rdma_migrate_id(id, ch_), 0) << "back to asynchronous";
  EXPECT_EQ(id->event, nullptr) << "acked when leaving synchronous mode";
  EXPECT_EQ(rdma_destroy_id(id), 0);
  rdma_destroy_event_channel(other);
}

}  // namespace
}  // namespace uscm::librdmacm
