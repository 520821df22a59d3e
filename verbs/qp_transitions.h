// Data-QP transitions on a real verbs QP.
//
// Two halves:
//   * ToIbvQpAttr: a PURE mapping of the CM's QP attributes (cm/types.h,
//     computed by CmEndpoint::GetQpAttributes / CmId::InitQpAttr) onto
//     `struct ibv_qp_attr` + `enum ibv_qp_attr_mask`, exactly as the digest §5
//     and Linux ib_cm_init_qp_attr / librdmacm ucma_init_ud_qp do it, with the
//     RC / UC / UD differences applied. No device needed; table-tested.
//   * VerbsQp: a QpTransitioner (api/rdma_cm/rdma_cm.h) around an `ibv_qp*` that calls
//     ibv_modify_qp / ibv_attach_mcast / ibv_detach_mcast with errors that name
//     the transition, the attributes and the errno. The verbs calls go through
//     a small function table so the error paths are testable without a device.
#ifndef USCM_VERBS_QP_TRANSITIONS_H_
#define USCM_VERBS_QP_TRANSITIONS_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cm/qp_transitioner.h"
#include "cm/types.h"
#include "mad/gid.h"

namespace uscm::verbs {

enum class DataQpType : uint8_t { kRc, kUc, kUd };
const char* DataQpTypeName(DataQpType t);

// What the CM attributes do not carry.
struct IbvMapOptions {
  uint8_t sgid_index = 0;  // GRH source GID index (RoCE: the GID of the IP)
  uint32_t qkey = 0;       // UD INIT only (rdma_cm: RDMA_UDP_QKEY 0x01234567)
};

struct IbvQpAttr {
  ibv_qp_attr attr;  // zero except the fields named in mask
  int mask = 0;
};

// "INIT" / "RTR" / "RTS".
const char* QpStateName(cm::QpState s);
// "STATE|AV|PATH_MTU|..." for an ibv_qp_attr_mask.
std::string IbvMaskString(int mask);

// Maps `a` for a QP of type `type`:
//   RC  all of `a` (digest §5 table).
//   UC  drops what UC has no use for: MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER,
//       RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC, TIMEOUT; access = REMOTE_WRITE
//       only (UC has no RDMA read or atomics).
//   UD  INIT = STATE|PKEY_INDEX|PORT|QKEY, RTR = STATE, RTS = STATE|SQ_PSN
//       (librdmacm ucma_init_ud_qp; sq_psn taken from `a`, 0 from rdma_cm).
// Errors (InvalidArgument, naming the field and its limit) for values a
// device would reject with a bare EINVAL: path MTU outside 1..5, PSNs or
// dest QPN beyond 24 bits, retry counts > 7, timeouts > 31, flow label > 20
// bits, SL > 15, a mask bit without meaning for the state.
absl::StatusOr<IbvQpAttr> ToIbvQpAttr(const cm::QpAttributes& a, DataQpType type,
                                      const IbvMapOptions& options = {});

// ibv_modify_qp with a readable error. A null QP is FailedPrecondition.
absl::Status ModifyQp(ibv_qp* qp, const cm::QpAttributes& a, DataQpType type,
                      const IbvMapOptions& options = {});
// Moves the QP to ERROR (IBV_QP_STATE only; valid from every state).
absl::Status TransitionToError(ibv_qp* qp);

// The verbs entry points VerbsQp uses; tests replace them.
struct VerbsOps {
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = &ibv_modify_qp;
  int (*attach_mcast)(ibv_qp*, const ibv_gid*, uint16_t) = &ibv_attach_mcast;
  int (*detach_mcast)(ibv_qp*, const ibv_gid*, uint16_t) = &ibv_detach_mcast;
};

struct VerbsQpCounters {
  uint64_t modifies = 0;
  uint64_t modify_errors = 0;
  uint64_t attaches = 0;
  uint64_t detaches = 0;
  uint64_t mcast_errors = 0;
};

// A user's verbs QP attached to a CmId (CmId::SetQp): the runtime calls
// Modify(INIT/RTR/RTS) and ToError at the points docs/API.md lists. Multicast
// attach/detach are here too (fi_cm's Join calls them; librdmacm attaches on
// MULTICAST_JOIN unless the join was send-only).
class VerbsQp final : public QpTransitioner {
 public:
  // `qp` must outlive this object. The type comes from qp->qp_type
  // (IBV_QPT_RC / UC / UD; anything else: every call fails with a clear error).
  static absl::StatusOr<VerbsQp> Wrap(ibv_qp* qp, IbvMapOptions options = {},
                                      VerbsOps ops = {});

  uint32_t qp_num() const override { return qp_->qp_num; }
  absl::Status Modify(const cm::QpAttributes& attr) override;
  absl::Status ToError() override;
  absl::Status AttachMulticast(const mad::Gid& mgid, uint16_t mlid) override;
  absl::Status DetachMulticast(const mad::Gid& mgid, uint16_t mlid) override;

  DataQpType type() const { return type_; }
  const VerbsQpCounters& counters() const { return counters_; }

 private:
  VerbsQp(ibv_qp* qp, DataQpType type, IbvMapOptions options, VerbsOps ops)
      : qp_(qp), type_(type), options_(options), ops_(ops) {}

  ibv_qp* qp_;
  DataQpType type_;
  IbvMapOptions options_;
  VerbsOps ops_;
  VerbsQpCounters counters_;
};

}  // namespace uscm::verbs

#endif  // USCM_VERBS_QP_TRANSITIONS_H_
