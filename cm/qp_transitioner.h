// The interface through which the CM moves a data QP: the runtime calls it on
// the id's events (RTR/RTS on connect, ERROR on reject and disconnect, attach /
// detach on multicast join and leave). verbs/ implements it over ibv_qp
// (verbs/qp_transitions.h, verbs/rc_resources.h); tests use doubles. It lives
// here, below both verbs/ and the APIs in api/, so that neither includes the
// other.
#ifndef USCM_CM_QP_TRANSITIONER_H_
#define USCM_CM_QP_TRANSITIONER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "cm/types.h"
#include "mad/gid.h"

namespace uscm {

// QP transitions done by the runtime when the user attaches a QP (a verbs QP
// through verbs/qp_transitions.h, or any test double). Without one the id is in
// "external QP" mode: the user reads InitQpAttr() and moves the QP itself,
// exactly like a librdmacm user without an rdma_cm QP.
class QpTransitioner {
 public:
  virtual ~QpTransitioner() = default;
  virtual uint32_t qp_num() const = 0;
  virtual absl::Status Modify(const cm::QpAttributes& attr) = 0;
  // Moves the QP to ERROR (on REJECTED / DISCONNECTED).
  virtual absl::Status ToError() = 0;
  // [fabric] Multicast on a UD QP (ibv_attach_mcast / ibv_detach_mcast). The
  // runtime attaches on a successful join unless it was send-only (as
  // librdmacm) and detaches on leave. Default: nothing to attach.
  virtual absl::Status AttachMulticast(const mad::Gid& mgid, uint16_t mlid) {
    return absl::OkStatus();
  }
  virtual absl::Status DetachMulticast(const mad::Gid& mgid, uint16_t mlid) {
    return absl::OkStatus();
  }
};

}  // namespace uscm

#endif  // USCM_CM_QP_TRANSITIONER_H_
