// rdma_event_str, rdma_get_src_port / rdma_get_dst_port. The id calls are in
// ids.cc, QPs and SRQs in qps.cc (docs/API.md "Drop-in librdmacm").
#include <endian.h>
#include <errno.h>
#include <infiniband/ib.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdint.h>
#include <sys/socket.h>

#include "api/librdmacm/fail.h"

namespace {

// librdmacm's ucma_get_port: network order; AF_IB: the low 16 bits of the
// service ID.
uint16_t PortOf(const sockaddr* addr) {
  switch (addr->sa_family) {
    case AF_INET:
      return reinterpret_cast<const sockaddr_in*>(addr)->sin_port;
    case AF_INET6:
      return reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port;
    case AF_IB:
      return htobe16(
          static_cast<uint16_t>(be64toh(reinterpret_cast<const sockaddr_ib*>(addr)->sib_sid)));
    default:
      return 0;
  }
}

}  // namespace

extern "C" {

const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

// From id->route.addr, as librdmacm (network order; 0 for an unset address).
// A null id is 0 with EINVAL, where librdmacm dereferences it.
__be16 rdma_get_src_port(rdma_cm_id* id) {
  if (id == nullptr) return uscm::librdmacm::Fail(EINVAL, "rdma_get_src_port", "null id"), 0;
  return PortOf(&id->route.addr.src_addr);
}
__be16 rdma_get_dst_port(rdma_cm_id* id) {
  if (id == nullptr) return uscm::librdmacm::Fail(EINVAL, "rdma_get_dst_port", "null id"), 0;
  return PortOf(&id->route.addr.dst_addr);
}

}  // extern "C"
