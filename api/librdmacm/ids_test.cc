// The drop-in's id calls in asynchronous mode on the simulated fabric
// (ids_testing.h): the drop-in on host 0 against the uscm C API on host 1.
#include "api/librdmacm/ids.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids_testing.h"
#include "api/librdmacm/ports.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

// Active drop-in, program-owned QP (cmtime's way): resolve, connect with a
// QPN, CONNECT_RESPONSE, rdma_init_qp_attr, rdma_establish, disconnect.
TEST_F(IdsTest, ActiveSideWithItsOwnQp) {
  uscm_cm_id* listener = nullptr;
  ASSERT_EQ(uscm_create_id(peer_ch_, &listener, nullptr, USCM_PS_TCP), 0);
  uscm_addr here;
  ASSERT_EQ(uscm_parse_addr("10.0.0.2:7471", &here), 0);
  ASSERT_EQ(uscm_bind_addr(listener, &here), 0);
  ASSERT_EQ(uscm_listen(listener, 8), 0);

  int ctx = 0;
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, &ctx, RDMA_PS_TCP), 0) << strerror(errno);
  EXPECT_EQ(id->channel, ch_);
  EXPECT_EQ(id->context, &ctx);
  EXPECT_EQ(id->ps, RDMA_PS_TCP);
  EXPECT_EQ(id->qp_type, IBV_QPT_RC);
  EXPECT_EQ(id->verbs, nullptr);  // the simulated device has no verbs context
  EXPECT_EQ(id->port_num, 0);

  sockaddr_in dst = Ipv4("10.0.0.2", 7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  EXPECT_EQ(ntohs(rdma_get_dst_port(id)), 7471) << "the destination shows at once";
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, id);
  EXPECT_EQ(e->listen_id, nullptr);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(id->port_num, 1);
  EXPECT_EQ(IpOf(&id->route.addr.src_addr), "10.0.0.1");
  EXPECT_EQ(IpOf(&id->route.addr.dst_addr), "10.0.0.2");
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  EXPECT_EQ(id->route.num_paths, 0);
  const uint64_t direct = DirectRoutes();
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  e = Next(RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(DirectRoutes(), direct) << "an SA route: the C API's path (direct_route.cc)";
  // The SA's path, as librdmacm's ucma_query_route shows it.
  ASSERT_EQ(id->route.num_paths, 1);
  ASSERT_NE(id->route.path_rec, nullptr);
  EXPECT_NE(id->route.path_rec->dlid, 0);
  EXPECT_NE(id->route.path_rec->slid, id->route.path_rec->dlid);
  EXPECT_EQ(id->route.path_rec->pkey, htobe16(0xFFFF));

  rdma_conn_param param = {};
  param.private_data = "hello";
  param.private_data_len = 5;
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  param.qp_num = 0x1234;
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);

  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->param.conn.qp_num, 0x1234u);
  EXPECT_EQ(DataOf(pe->param.conn.private_data, 5), "hello");
  uscm_cm_id* passive = pe->id;
  uscm_conn_param answer = {};
  answer.private_data = "world";
  answer.private_data_len = 5;
  answer.responder_resources = 1;
  answer.initiator_depth = 1;
  answer.qp_num = 0x5678;
  ASSERT_EQ(uscm_accept(passive, &answer), 0) << uscm_last_error();
  uscm_ack_cm_event(pe);

  e = Next(RDMA_CM_EVENT_CONNECT_RESPONSE);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->param.conn.qp_num, 0x5678u) << "the peer's QPN, as the kernel reports it";
  ASSERT_GE(e->param.conn.private_data_len, 5);
  EXPECT_EQ(DataOf(e->param.conn.private_data, 5), "world");

  // The attributes a program moves its own QP with.
  ibv_qp_attr attr = {};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0) << strerror(errno);
  EXPECT_TRUE(mask & IBV_QP_PORT);
  EXPECT_EQ(attr.port_num, 1);
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0) << strerror(errno);
  EXPECT_TRUE(mask & IBV_QP_DEST_QPN);
  EXPECT_TRUE(mask & IBV_QP_AV);
  EXPECT_EQ(attr.dest_qp_num, 0x5678u);
  EXPECT_NE(attr.ah_attr.dlid, 0);
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0) << strerror(errno);
  EXPECT_TRUE(mask & IBV_QP_SQ_PSN);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  ASSERT_EQ(rdma_establish(id), 0) << strerror(errno);
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_ESTABLISHED));

  ASSERT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  pe = PeerNext(USCM_CM_EVENT_DISCONNECTED);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(uscm_disconnect(passive), 0) << uscm_last_error();  // DREP
  uscm_ack_cm_event(pe);
  e = Next(RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 0) << "the peer's DREP came back";
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
  EXPECT_EQ(uscm_destroy_id(passive), 0) << uscm_last_error();
  EXPECT_EQ(uscm_destroy_id(listener), 0) << uscm_last_error();
}

// Passive drop-in: CONNECT_REQUEST on a new id that carries the listener's
// channel and context, listen_id set, the request's QPN and private data.
TEST_F(IdsTest, PassiveSideAcceptsOnANewId) {
  int lctx = 0;
  rdma_cm_id* listener = Listen(7000, &lctx);
  uscm_cm_id* peer = PeerConnect(7000, 0x42, "req");

  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->listen_id, listener);
  rdma_cm_id* id = e->id;
  ASSERT_NE(id, nullptr);
  EXPECT_NE(id, listener);
  EXPECT_EQ(id->context, &lctx);
  EXPECT_EQ(id->channel, ch_);
  EXPECT_EQ(id->ps, RDMA_PS_TCP);
  EXPECT_EQ(id->port_num, 1);
  EXPECT_EQ(e->param.conn.qp_num, 0x42u);
  // From this side, as the kernel reports them: the peer's initiator depth
  // (3) is our responder resources, its responder resources (2) our depth.
  EXPECT_EQ(e->param.conn.responder_resources, 3);
  EXPECT_EQ(e->param.conn.initiator_depth, 2);
  ASSERT_GE(e->param.conn.private_data_len, 3);
  EXPECT_EQ(DataOf(e->param.conn.private_data, 3), "req");
  EXPECT_EQ(ntohs(rdma_get_src_port(id)), 7000);
  EXPECT_EQ(IpOf(&id->route.addr.dst_addr), "10.0.0.2");

  rdma_conn_param param = {};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.qp_num = 0x99;
  ASSERT_EQ(rdma_accept(id, &param), 0) << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_RESPONSE);
  ASSERT_NE(pe, nullptr);
  uscm_qp_attr rtr = {};
  rtr.qp_state = USCM_QPS_RTR;
  int mask = 0;
  ASSERT_EQ(uscm_init_qp_attr(peer, &rtr, &mask), 0) << uscm_last_error();
  EXPECT_EQ(rtr.dest_qp_num, 0x99u) << "the QPN given to rdma_accept";
  uscm_ack_cm_event(pe);
  ASSERT_EQ(uscm_establish(peer), 0) << uscm_last_error();
  e = Next(RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, id);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  ASSERT_EQ(uscm_disconnect(peer), 0) << uscm_last_error();
  e = Next(RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, id);
  EXPECT_EQ(rdma_disconnect(id), 0) << strerror(errno);  // DREP
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  uscm_cm_event* done = PeerNext(USCM_CM_EVENT_DISCONNECTED);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->status, 0) << "the drop-in's DREP came back";
  uscm_ack_cm_event(done);

  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
  EXPECT_EQ(uscm_destroy_id(peer), 0) << uscm_last_error();
}

// rdma_reject with private data: the peer's REJECTED carries it, status 28
// (consumer reject).
TEST_F(IdsTest, RejectCarriesPrivateData) {
  rdma_cm_id* listener = Listen(7001, nullptr);
  uscm_cm_id* peer = PeerConnect(7001, 0x43, "please");
  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  rdma_cm_id* id = e->id;
  uint8_t data[148];
  for (size_t i = 0; i < sizeof(data); ++i) data[i] = static_cast<uint8_t>(i + 1);
  ASSERT_EQ(rdma_reject(id, data, sizeof(data)), 0) << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_REJECTED);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->status, 28);
  ASSERT_EQ(pe->param.conn.private_data_len, 148);
  EXPECT_EQ(memcmp(pe->param.conn.private_data, data, 148), 0);
  uscm_ack_cm_event(pe);

  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
  EXPECT_EQ(uscm_destroy_id(peer), 0) << uscm_last_error();
}

// The progress hook runs after every step of a port's progress thread; it
// takes the library's lock only when a port channel holds an event (the
// lock-free count), and then moves it to the program's channel by itself.
TEST_F(IdsTest, ProgressHookTakesTheLockOnlyForAQueuedEvent) {
  EXPECT_FALSE(RunProgressHookForTesting()) << "nothing queued: no lock, no pump";
  rdma_cm_id* listener = Listen(7004, nullptr);
  uscm_cm_id* peer = PeerConnect(7004, 0x44, "hook");
  ASSERT_EQ(uscm_sim_run_until_event(sim_, BackendChannel(), 120000), 0);
  EXPECT_EQ(QueuedEvents(ch_), 0);
  EXPECT_TRUE(RunProgressHookForTesting()) << "a CONNECT_REQUEST waits on the port channel";
  EXPECT_EQ(QueuedEvents(ch_), 1) << "moved by the hook, with no PumpEvents";
  EXPECT_FALSE(RunProgressHookForTesting());
  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  rdma_cm_id* id = e->id;
  ASSERT_EQ(rdma_reject(id, nullptr, 0), 0) << strerror(errno);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_REJECTED));
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
  EXPECT_EQ(uscm_destroy_id(peer), 0) << uscm_last_error();
}

// rdma_destroy_id waits, as librdmacm's, until the id's events are acked.
TEST_F(IdsTest, DestroyIdWaitsForTheAck) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = Ipv4("10.0.0.2", 7002);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);

  std::atomic<bool> destroyed{false};
  std::thread destroyer([&] {
    EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
    destroyed = true;
  });
  usleep(50 * 1000);
  EXPECT_FALSE(destroyed) << "rdma_destroy_id returned with an event not acked";
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  destroyer.join();
  EXPECT_TRUE(destroyed);
}

// An event queued and never retrieved does not hold rdma_destroy_id (the
// kernel's ucma discards it; librdmacm waits only for delivered events):
// perftest's ib_send_bw -R server destroys its id with a TIMEWAIT_EXIT
// queued and hung before. The other id's events stay.
TEST_F(IdsTest, DestroyIdDiscardsEventsNotRetrieved) {
  rdma_cm_id* id = nullptr;
  rdma_cm_id* other = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(ch_, &other, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = Ipv4("10.0.0.2", 7003);
  ASSERT_EQ(rdma_resolve_addr(other, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  while (QueuedEvents(ch_) < 2) {
    ASSERT_EQ(uscm_sim_run_until_event(sim_, BackendChannel(), 120000), 0);
    PumpEvents();
  }
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);  // returns: nothing was delivered
  ASSERT_EQ(QueuedEvents(ch_), 1);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, other);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_destroy_id(other), 0) << strerror(errno);
}

// rdma_join_multicast / _ex and rdma_leave_multicast on a UD id: the
// MULTICAST_JOIN event carries the group's address vector, the multicast QPN
// and the join's context as private_data (librdmacm's convention).
TEST_F(IdsTest, JoinAndLeaveMulticast) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_UDP), 0) << strerror(errno);
  EXPECT_EQ(id->qp_type, IBV_QPT_UD);
  sockaddr_in peer = Ipv4("10.0.0.2", 0);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&peer), 2000), 0);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  sockaddr_in group = Ipv4("239.7.7.8", 0);
  rdma_cm_join_mc_attr_ex attr = {};
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS |
                   RDMA_CM_JOIN_MC_ATTR_RESERVED;
  attr.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
  attr.addr = reinterpret_cast<sockaddr*>(&group);
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(id, &attr, nullptr), -1);
  EXPECT_EQ(errno, ENOTSUP) << "a reserved comp_mask bit, as librdmacm";

  int ctx = 0;
  ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&group), &ctx), 0)
      << strerror(errno);
  e = Next(RDMA_CM_EVENT_MULTICAST_JOIN);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, id);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(e->param.ud.private_data, &ctx);
  EXPECT_EQ(e->param.ud.qp_num, 0xFFFFFFu);
  EXPECT_GE(e->param.ud.ah_attr.dlid, 0xC000);
  EXPECT_EQ(e->param.ud.ah_attr.grh.dgid.raw[0], 0xFF);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&group)), 0) << strerror(errno);
  errno = 0;
  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&group)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);

  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  attr.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
  ASSERT_EQ(rdma_join_multicast_ex(id, &attr, &ctx), 0) << strerror(errno);
  e = Next(RDMA_CM_EVENT_MULTICAST_JOIN);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->param.ud.private_data, &ctx);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&group)), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

TEST_F(IdsTest, Errors) {
  rdma_cm_id* id = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_create_id(ch_, nullptr, nullptr, RDMA_PS_TCP), -1);
  EXPECT_EQ(errno, EINVAL);

  rdma_cm_id not_ours = {};
  errno = 0;
  EXPECT_EQ(rdma_connect(&not_ours, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rdma_destroy_id(&not_ours), -1);
  EXPECT_EQ(errno, EINVAL);

  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  // uscm's own checks come through with their errno.
  errno = 0;
  EXPECT_EQ(rdma_connect(id, nullptr), -1) << "connect before the route is resolved";
  EXPECT_EQ(errno, EINVAL);
  ibv_ece ece = {0, 0, 0};
  errno = 0;
  EXPECT_EQ(rdma_set_local_ece(id, &ece), -1) << "vendor_id 0";
  EXPECT_EQ(errno, EINVAL);
  ece.vendor_id = 0x15b3;
  ece.options = 7;
  EXPECT_EQ(rdma_set_local_ece(id, &ece), 0) << strerror(errno);
  int reuse = 1;
  EXPECT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &reuse, sizeof(reuse)), 0)
      << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// Loopback is the wildcard, as the kernel's cma_any_addr: rdma_bind_addr to
// 127.0.0.1 / ::1 succeeds without a device (libfabric's verbs provider binds
// "localhost" while it picks a passive endpoint's address, then takes the
// interfaces' addresses because id->verbs is NULL; fi_getinfo failed (-61)
// when the bind did), and a listener on it takes a REQ to the host's address.
// An address that is not the host's still fails (EADDRNOTAVAIL).
TEST_F(IdsTest, LoopbackBindIsTheWildcardAsTheKernel) {
  rdma_cm_id* v4 = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &v4, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in lo = Ipv4("127.0.0.1", 7002);
  ASSERT_EQ(rdma_bind_addr(v4, reinterpret_cast<sockaddr*>(&lo)), 0) << strerror(errno);
  EXPECT_EQ(v4->verbs, nullptr);
  EXPECT_EQ(v4->port_num, 0) << "no device, as a wildcard bind";
  EXPECT_EQ(IpOf(&v4->route.addr.src_addr), "127.0.0.1");
  ASSERT_EQ(rdma_listen(v4, 1), 0) << strerror(errno);
  uscm_cm_id* peer = PeerConnect(7002, 0x42, "req");  // to 10.0.0.1:7002
  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->listen_id, v4);
  EXPECT_EQ(rdma_reject(e->id, nullptr, 0), 0) << strerror(errno);
  rdma_cm_id* req_id = e->id;
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_REJECTED);
  ASSERT_NE(pe, nullptr);
  uscm_ack_cm_event(pe);

  rdma_cm_id* v6 = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &v6, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in6 lo6 = {};
  lo6.sin6_family = AF_INET6;
  lo6.sin6_addr = in6addr_loopback;
  EXPECT_EQ(rdma_bind_addr(v6, reinterpret_cast<sockaddr*>(&lo6)), 0) << strerror(errno);
  EXPECT_EQ(v6->port_num, 0);

  rdma_cm_id* other = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &other, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in not_here = Ipv4("128.0.0.1", 0);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(other, reinterpret_cast<sockaddr*>(&not_here)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL) << "the kernel's rdma_translate_ip finds no netdev";
  EXPECT_EQ(rdma_destroy_id(other), 0);
  EXPECT_EQ(rdma_destroy_id(v6), 0);
  EXPECT_EQ(rdma_destroy_id(req_id), 0);
  EXPECT_EQ(rdma_destroy_id(v4), 0);
  EXPECT_EQ(uscm_destroy_id(peer), 0) << uscm_last_error();
}

// The host's address on a netdev with no RDMA port (an Ethernet port whose
// rxe device was deleted): the kernel's rdma_bind_addr finds the netdev
// (rdma_translate_ip) and then no device (cma_acquire_dev_by_src_ip): ENODEV.
// An address that is nobody's stays EADDRNOTAVAIL. The host's addresses are
// the test's: 10.9.9.9 (v4) and fd00::9 (v6).
bool FakeHostHolds(const uscm_addr& a) {
  static const Addr16 v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 9, 9, 9};
  static const Addr16 v6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};
  const Addr16 key = KeyOf(a);
  return key == v4 || key == v6;
}

TEST_F(IdsTest, BindToTheHostsAddressOnNoRdmaPortIsENODEVAsTheKernel) {
  SetHostAddressesForTesting(FakeHostHolds);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in host = Ipv4("10.9.9.9", 7003);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&host)), -1);
  EXPECT_EQ(errno, ENODEV);
  sockaddr_in6 host6 = {};
  host6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "fd00::9", &host6.sin6_addr);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&host6)), -1);
  EXPECT_EQ(errno, ENODEV);
  sockaddr_in nobodys = Ipv4("10.9.9.8", 7003);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&nobodys)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  sockaddr_in ours = Ipv4("10.0.0.1", 7003);  // the port's: bound
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&ours)), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  SetHostAddressesForTesting(nullptr);
}

// rdma_resolve_addr from such an address: the kernel binds the id to the
// given source first (resolve_prepare_src: cma_bind_addr), so the answer is
// the bind's, ENODEV; an address that is nobody's stays EADDRNOTAVAIL.
TEST_F(IdsTest, ResolveFromTheHostsAddressOnNoRdmaPortIsENODEVAsTheKernel) {
  SetHostAddressesForTesting(FakeHostHolds);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = Ipv4("10.0.0.2", 7471);
  sockaddr_in host = Ipv4("10.9.9.9", 0);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&host),
                              reinterpret_cast<sockaddr*>(&dst), 2000),
            -1);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_EQ(id->port_num, 0) << "not placed on the default port";
  sockaddr_in nobodys = Ipv4("10.9.9.8", 0);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&nobodys),
                              reinterpret_cast<sockaddr*>(&dst), 2000),
            -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  sockaddr_in ours = Ipv4("10.0.0.1", 0);  // the port's: resolved
  ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&ours),
                              reinterpret_cast<sockaddr*>(&dst), 2000),
            0)
      << strerror(errno);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(IpOf(&id->route.addr.src_addr), "10.0.0.1");
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  SetHostAddressesForTesting(nullptr);
}

// rdma_create_qp's checks before any verbs call (QP creation itself runs in
// the VM lane: tests/vm/groups/60-dropin-rping.sh).
TEST_F(IdsTest, CreateQpAndSrqNeedAnIdWithADevice) {
  ibv_qp_init_attr attr = {};
  attr.qp_type = IBV_QPT_RC;
  rdma_cm_id not_ours = {};
  errno = 0;
  EXPECT_EQ(rdma_create_qp(&not_ours, nullptr, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  errno = 0;
  EXPECT_EQ(rdma_create_qp(id, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rdma_create_qp(id, nullptr, &attr), -1) << "no device: the simulated backend has none";
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_init_attr_ex ex = {};
  errno = 0;
  EXPECT_EQ(rdma_create_qp_ex(id, &ex), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(id->qp, nullptr);
  rdma_destroy_qp(id);  // no QP: nothing happens
  // SRQs: librdmacm's checks, then the device.
  ibv_srq_init_attr_ex srq_ex = {};
  errno = 0;
  EXPECT_EQ(rdma_create_srq_ex(id, &srq_ex), -1) << "no IBV_SRQ_INIT_ATTR_TYPE";
  EXPECT_EQ(errno, EINVAL);
  ibv_srq_init_attr srq_attr = {};
  srq_attr.attr.max_wr = 4;
  srq_attr.attr.max_sge = 1;
  errno = 0;
  EXPECT_EQ(rdma_create_srq(id, nullptr, &srq_attr), -1) << "no device";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(id->srq, nullptr);
  rdma_destroy_srq(id);  // no SRQ: nothing happens
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

}  // namespace
}  // namespace uscm::librdmacm
