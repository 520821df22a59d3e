#include "mad/wire/cm_req.h"

#include "absl/strings/str_format.h"

namespace uscm::mad::wire {

const char* TransportServiceName(TransportService t) {
  switch (t) {
    case TransportService::kRc: return "RC";
    case TransportService::kUc: return "UC";
    case TransportService::kRd: return "RD";
    case TransportService::kExtended: return "extended";
  }
  return nullptr;
}

int PathMtuBytes(PathMtu m) {
  const int v = static_cast<int>(m);
  return v >= 1 && v <= 5 ? 128 << v : 0;
}

namespace {

[[gnu::cold]] absl::Status MtuError(uint64_t mtu) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "REQ.%s = %d is reserved (valid: 1=256 .. 5=4096)", req::kPathMtu.name, mtu));
}

[[gnu::cold]] absl::Status ZeroAlternateError() {
  return absl::InvalidArgumentError(
      "REQ: alternate path is present but all zero, which reads back as no alternate "
      "path; leave it unset");
}

bool MtuValid(uint64_t mtu) { return mtu >= 1 && mtu <= 5; }

// Fills `r`, a default ReqRepr.
[[gnu::always_inline]] inline absl::Status ParseInto(std::span<const uint8_t> mad, ReqRepr& r) {
  auto v = ParseCmMad(mad, CmAttr::kReq, req::kRows, &r.envelope);
  if (!v.ok()) [[unlikely]] return v.status();
  TakeEceOptions(&r.envelope, &r.ece);
  const uint64_t mtu = v->Get(req::kPathMtu);
  if (!MtuValid(mtu)) [[unlikely]] return MtuError(mtu);
  r.path_mtu = static_cast<PathMtu>(mtu);
  r.local_comm_id = v->Get(req::kLocalCommId);
  r.ece.vendor_id = v->Get(req::kVendorId);
  r.service_id = v->Get(req::kServiceId);
  r.local_ca_guid = v->Get(req::kLocalCaGuid);
  r.local_qkey = v->Get(req::kLocalQKey);
  r.local_qpn = v->Get(req::kLocalQpn);
  r.responder_resources = v->Get(req::kResponderResources);
  r.local_eecn = v->Get(req::kLocalEecn);
  r.initiator_depth = v->Get(req::kInitiatorDepth);
  r.remote_eecn = v->Get(req::kRemoteEecn);
  r.remote_cm_response_timeout = v->Get(req::kRemoteCmResponseTimeout);
  r.transport_service = static_cast<TransportService>(v->Get(req::kTransportServiceType));
  r.end_to_end_flow_control = v->Get(req::kEndToEndFlowControl) != 0;
  r.starting_psn = v->Get(req::kStartingPsn);
  r.local_cm_response_timeout = v->Get(req::kLocalCmResponseTimeout);
  r.retry_count = v->Get(req::kRetryCount);
  r.partition_key = v->Get(req::kPartitionKey);
  r.rdc_exists = v->Get(req::kRdcExists) != 0;
  r.rnr_retry_count = v->Get(req::kRnrRetryCount);
  r.max_cm_retries = v->Get(req::kMaxCmRetries);
  r.srq = v->Get(req::kSrq) != 0;
  r.extended_transport = static_cast<ExtendedTransport>(v->Get(req::kExtendedTransportType));
  r.primary = ReadPath(*v, req::kPrimaryPath);
  r.alternate.emplace(ReadPath(*v, req::kAlternatePath));
  if (r.alternate->is_zero()) r.alternate.reset();
  r.sap_supported = v->Get(req::kSapSupported) != 0;
  r.private_data.Assign(v->Bytes(req::kPrivateData));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReqRepr> ReqRepr::Parse(std::span<const uint8_t> mad) {
  // Built in place inside the result, NRVO included: a ReqRepr is ~470 bytes
  // and a move would copy all of them again.
  absl::StatusOr<ReqRepr> out(absl::in_place);
  if (absl::Status s = ParseInto(mad, *out); !s.ok()) [[unlikely]] out = std::move(s);
  return out;
}

absl::Status ReqRepr::Emit(std::span<uint8_t> mad) const {
  auto env = EceEnvelope("REQ", envelope, ece);
  if (!env.ok()) return env.status();
  if (!MtuValid(static_cast<uint8_t>(path_mtu))) [[unlikely]] {
    return MtuError(static_cast<uint8_t>(path_mtu));
  }
  if (alternate.has_value() && alternate->is_zero()) [[unlikely]] return ZeroAlternateError();
  auto w = EmitCmMad(mad, CmAttr::kReq, *env);
  if (!w.ok()) return w.status();
  w->ZeroReserved<req::kRows>();
  w->Set(req::kLocalCommId, local_comm_id);
  w->Set(req::kVendorId, ece.vendor_id);
  w->Set(req::kServiceId, service_id);
  w->Set(req::kLocalCaGuid, local_ca_guid);
  w->Set(req::kLocalQKey, local_qkey);
  w->Set(req::kLocalQpn, local_qpn);
  w->Set(req::kResponderResources, responder_resources);
  w->Set(req::kLocalEecn, local_eecn);
  w->Set(req::kInitiatorDepth, initiator_depth);
  w->Set(req::kRemoteEecn, remote_eecn);
  w->Set(req::kRemoteCmResponseTimeout, remote_cm_response_timeout);
  w->Set(req::kTransportServiceType, static_cast<uint8_t>(transport_service));
  w->Set(req::kEndToEndFlowControl, end_to_end_flow_control ? 1 : 0);
  w->Set(req::kStartingPsn, starting_psn);
  w->Set(req::kLocalCmResponseTimeout, local_cm_response_timeout);
  w->Set(req::kRetryCount, retry_count);
  w->Set(req::kPartitionKey, partition_key);
  w->Set(req::kPathMtu, static_cast<uint8_t>(path_mtu));
  w->Set(req::kRdcExists, rdc_exists ? 1 : 0);
  w->Set(req::kRnrRetryCount, rnr_retry_count);
  w->Set(req::kMaxCmRetries, max_cm_retries);
  w->Set(req::kSrq, srq ? 1 : 0);
  w->Set(req::kExtendedTransportType, static_cast<uint8_t>(extended_transport));
  WritePath(*w, req::kPrimaryPath, primary);
  WritePath(*w, req::kAlternatePath, alternate.value_or(CmPath{}));
  w->Set(req::kSapSupported, sap_supported ? 1 : 0);
  WritePrivateData(*w, req::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
