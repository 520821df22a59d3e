// rdma_getaddrinfo / rdma_freeaddrinfo with librdmacm's semantics
// (rdma-core librdmacm/addrinfo.c): the hints become getaddrinfo hints
// (RAI_PASSIVE -> AI_PASSIVE, RAI_NUMERICHOST -> AI_NUMERICHOST, QP type ->
// socket type, port space -> protocol), the first answer becomes one
// rdma_addrinfo (socket type -> QP type, protocol -> port space unless the
// hints name them; a passive answer fills ai_src_addr, an active one
// ai_dst_addr, plus the hints' ai_src_addr when given). RAI_FAMILY with
// AF_IB and RAI_NUMERICHOST turns the IPv6 answer into a sockaddr_ib.
//
// Differences from librdmacm: no RDMA device is needed (librdmacm fails with
// ENODEV before looking at the name), and no ibacm query fills ai_route.
#include <endian.h>
#include <errno.h>
#include <infiniband/ib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "api/librdmacm/fail.h"

namespace uscm::librdmacm {
namespace {

using ::uscm::librdmacm::Fail;

void ToAddrinfoHints(const rdma_addrinfo& rai, addrinfo* ai) {
  memset(ai, 0, sizeof(*ai));
  if (rai.ai_flags & RAI_PASSIVE) ai->ai_flags = AI_PASSIVE;
  if (rai.ai_flags & RAI_NUMERICHOST) ai->ai_flags |= AI_NUMERICHOST;
  if (rai.ai_family != AF_IB) ai->ai_family = rai.ai_family;
  switch (rai.ai_qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
      ai->ai_socktype = SOCK_STREAM;
      break;
    case IBV_QPT_UD:
      ai->ai_socktype = SOCK_DGRAM;
      break;
    default:
      break;
  }
  switch (rai.ai_port_space) {
    case RDMA_PS_TCP:
      ai->ai_protocol = IPPROTO_TCP;
      break;
    case RDMA_PS_IPOIB:
    case RDMA_PS_UDP:
      ai->ai_protocol = IPPROTO_UDP;
      break;
    case RDMA_PS_IB:
      if (ai->ai_socktype == SOCK_STREAM) {
        ai->ai_protocol = IPPROTO_TCP;
      } else if (ai->ai_socktype == SOCK_DGRAM) {
        ai->ai_protocol = IPPROTO_UDP;
      }
      break;
    default:
      break;
  }
}

int CopyAddr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t src_len) {
  *dst = static_cast<sockaddr*>(malloc(src_len));
  if (*dst == nullptr) return Fail(ENOMEM, "rdma_getaddrinfo", "out of memory");
  memcpy(*dst, src, src_len);
  *dst_len = src_len;
  return 0;
}

uint16_t PortOf(const sockaddr* addr) {  // network order, as ucma_get_port
  switch (addr->sa_family) {
    case AF_INET:
      return reinterpret_cast<const sockaddr_in*>(addr)->sin_port;
    case AF_INET6:
      return reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port;
    default:
      return 0;
  }
}

// librdmacm's ucma_convert_in6: the IPv6 address as the GID, the port space
// and port in the service ID.
int ToSockaddrIb(int ps, const sockaddr_in6& src, sockaddr** dst, socklen_t* dst_len) {
  auto* sib = static_cast<sockaddr_ib*>(calloc(1, sizeof(sockaddr_ib)));
  if (sib == nullptr) return Fail(ENOMEM, "rdma_getaddrinfo", "out of memory");
  sib->sib_family = AF_IB;
  sib->sib_pkey = htobe16(0xFFFF);
  sib->sib_flowinfo = src.sin6_flowinfo;
  memcpy(&sib->sib_addr, &src.sin6_addr, sizeof(sib->sib_addr));
  uint16_t port = PortOf(reinterpret_cast<const sockaddr*>(&src));
  sib->sib_sid = htobe64((static_cast<uint64_t>(ps) << 16) + be16toh(port));
  if (ps) sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
  if (port) sib->sib_sid_mask |= htobe64(RDMA_IB_IP_PORT_MASK);
  sib->sib_scope_id = src.sin6_scope_id;
  *dst = reinterpret_cast<sockaddr*>(sib);
  *dst_len = sizeof(sockaddr_ib);
  return 0;
}

int FromAddrinfo(const rdma_addrinfo& hints, const addrinfo& ai, rdma_addrinfo* rai) {
  if (hints.ai_qp_type) {
    rai->ai_qp_type = hints.ai_qp_type;
  } else if (ai.ai_socktype == SOCK_STREAM) {
    rai->ai_qp_type = IBV_QPT_RC;
  } else if (ai.ai_socktype == SOCK_DGRAM) {
    rai->ai_qp_type = IBV_QPT_UD;
  }
  if (hints.ai_port_space) {
    rai->ai_port_space = hints.ai_port_space;
  } else if (ai.ai_protocol == IPPROTO_TCP) {
    rai->ai_port_space = RDMA_PS_TCP;
  } else if (ai.ai_protocol == IPPROTO_UDP) {
    rai->ai_port_space = RDMA_PS_UDP;
  }

  const bool passive = ai.ai_flags & AI_PASSIVE;
  if (passive) rai->ai_flags = RAI_PASSIVE;
  char** canonname = passive ? &rai->ai_src_canonname : &rai->ai_dst_canonname;
  if (ai.ai_canonname != nullptr) {
    *canonname = strdup(ai.ai_canonname);
    if (*canonname == nullptr) return Fail(ENOMEM, "rdma_getaddrinfo", "out of memory");
  }
  sockaddr** addr = passive ? &rai->ai_src_addr : &rai->ai_dst_addr;
  socklen_t* len = passive ? &rai->ai_src_len : &rai->ai_dst_len;
  if ((hints.ai_flags & RAI_FAMILY) && hints.ai_family == AF_IB &&
      (hints.ai_flags & RAI_NUMERICHOST)) {
    if (ai.ai_family != AF_INET6) {
      return Fail(EINVAL, "rdma_getaddrinfo", "AF_IB numeric host must be an IPv6-form GID");
    }
    rai->ai_family = AF_IB;
    return ToSockaddrIb(rai->ai_port_space, *reinterpret_cast<const sockaddr_in6*>(ai.ai_addr),
                        addr, len);
  }
  rai->ai_family = ai.ai_family;
  return CopyAddr(addr, len, ai.ai_addr, ai.ai_addrlen);
}

}  // namespace
}  // namespace uscm::librdmacm

// 0, or: -1 with errno (EINVAL nothing asked, ENOMEM), or getaddrinfo's
// EAI_* code (negative, errno untouched) as librdmacm returns it.
extern "C" int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                rdma_addrinfo** res) {
  using uscm::librdmacm::Fail;
  if (res == nullptr) return Fail(EINVAL, "rdma_getaddrinfo", "NULL res");
  if (node == nullptr && service == nullptr && hints == nullptr) {
    return Fail(EINVAL, "rdma_getaddrinfo", "no node, service or hints");
  }
  static const rdma_addrinfo kNoHints = {};
  const rdma_addrinfo& h = hints != nullptr ? *hints : kNoHints;
  auto* rai = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (rai == nullptr) return Fail(ENOMEM, "rdma_getaddrinfo", "out of memory");

  int ret = 0;
  if (node != nullptr || service != nullptr) {
    addrinfo ai_hints;
    addrinfo* ai = nullptr;
    if (hints != nullptr) uscm::librdmacm::ToAddrinfoHints(h, &ai_hints);
    ret = getaddrinfo(node, service, hints != nullptr ? &ai_hints : nullptr, &ai);
    if (ret != 0) {
      if (uscm::librdmacm::DebugEnabled()) {
        fprintf(stderr, "uscm librdmacm: rdma_getaddrinfo: getaddrinfo: %s\n", gai_strerror(ret));
      }
      free(rai);
      return ret;
    }
    ret = uscm::librdmacm::FromAddrinfo(h, *ai, rai);
    freeaddrinfo(ai);
  } else {
    rai->ai_flags = h.ai_flags;
    rai->ai_family = h.ai_family;
    rai->ai_qp_type = h.ai_qp_type;
    rai->ai_port_space = h.ai_port_space;
    if (h.ai_dst_len) {
      ret = uscm::librdmacm::CopyAddr(&rai->ai_dst_addr, &rai->ai_dst_len, h.ai_dst_addr,
                                      h.ai_dst_len);
    }
  }
  if (ret == 0 && !rai->ai_src_len && h.ai_src_len) {
    ret =
        uscm::librdmacm::CopyAddr(&rai->ai_src_addr, &rai->ai_src_len, h.ai_src_addr, h.ai_src_len);
  }
  if (ret != 0) {
    int err = errno;
    rdma_freeaddrinfo(rai);
    errno = err;
    return ret;
  }
  *res = rai;
  return 0;
}

extern "C" void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* rai = res;
    res = res->ai_next;
    free(rai->ai_connect);
    free(rai->ai_route);
    free(rai->ai_src_canonname);
    free(rai->ai_dst_canonname);
    free(rai->ai_src_addr);
    free(rai->ai_dst_addr);
    free(rai);
  }
}
