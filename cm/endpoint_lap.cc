// LAP / APR: loading an alternate path on an ESTABLISHED connection (the LAP
// sub-state machine, digest §4). Linux still answers LAP/APR but no longer
// offers sending them; here both directions work.
#include <memory>

#include "absl/strings/str_cat.h"
#include "cm/endpoint.h"
#include "cm/endpoint_internal.h"
#include "mad/wire/cm_lap_apr.h"

namespace uscm::cm {

using mad::TimePoint;
using mad::wire::CmAttr;
using internal::CheckPrivateData;
using internal::WrongState;

absl::Status CmEndpoint::LoadAlternatePath(TimePoint now, ConnId id,
                                           const PathInfo& alternate,
                                           std::span<const uint8_t> private_data) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  if (c.state != CmState::kEstablished ||
      (c.lap != LapState::kUninit && c.lap != LapState::kIdle)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "LoadAlternatePath is not allowed in state ", CmStateName(c.state), "/",
        LapStateName(c.lap)));
  }
  if (auto s = CheckPrivateData(private_data, mad::wire::lap::kPrivateDataBytes, "LAP");
      !s.ok()) {
    return s;
  }
  mad::wire::LapRepr r;
  r.envelope.transaction_id = (uint64_t{++tid_counter_} << 32) | c.local_comm_id;
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.remote_qpn = c.remote_qpn;
  r.remote_cm_response_timeout = c.remote_cm_response_timeout;
  r.alternate = internal::ToWire(alternate);
  r.private_data = mad::wire::PrivateData(private_data);
  if (absl::Status s = r.Emit(RequestBuffer(c)); !s.ok()) {
    EndRequest(c);  // ESTABLISHED without a LAP in flight: nothing outstanding
    return s;
  }
  c.pending_alternate = std::make_unique<PathInfo>(alternate);
  c.lap = LapState::kLapSent;
  QueueCounted(c.peer, RequestMad(c));
  ArmRequest(now, c, id, CmAttr::kLap, c.response_timeout, c.max_cm_retries, c.retry);
  return absl::OkStatus();
}

void CmEndpoint::HandleLap(TimePoint now, std::span<const uint8_t> mad) {
  auto r = mad::wire::LapRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kLap);
  Connection* c = ByLocalId(r->remote_comm_id);
  if (c == nullptr || c->remote_comm_id != r->local_comm_id ||
      r->remote_qpn != c->local_qpn) {
    ++counters_.unknown_connection;
    return;
  }
  if (c->state != CmState::kEstablished) {
    ++counters_.unexpected_state;
    return;
  }
  if (c->lap == LapState::kMraLapSent) {
    CountDuplicate(CmAttr::kLap);
    ResendReply(*c);
    return;
  }
  if (c->lap != LapState::kUninit && c->lap != LapState::kIdle) {
    CountDuplicate(CmAttr::kLap);
    return;
  }
  c->lap = LapState::kLapRcvd;
  c->pending_alternate =
      std::make_unique<PathInfo>(internal::FromWireSwapped(r->alternate));
  c->transaction_id = r->envelope.transaction_id;
  if (c->destroyed) return;
  CmEvent e = MakeEvent(CmEventType::kLapReceived, *c);
  e.alternate_path = internal::FromWire(r->alternate);
  e.private_data = r->private_data;
  Emit(std::move(e));
}

absl::Status CmEndpoint::AprReply(TimePoint now, ConnId id, uint8_t ap_status,
                                  std::span<const uint8_t> info,
                                  std::span<const uint8_t> private_data) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  if (c.state != CmState::kEstablished ||
      (c.lap != LapState::kLapRcvd && c.lap != LapState::kMraLapSent)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "AprReply is not allowed in state ", CmStateName(c.state), "/",
        LapStateName(c.lap)));
  }
  if (auto s = CheckPrivateData(private_data, mad::wire::apr::kPrivateDataBytes, "APR");
      !s.ok()) {
    return s;
  }
  if (info.size() > mad::wire::InfoBlock::kBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "additional info is ", info.size(), " bytes; APR carries at most 72"));
  }
  mad::wire::AprRepr r;
  r.envelope.transaction_id = c.transaction_id;
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.status = static_cast<mad::wire::ApStatus>(ap_status);
  r.additional_info = mad::wire::InfoBlock::Of(info);
  r.private_data = mad::wire::PrivateData(private_data);
  std::array<uint8_t, mad::kMadSize> buf{};
  if (absl::Status s = r.Emit(buf); !s.ok()) return s;
  QueueCounted(c.peer, buf);
  if (ap_status == 0) c.alternate = std::move(c.pending_alternate);
  c.pending_alternate.reset();
  c.lap = LapState::kIdle;
  return absl::OkStatus();
}

void CmEndpoint::HandleApr(TimePoint now, std::span<const uint8_t> mad) {
  auto r = mad::wire::AprRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kApr);
  Connection* c = ByLocalId(r->remote_comm_id);
  if (c == nullptr || c->remote_comm_id != r->local_comm_id) {
    ++counters_.unknown_connection;
    return;
  }
  if (c->state != CmState::kEstablished ||
      (c->lap != LapState::kLapSent && c->lap != LapState::kMraLapRcvd)) {
    CountDuplicate(CmAttr::kApr);
    return;
  }
  Disarm(*c, TimerKind::kRetransmit);
  EndRequest(*c);
  if (r->status == mad::wire::ApStatus::kSuccess) {
    c->alternate = std::move(c->pending_alternate);
  }
  c->pending_alternate.reset();
  c->lap = LapState::kIdle;
  if (c->destroyed) return;
  CmEvent e = MakeEvent(CmEventType::kAprReceived, *c);
  e.status = static_cast<int>(r->status);
  e.ari_length = r->additional_info.length;
  e.ari = r->additional_info.bytes;
  e.private_data = r->private_data;
  Emit(std::move(e));
}

}  // namespace uscm::cm
