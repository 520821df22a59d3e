#include "api/librdmacm/convert.h"

#include <endian.h>
#include <errno.h>
#include <infiniband/ib.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

namespace uscm::librdmacm {

int ToUscmAddr(const sockaddr* sa, uscm_addr* a) {
  memset(a, 0, sizeof(*a));
  switch (sa->sa_family) {
    case AF_INET: {
      const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
      a->family = USCM_AF_INET;
      memcpy(&a->ip[12], &in->sin_addr, 4);
      a->port = ntohs(in->sin_port);
      return 0;
    }
    case AF_INET6: {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
      a->family = USCM_AF_INET6;
      memcpy(a->ip, &in6->sin6_addr, 16);
      a->port = ntohs(in6->sin6_port);
      a->scope_id = in6->sin6_scope_id;
      a->flowinfo = ntohl(in6->sin6_flowinfo);
      return 0;
    }
    case AF_IB: {
      const auto* ib = reinterpret_cast<const sockaddr_ib*>(sa);
      a->family = USCM_AF_IB;
      memcpy(a->gid, &ib->sib_addr, 16);
      a->pkey = be16toh(ib->sib_pkey);
      a->service_id = be64toh(ib->sib_sid);
      a->service_mask = be64toh(ib->sib_sid_mask);
      a->port = static_cast<uint16_t>(a->service_id);
      return 0;
    }
    default:
      return -1;
  }
}

void ToSockaddr(const uscm_addr& a, sockaddr_storage* out) {
  memset(out, 0, sizeof(*out));
  switch (a.family) {
    case USCM_AF_INET: {
      auto* in = reinterpret_cast<sockaddr_in*>(out);
      in->sin_family = AF_INET;
      in->sin_port = htons(a.port);
      memcpy(&in->sin_addr, &a.ip[12], 4);
      break;
    }
    case USCM_AF_INET6: {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(a.port);
      memcpy(&in6->sin6_addr, a.ip, 16);
      in6->sin6_scope_id = a.scope_id;
      in6->sin6_flowinfo = htonl(a.flowinfo);
      break;
    }
    case USCM_AF_IB: {
      auto* ib = reinterpret_cast<sockaddr_ib*>(out);
      ib->sib_family = AF_IB;
      ib->sib_pkey = htobe16(a.pkey);
      memcpy(&ib->sib_addr, a.gid, 16);
      ib->sib_sid = htobe64(a.service_id);
      ib->sib_sid_mask = htobe64(a.service_mask);
      break;
    }
    default:
      break;  // AF_UNSPEC: all zero
  }
}

bool IsWildcard(const uscm_addr& a) {
  static const uint8_t kZero[16] = {};
  if (a.family == USCM_AF_IB) return memcmp(a.gid, kZero, 16) == 0;
  if (memcmp(a.ip, kZero, 16) == 0) return true;
  if (a.family == USCM_AF_INET) return a.ip[12] == 127;  // IPv4-mapped: 127.0.0.0/8
  return memcmp(a.ip, kZero, 15) == 0 && a.ip[15] == 1;  // ::1
}

void ToIbvAh(const uscm_ah_attr& in, ibv_ah_attr* out) {
  memset(out, 0, sizeof(*out));
  memcpy(out->grh.dgid.raw, in.dgid, 16);
  out->grh.flow_label = in.flow_label;
  out->grh.hop_limit = in.hop_limit;
  out->grh.traffic_class = in.traffic_class;
  out->grh.sgid_index = in.sgid_index;
  out->is_global = in.is_global;
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->static_rate = in.static_rate;
  out->port_num = in.port_num;
}

void ToConnParam(const uscm_conn_param& c, bool connect_request, rdma_conn_param* out) {
  out->responder_resources = connect_request ? c.initiator_depth : c.responder_resources;
  out->initiator_depth = connect_request ? c.responder_resources : c.initiator_depth;
  out->flow_control = c.flow_control;
  out->retry_count = c.retry_count;
  out->rnr_retry_count = c.rnr_retry_count;
  out->srq = c.srq;
  out->qp_num = c.qp_num;
}

void ToPathRec(const uscm_path& p, ibv_sa_path_rec* out) {
  ibv_sa_path_rec& r = *out;
  memset(&r, 0, sizeof(r));
  memcpy(r.sgid.raw, p.sgid, 16);
  memcpy(r.dgid.raw, p.dgid, 16);
  r.slid = htobe16(p.slid);
  r.dlid = htobe16(p.dlid);
  r.flow_label = htobe32(p.flow_label);
  r.hop_limit = p.hop_limit;
  r.traffic_class = p.traffic_class;
  r.reversible = 1;
  r.numb_path = 1;
  r.pkey = htobe16(p.pkey);
  r.sl = p.sl;
  r.mtu_selector = 2;  // exactly
  r.mtu = p.mtu;
  r.rate_selector = 2;
  r.rate = p.rate;
  r.packet_life_time_selector = 2;
  r.packet_life_time = p.packet_life_time;
}

uscm_conn_param ToUscmParam(const rdma_conn_param& p) {
  uscm_conn_param u = {};
  u.private_data = p.private_data;
  u.private_data_len = p.private_data_len;
  u.responder_resources = p.responder_resources;
  u.initiator_depth = p.initiator_depth;
  u.flow_control = p.flow_control;
  u.retry_count = p.retry_count;
  u.rnr_retry_count = p.rnr_retry_count;
  u.srq = p.srq;
  u.qp_num = p.qp_num;
  return u;
}

int RouteSource(const uscm_addr& dst, uscm_addr* src) {
  if (dst.family != USCM_AF_INET && dst.family != USCM_AF_INET6) return -1;
  sockaddr_storage to;
  ToSockaddr(dst, &to);
  if (reinterpret_cast<sockaddr_in*>(&to)->sin_port == 0) {
    reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(9);  // any port routes the same
  }
  const int family = dst.family == USCM_AF_INET ? AF_INET : AF_INET6;
  int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_storage me = {};
  socklen_t len = sizeof(me);
  const socklen_t to_len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&to), to_len) == 0 &&
                   getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0
               ? ToUscmAddr(reinterpret_cast<sockaddr*>(&me), src)
               : -1;
  close(fd);
  if (rc == 0) src->port = 0;
  return rc;
}

}  // namespace uscm::librdmacm
