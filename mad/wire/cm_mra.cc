#include "mad/wire/cm_mra.h"

namespace uscm::mad::wire {

const char* MraMessageName(MraMessage m) {
  switch (m) {
    case MraMessage::kReq: return "REQ";
    case MraMessage::kRep: return "REP";
    case MraMessage::kLap: return "LAP";
  }
  return nullptr;
}

absl::StatusOr<MraRepr> MraRepr::Parse(std::span<const uint8_t> mad) {
  MraRepr r;
  auto v = ParseCmMad(mad, CmAttr::kMra, mra::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  r.local_comm_id = v->Get(mra::kLocalCommId);
  r.remote_comm_id = v->Get(mra::kRemoteCommId);
  r.message_mraed = static_cast<MraMessage>(v->Get(mra::kMessageMraed));
  r.service_timeout = v->Get(mra::kServiceTimeout);
  r.private_data.Assign(v->Bytes(mra::kPrivateData));
  return r;
}

absl::Status MraRepr::Emit(std::span<uint8_t> mad) const {
  auto w = EmitCmMad(mad, CmAttr::kMra, envelope);
  if (!w.ok()) return w.status();
  w->ZeroReserved<mra::kRows>();
  w->Set(mra::kLocalCommId, local_comm_id);
  w->Set(mra::kRemoteCommId, remote_comm_id);
  w->Set(mra::kMessageMraed, static_cast<uint8_t>(message_mraed));
  w->Set(mra::kServiceTimeout, service_timeout);
  WritePrivateData(*w, mra::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
