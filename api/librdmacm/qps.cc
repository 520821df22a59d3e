// rdma_create_qp, rdma_create_qp_ex, rdma_destroy_qp as librdmacm
// (cma.c: rdma_create_qp_ex, ucma_create_cqs, ucma_init_conn_qp,
// ucma_init_ud_qp): the QP is created on the id's device, with the id's
// shared PD when none is given, with a CQ and completion channel of its own
// for each CQ the program leaves out, moved to INIT (UD: on to RTS with the
// port space's Q_Key), and handed to the uscm CM (uscm_set_qp), which moves
// an RC QP to RTR / RTS while connecting or accepting and to ERROR on
// REJECTED. Once connected the QP is the program's alone (ids.cc DetachQp):
// rdma_disconnect moves it to ERROR in the caller's thread (ShutdownQp), as
// librdmacm does; a peer's DREQ leaves it as it is, as the kernel does.
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <string.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/fork_locks.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ud_ah.h"

namespace uscm::librdmacm {
namespace {

// librdmacm's RDMA_UDP_QKEY, the Q_Key of RDMA_PS_UDP (and of uscm's UD ids).
constexpr uint32_t kUdpQkey = 0x01234567;

// What rdma_destroy_qp undoes besides the QP: the CQs (and their channels)
// rdma_create_qp made because the program gave none.
struct Made {
  ibv_cq* send_cq = nullptr;
  ibv_comp_channel* send_channel = nullptr;
  ibv_cq* recv_cq = nullptr;
  ibv_comp_channel* recv_channel = nullptr;
};

std::mutex g_qp_mu;
std::unordered_map<rdma_cm_id*, Made>& MadeByQp() {
  static auto* m = new std::unordered_map<rdma_cm_id*, Made>;
  return *m;
}

void DestroyCq(ibv_cq*& cq, ibv_comp_channel*& channel) {
  if (cq != nullptr) ibv_destroy_cq(cq);
  if (channel != nullptr) ibv_destroy_comp_channel(channel);
  cq = nullptr;
  channel = nullptr;
}

// A CQ with its own completion channel, `cqe` entries (at least 1).
// As librdmacm, the CQ's context is the id.
int MakeCq(ibv_context* verbs, void* cq_context, uint32_t cqe, ibv_cq** cq,
           ibv_comp_channel** channel, const char* call) {
  *channel = ibv_create_comp_channel(verbs);
  if (*channel == nullptr) {
    return Fail(errno != 0 ? errno : ENOMEM, call, "ibv_create_comp_channel failed");
  }
  *cq = ibv_create_cq(verbs, cqe > 0 ? static_cast<int>(cqe) : 1, cq_context, *channel, 0);
  if (*cq == nullptr) {
    int err = errno != 0 ? errno : ENOMEM;
    ibv_destroy_comp_channel(*channel);
    *channel = nullptr;
    return Fail(err, call, "ibv_create_cq failed");
  }
  return 0;
}

// librdmacm's ucma_init_conn_qp / ucma_init_ud_qp: INIT with the CM's
// attributes (pkey index, port, access flags); UD on to RTR and RTS.
int MoveToInit(rdma_cm_id* id, ibv_qp* qp, const char* call) {
  ibv_qp_attr attr = {};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (rdma_init_qp_attr(id, &attr, &mask) != 0) return -1;
  const bool ud = qp->qp_type == IBV_QPT_UD;
  if (ud) {
    attr.qkey = kUdpQkey;
    mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
  }
  if (int rc = ibv_modify_qp(qp, &attr, mask); rc != 0) {
    return Fail(rc, call, "ibv_modify_qp to INIT failed");
  }
  if (!ud) return 0;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTR;
  if (int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE); rc != 0) {
    return Fail(rc, call, "ibv_modify_qp of the UD QP to RTR failed");
  }
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  if (int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN); rc != 0) {
    return Fail(rc, call, "ibv_modify_qp of the UD QP to RTS failed");
  }
  return 0;
}

}  // namespace

std::mutex& QpTableLock() { return g_qp_mu; }

// uscm_set_qp finds the QP's source GID index by querying the port and the
// entries of its GID table on every call: 4 ioctls per QP on rxe (cmtime's
// rdma_create_qp per connection on each side: CMTIME_MEASURE=callers,
// docs/API.md "The server's futexes and the extra ioctls"). The kept table
// (ud_ah.h) knows the index and the active MTU (uscm takes the RoCE path MTU
// once, at uscm_device_open).
int HandQpToUscm(rdma_cm_id* id, uscm_cm_id* uid, ibv_qp* qp) {
  // A UD QP on an RDMA_PS_IB id made UD since (rdma_create_ep, or the
  // program's id->qp_type): uscm checks the QP's type against the id's.
  if (SyncQpType(id, uid, "rdma_create_qp") != 0) return -1;
  uint8_t sgid_index = 0;
  int active_mtu = 0;
  // uscm's entry where it knows it: the address on the id's netdev (the
  // route's, or the one a request came in on, for an address on two).
  if (KeptSourceGid(id->verbs, id->port_num, &id->route.addr.src_addr, &sgid_index,
                    &active_mtu, uscm_source_gid_index(uid))) {
    return uscm_set_qp_ex(uid, qp, sgid_index, active_mtu);
  }
  return uscm_set_qp(uid, qp);  // InfiniBand: the port's GID, as uscm finds it
}

namespace {

// The common part of rdma_create_qp and rdma_create_qp_ex; `attr` has its
// PD (IBV_QP_INIT_ATTR_PD) and CQs filled here.
int CreateQp(rdma_cm_id* id, ibv_qp_init_attr_ex* attr, const char* call) {
  uscm_cm_id* uid = UscmIdOf(id, call);
  if (uid == nullptr) return -1;
  if (id->qp != nullptr) {
    return Fail(EINVAL, call, "the id has a QP already (rdma_destroy_qp first)");
  }
  if (id->verbs == nullptr) {
    return Fail(EINVAL, call,
                "the id has no device yet: resolve the address (active side) or use the id of "
                "a CONNECT_REQUEST (passive side) first");
  }
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr) {
    attr->pd = id->pd;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd == nullptr) return Fail(EINVAL, call, "no PD given and the id has none");
  if (attr->pd->context != id->verbs) {
    return Fail(EINVAL, call, "the PD is of another device than the id (pd->context != id->verbs)");
  }
  // As librdmacm: CQs the id already has (an SRQ's) and its SRQ are used.
  if (attr->send_cq == nullptr) attr->send_cq = id->send_cq;
  if (attr->recv_cq == nullptr) attr->recv_cq = id->recv_cq;
  if (attr->srq == nullptr) attr->srq = id->srq;
  Made made;
  if (attr->send_cq == nullptr) {
    if (MakeCq(id->verbs, id, attr->cap.max_send_wr, &made.send_cq, &made.send_channel, call) !=
        0) {
      return -1;
    }
    attr->send_cq = made.send_cq;
  }
  if (attr->recv_cq == nullptr) {
    if (MakeCq(id->verbs, id, attr->cap.max_recv_wr, &made.recv_cq, &made.recv_channel, call) !=
        0) {
      int err = errno;
      DestroyCq(made.send_cq, made.send_channel);
      errno = err;
      return -1;
    }
    attr->recv_cq = made.recv_cq;
  }
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  int rc = 0;
  if (qp == nullptr) {
    rc = Fail(errno != 0 ? errno : ENOMEM, call, "ibv_create_qp failed");
  } else if (MoveToInit(id, qp, call) != 0) {
    rc = -1;
  } else if (HandQpToUscm(id, uid, qp) != 0) {
    rc = Fail(errno, call, uscm_last_error());
  }
  if (rc != 0) {
    int err = errno;
    if (qp != nullptr) ibv_destroy_qp(qp);
    DestroyCq(made.send_cq, made.send_channel);
    DestroyCq(made.recv_cq, made.recv_channel);
    errno = err;
    return -1;
  }
  id->qp = qp;
  id->send_cq = attr->send_cq;
  id->recv_cq = attr->recv_cq;
  if (made.send_channel != nullptr) id->send_cq_channel = made.send_channel;
  if (made.recv_channel != nullptr) id->recv_cq_channel = made.recv_channel;
  std::lock_guard<std::mutex> lock(g_qp_mu);
  MadeByQp()[id] = made;
  return 0;
}

// The recv CQ rdma_create_srq_ex made for an XRC SRQ, destroyed with it.
std::unordered_map<rdma_cm_id*, Made>& MadeBySrq() {
  static auto* m = new std::unordered_map<rdma_cm_id*, Made>;
  return *m;
}

int CreateSrq(rdma_cm_id* id, ibv_srq_init_attr_ex* attr, const char* call) {
  if (UscmIdOf(id, call) == nullptr) return -1;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) {
    return Fail(EINVAL, call, "comp_mask lacks IBV_SRQ_INIT_ATTR_TYPE");
  }
  if (id->verbs == nullptr) {
    return Fail(EINVAL, call, "the id has no device yet (resolve or bind to an address first)");
  }
  if (id->srq != nullptr) return Fail(EINVAL, call, "the id has an SRQ already");
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr) {
    attr->pd = id->pd;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  if (attr->pd == nullptr) return Fail(EINVAL, call, "no PD given and the id has none");
  Made made;
  if (attr->srq_type == IBV_SRQT_XRC) {
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || attr->xrcd == nullptr) {
      return Fail(ENOSYS, call, "an XRC SRQ without an XRC domain (librdmacm opens one): not done");
    }
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || attr->cq == nullptr) {
      if (MakeCq(id->verbs, id, attr->attr.max_wr, &made.recv_cq, &made.recv_channel, call) != 0) {
        return -1;
      }
      attr->cq = made.recv_cq;
    }
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  }
  ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
  if (srq == nullptr) {
    int err = errno != 0 ? errno : ENOMEM;
    DestroyCq(made.recv_cq, made.recv_channel);
    return Fail(err, call, "ibv_create_srq_ex failed");
  }
  id->srq = srq;
  if (made.recv_cq != nullptr) {
    id->recv_cq = made.recv_cq;
    id->recv_cq_channel = made.recv_channel;
  }
  std::lock_guard<std::mutex> lock(g_qp_mu);
  MadeBySrq()[id] = made;
  return 0;
}

// What ShutdownQp calls (SetModifyQpForTesting); guarded by g_qp_mu.
int (*g_modify_qp)(ibv_qp*, ibv_qp_attr*, int) = &ibv_modify_qp;

}  // namespace

void SetModifyQpForTesting(int (*modify)(ibv_qp*, ibv_qp_attr*, int)) {
  std::lock_guard<std::mutex> lock(g_qp_mu);
  g_modify_qp = modify != nullptr ? modify : &ibv_modify_qp;
}

// As librdmacm's ucma_modify_qp_err (rdma_disconnect on IB and RoCE).
int ShutdownQp(rdma_cm_id* id, const char* call) {
  if (id->qp == nullptr) return 0;
  int (*modify)(ibv_qp*, ibv_qp_attr*, int);
  {
    std::lock_guard<std::mutex> lock(g_qp_mu);
    modify = g_modify_qp;
  }
  ibv_qp_attr attr = {};
  attr.qp_state = IBV_QPS_ERR;
  if (int rc = modify(id->qp, &attr, IBV_QP_STATE); rc != 0) {
    return Fail(rc, call, "ibv_modify_qp of the id's QP to ERROR failed");
  }
  return 0;
}

void ForgetQp(rdma_cm_id* id) {
  std::lock_guard<std::mutex> lock(g_qp_mu);
  MadeByQp().erase(id);
  MadeBySrq().erase(id);
}

}  // namespace uscm::librdmacm

extern "C" {

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* qp_init_attr) {
  if (id == nullptr || qp_init_attr == nullptr) {
    return uscm::librdmacm::Fail(EINVAL, "rdma_create_qp_ex", "id or qp_init_attr is NULL");
  }
  ibv_qp_init_attr_ex attr = *qp_init_attr;
  int rc = uscm::librdmacm::CreateQp(id, &attr, "rdma_create_qp_ex");
  if (rc == 0) {
    // As librdmacm: the program's struct shows the CQs and the capabilities.
    qp_init_attr->send_cq = attr.send_cq;
    qp_init_attr->recv_cq = attr.recv_cq;
    qp_init_attr->pd = attr.pd;
    qp_init_attr->comp_mask = attr.comp_mask;
    qp_init_attr->cap = attr.cap;
  }
  return rc;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || qp_init_attr == nullptr) {
    return uscm::librdmacm::Fail(EINVAL, "rdma_create_qp", "id or qp_init_attr is NULL");
  }
  ibv_qp_init_attr_ex attr = {};
  memcpy(&attr, qp_init_attr, sizeof(*qp_init_attr));  // the leading fields are the same
  attr.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr.pd = pd;
  int rc = uscm::librdmacm::CreateQp(id, &attr, "rdma_create_qp");
  if (rc == 0) {
    qp_init_attr->send_cq = attr.send_cq;
    qp_init_attr->recv_cq = attr.recv_cq;
    qp_init_attr->cap = attr.cap;
  }
  return rc;
}

// The QP, and the CQs and channels rdma_create_qp made; id->qp and the CQ
// fields become NULL.
void rdma_destroy_qp(rdma_cm_id* id) {
  using namespace uscm::librdmacm;
  if (id == nullptr || id->qp == nullptr) return;
  if (uscm_cm_id* uid = UscmIdOf(id, "rdma_destroy_qp"); uid != nullptr) {
    uscm_destroy_qp(uid);  // the CM stops driving it (a QP of uscm_set_qp stays)
  }
  ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  Made made;
  {
    std::lock_guard<std::mutex> lock(g_qp_mu);
    auto it = MadeByQp().find(id);
    if (it != MadeByQp().end()) {
      made = it->second;
      MadeByQp().erase(it);
    }
  }
  DestroyCq(made.send_cq, made.send_channel);
  DestroyCq(made.recv_cq, made.recv_channel);
  // CQs of the id's SRQ stay (they are the SRQ's).
  if (made.send_cq != nullptr) {
    DestroyCq(made.send_cq, made.send_channel);
    id->send_cq = nullptr;
    id->send_cq_channel = nullptr;
  }
  if (made.recv_cq != nullptr) {
    DestroyCq(made.recv_cq, made.recv_channel);
    id->recv_cq = nullptr;
    id->recv_cq_channel = nullptr;
  }
}

int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr) {
    return uscm::librdmacm::Fail(EINVAL, "rdma_create_srq_ex", "id or attr is NULL");
  }
  return uscm::librdmacm::CreateSrq(id, attr, "rdma_create_srq_ex");
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (id == nullptr || attr == nullptr) {
    return uscm::librdmacm::Fail(EINVAL, "rdma_create_srq", "id or attr is NULL");
  }
  ibv_srq_init_attr_ex ex = {};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.pd = pd;
  ex.srq_type = IBV_SRQT_BASIC;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  int rc = uscm::librdmacm::CreateSrq(id, &ex, "rdma_create_srq");
  if (rc == 0) attr->attr = ex.attr;  // the device's actual limits
  return rc;
}

// As librdmacm: the SRQ, and the CQ rdma_create_srq_ex made for it.
void rdma_destroy_srq(rdma_cm_id* id) {
  using namespace uscm::librdmacm;
  if (id == nullptr || id->srq == nullptr) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  Made made;
  {
    std::lock_guard<std::mutex> lock(g_qp_mu);
    auto it = MadeBySrq().find(id);
    if (it != MadeBySrq().end()) {
      made = it->second;
      MadeBySrq().erase(it);
    }
  }
  if (made.recv_cq != nullptr) {
    DestroyCq(made.recv_cq, made.recv_channel);
    id->recv_cq = nullptr;
    id->recv_cq_channel = nullptr;
  }
}

}  // extern "C"
