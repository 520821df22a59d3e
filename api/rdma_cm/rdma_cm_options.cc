// uscm rdma_cm API: an id's options and what it hands the QP (the kernel's
// rdma_set_option, rdma_set_reuseaddr, the QP type of an RDMA_PS_IB id,
// rdma_init_qp_attr's INIT, the QP it connects), its channel (migrate_id)
// and ECE. Addresses, the device and the addressing calls are in rdma_cm.cc.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/rdma_cm/call_errors.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/status_errno.h"

namespace uscm {

namespace {

using internal::Prefix;
using internal::WrongState;

uint16_t PkeyIndex(const mad::LocalPort& port, uint16_t pkey) {
  for (size_t i = 0; i < port.pkeys.size(); ++i) {
    if ((port.pkeys[i] & 0x7FFF) == (pkey & 0x7FFF)) return static_cast<uint16_t>(i);
  }
  return 0;
}

}  // namespace

// The kernel's rdma_set_reuseaddr (6.1): turned on in any state but LISTEN,
// off only while IDLE and unbound; otherwise EINVAL. The flag is read by the
// binds of other ids that come later (cma_check_port), so an id bound
// without it may let others share its address from now on.
absl::Status CmId::CheckReuseAddrLocked(bool on) const {
  if ((on && state_ != IdState::kListen) || (state_ == IdState::kIdle && !bound_)) {
    return absl::OkStatus();
  }
  return WrongState("set_option(REUSEADDR)", state_,
                    on ? "any state but LISTEN to turn it on"
                       : "IDLE and not yet bound to turn it off");
}

absl::Status CmId::SetReuseAddr(bool on) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (absl::Status s = CheckReuseAddrLocked(on); !s.ok()) return s;
  IdOptions o = opts();
  o.reuse_addr = on;
  return SetOptionLocked(o);
}

absl::Status CmId::SetQpType(QpType type) {
  const bool ud = type == QpType::kUd;
  if (ps_ != PortSpace::kIb) {
    if (ud == ud_) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("set_qp_type: only an RDMA_PS_IB id chooses its QP type; this port space's "
                     "ids are ",
                     ud_ ? "UD" : "RC"));
  }
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  switch (state_) {
    case IdState::kIdle:
    case IdState::kAddrQuery:
    case IdState::kAddrResolved:
    case IdState::kRouteQuery:
    case IdState::kRouteResolved:
      ud_ = ud;
      return absl::OkStatus();
    default:
      return absl::FailedPreconditionError(
          absl::StrCat("set_qp_type: the QP type is chosen before connect or listen; id is in state ",
                       IdStateName(state_)));
  }
}

absl::Status CmId::SetOption(const IdOptions& o) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (o.reuse_addr != opts().reuse_addr) {
    if (absl::Status s = CheckReuseAddrLocked(o.reuse_addr); !s.ok()) return s;
  }
  return SetOptionLocked(o);
}

absl::Status CmId::SetOptionLocked(const IdOptions& o) {
  if (o.ack_timeout && *o.ack_timeout > 31) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set_option(ACK_TIMEOUT): ", *o.ack_timeout, " is not a time code (at most 31)"));
  }
  if (o.max_cm_retries && *o.max_cm_retries > 15) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set_option(CM_RETRIES): ", *o.max_cm_retries, " does not fit 4 bits (at most 15)"));
  }
  if (o.backoff_factor < 1 || o.backoff_factor > 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set_option(BACKOFF): factor ", o.backoff_factor, " must be 1..16"));
  }
  // Only a new IB_PATH is bound to the state; other options may change later.
  if (o.ib_path && o.ib_path != opts().ib_path && state_ != IdState::kAddrResolved &&
      state_ != IdState::kIdle) {
    return WrongState("set_option(IB_PATH)", state_, "IDLE or ADDR_RESOLVED");
  }
  const bool reuse_on = o.reuse_addr && !opts().reuse_addr;
  options_ = std::make_unique<IdOptions>(o);
  // Other processes' binds on a shared port are checked by the router
  // against this id's bind claim: it learns the flag too.
  if (reuse_on && bind_claimed_) {
    if (absl::Status s = device_->ClaimBindReuse(this); !s.ok()) {
      options_->reuse_addr = false;
      return Prefix("set_option(REUSEADDR)", s);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<cm::QpAttributes> CmId::InitQpAttr(cm::QpState state) const {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (conn_.valid() && !is_ud()) {
    absl::StatusOr<cm::QpAttributes> a = device_->node_->cm().GetQpAttributes(conn_, state);
    if (!a.ok()) return Prefix("init_qp_attr", a.status());
    if (state == cm::QpState::kRts && opts().ack_timeout) {
      a->timeout = *opts().ack_timeout;
    }
    return a;
  }
  if (state != cm::QpState::kInit) {
    return absl::FailedPreconditionError(absl::StrCat(
        "init_qp_attr: RTR / RTS attributes need a connection (connect or a CONNECT_REQUEST); "
        "id is in state ", IdStateName(state_)));
  }
  // A UD id from a SIDR_REQ (CONNECT_REQUEST) shares the listener's port.
  if (!bound_ && !conn_.valid()) {
    return WrongState("init_qp_attr(INIT)", state_, "a bound or resolved id");
  }
  // An RDMA_PS_IPOIB id's INIT carries the IPoIB broadcast group's Q_Key in
  // the kernel (cma_set_default_qkey: ib_sa_get_mcmember_rec, the record of
  // the local IPoIB driver's join). A RoCE port has no such record: the
  // kernel fails with ENODEV (no SA multicast client on the port), and so
  // does uscm. (On IB uscm does not ask the SA for it: no Q_Key; docs/API.md.)
  if (ps_ == PortSpace::kIpoib && device_->options_.roce) {
    return mad::WithErrno(
        absl::FailedPreconditionError(
            "init_qp_attr(INIT): an RDMA_PS_IPOIB id's Q_Key is the IPoIB broadcast group's, "
            "which a RoCE port has not (errno ENODEV, as the kernel's cma_set_default_qkey)"),
        ENODEV);
  }
  cm::QpAttributes a;
  a.state = cm::QpState::kInit;
  a.mask = cm::kQpState | cm::kQpPkeyIndex | cm::kQpPort |
           (is_ud() ? 0u : static_cast<uint32_t>(cm::kQpAccessFlags));
  a.access_flags = is_ud() ? 0 : cm::kAccessRemoteWrite | cm::kAccessRemoteRead;
  a.pkey_index = PkeyIndex(device_->port(), peer_.pkey);
  a.port_num = device_->port().port_num;
  return a;
}

absl::Status CmId::SetQp(QpTransitioner* qp) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (qp == nullptr) return absl::InvalidArgumentError("set_qp: null QP");
  if (qp->qp_num() > 0xFFFFFF) {
    return absl::InvalidArgumentError(
        absl::StrCat("set_qp: QPN 0x", absl::Hex(qp->qp_num()), " does not fit 24 bits"));
  }
  if (conn_.valid() && state_ != IdState::kConnectRequest) {
    return WrongState("set_qp", state_, "no connection yet, or CONNECT_REQUEST");
  }
  qp_ = qp;
  qpn_ = qp->qp_num();
  return absl::OkStatus();
}

void CmId::ClearQp() {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  qp_ = nullptr;
  for (McJoinState& j : joins_) j.attached = false;  // the QP is gone: nothing to detach
}

absl::Status CmId::Migrate(EventChannel* to) {
  std::lock_guard<std::mutex> dlock(device_->node_->mutex());
  if (to == nullptr) return absl::InvalidArgumentError("migrate_id: channel is null");
  if (to->device_ != device_) {
    return absl::InvalidArgumentError(
        "migrate_id: the channel belongs to another device (port); a channel serves one port");
  }
  EventChannel* from = channel_;
  if (to == from) return absl::OkStatus();
  std::scoped_lock lock(from->mu_, to->mu_);
  int retrieved = 0;
  for (const std::unique_ptr<Event>& e : from->delivered_) retrieved += e->id == this;
  if (retrieved > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "migrate_id: ", retrieved,
        " retrieved event(s) of this id are not acked on its current channel; ack_cm_event "
        "them first (librdmacm would wait)"));
  }
  // Children whose CONNECT_REQUEST is still queued have not reached the user:
  // they and all their queued events go along.
  std::vector<CmId*> moving = {this};
  for (const auto& e : from->queue_) {
    if (e->listen_id == this && e->id != nullptr && e->id != this) moving.push_back(e->id);
  }
  auto moves = [&](const Event* e) {
    return std::find(moving.begin(), moving.end(), e->id) != moving.end();
  };
  for (auto it = from->queue_.begin(); it != from->queue_.end();) {
    if (!moves(it->get())) {
      ++it;
      continue;
    }
    to->queue_.push_back(std::move(*it));
    it = from->queue_.erase(it);
  }
  from->SyncFdLocked();
  to->SyncFdLocked();
  for (CmId* m : moving) m->channel_ = to;
  return absl::OkStatus();
}

absl::Status CmId::SetLocalEce(const cm::Ece& ece) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (ece.vendor_id > 0xFFFFFF) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set_local_ece: vendor id 0x", absl::Hex(ece.vendor_id), " does not fit 24 bits"));
  }
  if (state_ != IdState::kIdle && state_ != IdState::kAddrResolved &&
      state_ != IdState::kRouteResolved && state_ != IdState::kConnectRequest) {
    return WrongState("set_local_ece", state_, "before connect or accept");
  }
  local_ece_ = ece;
  return absl::OkStatus();
}

absl::StatusOr<cm::Ece> CmId::GetRemoteEce() const {
  // As librdmacm's rdma_get_remote_ece: what the id holds, in any state
  // (zeros before a REQ / REP with ECE arrived, e.g. after REJECTED).
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  return remote_ece_;
}

}  // namespace uscm
