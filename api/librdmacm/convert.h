// Conversions between the system's librdmacm types and the uscm C API's
// (addresses, AH attributes, connection parameters), and the IPoIB
// neighbour lookup of rdma_resolve_addr on an InfiniBand port.
#ifndef USCM_API_LIBRDMACM_CONVERT_H_
#define USCM_API_LIBRDMACM_CONVERT_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_device.h"

namespace uscm::librdmacm {

// AF_INET / AF_INET6 / AF_IB to uscm; -1 for another family.
int ToUscmAddr(const sockaddr* sa, uscm_addr* a);
// uscm to a sockaddr (all zero for AF_UNSPEC).
void ToSockaddr(const uscm_addr& a, sockaddr_storage* out);
// INADDR_ANY / in6addr_any, loopback (127.0.0.0/8, ::1: the kernel's cma_any_addr
// counts it as the wildcard), or an all-zero GID.
bool IsWildcard(const uscm_addr& a);
void ToIbvAh(const uscm_ah_attr& in, ibv_ah_attr* out);
uscm_conn_param ToUscmParam(const rdma_conn_param& p);
// An event's connection parameters without the private data; on a
// CONNECT_REQUEST the depths from this side, as the kernel's
// cma_set_req_event_data: the REQ's responder resources are our initiator
// depth and vice versa.
void ToConnParam(const uscm_conn_param& c, bool connect_request, rdma_conn_param* out);
// uscm's path as librdmacm's id->route.path_rec holds it (network order).
void ToPathRec(const uscm_path& p, ibv_sa_path_rec* out);

// The source address the kernel's routing table picks for `dst` (a UDP
// socket connected to it: nothing is sent), port 0; -1 when there is no
// route or `dst` is not IP.
int RouteSource(const uscm_addr& dst, uscm_addr* src);


}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_CONVERT_H_
