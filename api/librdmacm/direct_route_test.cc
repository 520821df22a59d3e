// rdma_resolve_route's direct path (direct_route.cc) on a simulated RoCE
// port (DeviceOptions::roce: no SA, the path from the two IPs): the event
// reaches the program's channel from the call itself, with librdmacm's
// fields; id->route as the path through the C API fills it; the id's state
// in uscm is ROUTE_RESOLVED (a second call is EINVAL, rdma_connect goes
// ahead); EINVAL before resolve_addr; synchronous mode; rdma_migrate_id of
// the event. IB routes (the SA's) keep their path: ids_test.
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <memory>
#include <string>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"  // Ipv4
#include "api/librdmacm/roce_port_testing.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

// The drop-in's one port: a RoCE device (192.168.78.1, path MTU 1024) on the
// simulated fabric's host 0.
class DirectRouteTest : public RocePortTest {
 protected:
  static void SetUpTestSuite() { OpenPort(21); }
  void TearDown() override {
    SetDirectRoutesForTesting(true);
    RocePortTest::TearDown();
  }

  // An id on ch_ with 192.168.78.2:7174 resolved (ADDR_RESOLVED taken).
  rdma_cm_id* Resolved(rdma_event_channel* ch) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in dst = Ipv4("192.168.78.2", 7174);
    EXPECT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
        << strerror(errno);
    if (ch != nullptr) {
      EXPECT_EQ(rdma_ack_cm_event(Take(ch, RDMA_CM_EVENT_ADDR_RESOLVED)), 0);
    }
    return id;
  }
};

TEST_F(DirectRouteTest, RoceRouteIsQueuedByTheCallWithLibrdmacmsFields) {
  rdma_cm_id* id = Resolved(ch_);
  uint8_t tos = 0x20;
  ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)), 0);
  const uint64_t direct = DirectRoutes();
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  EXPECT_EQ(DirectRoutes(), direct + 1);
  ExpectQueuedByTheCall(ch_, RDMA_CM_EVENT_ROUTE_RESOLVED, id);
  if (HasFatalFailure()) return;

  // id->route as librdmacm's ucma_query_route leaves it (RoCE: cma_resolve_iboe_route).
  ASSERT_EQ(id->route.num_paths, 1);
  ASSERT_NE(id->route.path_rec, nullptr);
  const ibv_sa_path_rec& p = *id->route.path_rec;
  EXPECT_EQ(GidText(p.sgid.raw), "::ffff:192.168.78.1");
  EXPECT_EQ(GidText(p.dgid.raw), "::ffff:192.168.78.2");
  EXPECT_EQ(p.slid, htobe16(0xFFFF));
  EXPECT_EQ(p.dlid, htobe16(0xFFFF));
  EXPECT_EQ(p.hop_limit, 64);
  EXPECT_EQ(p.traffic_class, 0x20);
  EXPECT_EQ(p.mtu, 3);
  EXPECT_EQ(p.packet_life_time, 18);
  EXPECT_EQ(p.pkey, htobe16(0xFFFF));
  EXPECT_EQ(ntohs(rdma_get_dst_port(id)), 7174);
  // cma_get_roce_udp_flow_label: from the two ports (it was 0; the kernel's
  // client put 141772 in its REQ in 68-dropin-fio, and the drop-in's none)
  const uint32_t source_port = ntohs(rdma_get_src_port(id));
  EXPECT_NE(source_port, 0u);
  EXPECT_EQ(be32toh(p.flow_label), (source_port * 31 + 7174) & 0xFFFFF);
  EXPECT_EQ(GidText(id->route.addr.addr.ibaddr.dgid.raw), "::ffff:192.168.78.2");

  // uscm's id is ROUTE_RESOLVED: a second call is EINVAL (the kernel's
  // cma_comp_exch from ADDR_RESOLVED fails), rdma_connect goes ahead.
  errno = 0;
  EXPECT_EQ(rdma_resolve_route(id, 2000), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(DirectRoutes(), direct + 1);
  rdma_conn_param param = {};
  param.qp_num = 0x1234;
  EXPECT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// The same id->route and addresses as the path through the C API's pump.
TEST_F(DirectRouteTest, FillsTheRouteAsThePumpDoes) {
  rdma_cm_id* ids[2];
  for (int direct = 0; direct < 2; ++direct) {
    SetDirectRoutesForTesting(direct == 1);
    ids[direct] = Resolved(ch_);
    const uint64_t before = DirectRoutes();
    ASSERT_EQ(rdma_resolve_route(ids[direct], 2000), 0) << strerror(errno);
    EXPECT_EQ(DirectRoutes(), before + direct);
    EXPECT_EQ(rdma_ack_cm_event(Take(ch_, RDMA_CM_EVENT_ROUTE_RESOLVED)), 0);
  }
  ASSERT_EQ(ids[0]->route.num_paths, 1);
  ASSERT_EQ(ids[1]->route.num_paths, 1);
  // The same path but for the flow label, which comes from each id's own
  // ephemeral port.
  ibv_sa_path_rec paths[2];
  for (int i = 0; i < 2; ++i) {
    paths[i] = *ids[i]->route.path_rec;
    EXPECT_EQ(be32toh(paths[i].flow_label),
              (ntohs(rdma_get_src_port(ids[i])) * 31u + 7174) & 0xFFFFF);
    paths[i].flow_label = 0;
  }
  EXPECT_EQ(memcmp(&paths[0], &paths[1], sizeof(ibv_sa_path_rec)), 0);
  EXPECT_EQ(memcmp(&ids[0]->route.addr.addr, &ids[1]->route.addr.addr, sizeof(rdma_ib_addr)), 0);
  EXPECT_EQ(memcmp(&ids[0]->route.addr.dst_storage, &ids[1]->route.addr.dst_storage,
                   sizeof(sockaddr_storage)),
            0);
  // The sources differ in their ephemeral port only.
  EXPECT_EQ(ids[0]->route.addr.src_sin.sin_addr.s_addr, ids[1]->route.addr.src_sin.sin_addr.s_addr);
  EXPECT_NE(rdma_get_src_port(ids[1]), 0);
  for (rdma_cm_id* id : ids) EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(DirectRouteTest, EinvalBeforeResolveAddr) {
  const uint64_t direct = DirectRoutes();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  errno = 0;
  EXPECT_EQ(rdma_resolve_route(id, 2000), -1);
  EXPECT_EQ(errno, EINVAL) << "created, no port yet";
  sockaddr_in here = Ipv4("192.168.78.1", 7300);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&here)), 0) << strerror(errno);
  errno = 0;
  EXPECT_EQ(rdma_resolve_route(id, 2000), -1);
  EXPECT_EQ(errno, EINVAL) << "bound, on its port, not resolved";
  EXPECT_EQ(DirectRoutes(), direct);
  EXPECT_EQ(QueuedEvents(ch_), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// A NULL channel: the call returns with its event in id->event.
TEST_F(DirectRouteTest, SynchronousIdReturnsWithTheEvent) {
  rdma_cm_id* id = Resolved(nullptr);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  const uint64_t direct = DirectRoutes();
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  EXPECT_EQ(DirectRoutes(), direct + 1);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
  EXPECT_EQ(id->event->id, id);
  EXPECT_EQ(id->route.num_paths, 1);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// The event the call queued moves with the id, as any queued event.
TEST_F(DirectRouteTest, MigrateIdTakesTheQueuedEvent) {
  rdma_cm_id* id = Resolved(ch_);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  rdma_event_channel* other = NewEventChannel();
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(rdma_migrate_id(id, other), 0) << strerror(errno);
  EXPECT_EQ(QueuedEvents(ch_), 0);
  EXPECT_EQ(rdma_ack_cm_event(Take(other, RDMA_CM_EVENT_ROUTE_RESOLVED)), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  rdma_destroy_event_channel(other);
}

}  // namespace
}  // namespace uscm::librdmacm
