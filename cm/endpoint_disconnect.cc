// Disconnect (DREQ / DREP, crossing DREQs, DREQ timeout) and Destroy with its
// spec'd side effects. Digest §3.5, §4.4; Linux cm_destroy_id.
#include <array>

#include "cm/endpoint.h"
#include "cm/endpoint_internal.h"
#include "mad/wire/cm_drep.h"
#include "mad/wire/cm_dreq.h"

namespace uscm::cm {

using mad::TimePoint;
using mad::wire::CmAttr;
using internal::CheckPrivateData;
using internal::WrongState;

void CmEndpoint::SendDreq(TimePoint now, Connection& c, ConnId id,
                          std::span<const uint8_t> pd) {
  mad::wire::DreqRepr r;
  r.envelope.transaction_id = (uint64_t{++tid_counter_} << 32) | c.local_comm_id;
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.remote_qpn = c.remote_qpn;
  r.private_data = mad::wire::PrivateData(pd);
  const absl::Status s = r.Emit(RequestBuffer(c));
  assert(s.ok());  // private data checked by the caller
  (void)s;
  Disarm(c, TimerKind::kAutoMra);
  c.lap = LapState::kUninit;  // a DREQ cancels an outstanding LAP
  c.state = CmState::kDreqSent;
  QueueCounted(c.peer, RequestMad(c));
  ArmRequest(now, c, id, CmAttr::kDreq, c.response_timeout, c.max_cm_retries,
             c.retry);
}

void CmEndpoint::SendDrep(TimePoint now, Connection& c, ConnId id,
                          std::span<const uint8_t> pd) {
  mad::wire::DrepRepr r;
  r.envelope.transaction_id = c.transaction_id;  // the DREQ's
  r.local_comm_id = c.local_comm_id;
  r.remote_comm_id = c.remote_comm_id;
  r.private_data = mad::wire::PrivateData(pd);
  Send(c.peer, r);
  KeepReply(c, CmAttr::kDrep, pd);
  EnterTimeWait(now, c, id);
}

absl::Status CmEndpoint::Disconnect(TimePoint now, ConnId id,
                                    std::span<const uint8_t> private_data) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  switch (c.state) {
    case CmState::kEstablished:
      if (auto s = CheckPrivateData(private_data, mad::wire::dreq::kPrivateDataBytes, "DREQ");
          !s.ok()) {
        return s;
      }
      SendDreq(now, c, id, private_data);
      return absl::OkStatus();
    case CmState::kDreqRcvd:
      if (auto s = CheckPrivateData(private_data, mad::wire::drep::kPrivateDataBytes, "DREP");
          !s.ok()) {
        return s;
      }
      SendDrep(now, c, id, private_data);
      return absl::OkStatus();
    case CmState::kDreqSent:
    case CmState::kTimeWait:
      return absl::OkStatus();  // already disconnecting (crossing DREQs)
    default:
      return WrongState("Disconnect", c.state);
  }
}

void CmEndpoint::HandleDreq(TimePoint now, const mad::MadAddress& from,
                            std::span<const uint8_t> mad) {
  auto r = mad::wire::DreqRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kDreq);
  Connection* c = ByLocalId(r->remote_comm_id);
  if (c == nullptr || c->remote_comm_id != r->local_comm_id) {
    // No such connection: still answer, so a peer that lost state gets
    // closure (Linux cm_issue_drep).
    ++counters_.unknown_connection;
    mad::wire::DrepRepr d;
    d.envelope.transaction_id = r->envelope.transaction_id;
    d.local_comm_id = r->remote_comm_id;
    d.remote_comm_id = r->local_comm_id;
    Send(from, d);
    return;
  }
  if (r->remote_qpn != c->local_qpn) {
    ++counters_.unknown_connection;  // Linux drops a DREQ for another QP
    return;
  }
  const ConnId id = IdOf(*c);
  switch (c->state) {
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
    case CmState::kEstablished:
    case CmState::kDreqSent: {
      Disarm(*c, TimerKind::kRetransmit);
      EndRequest(*c);
      c->lap = LapState::kUninit;
      c->transaction_id = r->envelope.transaction_id;
      c->state = CmState::kDreqRcvd;
      if (c->destroyed) {
        SendDrep(now, *c, id, {});
        return;
      }
      CmEvent e = MakeEvent(CmEventType::kDisconnected, *c);
      e.private_data = r->private_data;
      Emit(std::move(e));
      return;
    }
    case CmState::kDreqRcvd:
      CountDuplicate(CmAttr::kDreq);
      return;
    case CmState::kTimeWait: {
      // Our DREP was lost: answer again with the same private data.
      CountDuplicate(CmAttr::kDreq);
      mad::wire::DrepRepr d;
      d.envelope.transaction_id = r->envelope.transaction_id;
      d.local_comm_id = c->local_comm_id;
      d.remote_comm_id = c->remote_comm_id;
      // Only a DREP we sent carries private data (none if our DREQ was answered).
      if (c->has_reply && c->reply_attr == CmAttr::kDrep) {
        d.private_data = mad::wire::PrivateData(c->reply_private_data.bytes());
      }
      Send(c->peer, d);
      return;
    }
    default:
      ++counters_.unexpected_state;
      return;
  }
}

void CmEndpoint::HandleDrep(TimePoint now, std::span<const uint8_t> mad) {
  auto r = mad::wire::DrepRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kDrep);
  Connection* c = ByLocalId(r->remote_comm_id);
  if (c == nullptr || c->remote_comm_id != r->local_comm_id) {
    ++counters_.unknown_connection;
    return;
  }
  const ConnId id = IdOf(*c);
  if (c->state == CmState::kDreqSent) {
    if (!c->destroyed) {
      CmEvent e = MakeEvent(CmEventType::kDisconnected, *c);
      e.private_data = r->private_data;
      Emit(std::move(e));
    }
    EnterTimeWait(now, *c, id);
  } else if (c->state == CmState::kDreqRcvd) {
    EnterTimeWait(now, *c, id);  // crossing DREQs: ours is answered
  } else {
    CountDuplicate(CmAttr::kDrep);
  }
}

absl::Status CmEndpoint::Destroy(TimePoint now, ConnId id) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  switch (c.state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd: {
      // REJ Timeout with our CA GUID as ARI (digest §3.1).
      std::array<uint8_t, 8> guid;
      for (int i = 0; i < 8; ++i) {
        guid[i] = static_cast<uint8_t>(port_.node_guid >> (56 - 8 * i));
      }
      SendRej(c, RejReason::kTimeout, MsgRef::kReq, guid, {});
      Disarm(c, TimerKind::kRetransmit);
      EndRequest(c);
      c.state = CmState::kIdle;
      break;
    }
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
      SendRej(c, RejReason::kConsumerReject, MsgRef::kReq, {}, {});
      Disarm(c, TimerKind::kAutoMra);
      c.state = CmState::kIdle;
      break;
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      SendRej(c, RejReason::kConsumerReject, MsgRef::kOther, {}, {});
      EnterTimeWait(now, c, id);
      break;
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
      SendRej(c, RejReason::kConsumerReject, MsgRef::kRep, {}, {});
      EnterTimeWait(now, c, id);
      break;
    case CmState::kEstablished:
      // One DREQ, then TimeWait at once (Linux: no DREQ retries for a
      // destroyed id).
      SendDreq(now, c, id, {});
      EnterTimeWait(now, c, id);
      break;
    case CmState::kDreqSent:
      EnterTimeWait(now, c, id);
      break;
    case CmState::kDreqRcvd:
      SendDrep(now, c, id, {});
      break;
    case CmState::kSidrReqSent:
      Disarm(c, TimerKind::kRetransmit);
      EndRequest(c);
      c.state = CmState::kIdle;
      break;
    case CmState::kSidrReqRcvd: {
      SidrReplyParams p;
      p.status = 2;  // rejected by the service provider
      const absl::Status s = SidrReply(now, id, p);
      assert(s.ok());
      (void)s;
      break;
    }
    case CmState::kIdle:
    case CmState::kTimeWait:
    case CmState::kListen:
      break;
  }
  c.destroyed = true;
  MaybeFree(id);
  return absl::OkStatus();
}

}  // namespace uscm::cm
