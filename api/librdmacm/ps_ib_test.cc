// An RDMA_PS_IB id on IP addresses, through the drop-in's own calls on the
// simulated fabric (ids_testing.h): the drop-in on host 0 against the uscm C
// API on host 1.
//
// The kernel's rdma_cm takes RDMA_PS_IB with AF_INET / AF_INET6 as with
// AF_IB (cma_select_inet_ps returns the id's own port space for RDMA_PS_TCP,
// _UDP, _IPOIB and _IB): the ServiceID is (0x013F << 16) + port
// (rdma_get_service_id), a port space of its own, and the private data
// starts with the CMA header as for any IP address (cma_user_data_offset
// looks at the address family, not the port space). Debian's rdma_xserver /
// rdma_xclient with `-c x` (XRC) make such ids from rdma_getaddrinfo's IPv4
// answer.
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <string>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/ids_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

constexpr uint16_t kPort = 7610;

class PsIbTest : public IdsTest {
 protected:
  // A peer id of port space `ps` (of QP type `type`: USCM_PS_IB) listening
  // on 10.0.0.2:kPort.
  uscm_cm_id* PeerListen(uscm_port_space ps, uscm_qp_type type = USCM_QPT_RC) {
    uscm_cm_id* l = nullptr;
    EXPECT_EQ(uscm_create_id(peer_ch_, &l, nullptr, ps), 0) << uscm_last_error();
    if (ps == USCM_PS_IB) {
      EXPECT_EQ(uscm_set_qp_type(l, type), 0) << uscm_last_error();
    }
    uscm_addr a;
    EXPECT_EQ(uscm_parse_addr(("10.0.0.2:" + std::to_string(kPort)).c_str(), &a), 0);
    EXPECT_EQ(uscm_bind_addr(l, &a), 0) << uscm_last_error();
    EXPECT_EQ(uscm_listen(l, 4), 0) << uscm_last_error();
    return l;
  }

  // The drop-in's RDMA_PS_IB listener on 10.0.0.1:kPort, its qp_type set to
  // `type` after the bind (as a program may, before rdma_listen).
  rdma_cm_id* IbListen(ibv_qp_type type) {
    rdma_cm_id* l = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &l, nullptr, RDMA_PS_IB), 0) << strerror(errno);
    sockaddr_in addr = Ipv4("10.0.0.1", kPort);
    EXPECT_EQ(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&addr)), 0) << strerror(errno);
    l->qp_type = type;
    EXPECT_EQ(rdma_listen(l, 4), 0) << strerror(errno);
    return l;
  }

  // The peer's request was refused: its event `want` with `status`, and
  // nothing for the drop-in's program.
  void ExpectRefused(uscm_cm_event_type want, int status) {
    uscm_cm_event* pe = PeerNext(want);
    ASSERT_NE(pe, nullptr);
    EXPECT_EQ(pe->status, status);
    uscm_ack_cm_event(pe);
    PumpEvents();
    EXPECT_EQ(QueuedEvents(ch_), 0) << "no CONNECT_REQUEST for the refused request";
  }
};

// The drop-in's RDMA_PS_IB id resolves an IPv4 address and connects; the
// peer's RDMA_PS_IB listener gets the request, not its RDMA_PS_TCP listener
// on the same port number, and the private data arrives without the CMA
// header in front. (Before: EINVAL at rdma_resolve_addr, "RDMA_PS_IB ids take
// AF_IB addresses".)
TEST_F(PsIbTest, AnIbIdConnectsToAnIpv4Address) {
  uscm_cm_id* tcp_listener = PeerListen(USCM_PS_TCP);
  uscm_cm_id* ib_listener = PeerListen(USCM_PS_IB);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_IB), 0) << strerror(errno);
  sockaddr_in dst = Ipv4("10.0.0.2", kPort);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
  EXPECT_EQ(rdma_get_local_addr(id)->sa_family, AF_INET);
  EXPECT_EQ(ntohs(rdma_get_dst_port(id)), kPort);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED));
  ASSERT_EQ(id->route.num_paths, 1);

  // The private data as given: the CMA header taken off.
  uscm_cm_event* pe = ConnectToPeer(id, "ps-ib", 0x5151);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->listen_id, ib_listener) << "the RDMA_PS_IB listener, not the RDMA_PS_TCP one";
  EXPECT_EQ(pe->param.conn.qp_num, 0x5151u);
  uscm_cm_id* passive = PeerRejectsWithNo(pe);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  peer_ids_ = {passive, ib_listener, tcp_listener};
}

// The other way: the peer's RDMA_PS_IB id on IPv4 reaches the drop-in's
// RDMA_PS_IB listener bound to 10.0.0.1, and the drop-in's RDMA_PS_TCP
// listener on the same port hears nothing.
TEST_F(PsIbTest, AnIbListenerOnIpv4GetsAnIbIdsRequest) {
  rdma_cm_id* tcp_listener = Listen(kPort, nullptr);
  rdma_cm_id* ib_listener = IbListen(IBV_QPT_RC);

  uscm_cm_id* peer = PeerConnect(kPort, 0x6161, "ib-ip", USCM_PS_IB);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->listen_id, ib_listener);
  EXPECT_EQ(e->id->ps, RDMA_PS_IB);
  EXPECT_EQ(DataOf(e->param.conn.private_data, 5), "ib-ip");
  EXPECT_EQ(rdma_get_peer_addr(e->id)->sa_family, AF_INET);
  rdma_cm_id* child = e->id;
  ASSERT_EQ(rdma_reject(child, nullptr, 0), 0) << strerror(errno);
  rdma_ack_cm_event(e);
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_REJECTED));
  PumpEvents();
  EXPECT_EQ(QueuedEvents(ch_), 0) << "nothing for the RDMA_PS_TCP listener";
  EXPECT_EQ(rdma_destroy_id(child), 0);
  EXPECT_EQ(rdma_destroy_id(ib_listener), 0);
  EXPECT_EQ(rdma_destroy_id(tcp_listener), 0);
  peer_ids_ = {peer};
}

// The kernel makes an RDMA_PS_IB id UD or RC by its qp_type (rdma_create_id2's,
// which rdma_create_ep takes from ai_qp_type; the drop-in reads id->qp_type
// as the program left it before the connect). A UD one connects by SIDR:
// the peer's UD listener gets a SIDR_REQ with the private data, its
// SIDR_REP makes ESTABLISHED with param.ud, the Q_Key RDMA_UDP_QKEY (the
// kernel's cma_set_default_qkey for RDMA_PS_IB). (Before: a REQ went out,
// the UD listener answered REJ 28: REJECTED.)
TEST_F(PsIbTest, AUdIbIdConnectsBySidr) {
  uscm_cm_id* ud_listener = PeerListen(USCM_PS_IB, USCM_QPT_UD);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_IB), 0) << strerror(errno);
  EXPECT_EQ(id->qp_type, IBV_QPT_RC) << "rdma_create_id's RDMA_PS_IB id is RC";
  id->qp_type = IBV_QPT_UD;
  sockaddr_in dst = Ipv4("10.0.0.2", kPort);
  ResolveTo(id, &dst);
  rdma_conn_param param = {};
  param.private_data = "ud-ib";
  param.private_data_len = 5;
  param.qp_num = 0x8181;
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->listen_id, ud_listener);
  EXPECT_EQ(DataOf(pe->param.ud.private_data, 5), "ud-ib");
  uscm_cm_id* passive = pe->id;
  EXPECT_EQ(uscm_get_qp_type(passive), USCM_QPT_UD);
  uscm_ack_cm_event(pe);
  uscm_conn_param ap = {};
  ap.private_data = "ok";
  ap.private_data_len = 2;
  ap.qp_num = 0x9191;
  ASSERT_EQ(uscm_accept(passive, &ap), 0) << uscm_last_error();
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->param.ud.qp_num, 0x9191u);
  EXPECT_EQ(e->param.ud.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
  EXPECT_EQ(DataOf(e->param.ud.private_data, 2), "ok");
  rdma_ack_cm_event(e);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  peer_ids_ = {passive, ud_listener};
}

// The passive side: the drop-in's RDMA_PS_IB listener made UD (id->qp_type
// set before rdma_listen) gets the peer's SIDR_REQ; its new id is UD (the
// kernel's cma_ib_new_udp_id), the request's param.ud carries the data, and
// rdma_accept answers with a SIDR_REP (the peer's ESTABLISHED: our QPN and
// RDMA_UDP_QKEY). A RC peer's REQ to it is refused (REJ 28, as the kernel's
// cma_ib_check_req_qp_type), and nothing reaches the program.
TEST_F(PsIbTest, AUdIbListenerTakesSidrRequestsOnly) {
  rdma_cm_id* listener = IbListen(IBV_QPT_UD);
  uscm_cm_id* rc_peer = PeerConnect(kPort, 0x6161, "rc", USCM_PS_IB);
  ExpectRefused(USCM_CM_EVENT_REJECTED, 28);

  uscm_cm_id* ud_peer = PeerConnect(kPort, 0x7171, "ib-ud", USCM_PS_IB, USCM_QPT_UD);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->listen_id, listener);
  rdma_cm_id* child = e->id;
  EXPECT_EQ(child->ps, RDMA_PS_IB);
  EXPECT_EQ(child->qp_type, IBV_QPT_UD);
  EXPECT_EQ(DataOf(e->param.ud.private_data, 5), "ib-ud");
  rdma_conn_param param = {};
  param.qp_num = 0xA1A1;
  ASSERT_EQ(rdma_accept(child, &param), 0) << strerror(errno);
  rdma_ack_cm_event(e);
  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_ESTABLISHED);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->param.ud.qp_num, 0xA1A1u);
  EXPECT_EQ(pe->param.ud.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
  uscm_ack_cm_event(pe);
  EXPECT_EQ(rdma_destroy_id(child), 0);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  peer_ids_ = {rc_peer, ud_peer};
}

// An RDMA_PS_IB listener left RC (rdma_create_id's) refuses a SIDR_REQ:
// SIDR_REP status 2 (IB_SIDR_REJECT), the peer's UNREACHABLE, and the
// program hears nothing (before: a CONNECT_REQUEST with param.conn).
TEST_F(PsIbTest, AnRcIbListenerRefusesSidr) {
  rdma_cm_id* listener = IbListen(IBV_QPT_RC);
  uscm_cm_id* ud_peer = PeerConnect(kPort, 0x7171, "ib-ud", USCM_PS_IB, USCM_QPT_UD);
  ExpectRefused(USCM_CM_EVENT_UNREACHABLE, 2);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  peer_ids_ = {ud_peer};
}

// rdma_create_ep with rdma_getaddrinfo's answer of ai_qp_type IBV_QPT_UD
// (hints RDMA_PS_IB, UD): the endpoint's id is UD, so its listener refuses
// an RC peer's REQ (REJ 28) as the kernel's, whose id rdma_create_id2 made
// UD. (Before: the REQ reached the program as a CONNECT_REQUEST.)
TEST_F(PsIbTest, CreateEpTakesAiQpTypeUd) {
  rdma_addrinfo hints = {};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_IB;
  hints.ai_qp_type = IBV_QPT_UD;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("10.0.0.1", std::to_string(kPort).c_str(), &hints, &res), 0);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_ep(&listener, res, nullptr, nullptr), 0) << strerror(errno);
  rdma_freeaddrinfo(res);
  EXPECT_EQ(listener->qp_type, IBV_QPT_UD);
  ASSERT_EQ(rdma_listen(listener, 4), 0) << strerror(errno);
  uscm_cm_id* rc_peer = PeerConnect(kPort, 0x6161, "rc", USCM_PS_IB);
  ExpectRefused(USCM_CM_EVENT_REJECTED, 28);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  peer_ids_ = {rc_peer};
}

// rdma_xclient -c x: an RDMA_PS_IB id of qp_type IBV_QPT_XRC_SEND (as
// rdma_create_ep sets it from rdma_getaddrinfo's answer). XRC is not
// implemented: rdma_connect fails with ENOSYS and sends no REQ, rather than
// connecting the XRC QP as RC (before: an RC REQ went out).
TEST_F(PsIbTest, AnXrcConnectFailsWithoutARequest) {
  uscm_cm_id* ib_listener = PeerListen(USCM_PS_IB);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_IB), 0) << strerror(errno);
  id->qp_type = IBV_QPT_XRC_SEND;
  sockaddr_in dst = Ipv4("10.0.0.2", kPort);
  ResolveTo(id, &dst);
  rdma_conn_param param = {};
  param.qp_num = 0x7171;
  errno = 0;
  EXPECT_EQ(rdma_connect(id, &param), -1);
  EXPECT_EQ(errno, ENOSYS);
  EXPECT_NE(uscm_sim_run_until_event(sim_, peer_ch_, 10000), 0) << "no CONNECT_REQUEST";
  EXPECT_EQ(rdma_destroy_id(id), 0);
  peer_ids_ = {ib_listener};
}

// rdma_init_qp_attr's INIT for a UD id carries the Q_Key, as the kernel's
// cma_ib_init_qp_attr (RDMA_UDP_QKEY for RDMA_PS_UDP and for an RDMA_PS_IB
// id of qp_type UD); an RC id's has none. (Before: no IBV_QP_QKEY, so a
// program moving its own UD QP with it got Q_Key 0.)
TEST_F(PsIbTest, InitQpAttrOfAUdIdCarriesTheQkey) {
  struct Case {
    rdma_port_space ps;
    ibv_qp_type qp_type;
    bool qkey;
  };
  for (const Case c : {Case{RDMA_PS_UDP, IBV_QPT_UD, true}, Case{RDMA_PS_IB, IBV_QPT_UD, true},
                       Case{RDMA_PS_TCP, IBV_QPT_RC, false}, Case{RDMA_PS_IB, IBV_QPT_RC, false}}) {
    SCOPED_TRACE(c.ps);
    SCOPED_TRACE(c.qp_type);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, c.ps), 0) << strerror(errno);
    id->qp_type = c.qp_type;
    sockaddr_in dst = Ipv4("10.0.0.2", kPort);
    ResolveTo(id, &dst);
    ibv_qp_attr attr = {};
    int mask = 0;
    attr.qp_state = IBV_QPS_INIT;
    ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0) << strerror(errno);
    EXPECT_EQ((mask & IBV_QP_QKEY) != 0, c.qkey);
    EXPECT_EQ(attr.qkey, c.qkey ? static_cast<uint32_t>(RDMA_UDP_QKEY) : 0u);
    EXPECT_EQ(rdma_destroy_id(id), 0);
  }
}

}  // namespace
}  // namespace uscm::librdmacm
