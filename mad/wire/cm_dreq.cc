#include "mad/wire/cm_dreq.h"

namespace uscm::mad::wire {

absl::StatusOr<DreqRepr> DreqRepr::Parse(std::span<const uint8_t> mad) {
  DreqRepr r;
  auto v = ParseCmMad(mad, CmAttr::kDreq, dreq::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  r.local_comm_id = v->Get(dreq::kLocalCommId);
  r.remote_comm_id = v->Get(dreq::kRemoteCommId);
  r.remote_qpn = v->Get(dreq::kRemoteQpn);
  r.private_data.Assign(v->Bytes(dreq::kPrivateData));
  return r;
}

absl::Status DreqRepr::Emit(std::span<uint8_t> mad) const {
  auto w = EmitCmMad(mad, CmAttr::kDreq, envelope);
  if (!w.ok()) return w.status();
  w->ZeroReserved<dreq::kRows>();
  w->Set(dreq::kLocalCommId, local_comm_id);
  w->Set(dreq::kRemoteCommId, remote_comm_id);
  w->Set(dreq::kRemoteQpn, remote_qpn);
  WritePrivateData(*w, dreq::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
