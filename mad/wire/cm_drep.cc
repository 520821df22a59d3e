#include "mad/wire/cm_drep.h"

namespace uscm::mad::wire {

absl::StatusOr<DrepRepr> DrepRepr::Parse(std::span<const uint8_t> mad) {
  DrepRepr r;
  auto v = ParseCmMad(mad, CmAttr::kDrep, drep::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  r.local_comm_id = v->Get(drep::kLocalCommId);
  r.remote_comm_id = v->Get(drep::kRemoteCommId);
  r.private_data.Assign(v->Bytes(drep::kPrivateData));
  return r;
}

absl::Status DrepRepr::Emit(std::span<uint8_t> mad) const {
  auto w = EmitCmMad(mad, CmAttr::kDrep, envelope);
  if (!w.ok()) return w.status();
  w->ZeroReserved<drep::kRows>();
  w->Set(drep::kLocalCommId, local_comm_id);
  w->Set(drep::kRemoteCommId, remote_comm_id);
  WritePrivateData(*w, drep::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
