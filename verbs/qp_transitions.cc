// CM QP attributes -> ibv_qp_attr (digest §5; Linux cm_init_qp_{init,rtr,rts}_attr,
// librdmacm ucma_init_ud_qp) and the verbs calls that apply them.
#include "verbs/qp_transitions.h"

#include <errno.h>
#include <string.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace uscm::verbs {

// The CM core uses verbs mask values; prove it once here.
static_assert(int{cm::kQpState} == int{IBV_QP_STATE});
static_assert(int{cm::kQpAccessFlags} == int{IBV_QP_ACCESS_FLAGS});
static_assert(int{cm::kQpPkeyIndex} == int{IBV_QP_PKEY_INDEX});
static_assert(int{cm::kQpPort} == int{IBV_QP_PORT});
static_assert(int{cm::kQpAv} == int{IBV_QP_AV});
static_assert(int{cm::kQpPathMigState} == int{IBV_QP_PATH_MIG_STATE});
static_assert(int{cm::kQpTimeout} == int{IBV_QP_TIMEOUT});
static_assert(int{cm::kQpRetryCnt} == int{IBV_QP_RETRY_CNT});
static_assert(int{cm::kQpRnrRetry} == int{IBV_QP_RNR_RETRY});
static_assert(int{cm::kQpRqPsn} == int{IBV_QP_RQ_PSN});
static_assert(int{cm::kQpMaxQpRdAtomic} == int{IBV_QP_MAX_QP_RD_ATOMIC});
static_assert(int{cm::kQpAltPath} == int{IBV_QP_ALT_PATH});
static_assert(int{cm::kQpMinRnrTimer} == int{IBV_QP_MIN_RNR_TIMER});
static_assert(int{cm::kQpSqPsn} == int{IBV_QP_SQ_PSN});
static_assert(int{cm::kQpMaxDestRdAtomic} == int{IBV_QP_MAX_DEST_RD_ATOMIC});
static_assert(int{cm::kQpPathMtu} == int{IBV_QP_PATH_MTU});
static_assert(int{cm::kQpDestQpn} == int{IBV_QP_DEST_QPN});
static_assert(int{cm::kAccessRemoteWrite} == int{IBV_ACCESS_REMOTE_WRITE});
static_assert(int{cm::kAccessRemoteRead} == int{IBV_ACCESS_REMOTE_READ});
static_assert(int{cm::kAccessRemoteAtomic} == int{IBV_ACCESS_REMOTE_ATOMIC});
// IBA MTU codes are the verbs enum values (IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5).
static_assert(IBV_MTU_256 == 1 && IBV_MTU_4096 == 5);

namespace {

constexpr uint32_t kMax24 = 0xFFFFFF;

std::string ErrnoText(int err) { return absl::StrCat(strerror(err), " (errno ", err, ")"); }

// Bits that have a meaning for each target state (Linux ib_modify_qp_is_ok,
// RESET/INIT->INIT, INIT->RTR, RTR->RTS and RTS->RTS, all QP types together).
constexpr int kInitBits =
    IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
constexpr int kRtrBits = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER |
                         IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                         IBV_QP_QKEY;
constexpr int kRtsBits = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_TIMEOUT | IBV_QP_ALT_PATH |
                         IBV_QP_PATH_MIG_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER;
// What UC has no use for (no ACKs of its own, no RDMA read / atomics).
constexpr int kNotUc = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_RETRY_CNT |
                       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_TIMEOUT;

absl::Status Range(const char* state, const char* field, uint64_t v, uint64_t max) {
  if (v <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(state, ": ", field, " is ", v, "; the limit is ", max));
}

absl::Status CheckAv(const char* state, const char* which, const cm::QpAv& av) {
  const std::string sl = absl::StrCat(which, ".sl");
  const std::string fl = absl::StrCat(which, ".flow_label");
  const std::string to = absl::StrCat(which, ".timeout");
  const std::string rate = absl::StrCat(which, ".static_rate");
  for (absl::Status s : {Range(state, sl.c_str(), av.sl, 15),
                         Range(state, fl.c_str(), av.flow_label, 0xFFFFF),
                         Range(state, to.c_str(), av.timeout, 31),
                         Range(state, rate.c_str(), av.static_rate, 63)}) {
    if (!s.ok()) return s;
  }
  if (av.port_num == 0) {
    return absl::InvalidArgumentError(absl::StrCat(state, ": ", which, ".port_num is 0"));
  }
  return absl::OkStatus();
}

ibv_ah_attr AhFrom(const cm::QpAv& av, uint8_t sgid_index) {
  ibv_ah_attr ah;
  std::memset(&ah, 0, sizeof ah);
  ah.dlid = av.dlid;
  ah.sl = av.sl;
  ah.src_path_bits = 0;
  ah.static_rate = av.static_rate;  // IBA rate codes = enum ibv_rate values
  ah.is_global = av.is_global ? 1 : 0;
  ah.port_num = av.port_num;
  if (av.is_global) {
    std::memcpy(ah.grh.dgid.raw, av.dgid.raw.data(), 16);
    ah.grh.flow_label = av.flow_label;
    ah.grh.sgid_index = sgid_index;
    ah.grh.hop_limit = av.hop_limit;
    ah.grh.traffic_class = av.traffic_class;
  }
  return ah;
}

ibv_gid ToIbvGid(const mad::Gid& g) {
  ibv_gid out;
  std::memcpy(out.raw, g.raw.data(), 16);
  return out;
}

}  // namespace

const char* DataQpTypeName(DataQpType t) {
  switch (t) {
    case DataQpType::kRc: return "RC";
    case DataQpType::kUc: return "UC";
    case DataQpType::kUd: return "UD";
  }
  return "?";
}

const char* QpStateName(cm::QpState s) {
  switch (s) {
    case cm::QpState::kInit: return "INIT";
    case cm::QpState::kRtr: return "RTR";
    case cm::QpState::kRts: return "RTS";
  }
  return "?";
}

std::string IbvMaskString(int mask) {
  static constexpr std::pair<int, const char*> kNames[] = {
      {IBV_QP_STATE, "STATE"},
      {IBV_QP_CUR_STATE, "CUR_STATE"},
      {IBV_QP_EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY"},
      {IBV_QP_ACCESS_FLAGS, "ACCESS_FLAGS"},
      {IBV_QP_PKEY_INDEX, "PKEY_INDEX"},
      {IBV_QP_PORT, "PORT"},
      {IBV_QP_QKEY, "QKEY"},
      {IBV_QP_AV, "AV"},
      {IBV_QP_PATH_MIG_STATE, "PATH_MIG_STATE"},
      {IBV_QP_TIMEOUT, "TIMEOUT"},
      {IBV_QP_RETRY_CNT, "RETRY_CNT"},
      {IBV_QP_RNR_RETRY, "RNR_RETRY"},
      {IBV_QP_RQ_PSN, "RQ_PSN"},
      {IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC"},
      {IBV_QP_ALT_PATH, "ALT_PATH"},
      {IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER"},
      {IBV_QP_SQ_PSN, "SQ_PSN"},
      {IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"},
      {IBV_QP_PATH_MTU, "PATH_MTU"},
      {IBV_QP_CAP, "CAP"},
      {IBV_QP_DEST_QPN, "DEST_QPN"},
  };
  std::vector<const char*> parts;
  for (const auto& [bit, name] : kNames) {
    if (mask & bit) parts.push_back(name);
  }
  return parts.empty() ? "0" : absl::StrJoin(parts, "|");
}

absl::StatusOr<IbvQpAttr> ToIbvQpAttr(const cm::QpAttributes& a, DataQpType type,
                                      const IbvMapOptions& options) {
  const char* st = QpStateName(a.state);
  IbvQpAttr out;
  std::memset(&out.attr, 0, sizeof out.attr);
  ibv_qp_attr& q = out.attr;
  int mask = static_cast<int>(a.mask);
  const int allowed = a.state == cm::QpState::kInit  ? kInitBits
                      : a.state == cm::QpState::kRtr ? kRtrBits
                                                     : kRtsBits;
  if ((mask & ~allowed) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        st, ": mask bits ", IbvMaskString(mask & ~allowed), " have no meaning for a move to ", st));
  }

  if (type == DataQpType::kUd) {
    // librdmacm ucma_init_ud_qp: only these, whatever the RC attributes say.
    switch (a.state) {
      case cm::QpState::kInit:
        mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
        break;
      case cm::QpState::kRtr:
        mask = IBV_QP_STATE;
        break;
      case cm::QpState::kRts:
        mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        break;
    }
  } else if (type == DataQpType::kUc) {
    mask &= ~kNotUc;
  }

  if (mask & IBV_QP_STATE) {
    q.qp_state = a.state == cm::QpState::kInit  ? IBV_QPS_INIT
                 : a.state == cm::QpState::kRtr ? IBV_QPS_RTR
                                                : IBV_QPS_RTS;
  }
  if (mask & IBV_QP_ACCESS_FLAGS) {
    q.qp_access_flags = a.access_flags;
    if (type == DataQpType::kUc) q.qp_access_flags &= IBV_ACCESS_REMOTE_WRITE;
  }
  if (mask & IBV_QP_PKEY_INDEX) q.pkey_index = a.pkey_index;
  if (mask & IBV_QP_PORT) {
    if (a.port_num == 0) return absl::InvalidArgumentError(absl::StrCat(st, ": port_num is 0"));
    q.port_num = a.port_num;
  }
  if (mask & IBV_QP_QKEY) q.qkey = options.qkey;
  if (mask & IBV_QP_AV) {
    absl::Status s = CheckAv(st, "av", a.av);
    if (!s.ok()) return s;
    q.ah_attr = AhFrom(a.av, options.sgid_index);
  }
  if (mask & IBV_QP_PATH_MTU) {
    if (a.path_mtu < 1 || a.path_mtu > 5) {
      return absl::InvalidArgumentError(absl::StrCat(
          st, ": path_mtu code is ", a.path_mtu, "; valid are 1 (256) .. 5 (4096)"));
    }
    q.path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  }
  if (mask & IBV_QP_DEST_QPN) {
    absl::Status s = Range(st, "dest_qpn", a.dest_qpn, kMax24);
    if (!s.ok()) return s;
    q.dest_qp_num = a.dest_qpn;
  }
  if (mask & IBV_QP_RQ_PSN) {
    absl::Status s = Range(st, "rq_psn", a.rq_psn, kMax24);
    if (!s.ok()) return s;
    q.rq_psn = a.rq_psn;
  }
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) {
    absl::Status s = Range(st, "min_rnr_timer", a.min_rnr_timer, 31);
    if (!s.ok()) return s;
    q.min_rnr_timer = a.min_rnr_timer;
  }
  if (mask & IBV_QP_ALT_PATH) {
    absl::Status s = CheckAv(st, "alt_av", a.alt_av);
    if (!s.ok()) return s;
    q.alt_ah_attr = AhFrom(a.alt_av, options.sgid_index);
    q.alt_pkey_index = a.alt_av.pkey_index;
    q.alt_port_num = a.alt_av.port_num;
    q.alt_timeout = a.alt_av.timeout;
  }
  if (mask & IBV_QP_SQ_PSN) {
    absl::Status s = Range(st, "sq_psn", a.sq_psn, kMax24);
    if (!s.ok()) return s;
    q.sq_psn = a.sq_psn;
  }
  if (mask & IBV_QP_RETRY_CNT) {
    absl::Status s = Range(st, "retry_cnt", a.retry_cnt, 7);
    if (!s.ok()) return s;
    q.retry_cnt = a.retry_cnt;
  }
  if (mask & IBV_QP_RNR_RETRY) {
    absl::Status s = Range(st, "rnr_retry", a.rnr_retry, 7);
    if (!s.ok()) return s;
    q.rnr_retry = a.rnr_retry;
  }
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_TIMEOUT) {
    absl::Status s = Range(st, "timeout", a.timeout, 31);
    if (!s.ok()) return s;
    q.timeout = a.timeout;
  }
  if (mask & IBV_QP_PATH_MIG_STATE) {
    q.path_mig_state = a.path_mig_rearm ? IBV_MIG_REARM : IBV_MIG_MIGRATED;
  }
  out.mask = mask;
  return out;
}

namespace {

absl::Status ModifyWith(const VerbsOps& ops, ibv_qp* qp, const cm::QpAttributes& a,
                        DataQpType type, const IbvMapOptions& options) {
  const char* st = QpStateName(a.state);
  if (qp == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("modify QP to ", st, ": no QP (null ibv_qp; no RDMA device opened?)"));
  }
  absl::StatusOr<IbvQpAttr> m = ToIbvQpAttr(a, type, options);
  if (!m.ok()) return m.status();
  const int err = ops.modify_qp(qp, &m->attr, m->mask);
  if (err == 0) return absl::OkStatus();
  std::string hint;
  switch (err) {
    case EINVAL:
      hint = "the device rejected a value or the mask for this transition (is the QP in the "
             "state before it? port, P_Key index, MTU and AV valid on this port?)";
      break;
    case ENOMEM:
      hint = "the device is out of resources";
      break;
    case EPERM:
    case EACCES:
      hint = "not permitted (RDMA device permissions / memlock limit)";
      break;
    default:
      hint = "see the provider's log";
  }
  std::string values = absl::StrCat("mask ", IbvMaskString(m->mask));
  if (m->mask & IBV_QP_PATH_MTU) absl::StrAppend(&values, ", path_mtu ", m->attr.path_mtu);
  if (m->mask & IBV_QP_DEST_QPN) {
    absl::StrAppend(&values, ", dest_qpn 0x", absl::Hex(m->attr.dest_qp_num));
  }
  if (m->mask & IBV_QP_AV) absl::StrAppend(&values, ", dlid ", m->attr.ah_attr.dlid);
  if (m->mask & IBV_QP_PORT) absl::StrAppend(&values, ", port ", m->attr.port_num);
  return absl::InternalError(absl::StrCat("ibv_modify_qp(", DataQpTypeName(type), " QP 0x",
                                          absl::Hex(qp->qp_num), " to ", st, "; ", values,
                                          "): ", ErrnoText(err), ": ", hint));
}

absl::Status ErrorWith(const VerbsOps& ops, ibv_qp* qp) {
  if (qp == nullptr) {
    return absl::FailedPreconditionError(
        "modify QP to ERROR: no QP (null ibv_qp; no RDMA device opened?)");
  }
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.qp_state = IBV_QPS_ERR;
  const int err = ops.modify_qp(qp, &attr, IBV_QP_STATE);
  if (err == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("ibv_modify_qp(QP 0x", absl::Hex(qp->qp_num),
                                          " to ERROR; mask STATE): ", ErrnoText(err)));
}

}  // namespace

absl::Status ModifyQp(ibv_qp* qp, const cm::QpAttributes& a, DataQpType type,
                      const IbvMapOptions& options) {
  return ModifyWith(VerbsOps{}, qp, a, type, options);
}

absl::Status TransitionToError(ibv_qp* qp) { return ErrorWith(VerbsOps{}, qp); }

absl::StatusOr<VerbsQp> VerbsQp::Wrap(ibv_qp* qp, IbvMapOptions options, VerbsOps ops) {
  if (qp == nullptr) {
    return absl::FailedPreconditionError(
        "verbs QP: null ibv_qp (no RDMA device opened? create the QP with ibv_create_qp first)");
  }
  DataQpType type;
  switch (qp->qp_type) {
    case IBV_QPT_RC: type = DataQpType::kRc; break;
    case IBV_QPT_UC: type = DataQpType::kUc; break;
    case IBV_QPT_UD: type = DataQpType::kUd; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "verbs QP 0x", absl::Hex(qp->qp_num), ": QP type ", static_cast<int>(qp->qp_type),
          " is not RC, UC or UD; the CM drives only those"));
  }
  if (qp->qp_num > kMax24) {
    return absl::InvalidArgumentError(
        absl::StrCat("verbs QP: QPN 0x", absl::Hex(qp->qp_num), " does not fit 24 bits"));
  }
  return VerbsQp(qp, type, options, ops);
}

absl::Status VerbsQp::Modify(const cm::QpAttributes& attr) {
  ++counters_.modifies;
  absl::Status s = ModifyWith(ops_, qp_, attr, type_, options_);
  if (!s.ok()) ++counters_.modify_errors;
  return s;
}

absl::Status VerbsQp::ToError() {
  ++counters_.modifies;
  absl::Status s = ErrorWith(ops_, qp_);
  if (!s.ok()) ++counters_.modify_errors;
  return s;
}

absl::Status VerbsQp::AttachMulticast(const mad::Gid& mgid, uint16_t mlid) {
  if (type_ != DataQpType::kUd) {
    ++counters_.mcast_errors;
    return absl::FailedPreconditionError(absl::StrCat(
        "ibv_attach_mcast: QP 0x", absl::Hex(qp_->qp_num), " is ", DataQpTypeName(type_),
        "; only UD QPs join multicast groups"));
  }
  const ibv_gid gid = ToIbvGid(mgid);
  const int err = ops_.attach_mcast(qp_, &gid, mlid);
  if (err != 0) {
    ++counters_.mcast_errors;
    return absl::InternalError(absl::StrCat("ibv_attach_mcast(QP 0x", absl::Hex(qp_->qp_num),
                                            ", MLID 0x", absl::Hex(mlid), "): ", ErrnoText(err)));
  }
  ++counters_.attaches;
  return absl::OkStatus();
}

absl::Status VerbsQp::DetachMulticast(const mad::Gid& mgid, uint16_t mlid) {
  const ibv_gid gid = ToIbvGid(mgid);
  const int err = ops_.detach_mcast(qp_, &gid, mlid);
  if (err != 0) {
    ++counters_.mcast_errors;
    return absl::InternalError(absl::StrCat("ibv_detach_mcast(QP 0x", absl::Hex(qp_->qp_num),
                                            ", MLID 0x", absl::Hex(mlid), "): ", ErrnoText(err)));
  }
  ++counters_.detaches;
  return absl::OkStatus();
}

}  // namespace uscm::verbs
