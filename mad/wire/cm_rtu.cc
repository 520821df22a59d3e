#include "mad/wire/cm_rtu.h"

namespace uscm::mad::wire {

absl::StatusOr<RtuRepr> RtuRepr::Parse(std::span<const uint8_t> mad) {
  RtuRepr r;
  auto v = ParseCmMad(mad, CmAttr::kRtu, rtu::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  r.local_comm_id = v->Get(rtu::kLocalCommId);
  r.remote_comm_id = v->Get(rtu::kRemoteCommId);
  r.private_data.Assign(v->Bytes(rtu::kPrivateData));
  return r;
}

absl::Status RtuRepr::Emit(std::span<uint8_t> mad) const {
  auto w = EmitCmMad(mad, CmAttr::kRtu, envelope);
  if (!w.ok()) return w.status();
  w->ZeroReserved<rtu::kRows>();
  w->Set(rtu::kLocalCommId, local_comm_id);
  w->Set(rtu::kRemoteCommId, remote_comm_id);
  WritePrivateData(*w, rtu::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
