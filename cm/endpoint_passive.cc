// Passive side: REQ received (duplicates, stale QPNs, listener match,
// backlog), MRA, Accept (REP), RTU and COMM_EST. Digest §4.3, §4.5, §4.6.
#include <memory>

#include "absl/strings/str_cat.h"
#include "cm/endpoint.h"
#include "cm/endpoint_internal.h"
#include "mad/iba_time.h"
#include "mad/wire/cm_mra.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/cm_rep.h"
#include "mad/wire/cm_req.h"
#include "mad/wire/cm_rtu.h"

namespace uscm::cm {

using mad::TimePoint;
using mad::wire::CmAttr;
using internal::CheckPrivateData;
using internal::WrongState;

namespace {

ReqInfo InfoFromReq(const mad::wire::ReqRepr& r) {
  ReqInfo i;
  i.service_id = r.service_id;
  i.remote_ca_guid = r.local_ca_guid;
  i.remote_qpn = r.local_qpn;
  i.remote_psn = r.starting_psn;
  i.remote_qkey = r.local_qkey;
  i.pkey = r.partition_key;
  i.path_mtu = static_cast<uint8_t>(r.path_mtu);
  i.transport = r.transport_service == mad::wire::TransportService::kUc
                    ? TransportType::kUc
                    : TransportType::kRc;
  i.responder_resources = r.responder_resources;
  i.initiator_depth = r.initiator_depth;
  i.retry_count = r.retry_count;
  i.rnr_retry_count = r.rnr_retry_count;
  i.srq = r.srq;
  i.remote_cm_response_timeout = r.remote_cm_response_timeout;
  i.local_cm_response_timeout = r.local_cm_response_timeout;
  i.max_cm_retries = r.max_cm_retries;
  i.primary = internal::FromWire(r.primary);
  if (r.alternate.has_value()) i.alternate = internal::FromWire(*r.alternate);
  return i;
}

}  // namespace

void CmEndpoint::HandleReq(TimePoint now, const mad::MadAddress& from,
                           std::span<const uint8_t> mad) {
  auto parsed = mad::wire::ReqRepr::Parse(mad);
  if (!parsed.ok()) {
    ++counters_.malformed;
    return;
  }
  const mad::wire::ReqRepr& r = *parsed;
  CountReceived(CmAttr::kReq);
  const uint64_t guid = r.local_ca_guid;
  // A REJ built from the REQ alone (no connection): cm_issue_rej.
  auto issue_rej = [&](RejReason reason) {
    mad::wire::RejRepr rej;
    rej.envelope.transaction_id = r.envelope.transaction_id;
    rej.local_comm_id = 0;
    rej.remote_comm_id = r.local_comm_id;
    rej.message_rejected = mad::wire::RejMessage::kReq;
    rej.reason = reason;
    Send(from, rej);
  };

  if (Connection* d = ByRemoteId(r.local_comm_id, guid)) {
    // Duplicate REQ (digest §4.5, Linux cm_dup_req_handler).
    CountDuplicate(CmAttr::kReq);
    if (d->state == CmState::kMraReqSent) {
      ResendReply(*d);
    } else if (d->state == CmState::kRepSent && d->out.armed && d->out.attr == CmAttr::kRep &&
               config_.rep_for_duplicate_req) {
      // Our REP was lost (or is late): send it again now, without using one
      // of its retries. Linux drops this duplicate and waits for its REP
      // timer; answering recovers a lost REP one REQ timeout sooner when the
      // peer's REQ timer is the shorter one.
      ++counters_.rep_resent_for_duplicate_req;
      Queue(d->peer, RequestMad(*d));
    } else if (d->state == CmState::kTimeWait) {
      ++counters_.stale_connections;
      issue_rej(RejReason::kStaleConnection);
    }
    return;
  }
  if (auto it = by_remote_qpn_.find({r.local_qpn, guid}); it != by_remote_qpn_.end()) {
    // Stale: same QPN from the same CA while we hold a live connection.
    ++counters_.stale_connections;
    issue_rej(RejReason::kStaleConnection);
    Connection& old = *conns_.AtIndex(it->second);
    if (old.state == CmState::kEstablished) SendDreq(now, old, IdOf(old), {});
    return;
  }
  const absl::optional<ListenId> lid = MatchListener(r.service_id);
  if (!lid.has_value()) {
    ++counters_.no_listener;
    issue_rej(RejReason::kInvalidServiceId);
    return;
  }
  if (r.transport_service != mad::wire::TransportService::kRc &&
      r.transport_service != mad::wire::TransportService::kUc) {
    issue_rej(RejReason::kInvalidTransportType);
    return;
  }
  Listener& l = *listeners_.Get(lid->index, lid->generation);
  if (l.pending >= l.backlog) {
    if (config_.backlog_overflow == BacklogPolicy::kReject) {
      ++counters_.backlog_rejected;
      issue_rej(RejReason::kNoResources);
    } else {
      ++counters_.backlog_dropped;
    }
    return;
  }
  ++l.pending;

  Connection c;
  c.active_side = false;
  c.state = CmState::kReqRcvd;
  c.listen = *lid;
  c.in_backlog = true;
  c.service_id = r.service_id;
  c.transaction_id = r.envelope.transaction_id;
  c.peer = from;
  c.remote_comm_id = r.local_comm_id;
  c.remote_ca_guid = guid;
  c.remote_qpn = r.local_qpn;
  c.remote_psn = r.starting_psn;
  c.remote_qkey = r.local_qkey;
  c.pkey = r.partition_key;
  c.path_mtu = static_cast<uint8_t>(r.path_mtu);
  c.transport = r.transport_service == mad::wire::TransportService::kUc
                    ? TransportType::kUc
                    : TransportType::kRc;
  // Swapped on receipt (digest §5); Accept may override.
  c.initiator_depth = r.responder_resources;
  c.responder_resources = r.initiator_depth;
  c.retry_count = r.retry_count;
  c.rnr_retry_count = r.rnr_retry_count;
  c.srq = r.srq;
  c.primary = internal::FromWireSwapped(r.primary);
  // Routed REQs carry the permissive LID; use the one the MAD came from.
  if (c.primary.remote_lid == mad::kPermissiveLid) c.primary.remote_lid = from.lid;
  if (r.alternate.has_value()) {
    c.alternate = std::make_unique<PathInfo>(internal::FromWireSwapped(*r.alternate));
  }
  c.local_ack_timeout = r.primary.local_ack_timeout;
  c.remote_cm_response_timeout = r.remote_cm_response_timeout;
  c.local_cm_response_timeout = r.local_cm_response_timeout;
  c.max_cm_retries = r.max_cm_retries;
  c.response_timeout = mad::CmRepTimeout(
      *mad::IbaTimeCode::Create(r.local_cm_response_timeout & 0x1F, "timeout"),
      config_.rounding);
  c.remote_ece = r.ece;
  const ConnId id = NewConnection(std::move(c));
  Connection& cc = *Find(id);
  by_remote_id_[{cc.remote_comm_id, cc.remote_ca_guid}] = id.index;
  cc.in_remote_id_table = true;
  InsertRemoteQpn(cc, id);
  if (config_.auto_mra) {
    Arm(cc, id, TimerKind::kAutoMra,
        now + Ms(r.remote_cm_response_timeout) * config_.auto_mra_percent / 100);
  }
  CmEvent e = MakeEvent(CmEventType::kConnectRequest, cc);
  e.req = InfoFromReq(r);
  e.req.sgid_index = from.sgid_index;
  e.private_data = r.private_data;
  e.remote_ece = r.ece;
  Emit(std::move(e));
}

absl::Status CmEndpoint::Accept(TimePoint now, ConnId id, const AcceptParams& p) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  if (c.state != CmState::kReqRcvd && c.state != CmState::kMraReqSent) {
    return WrongState("Accept", c.state);
  }
  if (auto s = CheckPrivateData(p.private_data, mad::wire::rep::kPrivateDataBytes, "REP");
      !s.ok()) {
    return s;
  }
  if (p.retry.backoff_factor == 0) {
    return absl::InvalidArgumentError("RetryPolicy.backoff_factor must be >= 1");
  }
  mad::wire::RepRepr r;
  r.envelope.transaction_id = c.transaction_id;
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.local_qkey = p.qkey;
  r.local_qpn = p.qpn;
  // The REP echoes the REQ's vendor id (librdmacm); no ECE if the REQ had none.
  if (c.remote_ece.vendor_id != 0) {
    r.ece.vendor_id = c.remote_ece.vendor_id;
    r.ece.options = p.ece_options.value_or(0);
  }
  r.starting_psn = p.starting_psn;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.target_ack_delay = p.target_ack_delay;
  r.failover_accepted = p.failover_accepted
                            ? mad::wire::FailoverAccepted::kAccepted
                            : mad::wire::FailoverAccepted::kRejected;
  r.rnr_retry_count = p.rnr_retry_count;
  r.srq = p.srq;
  r.local_ca_guid = port_.node_guid;
  r.private_data = mad::wire::PrivateData(p.private_data);
  if (absl::Status s = r.Emit(RequestBuffer(c)); !s.ok()) {
    EndRequest(c);  // REQ_RCVD / MRA_REQ_SENT: no request was outstanding
    return s;
  }

  c.local_qpn = p.qpn;
  c.local_psn = p.starting_psn;
  c.local_qkey = p.qkey;
  c.responder_resources = p.responder_resources;
  c.initiator_depth = p.initiator_depth;
  c.srq = p.srq;
  if (c.remote_ece.vendor_id != 0) c.local_ece = r.ece;
  Disarm(c, TimerKind::kAutoMra);
  LeaveBacklog(c);
  c.state = CmState::kRepSent;
  QueueCounted(c.peer, RequestMad(c));
  ArmRequest(now, c, id, CmAttr::kRep, c.response_timeout, c.max_cm_retries, p.retry);
  return absl::OkStatus();
}

void CmEndpoint::AnswerWithMra(Connection& c, MsgRef msg, uint8_t service_timeout,
                               std::span<const uint8_t> pd, MraTiming timing) {
  KeepReply(c, CmAttr::kMra, pd, msg, service_timeout);
  if (timing == MraTiming::kOnDuplicate) {
    ++counters_.mra_held;
    return;  // ResendReply sends it when a duplicate comes
  }
  mad::wire::MraRepr r;
  r.envelope.transaction_id = c.transaction_id;
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.message_mraed = static_cast<mad::wire::MraMessage>(msg);
  r.service_timeout = service_timeout;
  r.private_data = mad::wire::PrivateData(pd);
  Send(c.peer, r);
}

absl::Status CmEndpoint::SendMra(TimePoint now, ConnId id, uint8_t service_timeout,
                                 std::span<const uint8_t> private_data, MraTiming timing) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  if (service_timeout > 31) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MRA service timeout is ", service_timeout, "; an IBA time value is 0..31"));
  }
  if (auto s = CheckPrivateData(private_data, mad::wire::mra::kPrivateDataBytes, "MRA");
      !s.ok()) {
    return s;
  }
  if (c.state == CmState::kReqRcvd) {
    AnswerWithMra(c, MsgRef::kReq, service_timeout, private_data, timing);
    c.state = CmState::kMraReqSent;
  } else if (c.state == CmState::kRepRcvd) {
    AnswerWithMra(c, MsgRef::kRep, service_timeout, private_data, timing);
    c.state = CmState::kMraRepSent;
  } else if (c.state == CmState::kEstablished && c.lap == LapState::kLapRcvd) {
    AnswerWithMra(c, MsgRef::kOther, service_timeout, private_data, timing);
    c.lap = LapState::kMraLapSent;
  } else {
    return WrongState("SendMra", c.state);
  }
  Disarm(c, TimerKind::kAutoMra);
  return absl::OkStatus();
}

void CmEndpoint::HandleRtu(TimePoint now, std::span<const uint8_t> mad) {
  auto r = mad::wire::RtuRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kRtu);
  Connection* c = ByLocalId(r->remote_comm_id);
  if (c == nullptr || c->remote_comm_id != r->local_comm_id) {
    ++counters_.unknown_connection;
    return;
  }
  if (c->state != CmState::kRepSent && c->state != CmState::kMraRepRcvd) {
    CountDuplicate(CmAttr::kRtu);  // e.g. after COMM_EST got us there first
    return;
  }
  Disarm(*c, TimerKind::kRetransmit);
  EndRequest(*c);
  c->state = CmState::kEstablished;
  c->lap = LapState::kUninit;
  if (!c->destroyed) {
    CmEvent e = MakeEvent(CmEventType::kEstablished, *c);
    e.private_data = r->private_data;
    Emit(std::move(e));
  }
}

absl::Status CmEndpoint::NotifyCommEstablished(TimePoint now, ConnId id) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  if (c.state == CmState::kEstablished) return absl::OkStatus();
  if (c.state != CmState::kRepSent && c.state != CmState::kMraRepRcvd) {
    return WrongState("NotifyCommEstablished", c.state);
  }
  Disarm(c, TimerKind::kRetransmit);
  EndRequest(c);
  c.state = CmState::kEstablished;
  c.lap = LapState::kUninit;
  Emit(MakeEvent(CmEventType::kEstablished, c));
  return absl::OkStatus();
}

}  // namespace uscm::cm
