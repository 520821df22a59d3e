// AF_IB addresses and ROUTE_ERROR through the drop-in's own calls on the
// simulated fabric (ids_testing.h): the drop-in on host 0 against the uscm C
// API on host 1.
//
// ROUTE_ERROR's status is the kernel's: cma_query_handler reports the status
// ib_sa gives its callback, which is -EINVAL when the SA answers with a
// non-zero MAD status (ERR_NO_RECORDS for a GID with no path; sa_query.c
// recv_handler) and -ETIMEDOUT when it never answers (send_handler,
// IB_WC_RESP_TIMEOUT_ERR); the id goes back to ADDR_RESOLVED, so a second
// rdma_resolve_route is allowed (route_timeout_test: the silent SA).
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <string>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/ids_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

constexpr uint16_t kPort = 7600;
// RDMA_PS_IB's SID for port kPort, as librdmacm's ucma_convert_in6 builds it
// ((ps << 16) + port, the IP-style mask), which the peer listens on.
constexpr uint64_t kSid = (uint64_t{RDMA_PS_IB} << 16) + kPort;

sockaddr_ib IbAddr(const ibv_gid& gid, uint64_t sid) {
  sockaddr_ib a = {};
  a.sib_family = AF_IB;
  a.sib_pkey = htobe16(0xFFFF);
  memcpy(&a.sib_addr, gid.raw, 16);
  a.sib_sid = htobe64(sid);
  a.sib_sid_mask = htobe64(~uint64_t{0});
  return a;
}

std::string Hex(const void* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    snprintf(b, sizeof(b), "%02x", static_cast<const uint8_t*>(p)[i]);
    s += b;
  }
  return s;
}

class AfIbTest : public IdsTest {
 protected:
  // The two hosts' GIDs from an IPv4 route (the SA's path record).
  void SetUp() override {
    IdsTest::SetUp();
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in dst = Ipv4("10.0.0.2", 1);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
    ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
    rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED));
    ASSERT_EQ(id->route.num_paths, 1);
    here_ = id->route.path_rec->sgid;
    there_ = id->route.path_rec->dgid;
    ASSERT_EQ(rdma_destroy_id(id), 0);
  }

  // A peer id on host 1 listening on AF_IB (its GID, `sid`).
  uscm_cm_id* PeerListen(uscm_port_space ps = USCM_PS_IB, uint64_t sid = kSid) {
    uscm_cm_id* l = nullptr;
    EXPECT_EQ(uscm_create_id(peer_ch_, &l, nullptr, ps), 0) << uscm_last_error();
    uscm_addr a = {};
    a.family = USCM_AF_IB;
    memcpy(a.gid, there_.raw, 16);
    a.pkey = 0xFFFF;
    a.service_id = sid;
    a.service_mask = ~uint64_t{0};
    a.port = kPort;
    EXPECT_EQ(uscm_bind_addr(l, &a), 0) << uscm_last_error();
    EXPECT_EQ(uscm_listen(l, 4), 0) << uscm_last_error();
    return l;
  }

  ibv_gid here_ = {};
  ibv_gid there_ = {};
};

// resolve_addr with a sockaddr_ib (the GID as given: no neighbour, no MAD),
// resolve_route (the SA), connect, the peer accepts, establish; what the id's
// addresses hold on the way.
TEST_F(AfIbTest, ConnectsToAnIbAddressAsGiven) {
  uscm_cm_id* listener = PeerListen();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_IB), 0) << strerror(errno);
  sockaddr_ib dst = IbAddr(there_, kSid);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 0);
  rdma_ack_cm_event(e);
  EXPECT_EQ(id->port_num, 1);

  // The kernel's cma_resolve_ib_dev: the source is the port's GID, AF_IB.
  const auto* src = reinterpret_cast<const sockaddr_ib*>(rdma_get_local_addr(id));
  const auto* peer = reinterpret_cast<const sockaddr_ib*>(rdma_get_peer_addr(id));
  ASSERT_EQ(src->sib_family, AF_IB);
  EXPECT_EQ(Hex(&src->sib_addr, 16), Hex(here_.raw, 16));
  ASSERT_EQ(peer->sib_family, AF_IB);
  EXPECT_EQ(Hex(&peer->sib_addr, 16), Hex(there_.raw, 16)) << "the destination as given";
  EXPECT_EQ(be64toh(peer->sib_sid), kSid);
  EXPECT_EQ(be16toh(peer->sib_pkey), 0xFFFF);
  EXPECT_EQ(ntohs(rdma_get_dst_port(id)), kPort) << "the low 16 bits of the SID";
  // ucma_query_addr fills route.addr.addr.ibaddr from the kernel's answer.
  EXPECT_EQ(Hex(id->route.addr.addr.ibaddr.sgid.raw, 16), Hex(here_.raw, 16));
  EXPECT_EQ(Hex(id->route.addr.addr.ibaddr.dgid.raw, 16), Hex(there_.raw, 16));
  EXPECT_EQ(be16toh(id->route.addr.addr.ibaddr.pkey), 0xFFFF);

  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  e = Next(RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 0);
  rdma_ack_cm_event(e);
  ASSERT_EQ(id->route.num_paths, 1);
  EXPECT_EQ(Hex(id->route.path_rec->sgid.raw, 16), Hex(here_.raw, 16));
  EXPECT_EQ(Hex(id->route.path_rec->dgid.raw, 16), Hex(there_.raw, 16));

  rdma_conn_param param = {};
  param.private_data = "ib";
  param.private_data_len = 2;
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.qp_num = 0x4242;
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(pe, nullptr);
  // AF_IB: the private data is the program's own, no CMA header (the
  // kernel's cma_user_data_offset is 0 for AF_IB).
  EXPECT_EQ(DataOf(pe->param.conn.private_data, 2), "ib");
  EXPECT_EQ(pe->param.conn.qp_num, 0x4242u);
  uscm_cm_id* passive = pe->id;
  uscm_conn_param answer = {};
  answer.responder_resources = 1;
  answer.initiator_depth = 1;
  answer.qp_num = 0x4343;
  ASSERT_EQ(uscm_accept(passive, &answer), 0) << uscm_last_error();
  uscm_ack_cm_event(pe);
  e = Next(RDMA_CM_EVENT_CONNECT_RESPONSE);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->param.conn.qp_num, 0x4343u);
  rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_establish(id), 0) << strerror(errno);
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_ESTABLISHED));

  ASSERT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  pe = PeerNext(USCM_CM_EVENT_DISCONNECTED);
  uscm_disconnect(passive);
  uscm_ack_cm_event(pe);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_DISCONNECTED));
  EXPECT_EQ(rdma_destroy_id(id), 0);
  peer_ids_ = {passive, listener};
}

// The passive side: the drop-in binds a sockaddr_ib (its GID and a SID),
// listens, and the peer connects to it on AF_IB.
TEST_F(AfIbTest, AcceptsOnAnIbAddress) {
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &listener, nullptr, RDMA_PS_IB), 0) << strerror(errno);
  sockaddr_ib here = IbAddr(here_, kSid);
  ASSERT_EQ(rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&here)), 0) << strerror(errno);
  EXPECT_EQ(listener->port_num, 1) << "a GID of the port: bound to it";
  const auto* src = reinterpret_cast<const sockaddr_ib*>(rdma_get_local_addr(listener));
  ASSERT_EQ(src->sib_family, AF_IB);
  EXPECT_EQ(Hex(&src->sib_addr, 16), Hex(here_.raw, 16));
  EXPECT_EQ(be64toh(src->sib_sid), kSid);
  EXPECT_EQ(ntohs(rdma_get_src_port(listener)), kPort);
  ASSERT_EQ(rdma_listen(listener, 4), 0) << strerror(errno);

  uscm_cm_id* peer = nullptr;
  ASSERT_EQ(uscm_create_id(peer_ch_, &peer, nullptr, USCM_PS_IB), 0);
  uscm_addr dst = {};
  dst.family = USCM_AF_IB;
  memcpy(dst.gid, here_.raw, 16);
  dst.pkey = 0xFFFF;
  dst.service_id = kSid;
  dst.service_mask = ~uint64_t{0};
  dst.port = kPort;
  ASSERT_EQ(uscm_resolve_addr(peer, nullptr, &dst, 2000), 0) << uscm_last_error();
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_ADDR_RESOLVED));
  ASSERT_EQ(uscm_resolve_route(peer, 2000), 0) << uscm_last_error();
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_ROUTE_RESOLVED));
  uscm_conn_param p = {};
  p.private_data = "hi";
  p.private_data_len = 2;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.qp_num = 0x99;
  ASSERT_EQ(uscm_connect(peer, &p), 0) << uscm_last_error();

  rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->listen_id, listener);
  EXPECT_EQ(e->param.conn.qp_num, 0x99u);
  EXPECT_EQ(DataOf(e->param.conn.private_data, 2), "hi");
  rdma_cm_id* child = e->id;
  const auto* child_src = reinterpret_cast<const sockaddr_ib*>(rdma_get_local_addr(child));
  const auto* child_dst = reinterpret_cast<const sockaddr_ib*>(rdma_get_peer_addr(child));
  ASSERT_EQ(child_src->sib_family, AF_IB);
  EXPECT_EQ(Hex(&child_src->sib_addr, 16), Hex(here_.raw, 16));
  ASSERT_EQ(child_dst->sib_family, AF_IB);
  EXPECT_EQ(Hex(&child_dst->sib_addr, 16), Hex(there_.raw, 16)) << "the REQ's primary GID";
  EXPECT_EQ(Hex(child->route.addr.addr.ibaddr.dgid.raw, 16), Hex(there_.raw, 16));
  EXPECT_EQ(child->route.num_paths, 1);
  rdma_conn_param answer = {};
  answer.qp_num = 0x98;
  answer.responder_resources = 1;
  answer.initiator_depth = 1;
  ASSERT_EQ(rdma_accept(child, &answer), 0) << strerror(errno);
  rdma_ack_cm_event(e);
  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_RESPONSE);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->param.conn.qp_num, 0x98u);
  uscm_ack_cm_event(pe);
  ASSERT_EQ(uscm_establish(peer), 0) << uscm_last_error();
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ESTABLISHED));

  ASSERT_EQ(uscm_disconnect(peer), 0);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_DISCONNECTED));
  ASSERT_EQ(rdma_disconnect(child), 0);
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_DISCONNECTED));
  EXPECT_EQ(rdma_destroy_id(child), 0);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  peer_ids_ = {peer};
}

// rdma_getaddrinfo with AF_IB hints (RAI_FAMILY + RAI_NUMERICHOST: the GID
// in IPv6 form, the port space and port in the ServiceID, as librdmacm's
// ucma_convert_in6), then an RDMA_PS_TCP id (the answer's port space) resolves
// and connects to that sockaddr_ib: the kernel's cma_select_ib_ps allows a TCP
// id on AF_IB when the SID's port space is TCP (uscm refused anything but
// RDMA_PS_IB: EINVAL at rdma_resolve_addr); an RDMA_PS_IPOIB id is refused
// with EPROTONOSUPPORT, as by the kernel.
TEST_F(AfIbTest, GetaddrinfoAfIbThenATcpIdConnects) {
  const uint64_t tcp_sid = (uint64_t{RDMA_PS_TCP} << 16) + kPort;
  uscm_cm_id* listener = PeerListen(USCM_PS_TCP, tcp_sid);
  char gid_text[INET6_ADDRSTRLEN];
  ASSERT_NE(inet_ntop(AF_INET6, there_.raw, gid_text, sizeof(gid_text)), nullptr);
  rdma_addrinfo hints = {};
  hints.ai_flags = RAI_NUMERICHOST | RAI_FAMILY;
  hints.ai_family = AF_IB;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* rai = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(gid_text, std::to_string(kPort).c_str(), &hints, &rai), 0);
  ASSERT_EQ(rai->ai_family, AF_IB);
  ASSERT_EQ(rai->ai_port_space, RDMA_PS_TCP);
  EXPECT_EQ(be64toh(reinterpret_cast<sockaddr_ib*>(rai->ai_dst_addr)->sib_sid), tcp_sid);

  rdma_cm_id* ipoib = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &ipoib, nullptr, RDMA_PS_IPOIB), 0) << strerror(errno);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(ipoib, nullptr, rai->ai_dst_addr, 2000), -1);
  EXPECT_EQ(errno, EPROTONOSUPPORT);
  EXPECT_EQ(rdma_destroy_id(ipoib), 0);

  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, static_cast<rdma_port_space>(rai->ai_port_space)), 0)
      << strerror(errno);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, rai->ai_dst_addr, 2000), 0) << strerror(errno);
  rdma_freeaddrinfo(rai);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
  EXPECT_EQ(reinterpret_cast<const sockaddr_ib*>(rdma_get_local_addr(id))->sib_family, AF_IB);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED));
  // AF_IB: no CMA header, the private data as given.
  uscm_cm_event* pe = ConnectToPeer(id, "tcp", 0x4444);
  ASSERT_NE(pe, nullptr);
  uscm_cm_id* passive = PeerRejectsWithNo(pe);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  peer_ids_ = {passive, listener};
}

// An RDMA_PS_UDP id on AF_IB (the SID's port space UDP, as the kernel's
// cma_select_ib_ps): SIDR to the peer's AF_IB UD listener; the drop-in's
// ESTABLISHED carries the peer's QPN and Q_Key and the private data.
TEST_F(AfIbTest, UdpIdResolvesAnIbAddressBySidr) {
  const uint64_t udp_sid = (uint64_t{RDMA_PS_UDP} << 16) + kPort;
  uscm_cm_id* listener = PeerListen(USCM_PS_UDP, udp_sid);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_UDP), 0) << strerror(errno);
  sockaddr_ib dst = IbAddr(there_, udp_sid);
  ResolveTo(id, &dst);
  rdma_conn_param param = {};
  param.private_data = "ud";
  param.private_data_len = 2;
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(DataOf(pe->param.ud.private_data, 2), "ud") << "AF_IB: no CMA header";
  uscm_cm_id* passive = pe->id;
  uscm_conn_param answer = {};
  answer.qp_num = 0x5151;
  answer.private_data = "ok";
  answer.private_data_len = 2;
  ASSERT_EQ(uscm_accept(passive, &answer), 0) << uscm_last_error();
  uscm_ack_cm_event(pe);
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(e->param.ud.qp_num, 0x5151u);
  EXPECT_NE(e->param.ud.qkey, 0u);
  EXPECT_EQ(DataOf(e->param.ud.private_data, 2), "ok");
  rdma_ack_cm_event(e);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  peer_ids_ = {passive, listener};
}

// A GID nobody has: ADDR_RESOLVED (AF_IB is taken as given), then the SA
// answers ERR_NO_RECORDS: ROUTE_ERROR, status -EINVAL as the kernel's; the id
// is back in ADDR_RESOLVED and may ask again.
TEST_F(AfIbTest, RouteToAGidWithNoPathIsRouteErrorEinval) {
  ibv_gid nobody = there_;
  nobody.raw[15] ^= 0x5A;
  nobody.raw[9] ^= 0x33;
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_IB), 0) << strerror(errno);
  sockaddr_ib dst = IbAddr(nobody, kSid);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << "round " << round << ": " << strerror(errno);
    rdma_cm_event* e = Next(RDMA_CM_EVENT_ROUTE_ERROR);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->id, id);
    EXPECT_EQ(e->status, -EINVAL) << "round " << round;
    EXPECT_EQ(id->route.num_paths, 0);
    rdma_ack_cm_event(e);
  }
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// The same in synchronous mode (NULL channel): rdma_resolve_route returns -1
// with errno EINVAL, as librdmacm's ucma_complete turns the event's negative
// status into errno, and id->event holds the ROUTE_ERROR.
TEST_F(AfIbTest, SynchronousRouteToAGidWithNoPathFailsWithEinval) {
  SetDriverForTesting(&IdsTest::Drive, this);
  ibv_gid nobody = there_;
  nobody.raw[15] ^= 0x5A;
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_IB), 0) << strerror(errno);
  sockaddr_ib dst = IbAddr(nobody, kSid);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  errno = 0;
  EXPECT_EQ(rdma_resolve_route(id, 2000), -1);
  EXPECT_EQ(errno, EINVAL) << strerror(errno);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_ERROR);
  EXPECT_EQ(id->event->status, -EINVAL);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

}  // namespace
}  // namespace uscm::librdmacm
