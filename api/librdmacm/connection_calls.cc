// The connection calls of the drop-in made of ForId / CompleteCall (ids.h):
// resolve_addr (the id to the port of its source), resolve_route, listen (on
// every port for a listener with no device), connect, accept, disconnect.
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>

#include <algorithm>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/convert.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"

namespace {

// librdmacm's rdma_connect and rdma_accept take the QP from id->qp (its QPN,
// srq, the QP they move to RTR / RTS). A QP the program put there itself,
// not through rdma_create_qp on this id, is handed to uscm first: DAPL's
// accept moves its EP's QP to the CONNECT_REQUEST's id by assigning id->qp
// (openib_cma dapls_ib_accept_connection), with conn_param.qp_num unset.
int AdoptAssignedQp(rdma_cm_id* id, uscm_cm_id* uid) {
  if (id->qp == nullptr || uid->qp != nullptr) return 0;
  return uscm::librdmacm::HandQpToUscm(id, uid, id->qp);
}

bool IsXrc(ibv_qp_type t) { return t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV; }

// XRC is not implemented: uscm's CM sends RC and UC REQs only (and answers
// an XRC one, transport service "extended", with REJ 9), so an XRC id or QP
// fails here, before any REQ, rather than being connected as RC. librdmacm
// connects them (the kernel's cm_req_set_qp_type: XRC_INI is service 3,
// extended type 1).
int RefuseXrc(rdma_cm_id* id, const char* call) {
  if (!IsXrc(id->qp_type) && (id->qp == nullptr || !IsXrc(id->qp->qp_type))) return 0;
  return uscm::librdmacm::Fail(ENOSYS, call,
                               "XRC connections are not implemented on uscm (RC and UC only)");
}

}  // namespace

extern "C" {

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  using namespace uscm::librdmacm;
  uscm_addr src, dst;
  if (dst_addr == nullptr || ToUscmAddr(dst_addr, &dst) != 0) {
    return Fail(EINVAL, "rdma_resolve_addr", "destination is NULL or of an unknown family");
  }
  if (src_addr != nullptr && ToUscmAddr(src_addr, &src) != 0) {
    return Fail(EINVAL, "rdma_resolve_addr", "source address of an unknown family");
  }
  // As the kernel's resolve_prepare_src (cma.c): the id's source, bound or
  // given, is of the destination's family (an IPv4 id cannot resolve an
  // IPv6 destination, nor an id bound to [::] an IPv4 one). The kernel binds
  // an unbound id to a given source before it refuses; here it stays unbound.
  const sa_family_t bound = id != nullptr ? id->route.addr.src_addr.sa_family : AF_UNSPEC;
  const sa_family_t given = src_addr != nullptr ? src_addr->sa_family : AF_UNSPEC;
  const sa_family_t from = bound != AF_UNSPEC ? bound : given;
  if (from != AF_UNSPEC && from != dst_addr->sa_family) {
    return Fail(EINVAL, "rdma_resolve_addr", "the source is not of the destination's family");
  }
  // The neighbour (ARP / ND, the IPoIB GID) is the device's to resolve:
  // uscm_device_open gives it the kernel's tables (verbs/neighbours.h).
  // An id on its device already (bound, or resolved before): one look-up
  // and one uscm call; ADDR_RESOLVED straight to the program's channel
  // where uscm resolved it within the call (direct_addr.cc).
  const bool with_src = src_addr != nullptr;
  bool done = false, sync = false;
  if (ResolveAddrDirect(id, with_src ? &src : nullptr, dst, timeout_ms, &done, &sync) != 0) {
    return -1;
  }
  if (done) return sync ? CompleteCall(id, "rdma_resolve_addr") : 0;
  // Not taken by the direct path (whose id is on a port already): the ports
  // open now if they have not yet.
  if (EnsureBackend("rdma_resolve_addr") != 0) return -1;
  // The id goes to the port of its source: the given one, else the one the
  // routing table picks (the device of the route's output interface), and
  // uscm, asked without a source, takes that address and the route's netdev
  // (its GID entry: DeviceOptions::route_to), as the kernel's rdma_cm
  // (rdma_resolve_ip). When that address is on no RDMA port, uscm's choice:
  // the port's first address of the destination's family.
  bool routed = false;
  if (src_addr == nullptr && !OnSimulatedPorts() && RouteSource(dst, &src) == 0) routed = true;
  if ((routed || (src_addr != nullptr && !IsWildcard(src))) &&
      PlaceForSource(id, src, !routed, "rdma_resolve_addr") != 0) {
    return -1;
  }
  CloseRemovedDevicesIfNew();  // the lookup may have listed them
  int rc = ForId("rdma_resolve_addr", id, [&](uscm_cm_id* uid) {
    return uscm_resolve_addr(uid, with_src ? &src : nullptr, &dst, timeout_ms);
  });
  if (rc != 0) return rc;
  // As librdmacm: the destination shows in id->route at once.
  ToSockaddr(dst, &id->route.addr.dst_storage);
  return CompleteCall(id, "rdma_resolve_addr");
}

// As librdmacm, the QP goes to ERROR first (ShutdownQp; uscm does it again
// for a QP it still drives), and from then on it is the program's alone.
int rdma_disconnect(rdma_cm_id* id) {
  if (uscm::librdmacm::ForId("rdma_disconnect", id, [&](uscm_cm_id* uid) {
        if (uscm::librdmacm::ShutdownQp(id, "rdma_disconnect") != 0) return -1;
        if (uscm_disconnect(uid) != 0) return -1;
        uscm::librdmacm::DetachQp(uid);
        return 0;
      }) != 0) {
    return -1;
  }
  return uscm::librdmacm::CompleteCall(id, "rdma_disconnect");
}

// No SA query (RoCE, IB_PATH): the direct path, which ignores the timeout
// as the kernel's cma_resolve_iboe_route does; else the SA's, through ForId.
int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  bool done = false, sync = false;
  if (uscm::librdmacm::ResolveRouteDirect(id, &done, &sync) != 0) return -1;
  if (done && !sync) return 0;
  if (!done && uscm::librdmacm::ForId("rdma_resolve_route", id, [&](uscm_cm_id* uid) {
        return uscm_resolve_route(uid, timeout_ms);
      }) != 0) {
    return -1;
  }
  return uscm::librdmacm::CompleteCall(id, "rdma_resolve_route");
}

// With USCM_DEBUG, says where it listens: what a script waits for before
// starting a client (the kernel's listeners show in `rdma resource`).
int rdma_listen(rdma_cm_id* id, int backlog) {
  using namespace uscm::librdmacm;
  if (ForId("rdma_listen", id, [&](uscm_cm_id* uid) {
        if (SyncQpType(id, uid, "rdma_listen") != 0) return -1;
        return uscm_listen(uid, backlog);
      }) != 0) {
    return -1;
  }
  if (ListenOnOtherPorts(id, backlog) != 0) return -1;
  if (DebugEnabled()) {
    char host[INET6_ADDRSTRLEN] = "?";
    const sockaddr* sa = &id->route.addr.src_addr;
    const void* ip = sa->sa_family == AF_INET6
                         ? static_cast<const void*>(&id->route.addr.src_sin6.sin6_addr)
                         : static_cast<const void*>(&id->route.addr.src_sin.sin_addr);
    inet_ntop(sa->sa_family == AF_INET6 ? AF_INET6 : AF_INET, ip, host, sizeof(host));
    char where[64] = "every port";
    if (id->verbs != nullptr) {
      snprintf(where, sizeof(where), "%s:%u", ibv_get_device_name(id->verbs->device), id->port_num);
    }
    fprintf(stderr, "uscm librdmacm: rdma_listen: listening on %s port %u (%s)\n", host,
            ntohs(rdma_get_src_port(id)), where);
  }
  return 0;
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (uscm::librdmacm::ForId("rdma_connect", id, [&](uscm_cm_id* uid) {
        if (RefuseXrc(id, "rdma_connect") != 0) return -1;
        if (uscm::librdmacm::SyncQpType(id, uid, "rdma_connect") != 0) return -1;
        if (AdoptAssignedQp(id, uid) != 0) return -1;
        if (conn_param == nullptr) return uscm_connect(uid, nullptr);
        uscm_conn_param p = uscm::librdmacm::ToUscmParam(*conn_param);
        return uscm_connect(uid, &p);
      }) != 0) {
    return -1;
  }
  return uscm::librdmacm::CompleteCall(id, "rdma_connect");
}

// As librdmacm's rdma_accept: without conn_param (or with RDMA_MAX_RESP_RES /
// RDMA_MAX_INIT_DEPTH) the depths of the CONNECT_REQUEST, capped at the
// device's (queried once per device: QueryDeviceOnce); without conn_param
// also retry / RNR retry 7 and the id's QP.
int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  using namespace uscm::librdmacm;
  uint8_t init = 0, resp = 0;
  RequestDepths(id, &init, &resp);
  if (id != nullptr && id->verbs != nullptr) {
    ibv_device_attr da;
    if (QueryDeviceOnce(id->verbs, &da) == 0) {
      init = static_cast<uint8_t>(std::min<int>(init, da.max_qp_init_rd_atom));
      resp = static_cast<uint8_t>(std::min<int>(resp, da.max_qp_rd_atom));
    }
  }
  rdma_conn_param p = {};
  if (conn_param != nullptr) {
    p = *conn_param;
  } else {
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    if (id != nullptr && id->qp != nullptr) {
      p.qp_num = id->qp->qp_num;
      p.srq = id->qp->srq != nullptr;
    }
  }
  if (conn_param == nullptr || p.initiator_depth == RDMA_MAX_INIT_DEPTH) p.initiator_depth = init;
  if (conn_param == nullptr || p.responder_resources == RDMA_MAX_RESP_RES) {
    p.responder_resources = resp;
  }
  if (ForId("rdma_accept", id, [&](uscm_cm_id* uid) {
        if (RefuseXrc(id, "rdma_accept") != 0) return -1;
        if (AdoptAssignedQp(id, uid) != 0) return -1;
        uscm_conn_param u = ToUscmParam(p);
        return uscm_accept(uid, &u);
      }) != 0) {
    return -1;
  }
  return uscm::librdmacm::CompleteCall(id, "rdma_accept");
}

}  // extern "C"
