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
// INADDR_ANY / in6addr_any, or an all-zero GID.
bool IsWildcard(const uscm_addr& a);
void ToIbvAh(const uscm_ah_attr& in, ibv_ah_attr* out);
uscm_conn_param ToUscmParam(const rdma_conn_param& p);

// The source address the kernel's routing table picks for `dst` (a UDP
// socket connected to it: nothing is sent), port 0; -1 when there is no
// route or `dst` is not IP.
int RouteSource(const uscm_addr& dst, uscm_addr* src);

// On an IB port, uscm's neighbour entry for an IPv4 destination, as the
// kernel's rdma_cm resolves it over IPoIB: the GID in the destination's
// entry of the kernel's ARP table, asking the kernel to ARP (a UDP datagram
// to the discard port) and waiting up to `timeout_ms` when there is none.
// Without an entry uscm reports ADDR_ERROR (-EHOSTUNREACH) itself; with
// USCM_DEBUG the reason is printed.
void ResolveIpoibNeighbor(uscm_device* dev, const uscm_addr& dst, int timeout_ms);

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_CONVERT_H_
