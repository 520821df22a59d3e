// The rdma_cm_id calls that pass one request through to the id's uscm id:
// reject, establish, notify, options, QP attributes, ECE, multicast, and
// rdma_destroy_ep (the
// id's life, connection set-up and events are in ids.cc).
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/convert.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ud_ah.h"

using uscm::librdmacm::Fail;

extern "C" {

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return uscm::librdmacm::ForId("rdma_reject", id, [&](uscm_cm_id* uid) {
    return uscm_reject(uid, private_data, private_data_len);
  });
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return uscm::librdmacm::ForId("rdma_reject_ece", id, [&](uscm_cm_id* uid) {
    return uscm_reject_ece(uid, private_data, private_data_len);
  });
}

int rdma_establish(rdma_cm_id* id) {
  return uscm::librdmacm::ForId("rdma_establish", id,
                                 [&](uscm_cm_id* uid) { return uscm_establish(uid); });
}

// The kernel's ib_cm_notify takes COMM_EST and PATH_MIG, other events are
// EINVAL. uscm loads no alternate path, so PATH_MIG has none to move to:
// EINVAL too (docs/API.md).
int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  if (event != IBV_EVENT_COMM_EST) {
    return uscm::librdmacm::Fail(EINVAL, "rdma_notify",
                                 event == IBV_EVENT_PATH_MIG
                                     ? "PATH_MIG: uscm loads no alternate path"
                                     : "only IBV_EVENT_COMM_EST and IBV_EVENT_PATH_MIG are taken");
  }
  return uscm::librdmacm::ForId("rdma_notify", id,
                                 [&](uscm_cm_id* uid) { return uscm_notify(uid); });
}

// Level and option numbers are librdmacm's, and struct ibv_path_data is
// struct uscm_path_data: passed through.
int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  return uscm::librdmacm::SetOption(id, level, optname, optval, optlen);
}

int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (qp_attr == nullptr || qp_attr_mask == nullptr) {
    return Fail(EINVAL, "rdma_init_qp_attr", "qp_attr or qp_attr_mask is NULL");
  }
  uscm_qp_attr a = {};
  a.qp_state = static_cast<uscm_qp_state>(qp_attr->qp_state);  // INIT / RTR / RTS: same values
  int mask = 0;
  int own_index = -1;  // uscm's GID entry of the id (uscm_source_gid_index)
  int rc = uscm::librdmacm::ForId("rdma_init_qp_attr", id, [&](uscm_cm_id* uid) {
    own_index = uscm_source_gid_index(uid);
    return uscm_init_qp_attr(uid, &a, &mask);
  });
  if (rc != 0) return rc;
  qp_attr->qp_access_flags = a.qp_access_flags;
  qp_attr->pkey_index = a.pkey_index;
  qp_attr->port_num = a.port_num;
  uscm::librdmacm::ToIbvAh(a.ah_attr, &qp_attr->ah_attr);
  // On RoCE the source GID index of the id's own address, as the kernel's
  // (uscm's AV has index 0: fe80:: on rxe, and UCX's QP failed RTR).
  if (mask & IBV_QP_AV) {
    uscm::librdmacm::CompleteAh(id->verbs, id->port_num, &id->route.addr.src_addr,
                                &qp_attr->ah_attr, own_index);
  }
  qp_attr->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  qp_attr->dest_qp_num = a.dest_qp_num;
  qp_attr->rq_psn = a.rq_psn;
  qp_attr->sq_psn = a.sq_psn;
  qp_attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  qp_attr->max_rd_atomic = a.max_rd_atomic;
  qp_attr->min_rnr_timer = a.min_rnr_timer;
  qp_attr->timeout = a.timeout;
  qp_attr->retry_cnt = a.retry_cnt;
  qp_attr->rnr_retry = a.rnr_retry;
  // A UD id's INIT carries the Q_Key, as the kernel's cma_ib_init_qp_attr
  // (cma_set_default_qkey: RDMA_UDP_QKEY for RDMA_PS_UDP and RDMA_PS_IB;
  // RDMA_PS_IPOIB's is the IPoIB broadcast group's, not known here).
  if (qp_attr->qp_state == IBV_QPS_INIT && id->qp_type == IBV_QPT_UD && id->ps != RDMA_PS_IPOIB) {
    qp_attr->qkey = RDMA_UDP_QKEY;
    mask |= IBV_QP_QKEY;
  }
  *qp_attr_mask = mask;
  return 0;
}

// librdmacm's checks: not once the id has a QP, a vendor ID, no comp_mask.
int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (id == nullptr || id->qp != nullptr || ece == nullptr || ece->vendor_id == 0 ||
      ece->comp_mask != 0) {
    return Fail(EINVAL, "rdma_set_local_ece",
                "needs an id without QP and an ece with vendor_id and no comp_mask");
  }
  uscm_ece e = {ece->vendor_id, ece->options};
  return uscm::librdmacm::ForId("rdma_set_local_ece", id,
                                 [&](uscm_cm_id* uid) { return uscm_set_local_ece(uid, &e); });
}

int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (ece == nullptr) return Fail(EINVAL, "rdma_get_remote_ece", "ece is NULL");
  uscm_ece e = {};
  int rc = uscm::librdmacm::ForId("rdma_get_remote_ece", id,
                                   [&](uscm_cm_id* uid) { return uscm_get_remote_ece(uid, &e); });
  if (rc != 0) return rc;
  ece->vendor_id = e.vendor_id;
  ece->options = e.options;
  ece->comp_mask = 0;
  return 0;
}

// Join flags, mask bits and the MULTICAST_JOIN event (ah_attr of the group,
// QPN 0xFFFFFF, private_data = the join's context) are librdmacm's; uscm
// checks the arguments as librdmacm does. An RDMA_PS_IB id joins as its
// qp_type says now (SyncQpType; only a UD one joins, as the kernel's).
// rdma_leave_multicast returns once the join's events the program took are
// acked (multicast.cc).
int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  uscm_addr a;
  if (addr == nullptr || uscm::librdmacm::ToUscmAddr(addr, &a) != 0) {
    return Fail(EINVAL, "rdma_join_multicast", "address is NULL or of an unknown family");
  }
  return uscm::librdmacm::JoinMulticast(
      "rdma_join_multicast", id, addr, context, [&](uscm_cm_id* uid, void* handle) {
        if (uscm::librdmacm::SyncQpType(id, uid, "rdma_join_multicast") != 0) return -1;
        return uscm_join_multicast(uid, &a, handle);
      });
}

int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr, void* context) {
  if (mc_join_attr == nullptr) return Fail(EINVAL, "rdma_join_multicast_ex", "attr is NULL");
  uscm_addr a;
  uscm_cm_join_mc_attr_ex attr = {mc_join_attr->comp_mask, mc_join_attr->join_flags, nullptr};
  if (mc_join_attr->addr != nullptr) {
    if (uscm::librdmacm::ToUscmAddr(mc_join_attr->addr, &a) != 0) {
      return Fail(EINVAL, "rdma_join_multicast_ex", "address of an unknown family");
    }
    attr.addr = &a;
  }
  return uscm::librdmacm::JoinMulticast(
      "rdma_join_multicast_ex", id, mc_join_attr->addr, context,
      [&](uscm_cm_id* uid, void* handle) {
        if (uscm::librdmacm::SyncQpType(id, uid, "rdma_join_multicast_ex") != 0) return -1;
        return uscm_join_multicast_ex(uid, &attr, handle);
      });
}

int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  uscm_addr a;
  if (addr == nullptr || uscm::librdmacm::ToUscmAddr(addr, &a) != 0) {
    return Fail(EINVAL, "rdma_leave_multicast", "address is NULL or of an unknown family");
  }
  return uscm::librdmacm::LeaveMulticast(id, addr, a);
}

// As librdmacm: the id's QP and SRQ go with it.
void rdma_destroy_ep(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp != nullptr) rdma_destroy_qp(id);
  if (id->srq != nullptr) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

}  // extern "C"
