// The synchronous endpoint calls (librdmacm's rdma_verbs.h helpers):
// rdma_create_ep, rdma_get_request (rdma_destroy_ep is in id_calls.cc), made
// of the id calls of ids.cc.
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"

using uscm::librdmacm::Fail;

extern "C" {

// A synchronous listener's next connection request: the new id (itself
// synchronous) with the CONNECT_REQUEST in (*id)->event, as librdmacm.
int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  using namespace uscm::librdmacm;
  if (EnsureBackend("rdma_get_request") != 0) return -1;
  if (!IsSyncId(listen)) {
    return Fail(EINVAL, "rdma_get_request", "not a synchronous id (rdma_create_id, NULL channel)");
  }
  if (id == nullptr) return Fail(EINVAL, "rdma_get_request", "id is NULL");
  if (listen->event != nullptr) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (WaitForEvent(listen->channel, &event) != 0) return -1;
  int err = 0;
  if (event->event == RDMA_CM_EVENT_REJECTED) {
    err = ECONNREFUSED;
  } else if (event->status != 0) {
    err = -event->status;
  } else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    err = EINVAL;
  }
  if (err != 0) {
    listen->event = event;
    return Fail(err, "rdma_get_request", rdma_event_str(event->event));
  }
  rdma_cm_id* new_id = event->id;
  new_id->event = event;
  ibv_qp_init_attr attr = {};
  // As librdmacm: the QP of rdma_create_ep's qp_init_attr; the request is
  // refused when it cannot be created.
  if (EndpointQpAttr(listen, &attr) && rdma_create_qp(new_id, listen->pd, &attr) != 0) {
    int e = errno;
    rdma_reject(new_id, nullptr, 0);
    rdma_destroy_id(new_id);
    errno = e;
    return -1;
  }
  *id = new_id;
  return 0;
}

// rdma_create_id (synchronous) + bind (RAI_PASSIVE) or resolve_addr and
// resolve_route (2000 ms each), as librdmacm; with a qp_init_attr the active
// id gets its QP now, a passive one keeps it for rdma_get_request.
int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                   ibv_qp_init_attr* qp_init_attr) {
  using namespace uscm::librdmacm;
  if (EnsureBackend("rdma_create_ep") != 0) return -1;
  if (id == nullptr || res == nullptr) return Fail(EINVAL, "rdma_create_ep", "id or res is NULL");
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) !=
      0) {
    return -1;
  }
  cm_id->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  int rc;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = rdma_bind_addr(cm_id, res->ai_src_addr);
    if (rc == 0 && pd != nullptr) cm_id->pd = pd;
    if (rc == 0 && qp_init_attr != nullptr) {
      ibv_qp_init_attr attr = *qp_init_attr;
      attr.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      KeepEndpointQpAttr(cm_id, attr);
    }
  } else {
    rc = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (rc == 0) rc = rdma_resolve_route(cm_id, 2000);
    if (rc == 0 && qp_init_attr != nullptr) {
      qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);  // as librdmacm
      rc = rdma_create_qp(cm_id, pd, qp_init_attr);
    }
  }
  if (rc != 0) {
    int err = errno;
    rdma_destroy_id(cm_id);
    errno = err;
    return -1;
  }
  *id = cm_id;
  return 0;
}

}  // extern "C"
