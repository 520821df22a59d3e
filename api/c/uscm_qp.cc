// The C API's QP calls (api/c/uscm_cma.h): init_qp_attr for programs that
// bring their own QP, and a verbs QP the runtime moves (set_qp, create_qp).
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "api/c/c_api_internal.h"
#include "api/c/set_qp_gid.h"
#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "verbs/qp_transitions.h"
#include "verbs/rc_resources.h"

namespace {

using uscm::Address;
using uscm::CmId;
using uscm::c_api::Fail;
using uscm::c_api::FromAh;
using uscm::c_api::g_last_error;
using uscm::c_api::g_mu;
using uscm::c_api::g_verbs_ops;
using uscm::c_api::IdOf;
using uscm::c_api::Qps;
using uscm::c_api::QpSlot;

}  // namespace

extern "C" {

int uscm_init_qp_attr(struct uscm_cm_id* id, struct uscm_qp_attr* attr, int* mask) {
  USCM_ID("init_qp_attr");
  if (attr == nullptr || mask == nullptr) return Fail(EINVAL, "init_qp_attr: attr/mask NULL");
  uscm::cm::QpState st;
  switch (attr->qp_state) {
    case USCM_QPS_INIT: st = uscm::cm::QpState::kInit; break;
    case USCM_QPS_RTR: st = uscm::cm::QpState::kRtr; break;
    case USCM_QPS_RTS: st = uscm::cm::QpState::kRts; break;
    default:
      return Fail(EINVAL, "init_qp_attr: attr->qp_state must be USCM_QPS_INIT, _RTR or _RTS");
  }
  auto a = c->InitQpAttr(st);
  if (!a.ok()) return Fail(a.status());
  attr->mask = a->mask;
  attr->qp_access_flags = a->access_flags;
  attr->pkey_index = a->pkey_index;
  attr->port_num = a->port_num;
  FromAh(a->av, &attr->ah_attr);
  attr->path_mtu = a->path_mtu;
  attr->dest_qp_num = a->dest_qpn;
  attr->rq_psn = a->rq_psn;
  attr->sq_psn = a->sq_psn;
  attr->max_dest_rd_atomic = a->max_dest_rd_atomic;
  attr->max_rd_atomic = a->max_rd_atomic;
  attr->min_rnr_timer = a->min_rnr_timer;
  attr->timeout = a->timeout;
  attr->retry_cnt = a->retry_cnt;
  attr->rnr_retry = a->rnr_retry;
  *mask = static_cast<int>(a->mask);
  return 0;
}

int uscm_set_qp_ex(struct uscm_cm_id* id, struct ibv_qp* qp, uint8_t sgid_index, int active_mtu) {
  USCM_ID("set_qp");
  if (qp == nullptr) return Fail(EINVAL, "set_qp: qp is NULL");
  if (active_mtu < IBV_MTU_256 || active_mtu > IBV_MTU_4096) {
    return Fail(EINVAL, "set_qp: active_mtu " + std::to_string(active_mtu) +
                            " is not an enum ibv_mtu (1 = 256 .. 5 = 4096)");
  }
  const bool ud = c->is_ud();
  if (ud ? qp->qp_type != IBV_QPT_UD : qp->qp_type != IBV_QPT_RC && qp->qp_type != IBV_QPT_UC) {
    return Fail(EINVAL, "set_qp: QP type " + std::to_string(qp->qp_type) + " does not fit port space 0x" +
                            absl::StrCat(absl::Hex(static_cast<int>(c->port_space()))) +
                            (ud ? " (UDP / IPOIB need IBV_QPT_UD)" : " (TCP / IB need IBV_QPT_RC or _UC)"));
  }
  if (c->state() == uscm::IdState::kListen) {
    return Fail(EINVAL, "set_qp: id is in state LISTEN; a QP belongs to an id that connects "
                        "or to the new id of a CONNECT_REQUEST");
  }
  std::lock_guard<std::mutex> lock(g_mu);
  auto have = Qps().find(c);
  if (have != Qps().end()) {
    return Fail(EEXIST, "set_qp: the id already has a QP (QPN 0x" +
                            absl::StrCat(absl::Hex(have->second.qp->qp_num)) +
                            "); uscm_destroy_qp first");
  }
  const uscm::verbs::VerbsOps ops = g_verbs_ops != nullptr ? *g_verbs_ops : uscm::verbs::VerbsOps{};
  QpSlot slot;
  slot.qp = qp;
  if (ud) {
    // UD: no path MTU to cap; VerbsQp also attaches multicast groups.
    uscm::verbs::IbvMapOptions m;
    m.sgid_index = sgid_index;
    m.qkey = uscm::kUdpQkey;
    auto v = uscm::verbs::VerbsQp::Wrap(qp, m, ops);
    if (!v.ok()) return Fail(EINVAL, "set_qp: " + std::string(v.status().message()));
    slot.transitioner = std::make_unique<uscm::verbs::VerbsQp>(std::move(*v));
  } else {
    auto t = uscm::verbs::RcQpTransitioner::Create(qp, sgid_index,
                                                   static_cast<ibv_mtu>(active_mtu), ops);
    if (!t.ok()) return Fail(EINVAL, "set_qp: " + std::string(t.status().message()));
    slot.transitioner = std::move(*t);
  }
  absl::Status s = c->SetQp(slot.transitioner.get());
  if (!s.ok()) return Fail(s);
  id->qp = qp;
  Qps()[c] = std::move(slot);
  return 0;
}

int uscm_source_gid_index(struct uscm_cm_id* id) {
  USCM_ID("source_gid_index");
  const int index = c->SourceGidIndex();
  return index >= 0 ? index : -2;
}

int uscm_set_qp(struct uscm_cm_id* id, struct ibv_qp* qp) {
  USCM_ID("set_qp");
  if (qp == nullptr) return Fail(EINVAL, "set_qp: qp is NULL");
  const uint8_t port = c->device()->port().port_num;
  ibv_port_attr pa{};
  if (ibv_query_port(qp->context, port, &pa) != 0) {
    return Fail(errno != 0 ? errno : EINVAL,
                "set_qp: ibv_query_port(port " + std::to_string(port) + ") failed: " +
                    strerror(errno) + " (is the QP on the id's device?)");
  }
  // The source GID: the id's entry on RoCE (a VLAN's link-local address:
  // the VLAN's), else the live table's (api/c/set_qp_gid.h).
  const int sgid_index = uscm::c_api::SetQpSourceGidIndex(
      *c, pa.gid_tbl_len, [&](int i) -> absl::optional<uscm::c_api::LiveGid> {
        ibv_gid g{};
        if (ibv_query_gid(qp->context, port, i, &g) != 0) return absl::nullopt;
        uscm::c_api::LiveGid live;
        std::memcpy(live.gid.raw.data(), g.raw, 16);
        ibv_gid_entry entry{};
        live.roce_v2 = ibv_query_gid_ex(qp->context, port, i, &entry, 0) == 0 &&
                       entry.gid_type == IBV_GID_TYPE_ROCE_V2;
        return live;
      });
  return uscm_set_qp_ex(id, qp, static_cast<uint8_t>(sgid_index), pa.active_mtu);
}

int uscm_create_qp(struct uscm_cm_id* id, struct ibv_pd* pd, struct ibv_qp_init_attr* qp_init_attr) {
  USCM_ID("create_qp");
  if (pd == nullptr || qp_init_attr == nullptr) {
    return Fail(EINVAL, "create_qp: pd and qp_init_attr must not be NULL (uscm has no default PD)");
  }
  const bool ud = c->is_ud();
  if (ud ? qp_init_attr->qp_type != IBV_QPT_UD
         : qp_init_attr->qp_type != IBV_QPT_RC && qp_init_attr->qp_type != IBV_QPT_UC) {
    return Fail(EINVAL, "create_qp: qp_init_attr->qp_type " + std::to_string(qp_init_attr->qp_type) +
                            " does not fit the port space" +
                            (ud ? " (UDP / IPOIB need IBV_QPT_UD)" : " (TCP / IB need IBV_QPT_RC or _UC)"));
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (Qps().contains(c)) return Fail(EEXIST, "create_qp: the id already has a QP; uscm_destroy_qp first");
  }
  ibv_qp* qp = ibv_create_qp(pd, qp_init_attr);
  if (qp == nullptr) {
    const int err = errno != 0 ? errno : ENOMEM;
    return Fail(err, std::string("create_qp: ibv_create_qp failed: ") + strerror(err));
  }
  if (uscm_set_qp(id, qp) != 0) {
    const int err = errno;
    const std::string msg = "create_qp: " + g_last_error;
    ibv_destroy_qp(qp);
    return Fail(err, msg);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  Qps()[c].owned = true;
  return 0;
}

void uscm_destroy_qp(struct uscm_cm_id* id) {
  CmId* c = IdOf(id, "destroy_qp");
  if (c == nullptr) return;
  c->ClearQp();  // after this the runtime no longer calls the transitioner
  QpSlot slot;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Qps().find(c);
    if (it == Qps().end()) return;
    slot = std::move(it->second);
    Qps().erase(it);
  }
  id->qp = nullptr;
  if (slot.owned) ibv_destroy_qp(slot.qp);
}

}  // extern "C"
