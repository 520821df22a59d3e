// The verbs queries of cmtime's server per connection (rdma_init_qp_attr to
// INIT, RTR and RTS, then rdma_accept): the device and each port's GID table
// are read once and kept, as librdmacm keeps a device's limits from
// ucma_init_device (its rdma_init_qp_attr asks the kernel, which answers
// from the id's own GID entry). Before, each connection read the port, the
// device and the GID table at RTR and the device again at accept: 4 ioctls
// per connection that the kernel's librdmacm does not make; and
// rdma_create_qp's hand-over to uscm (uscm_set_qp) queried the port and its
// GID entries, 4 more. The simulated
// device has no verbs context: the test gives each passive id a stand-in
// one, and the device query and GID reader are the test's, counting.
#include <infiniband/verbs.h>

#include <vector>

#include "api/c/uscm_cma.h"

#include "api/librdmacm/devices.h"
#include "api/librdmacm/ids_testing.h"
#include "api/librdmacm/ud_ah.h"
#include "verbs/qp_transitions.h"

namespace uscm::librdmacm {
namespace {

int g_device_queries = 0;
int g_gid_reads = 0;

int CountingQueryDevice(ibv_context*, ibv_device_attr* attr) {
  ++g_device_queries;
  *attr = {};
  attr->max_qp_rd_atom = 4;
  attr->max_qp_init_rd_atom = 4;
  attr->phys_port_cnt = 1;
  return 0;
}

PortGids CountingRoceTable(ibv_context*, uint8_t) {
  ++g_gid_reads;
  ibv_gid local = {}, mapped = {};
  local.raw[0] = 0xfe;
  local.raw[1] = 0x80;
  mapped.raw[10] = mapped.raw[11] = 0xff;
  inet_pton(AF_INET, "10.0.0.1", &mapped.raw[12]);
  PortGids p;
  p.ethernet = true;
  p.active_mtu = IBV_MTU_1024;
  p.table = {{local, true}, {mapped, true}};
  return p;
}

// The RTR of the QPs uscm moves: their source GID index (the simulated
// fabric's path has no GRH: not looked at; ud_ah_test checks the index).
std::vector<int> g_rtr_sgid_index;
int RecordingModify(ibv_qp*, ibv_qp_attr* attr, int mask) {
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR) {
    g_rtr_sgid_index.push_back(attr->ah_attr.grh.sgid_index);
  }
  return 0;
}
int NoMcast(ibv_qp*, const ibv_gid*, uint16_t) { return 0; }

class DeviceQueriesTest : public IdsTest {
 protected:
  void SetUp() override {
    IdsTest::SetUp();
    SetQueryDeviceForTesting(CountingQueryDevice);
    SetPortGidsReaderForTesting(CountingRoceTable);
    uscm_set_verbs_ops_for_testing(&kOps);
    g_device_queries = g_gid_reads = 0;
    g_rtr_sgid_index.clear();
  }
  void TearDown() override {
    SetQueryDeviceForTesting(nullptr);
    SetPortGidsReaderForTesting(nullptr);
    uscm_set_verbs_ops_for_testing(nullptr);
    IdsTest::TearDown();
  }
  static constexpr verbs::VerbsOps kOps = {&RecordingModify, &NoMcast, &NoMcast};

  // One connection as cmtime's server makes it, on `verbs`; torn down after.
  // `assigned`: as DAPL's accept, the QP is put in id->qp by the program (moved
  // from another id) and rdma_accept's conn_param has no qp_num.
  void AcceptOne(rdma_cm_id* listener, uint16_t port, uint32_t qpn, ibv_context* verbs,
                 bool assigned = false) {
    uscm_cm_id* peer = PeerConnect(port, qpn, "req");
    rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NE(e, nullptr);
    rdma_cm_id* id = e->id;
    id->verbs = verbs;  // as on a real port
    // rdma_create_qp's QP (cmtime's), handed to uscm, which moves it to RTR
    // and RTS when accepting.
    ibv_qp qp = {};
    qp.context = verbs;
    qp.qp_type = IBV_QPT_RC;
    qp.qp_num = qpn + 1;
    if (assigned) {
      id->qp = &qp;
    } else {
      ASSERT_EQ(HandQpToUscm(id, UscmIdOf(id, "test"), &qp), 0) << uscm_last_error();
    }
    for (ibv_qp_state state : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
      if (assigned) break;
      ibv_qp_attr attr = {};
      attr.qp_state = state;
      int mask = 0;
      ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0) << strerror(errno);
      if (state == IBV_QPS_RTR) {
        EXPECT_EQ(attr.ah_attr.grh.sgid_index, 1) << "::ffff:10.0.0.1";
      }
    }
    rdma_conn_param param = {};
    param.initiator_depth = RDMA_MAX_INIT_DEPTH;  // capped at the device's 4
    param.responder_resources = RDMA_MAX_RESP_RES;
    param.qp_num = assigned ? 0 : qpn + 1;
    ASSERT_EQ(rdma_accept(id, &param), 0) << strerror(errno);
    id->qp = nullptr;  // a stand-in: rdma_disconnect would move id->qp to ERROR
    EXPECT_EQ(rdma_ack_cm_event(e), 0);
    id->verbs = nullptr;  // the simulated port's again (no shared PD to release)
    EXPECT_EQ(listener->port_num, 1);

    uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_RESPONSE);
    ASSERT_NE(pe, nullptr);
    EXPECT_EQ(pe->param.conn.qp_num, qpn + 1) << "the REP's QPN";
    uscm_ack_cm_event(pe);
    ASSERT_EQ(uscm_establish(peer), 0) << uscm_last_error();
    EXPECT_EQ(rdma_ack_cm_event(Next(RDMA_CM_EVENT_ESTABLISHED)), 0);  // the QP is detached
    ASSERT_EQ(uscm_disconnect(peer), 0) << uscm_last_error();
    e = Next(RDMA_CM_EVENT_DISCONNECTED);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(rdma_disconnect(id), 0) << strerror(errno);
    EXPECT_EQ(rdma_ack_cm_event(e), 0);
    uscm_cm_event* done = PeerNext(USCM_CM_EVENT_DISCONNECTED);
    ASSERT_NE(done, nullptr);
    uscm_ack_cm_event(done);
    EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
    EXPECT_EQ(uscm_destroy_id(peer), 0) << uscm_last_error();
  }
};

// DAPL's accept (openib_cma dapls_ib_accept_connection) moves the EP's QP to
// the CONNECT_REQUEST's id by assigning id->qp; librdmacm's rdma_accept takes
// the QPN from id->qp and moves that QP to RTR and RTS. Before, the drop-in's
// REPs carried conn_param's qp_num (0), and a kernel CM rejected the second
// as a stale connection (VM 68-dropin-dapl, docs/API.md).
TEST_F(DeviceQueriesTest, AQpTheProgramPutInIdQpIsTheConnections) {
  ibv_context stand_in = {};
  rdma_cm_id* listener = Listen(7491, nullptr);
  for (uint32_t i = 0; i < 2; ++i) AcceptOne(listener, 7491, 0x60 + 2 * i, &stand_in, true);
  EXPECT_EQ(g_rtr_sgid_index.size(), 2u) << "uscm moved the two QPs to RTR";
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
}

TEST_F(DeviceQueriesTest, ThreeConnectionsReadTheDeviceAndTheGidTableOnce) {
  ibv_context stand_in = {};
  rdma_cm_id* listener = Listen(7490, nullptr);
  for (uint32_t i = 0; i < 3; ++i) AcceptOne(listener, 7490, 0x50 + 2 * i, &stand_in);
  EXPECT_EQ(g_device_queries, 1) << "rdma_accept's device query, per connection before";
  EXPECT_EQ(g_gid_reads, 1) << "the RTR AV's GID table, per connection before";
  EXPECT_EQ(g_rtr_sgid_index.size(), 3u) << "uscm moved the three QPs to RTR";
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
}

TEST_F(DeviceQueriesTest, EachDeviceIsQueriedOnItsOwn) {
  ibv_context a = {}, b = {};
  ibv_device_attr attr;
  EXPECT_EQ(QueryDeviceOnce(&a, &attr), 0);
  EXPECT_EQ(QueryDeviceOnce(&b, &attr), 0);
  EXPECT_EQ(QueryDeviceOnce(&a, &attr), 0);
  EXPECT_EQ(attr.max_qp_rd_atom, 4);
  EXPECT_EQ(g_device_queries, 2);
}

int FailingQueryDevice(ibv_context*, ibv_device_attr*) {
  ++g_device_queries;
  return EIO;
}

TEST_F(DeviceQueriesTest, AFailedQueryIsNotKept) {
  SetQueryDeviceForTesting(FailingQueryDevice);
  ibv_context a = {};
  ibv_device_attr attr;
  EXPECT_EQ(QueryDeviceOnce(&a, &attr), EIO);
  SetQueryDeviceForTesting(CountingQueryDevice);
  EXPECT_EQ(QueryDeviceOnce(&a, &attr), 0);
  EXPECT_EQ(QueryDeviceOnce(&a, &attr), 0);
  EXPECT_EQ(g_device_queries, 2) << "the failure, then one that answered";
}

}  // namespace
}  // namespace uscm::librdmacm
