// The connection calls of the drop-in made of ForId / CompleteCall (ids.h):
// resolve_route, listen (on every port for a listener with no device),
// connect, accept.
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>

#include <algorithm>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/convert.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"

extern "C" {

int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  if (uscm::librdmacm::ForId("rdma_resolve_route", id, [&](uscm_cm_id* uid) {
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
  if (ForId("rdma_listen", id, [&](uscm_cm_id* uid) { return uscm_listen(uid, backlog); }) != 0) {
    return -1;
  }
  ListenOnOtherPorts(id, backlog);
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
// device's; without conn_param also retry / RNR retry 7 and the id's QP.
int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  using namespace uscm::librdmacm;
  uint8_t init = 0, resp = 0;
  RequestDepths(id, &init, &resp);
  if (id != nullptr && id->verbs != nullptr) {
    ibv_device_attr da;
    if (ibv_query_device(id->verbs, &da) == 0) {
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
        uscm_conn_param u = ToUscmParam(p);
        return uscm_accept(uid, &u);
      }) != 0) {
    return -1;
  }
  return uscm::librdmacm::CompleteCall(id, "rdma_accept");
}

}  // extern "C"
