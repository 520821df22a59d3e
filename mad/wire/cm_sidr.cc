#include "mad/wire/cm_sidr.h"

namespace uscm::mad::wire {

absl::StatusOr<SidrReqRepr> SidrReqRepr::Parse(std::span<const uint8_t> mad) {
  SidrReqRepr r;
  auto v = ParseCmMad(mad, CmAttr::kSidrReq, sidr_req::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  r.request_id = v->Get(sidr_req::kRequestId);
  r.partition_key = v->Get(sidr_req::kPartitionKey);
  r.service_id = v->Get(sidr_req::kServiceId);
  r.private_data.Assign(v->Bytes(sidr_req::kPrivateData));
  return r;
}

absl::Status SidrReqRepr::Emit(std::span<uint8_t> mad) const {
  auto w = EmitCmMad(mad, CmAttr::kSidrReq, envelope);
  if (!w.ok()) return w.status();
  w->ZeroReserved<sidr_req::kRows>();
  w->Set(sidr_req::kRequestId, request_id);
  w->Set(sidr_req::kPartitionKey, partition_key);
  w->Set(sidr_req::kServiceId, service_id);
  WritePrivateData(*w, sidr_req::kPrivateData, private_data);
  return w->status();
}

const char* SidrStatusName(SidrStatus s) {
  switch (s) {
    case SidrStatus::kSuccess: return "success";
    case SidrStatus::kServiceIdNotSupported: return "ServiceID not supported";
    case SidrStatus::kRejected: return "rejected by the service provider";
    case SidrStatus::kNoQp: return "no QP";
    case SidrStatus::kRedirect: return "redirect";
    case SidrStatus::kUnsupportedVersion: return "unsupported class version";
  }
  return nullptr;
}

absl::optional<std::span<const uint8_t>> SidrRepRepr::RedirectClassPortInfo() const {
  if (status != SidrStatus::kRedirect || additional_info.length < InfoBlock::kBytes) {
    return absl::nullopt;
  }
  return std::span<const uint8_t>(additional_info.bytes);
}

absl::StatusOr<SidrRepRepr> SidrRepRepr::Parse(std::span<const uint8_t> mad) {
  SidrRepRepr r;
  auto v = ParseCmMad(mad, CmAttr::kSidrRep, sidr_rep::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  TakeEceOptions(&r.envelope, &r.ece);
  auto info = ReadInfoBlock("SIDR_REP", *v, sidr_rep::kAdditionalInfoLength,
                            sidr_rep::kAdditionalInfo);
  if (!info.ok()) return info.status();
  r.additional_info = *info;
  r.request_id = v->Get(sidr_rep::kRequestId);
  r.status = static_cast<SidrStatus>(v->Get(sidr_rep::kStatus));
  r.ece.vendor_id = v->Get(sidr_rep::kVendorId);
  r.qpn = v->Get(sidr_rep::kQpn);
  r.service_id = v->Get(sidr_rep::kServiceId);
  r.qkey = v->Get(sidr_rep::kQKey);
  r.private_data.Assign(v->Bytes(sidr_rep::kPrivateData));
  return r;
}

absl::Status SidrRepRepr::Emit(std::span<uint8_t> mad) const {
  auto env = EceEnvelope("SIDR_REP", envelope, ece);
  if (!env.ok()) return env.status();
  auto w = EmitCmMad(mad, CmAttr::kSidrRep, *env);
  if (!w.ok()) return w.status();
  w->ZeroReserved<sidr_rep::kRows>();
  w->Set(sidr_rep::kRequestId, request_id);
  w->Set(sidr_rep::kStatus, static_cast<uint8_t>(status));
  w->Set(sidr_rep::kVendorId, ece.vendor_id);
  w->Set(sidr_rep::kQpn, qpn);
  w->Set(sidr_rep::kServiceId, service_id);
  w->Set(sidr_rep::kQKey, qkey);
  WriteInfoBlock(*w, "SIDR_REP", sidr_rep::kAdditionalInfoLength, sidr_rep::kAdditionalInfo,
                 additional_info);
  WritePrivateData(*w, sidr_rep::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
