// Active side: Connect (REQ), MRA and REP received, RTU, REJ in both
// directions, TimeWait entry. Digest §4.2.
#include <array>
#include <memory>

#include "absl/strings/str_cat.h"
#include "cm/endpoint.h"
#include "cm/endpoint_internal.h"
#include "mad/iba_time.h"
#include "mad/wire/cm_dreq.h"
#include "mad/wire/cm_mra.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/cm_rep.h"
#include "mad/wire/cm_req.h"
#include "mad/wire/cm_rtu.h"

namespace uscm::cm {

using mad::Duration;
using mad::TimePoint;
using mad::wire::CmAttr;
using internal::CheckPrivateData;
using internal::WrongState;

namespace {

absl::Status CheckBits(absl::string_view name, uint64_t value, int bits) {
  if (value >> bits != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " = ", value, " does not fit in ", bits, " bits (max ",
        (uint64_t{1} << bits) - 1, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateConnect(const ConnectParams& p) {
  absl::Status s = CheckPrivateData(p.private_data, mad::wire::req::kPrivateDataBytes, "REQ");
  if (s.ok()) s = CheckBits("ConnectParams.qpn", p.qpn, 24);
  if (s.ok()) s = CheckBits("ConnectParams.starting_psn", p.starting_psn, 24);
  if (s.ok()) s = CheckBits("ConnectParams.retry_count", p.retry_count, 3);
  if (s.ok()) s = CheckBits("ConnectParams.rnr_retry_count", p.rnr_retry_count, 3);
  if (s.ok()) s = CheckBits("ConnectParams.max_cm_retries", p.max_cm_retries, 4);
  if (s.ok()) s = CheckBits("ConnectParams.remote_cm_response_timeout", p.remote_cm_response_timeout, 5);
  if (s.ok()) s = CheckBits("ConnectParams.local_cm_response_timeout", p.local_cm_response_timeout, 5);
  if (s.ok()) s = CheckBits("ConnectParams.primary.packet_life_time", p.primary.packet_life_time, 5);
  if (s.ok() && (p.path_mtu < 1 || p.path_mtu > 5)) {
    s = absl::InvalidArgumentError(absl::StrCat(
        "ConnectParams.path_mtu = ", p.path_mtu, "; valid: 1=256 .. 5=4096"));
  }
  if (s.ok() && p.ece.has_value() && p.ece->vendor_id == 0) {
    s = absl::InvalidArgumentError("ConnectParams.ece.vendor_id must be non-zero");
  }
  if (s.ok() && p.retry.backoff_factor == 0) {
    s = absl::InvalidArgumentError("RetryPolicy.backoff_factor must be >= 1");
  }
  return s;
}

}  // namespace

absl::StatusOr<ConnId> CmEndpoint::Connect(TimePoint now, const ConnectParams& p) {
  if (absl::Status s = ValidateConnect(p); !s.ok()) return s;

  Connection c;
  c.active_side = true;
  c.state = CmState::kReqSent;
  c.service_id = p.service_id;
  c.peer = AddressForPath(p.primary, p.pkey);
  c.peer.sgid_index = p.sgid_index;
  c.local_qpn = p.qpn;
  c.local_psn = p.starting_psn;
  c.local_qkey = p.qkey;
  c.pkey = p.pkey;
  c.path_mtu = p.path_mtu;
  c.transport = p.transport;
  c.responder_resources = p.responder_resources;
  c.initiator_depth = p.initiator_depth;
  c.retry_count = p.retry_count;
  c.srq = p.srq;
  c.primary = p.primary;
  if (p.alternate.has_value()) c.alternate = std::make_unique<PathInfo>(*p.alternate);
  c.local_ack_timeout = p.primary.local_ack_timeout;  // until the REP
  c.remote_cm_response_timeout = p.remote_cm_response_timeout;
  c.local_cm_response_timeout = p.local_cm_response_timeout;
  c.max_cm_retries = p.max_cm_retries;
  c.response_timeout = mad::CmReqTimeout(
      *mad::IbaTimeCode::Create(p.primary.packet_life_time, "PLT"),
      *mad::IbaTimeCode::Create(p.remote_cm_response_timeout, "timeout"),
      config_.rounding);
  c.retry = p.retry;
  c.local_ece = p.ece;
  c.local_comm_id = NewCommId();
  c.transaction_id = (uint64_t{++tid_counter_} << 32) | c.local_comm_id;

  // Format (cm_format_req): every field from the connection and params.
  mad::wire::ReqRepr r;
  r.envelope.transaction_id = c.transaction_id;
  r.local_comm_id = c.local_comm_id;
  if (p.ece.has_value()) r.ece = *p.ece;
  r.service_id = p.service_id;
  r.local_ca_guid = port_.node_guid;
  r.local_qkey = p.qkey;
  r.local_qpn = p.qpn;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.remote_cm_response_timeout = p.remote_cm_response_timeout;
  r.transport_service = p.transport == TransportType::kUc
                            ? mad::wire::TransportService::kUc
                            : mad::wire::TransportService::kRc;
  r.starting_psn = p.starting_psn;
  r.local_cm_response_timeout = p.local_cm_response_timeout;
  r.retry_count = p.retry_count;
  r.partition_key = p.pkey;
  r.path_mtu = static_cast<mad::wire::PathMtu>(p.path_mtu);
  r.rnr_retry_count = p.rnr_retry_count;
  r.max_cm_retries = p.max_cm_retries;
  r.srq = p.srq;
  r.primary = internal::ToWire(p.primary);
  if (p.alternate.has_value()) r.alternate = internal::ToWire(*p.alternate);
  r.private_data = mad::wire::PrivateData(p.private_data);
  // Emit before committing: the repr checks every range the wire has.
  if (absl::Status s = r.Emit(RequestBuffer(c)); !s.ok()) {
    EndRequest(c);
    return s;
  }

  const ConnId id = NewConnection(std::move(c));
  Connection& cc = *Find(id);
  QueueCounted(cc.peer, RequestMad(cc));
  ArmRequest(now, cc, id, CmAttr::kReq, cc.response_timeout, cc.max_cm_retries,
             cc.retry);
  return id;
}

void CmEndpoint::HandleMra(TimePoint now, std::span<const uint8_t> mad) {
  auto r = mad::wire::MraRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kMra);
  Connection* c = ByLocalId(r->remote_comm_id);
  if (c == nullptr) {
    ++counters_.unknown_connection;
    return;
  }
  const ConnId id = IdOf(*c);
  const bool remote_known = c->remote_comm_id != 0;
  if (remote_known && r->local_comm_id != c->remote_comm_id) {
    ++counters_.unknown_connection;
    return;
  }
  bool extend = false;
  switch (r->message_mraed) {
    case mad::wire::MraMessage::kReq:
      if (c->state == CmState::kReqSent) {
        c->state = CmState::kMraReqRcvd;
        extend = true;
      } else if (c->state == CmState::kMraReqRcvd) {
        CountDuplicate(CmAttr::kMra);
      } else {
        ++counters_.unexpected_state;
      }
      break;
    case mad::wire::MraMessage::kRep:
      if (c->state == CmState::kRepSent) {
        c->state = CmState::kMraRepRcvd;
        extend = true;
      } else if (c->state == CmState::kMraRepRcvd) {
        CountDuplicate(CmAttr::kMra);
      } else {
        ++counters_.unexpected_state;
      }
      break;
    case mad::wire::MraMessage::kLap:
      if (c->state == CmState::kEstablished && c->lap == LapState::kLapSent) {
        c->lap = LapState::kMraLapRcvd;
        extend = true;
      } else if (c->lap == LapState::kMraLapRcvd) {
        CountDuplicate(CmAttr::kMra);
      } else {
        ++counters_.unexpected_state;
      }
      break;
    default:
      ++counters_.malformed;  // "reserved" MRAed value
      break;
  }
  if (!extend) return;
  // New wait: service timeout + our ACK timeout (digest §4.1); applies to the
  // remaining retransmissions, as Linux ib_modify_mad does.
  c->out.timeout = mad::CmMraTimeout(
      *mad::IbaTimeCode::Create(r->service_timeout & 0x1F, "service timeout"),
      *mad::IbaTimeCode::Create(c->local_ack_timeout & 0x1F, "ack timeout"),
      config_.rounding);
  Arm(*c, id, TimerKind::kRetransmit, now + c->out.timeout);
  if (!c->destroyed) {
    CmEvent e = MakeEvent(CmEventType::kMraReceived, *c);
    e.mra_service_timeout = r->service_timeout;
    e.private_data = r->private_data;
    Emit(std::move(e));
  }
}

void CmEndpoint::HandleRep(TimePoint now, const mad::MadAddress& from,
                           std::span<const uint8_t> mad) {
  auto r = mad::wire::RepRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kRep);
  Connection* c = ByLocalId(r->remote_comm_id);
  if (c == nullptr || !c->active_side) {
    ++counters_.unknown_connection;
    return;
  }
  const ConnId id = IdOf(*c);
  if (c->state != CmState::kReqSent && c->state != CmState::kMraReqRcvd) {
    // Duplicate REP (digest §4.5): re-send what matches our state.
    if (r->local_comm_id != c->remote_comm_id) {
      ++counters_.unknown_connection;
      return;
    }
    CountDuplicate(CmAttr::kRep);
    if (c->state == CmState::kEstablished && c->reply_attr == CmAttr::kRtu) {
      ResendReply(*c);
    } else if (c->state == CmState::kMraRepSent) {
      ResendReply(*c);
    }
    return;
  }
  if (ByRemoteId(r->local_comm_id, r->local_ca_guid) != nullptr) {
    CountDuplicate(CmAttr::kRep);  // another id already owns this remote id
    return;
  }
  if (auto it = by_remote_qpn_.find({r->local_qpn, r->local_ca_guid});
      it != by_remote_qpn_.end()) {
    // Stale: the peer reuses a QPN we still think is connected (§4.6).
    ++counters_.stale_connections;
    Connection& old = *conns_.AtIndex(it->second);
    const ConnId old_id = IdOf(old);
    mad::wire::RejRepr rej;
    rej.envelope.transaction_id = c->transaction_id;
    rej.local_comm_id = c->local_comm_id;
    rej.remote_comm_id = r->local_comm_id;
    rej.message_rejected = mad::wire::RejMessage::kRep;
    rej.reason = RejReason::kStaleConnection;
    Send(c->peer, rej);
    if (old.state == CmState::kEstablished) SendDreq(now, old, old_id, {});
    return;  // Linux leaves this id in REQ_SENT; its timer runs on
  }

  Disarm(*c, TimerKind::kRetransmit);
  EndRequest(*c);
  SetRemote(*c, r->local_comm_id, r->local_ca_guid);
  by_remote_id_[{c->remote_comm_id, c->remote_ca_guid}] = id.index;
  c->in_remote_id_table = true;
  c->remote_qpn = r->local_qpn;
  InsertRemoteQpn(*c, id);
  c->remote_psn = r->starting_psn;
  c->remote_qkey = r->local_qkey;
  c->rnr_retry_count = r->rnr_retry_count;
  // Resources are swapped on receipt (digest §5).
  c->initiator_depth = r->responder_resources;
  c->responder_resources = r->initiator_depth;
  c->local_ack_timeout =
      mad::CmAckTimeout(
          *mad::IbaTimeCode::Create(r->target_ack_delay & 0x1F, "ack delay"),
          *mad::IbaTimeCode::Create(c->primary.packet_life_time & 0x1F, "PLT"))
          .value();
  c->remote_ece = r->ece;
  c->state = CmState::kRepRcvd;
  if (config_.auto_mra) {
    Arm(*c, id, TimerKind::kAutoMra,
        now + Ms(c->local_cm_response_timeout) * config_.auto_mra_percent / 100);
  }
  if (c->destroyed) return;
  const bool vendor_mismatch = c->local_ece.has_value() && r->ece.vendor_id != 0 &&
                               r->ece.vendor_id != c->local_ece->vendor_id;
  CmEvent e = MakeEvent(vendor_mismatch ? CmEventType::kConnectError
                                        : CmEventType::kConnectResponse,
                        *c);
  if (vendor_mismatch) e.status = -22;  // -EINVAL, as librdmacm
  e.private_data = r->private_data;
  e.remote_ece = r->ece;
  Emit(std::move(e));
}

absl::Status CmEndpoint::Rtu(TimePoint now, ConnId id,
                             std::span<const uint8_t> private_data) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  if (c.state != CmState::kRepRcvd && c.state != CmState::kMraRepSent) {
    return WrongState("Rtu", c.state);
  }
  if (auto s = CheckPrivateData(private_data, mad::wire::rtu::kPrivateDataBytes, "RTU");
      !s.ok()) {
    return s;
  }
  mad::wire::RtuRepr r;
  r.envelope.transaction_id = c.transaction_id;
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.private_data = mad::wire::PrivateData(private_data);
  Send(c.peer, r);
  KeepReply(c, CmAttr::kRtu, private_data);
  Disarm(c, TimerKind::kAutoMra);
  c.state = CmState::kEstablished;
  c.lap = LapState::kUninit;
  Emit(MakeEvent(CmEventType::kEstablished, c));
  return absl::OkStatus();
}

void CmEndpoint::SendRej(Connection& c, RejReason reason, MsgRef msg,
                         std::span<const uint8_t> ari,
                         std::span<const uint8_t> pd) {
  mad::wire::RejRepr r;
  r.envelope.transaction_id = c.transaction_id;
  // Linux puts 0 when rejecting from plain REQ_RCVD (digest §7.5).
  r.local_comm_id = c.state == CmState::kReqRcvd ? 0 : c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.message_rejected = static_cast<mad::wire::RejMessage>(msg);
  r.reason = reason;
  r.ari = mad::wire::InfoBlock::Of(ari);
  r.private_data = mad::wire::PrivateData(pd);
  Send(c.peer, r);
}

absl::Status CmEndpoint::Reject(TimePoint now, ConnId id, RejReason reason,
                                std::span<const uint8_t> private_data,
                                std::span<const uint8_t> ari) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  if (auto s = CheckPrivateData(private_data, mad::wire::rej::kPrivateDataBytes, "REJ");
      !s.ok()) {
    return s;
  }
  if (ari.size() > mad::wire::InfoBlock::kBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ARI is ", ari.size(), " bytes; REJ carries at most 72"));
  }
  switch (c.state) {
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
      SendRej(c, reason, MsgRef::kReq, ari, private_data);
      Disarm(c, TimerKind::kAutoMra);
      LeaveBacklog(c);
      RemoveRemoteQpn(c);
      RemoveRemoteId(c);
      c.state = CmState::kIdle;
      return absl::OkStatus();
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
      SendRej(c, reason, MsgRef::kRep, ari, private_data);
      EnterTimeWait(now, c, id);
      return absl::OkStatus();
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      SendRej(c, reason, MsgRef::kOther, ari, private_data);
      EnterTimeWait(now, c, id);
      return absl::OkStatus();
    default:
      return WrongState("Reject", c.state);
  }
}

void CmEndpoint::HandleRej(TimePoint now, std::span<const uint8_t> mad) {
  auto r = mad::wire::RejRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kRej);
  Connection* c = nullptr;
  if (r->reason == RejReason::kTimeout) {
    // REJ Timeout names its sender by the CA GUID in the ARI (digest §3.1).
    if (auto guid = r->AriValue(); guid.has_value()) {
      c = ByRemoteId(r->local_comm_id, *guid);
    }
  }
  if (c == nullptr) {
    c = ByLocalId(r->remote_comm_id);
    if (c != nullptr && r->message_rejected != mad::wire::RejMessage::kReq &&
        c->remote_comm_id != r->local_comm_id) {
      c = nullptr;
    }
  }
  if (c == nullptr) {
    ++counters_.unknown_connection;
    return;
  }
  const ConnId id = IdOf(*c);
  CmEvent e = MakeEvent(CmEventType::kRejected, *c);
  e.status = static_cast<int>(r->reason);
  e.private_data = r->private_data;
  e.ari_length = r->ari.length;
  e.ari = r->ari.bytes;
  const bool stale = r->reason == RejReason::kStaleConnection;
  switch (c->state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
      Disarm(*c, TimerKind::kRetransmit);
      Disarm(*c, TimerKind::kAutoMra);
      EndRequest(*c);
      if (!c->destroyed) Emit(std::move(e));
      if (stale) {
        EnterTimeWait(now, *c, id);
      } else {
        LeaveBacklog(*c);
        RemoveRemoteQpn(*c);
        RemoveRemoteId(*c);
        c->state = CmState::kIdle;
        MaybeFree(id);
      }
      return;
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
    case CmState::kDreqSent:
    case CmState::kEstablished:
      if (!c->destroyed) Emit(std::move(e));
      EnterTimeWait(now, *c, id);
      return;
    default:
      ++counters_.unexpected_state;
      return;
  }
}

void CmEndpoint::EnterTimeWait(TimePoint now, Connection& c, ConnId id) {
  Disarm(c, TimerKind::kRetransmit);
  Disarm(c, TimerKind::kAutoMra);
  EndRequest(c);
  LeaveBacklog(c);
  // The remote-QPN entry goes now (a rebooted peer may reuse the QPN); the
  // remote-ID entry stays until TimeWait ends so a late REQ gets REJ 10.
  RemoveRemoteQpn(c);
  c.state = CmState::kTimeWait;
  c.lap = LapState::kUninit;
  const Duration wait = config_.timewait.value_or(Ms(c.local_ack_timeout));
  Arm(c, id, TimerKind::kTimeWait, now + wait);
}

}  // namespace uscm::cm
