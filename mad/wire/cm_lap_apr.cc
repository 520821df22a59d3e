#include "mad/wire/cm_lap_apr.h"

namespace uscm::mad::wire {

absl::StatusOr<LapRepr> LapRepr::Parse(std::span<const uint8_t> mad) {
  LapRepr r;
  auto v = ParseCmMad(mad, CmAttr::kLap, lap::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  r.local_comm_id = v->Get(lap::kLocalCommId);
  r.remote_comm_id = v->Get(lap::kRemoteCommId);
  r.remote_qpn = v->Get(lap::kRemoteQpn);
  r.remote_cm_response_timeout = v->Get(lap::kRemoteCmResponseTimeout);
  r.alternate = ReadPath(*v, lap::kAlternatePath);
  r.private_data.Assign(v->Bytes(lap::kPrivateData));
  return r;
}

absl::Status LapRepr::Emit(std::span<uint8_t> mad) const {
  auto w = EmitCmMad(mad, CmAttr::kLap, envelope);
  if (!w.ok()) return w.status();
  w->ZeroReserved<lap::kRows>();
  w->Set(lap::kLocalCommId, local_comm_id);
  w->Set(lap::kRemoteCommId, remote_comm_id);
  w->Set(lap::kRemoteQpn, remote_qpn);
  w->Set(lap::kRemoteCmResponseTimeout, remote_cm_response_timeout);
  WritePath(*w, lap::kAlternatePath, alternate);
  WritePrivateData(*w, lap::kPrivateData, private_data);
  return w->status();
}

const char* ApStatusName(ApStatus s) {
  switch (s) {
    case ApStatus::kSuccess: return "success";
    case ApStatus::kInvalidCommId: return "invalid communication ID";
    case ApStatus::kUnsupported: return "unsupported request";
    case ApStatus::kRejected: return "rejected";
    case ApStatus::kRedirect: return "redirect";
    case ApStatus::kPathIsCurrent: return "path is the current path";
    case ApStatus::kInvalidQpn: return "invalid QPN/EECN";
    case ApStatus::kInvalidLid: return "invalid LID";
    case ApStatus::kInvalidGid: return "invalid GID";
    case ApStatus::kInvalidFlowLabel: return "invalid flow label";
    case ApStatus::kInvalidTrafficClass: return "invalid traffic class";
    case ApStatus::kInvalidHopLimit: return "invalid hop limit";
    case ApStatus::kInvalidPacketRate: return "invalid packet rate";
    case ApStatus::kInvalidSl: return "invalid SL";
  }
  return nullptr;
}

absl::StatusOr<AprRepr> AprRepr::Parse(std::span<const uint8_t> mad) {
  AprRepr r;
  auto v = ParseCmMad(mad, CmAttr::kApr, apr::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  auto info = ReadInfoBlock("APR", *v, apr::kAdditionalInfoLength, apr::kAdditionalInfo);
  if (!info.ok()) return info.status();
  r.additional_info = *info;
  r.local_comm_id = v->Get(apr::kLocalCommId);
  r.remote_comm_id = v->Get(apr::kRemoteCommId);
  r.status = static_cast<ApStatus>(v->Get(apr::kApStatus));
  r.private_data.Assign(v->Bytes(apr::kPrivateData));
  return r;
}

absl::Status AprRepr::Emit(std::span<uint8_t> mad) const {
  auto w = EmitCmMad(mad, CmAttr::kApr, envelope);
  if (!w.ok()) return w.status();
  w->ZeroReserved<apr::kRows>();
  w->Set(apr::kLocalCommId, local_comm_id);
  w->Set(apr::kRemoteCommId, remote_comm_id);
  w->Set(apr::kApStatus, static_cast<uint8_t>(status));
  WriteInfoBlock(*w, "APR", apr::kAdditionalInfoLength, apr::kAdditionalInfo, additional_info);
  WritePrivateData(*w, apr::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
