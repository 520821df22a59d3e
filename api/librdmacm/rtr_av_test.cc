// rdma_init_qp_attr(RTR)'s AV on RoCE, as the kernel's: the source GID index
// is the id's own address's RoCE v2 GID, not entry 0 (fe80:: on rxe). UCX
// reads grh.sgid_index for its device address and moved its QP to RTR with
// the wrong GID (EINVAL). The simulated device has no verbs context, so the
// port's GID table comes from SetPortGidsReaderForTesting.
#include "api/librdmacm/ud_ah.h"

#include <arpa/inet.h>

#include "api/librdmacm/ids_testing.h"

namespace uscm::librdmacm {
namespace {

ibv_gid Gid(const char* text) {
  ibv_gid g;
  inet_pton(AF_INET6, text, g.raw);
  return g;
}

// rxe's table for 10.0.0.1: the link-local GID and the address, v1 and v2.
PortGids RoceTable(ibv_context*, uint8_t) {
  PortGids p;
  p.ethernet = true;
  p.table = {{Gid("fe80::1"), false},
             {Gid("fe80::1"), true},
             {Gid("::ffff:10.0.0.1"), false},
             {Gid("::ffff:10.0.0.1"), true}};
  return p;
}

class RtrAvTest : public IdsTest {
 protected:
  void SetUp() override {
    IdsTest::SetUp();
    SetPortGidsReaderForTesting(RoceTable);
  }
  void TearDown() override {
    SetPortGidsReaderForTesting(nullptr);
    IdsTest::TearDown();
  }

  static void ExpectRoceRtrAv(rdma_cm_id* id) {
    ibv_qp_attr attr = {};
    attr.qp_state = IBV_QPS_RTR;
    int mask = 0;
    ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0) << strerror(errno);
    ASSERT_TRUE(mask & IBV_QP_AV);
    EXPECT_EQ(attr.ah_attr.is_global, 1);
    EXPECT_EQ(attr.ah_attr.grh.sgid_index, 3) << "::ffff:10.0.0.1, its RoCE v2 entry";
    EXPECT_EQ(attr.ah_attr.port_num, 1);
  }
};

// Active side: after CONNECT_RESPONSE (the program's own QP, as UCX).
TEST_F(RtrAvTest, ActiveSideAfterConnectResponse) {
  uscm_cm_id* listener = nullptr;
  ASSERT_EQ(uscm_create_id(peer_ch_, &listener, nullptr, USCM_PS_TCP), 0);
  uscm_addr here;
  ASSERT_EQ(uscm_parse_addr("10.0.0.2:7481", &here), 0);
  ASSERT_EQ(uscm_bind_addr(listener, &here), 0);
  ASSERT_EQ(uscm_listen(listener, 8), 0);

  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in dst = Ipv4("10.0.0.2", 7481);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  EXPECT_EQ(rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED)), 0);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED)), 0);
  rdma_conn_param param = {};
  param.qp_num = 0x1234;
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);

  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(pe, nullptr);
  uscm_cm_id* passive = pe->id;
  uscm_conn_param answer = {};
  answer.qp_num = 0x5678;
  ASSERT_EQ(uscm_accept(passive, &answer), 0) << uscm_last_error();
  uscm_ack_cm_event(pe);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_RESPONSE);
  ASSERT_NE(e, nullptr);
  ExpectRoceRtrAv(id);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  // UCX's way out when its QP fails: rdma_disconnect in CONNECT_RESPONSE.
  ASSERT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  uscm_cm_event* rej = PeerNext(USCM_CM_EVENT_REJECTED);
  ASSERT_NE(rej, nullptr);
  uscm_ack_cm_event(rej);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
  EXPECT_EQ(uscm_destroy_id(passive), 0) << uscm_last_error();
  EXPECT_EQ(uscm_destroy_id(listener), 0) << uscm_last_error();
}

// Passive side: the CONNECT_REQUEST id.
TEST_F(RtrAvTest, PassiveSideOnTheConnectRequestId) {
  rdma_cm_id* listener = Listen(7482, nullptr);
  uscm_cm_id* peer = PeerConnect(7482, 0x42, "req");
  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  ExpectRoceRtrAv(e->id);
  ASSERT_EQ(rdma_reject(e->id, nullptr, 0), 0) << strerror(errno);
  rdma_cm_id* child = e->id;
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  uscm_cm_event* rej = PeerNext(USCM_CM_EVENT_REJECTED);
  ASSERT_NE(rej, nullptr);
  uscm_ack_cm_event(rej);
  EXPECT_EQ(rdma_destroy_id(child), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
  EXPECT_EQ(uscm_destroy_id(peer), 0) << uscm_last_error();
}

}  // namespace
}  // namespace uscm::librdmacm
