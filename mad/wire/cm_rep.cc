#include "mad/wire/cm_rep.h"

namespace uscm::mad::wire {

const char* FailoverAcceptedName(FailoverAccepted f) {
  switch (f) {
    case FailoverAccepted::kAccepted: return "accepted";
    case FailoverAccepted::kNotSupported: return "failover not supported";
    case FailoverAccepted::kRejected: return "rejected";
  }
  return nullptr;
}

absl::StatusOr<RepRepr> RepRepr::Parse(std::span<const uint8_t> mad) {
  RepRepr r;
  auto v = ParseCmMad(mad, CmAttr::kRep, rep::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  TakeEceOptions(&r.envelope, &r.ece);
  r.local_comm_id = v->Get(rep::kLocalCommId);
  r.remote_comm_id = v->Get(rep::kRemoteCommId);
  r.local_qkey = v->Get(rep::kLocalQKey);
  r.local_qpn = v->Get(rep::kLocalQpn);
  r.ece.vendor_id = v->Get(rep::kVendorId);
  r.local_eecn = v->Get(rep::kLocalEecn);
  r.starting_psn = v->Get(rep::kStartingPsn);
  r.responder_resources = v->Get(rep::kResponderResources);
  r.initiator_depth = v->Get(rep::kInitiatorDepth);
  r.target_ack_delay = v->Get(rep::kTargetAckDelay);
  r.failover_accepted = static_cast<FailoverAccepted>(v->Get(rep::kFailoverAccepted));
  r.end_to_end_flow_control = v->Get(rep::kEndToEndFlowControl) != 0;
  r.rnr_retry_count = v->Get(rep::kRnrRetryCount);
  r.srq = v->Get(rep::kSrq) != 0;
  r.local_ca_guid = v->Get(rep::kLocalCaGuid);
  r.private_data.Assign(v->Bytes(rep::kPrivateData));
  return r;
}

absl::Status RepRepr::Emit(std::span<uint8_t> mad) const {
  auto env = EceEnvelope("REP", envelope, ece);
  if (!env.ok()) return env.status();
  auto w = EmitCmMad(mad, CmAttr::kRep, *env);
  if (!w.ok()) return w.status();
  w->ZeroReserved<rep::kRows>();
  w->Set(rep::kLocalCommId, local_comm_id);
  w->Set(rep::kRemoteCommId, remote_comm_id);
  w->Set(rep::kLocalQKey, local_qkey);
  w->Set(rep::kLocalQpn, local_qpn);
  w->Set(rep::kVendorId, ece.vendor_id);
  w->Set(rep::kLocalEecn, local_eecn);
  w->Set(rep::kStartingPsn, starting_psn);
  w->Set(rep::kResponderResources, responder_resources);
  w->Set(rep::kInitiatorDepth, initiator_depth);
  w->Set(rep::kTargetAckDelay, target_ack_delay);
  w->Set(rep::kFailoverAccepted, static_cast<uint8_t>(failover_accepted));
  w->Set(rep::kEndToEndFlowControl, end_to_end_flow_control ? 1 : 0);
  w->Set(rep::kRnrRetryCount, rnr_retry_count);
  w->Set(rep::kSrq, srq ? 1 : 0);
  w->Set(rep::kLocalCaGuid, local_ca_guid);
  WritePrivateData(*w, rep::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
