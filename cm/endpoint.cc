// CmEndpoint plumbing: construction, dispatch of received MADs, timers as
// data, comm-ID allocation, lookup tables, queues and counters. The message
// handlers live in endpoint_{active,passive,disconnect,sidr,lap}.cc.
#include "cm/endpoint.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "cm/endpoint_internal.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_drep.h"
#include "mad/wire/cm_mra.h"
#include "mad/wire/cm_rtu.h"

namespace uscm::cm {

using mad::Duration;
using mad::TimePoint;
using mad::wire::CmAttr;

const char* CmStateName(CmState s) {
  switch (s) {
    case CmState::kIdle: return "IDLE";
    case CmState::kListen: return "LISTEN";
    case CmState::kReqSent: return "REQ_SENT";
    case CmState::kReqRcvd: return "REQ_RCVD";
    case CmState::kMraReqSent: return "MRA_REQ_SENT";
    case CmState::kMraReqRcvd: return "MRA_REQ_RCVD";
    case CmState::kRepSent: return "REP_SENT";
    case CmState::kRepRcvd: return "REP_RCVD";
    case CmState::kMraRepSent: return "MRA_REP_SENT";
    case CmState::kMraRepRcvd: return "MRA_REP_RCVD";
    case CmState::kEstablished: return "ESTABLISHED";
    case CmState::kDreqSent: return "DREQ_SENT";
    case CmState::kDreqRcvd: return "DREQ_RCVD";
    case CmState::kTimeWait: return "TIMEWAIT";
    case CmState::kSidrReqSent: return "SIDR_REQ_SENT";
    case CmState::kSidrReqRcvd: return "SIDR_REQ_RCVD";
  }
  return "?";
}

const char* LapStateName(LapState s) {
  switch (s) {
    case LapState::kUninit: return "LAP_UNINIT";
    case LapState::kIdle: return "LAP_IDLE";
    case LapState::kLapSent: return "LAP_SENT";
    case LapState::kLapRcvd: return "LAP_RCVD";
    case LapState::kMraLapSent: return "MRA_LAP_SENT";
    case LapState::kMraLapRcvd: return "MRA_LAP_RCVD";
  }
  return "?";
}

const char* CmEventTypeName(CmEventType t) {
  switch (t) {
    case CmEventType::kConnectRequest: return "CONNECT_REQUEST";
    case CmEventType::kConnectResponse: return "CONNECT_RESPONSE";
    case CmEventType::kEstablished: return "ESTABLISHED";
    case CmEventType::kRejected: return "REJECTED";
    case CmEventType::kUnreachable: return "UNREACHABLE";
    case CmEventType::kConnectError: return "CONNECT_ERROR";
    case CmEventType::kDisconnected: return "DISCONNECTED";
    case CmEventType::kTimewaitExit: return "TIMEWAIT_EXIT";
    case CmEventType::kMraReceived: return "MRA_RECEIVED";
    case CmEventType::kSidrRequest: return "SIDR_REQUEST";
    case CmEventType::kSidrReply: return "SIDR_REPLY";
    case CmEventType::kLapReceived: return "LAP_RECEIVED";
    case CmEventType::kAprReceived: return "APR_RECEIVED";
    case CmEventType::kLapError: return "LAP_ERROR";
  }
  return "?";
}

namespace internal {

absl::Status CheckPrivateData(std::span<const uint8_t> pd, size_t limit,
                              absl::string_view message) {
  if (pd.size() > limit) {
    return absl::InvalidArgumentError(absl::StrCat("private data is ", pd.size(),
                                                   " bytes; ", message,
                                                   " carries at most ", limit));
  }
  return absl::OkStatus();
}

absl::Status WrongState(absl::string_view call, CmState s) {
  return absl::FailedPreconditionError(
      absl::StrCat(call, " is not allowed in state ", CmStateName(s)));
}

int AttrIndex(CmAttr a) {
  const int i = static_cast<int>(a) - static_cast<int>(CmAttr::kReq);
  return (i >= 0 && i < kCmAttrCount) ? i : -1;
}

}  // namespace internal

CmEndpoint::CmEndpoint(const mad::LocalPort& port, CmConfig config,
                       uint64_t seed)
    : port_(port),
      config_(std::move(config)),
      rng_(seed),
      wheel_(TimePoint::Epoch(), config_.timer_tick) {}

// ---------------------------------------------------------------- dispatch

void CmEndpoint::HandleMad(TimePoint now, const mad::MadAddress& from,
                           std::span<const uint8_t> mad) {
  // The attribute decides the parser; each parser checks class, version,
  // method and length. Too short to read the header: malformed.
  if (mad.size() < 24) {
    ++counters_.malformed;
    return;
  }
  const auto attr = static_cast<CmAttr>(uint16_t{mad[16]} << 8 | mad[17]);
  switch (attr) {
    case CmAttr::kReq: return HandleReq(now, from, mad);
    case CmAttr::kMra: return HandleMra(now, mad);
    case CmAttr::kRej: return HandleRej(now, mad);
    case CmAttr::kRep: return HandleRep(now, from, mad);
    case CmAttr::kRtu: return HandleRtu(now, mad);
    case CmAttr::kDreq: return HandleDreq(now, from, mad);
    case CmAttr::kDrep: return HandleDrep(now, mad);
    case CmAttr::kSidrReq: return HandleSidrReq(now, from, mad);
    case CmAttr::kSidrRep: return HandleSidrRep(now, mad);
    case CmAttr::kLap: return HandleLap(now, mad);
    case CmAttr::kApr: return HandleApr(now, mad);
    default:
      ++counters_.malformed;
      return;
  }
}

void CmEndpoint::HandleTimeout(TimePoint now) {
  // Collect first: handlers re-arm timers, which the wheel allows, but
  // handling outside the callback keeps the control flow plain.
  struct Fired {
    uint32_t index;
    uint32_t generation;
  };
  absl::InlinedVector<Fired, 8> fired;
  wheel_.Advance(now, [&](mad::TimerHandle, uint64_t payload) {
    fired.push_back(Fired{static_cast<uint32_t>(payload >> 32),
                          static_cast<uint32_t>(payload)});
  });
  for (const Fired& f : fired) {
    Connection* c = conns_.AtIndex(f.index);
    if (c == nullptr) continue;  // freed since: stale expiry
    const ConnId id{f.index, conns_.GenerationAt(f.index)};
    for (int k = 0; k < internal::kTimerKinds; ++k) {
      internal::ConnTimer& t = c->timers[k];
      if (t.armed() && t.generation == f.generation) {
        t = internal::ConnTimer{};
        OnTimer(now, id, static_cast<TimerKind>(k));
        break;
      }
    }
  }
}

absl::optional<TimePoint> CmEndpoint::NextDeadline() const {
  return wheel_.NextDeadline();
}

namespace {

// Pops the front of a head-indexed vector queue. Fully drained, the vector
// is cleared (capacity kept); a long-lived backlog has its consumed prefix
// dropped now and then so the vector does not grow without bound.
template <typename T>
bool PopFront(std::vector<T>& q, size_t& head, T* out) {
  if (head == q.size()) return false;
  *out = std::move(q[head++]);
  if (head == q.size()) {
    mad::QueueStorage<T>::Return(q);
    head = 0;
  } else if (head >= 64 && head * 2 >= q.size()) {
    q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(head));
    head = 0;
  }
  return true;
}

}  // namespace

bool CmEndpoint::PollTransmit(OutgoingMad* out) {
  return PopFront(tx_, tx_head_, out);
}

size_t CmEndpoint::DrainTransmit(absl::FunctionRef<void(const OutgoingMad&)> send) {
  const size_t n = tx_.size() - tx_head_;
  while (tx_head_ < tx_.size()) send(tx_[tx_head_++]);
  mad::QueueStorage<OutgoingMad>::Return(tx_);
  tx_head_ = 0;
  return n;
}

bool CmEndpoint::PollEvent(CmEvent* out) {
  return PopFront(events_, events_head_, out);
}

size_t CmEndpoint::DrainEvents(absl::FunctionRef<void(CmEvent&)> handle) {
  assert(draining_.empty());  // not re-entered from `handle`
  size_t n = 0;
  while (has_events()) {
    // `handle` may Emit: those go to the (now empty) events_ and are handed
    // out by the next round, so the batch's references stay valid.
    draining_.swap(events_);
    const size_t head = events_head_;
    events_head_ = 0;
    for (size_t i = head; i < draining_.size(); ++i, ++n) handle(draining_[i]);
    draining_.clear();
  }
  mad::QueueStorage<CmEvent>::Return(draining_);
  mad::QueueStorage<CmEvent>::Return(events_);
  return n;
}

// ------------------------------------------------------------------ timers

void CmEndpoint::Arm(Connection& c, ConnId id, TimerKind kind,
                     TimePoint deadline) {
  internal::ConnTimer& t = c.timers[static_cast<int>(kind)];
  wheel_.Cancel(t.handle);
  if (++timer_generation_ == 0) timer_generation_ = 1;  // 0 means "not armed"
  t.generation = timer_generation_;
  t.handle = wheel_.Schedule(
      deadline, (uint64_t{id.index} << 32) | uint64_t{t.generation});
}

void CmEndpoint::Disarm(Connection& c, TimerKind kind) {
  internal::ConnTimer& t = c.timers[static_cast<int>(kind)];
  wheel_.Cancel(t.handle);
  t = internal::ConnTimer{};
}

void CmEndpoint::OnTimer(TimePoint now, ConnId id, TimerKind kind) {
  Connection& c = *Find(id);
  switch (kind) {
    case TimerKind::kAutoMra:
      if (c.state == CmState::kReqRcvd) {
        ++counters_.auto_mra;
        AnswerWithMra(c, MsgRef::kReq, config_.mra_service_timeout, {});
        c.state = CmState::kMraReqSent;
      } else if (c.state == CmState::kRepRcvd) {
        ++counters_.auto_mra;
        AnswerWithMra(c, MsgRef::kRep, config_.mra_service_timeout, {});
        c.state = CmState::kMraRepSent;
      }
      return;
    case TimerKind::kTimeWait:
      assert(c.state == CmState::kTimeWait);
      RemoveRemoteId(c);
      c.state = CmState::kIdle;
      if (!c.destroyed) Emit(MakeEvent(CmEventType::kTimewaitExit, c));
      MaybeFree(id);
      return;
    case TimerKind::kRetransmit:
      break;
  }
  internal::Outstanding& o = c.out;
  assert(o.armed);
  if (o.retries_left > 0) {
    --o.retries_left;
    const int ai = internal::AttrIndex(o.attr);
    if (ai >= 0) ++counters_.retransmitted[ai];
    Queue(c.peer, RequestMad(c));
    if (o.policy.backoff_factor > 1 && o.timeout < o.policy.backoff_cap) {
      o.timeout = std::min(
          o.timeout * static_cast<int64_t>(o.policy.backoff_factor),
          o.policy.backoff_cap);
    }
    Arm(c, id, TimerKind::kRetransmit, now + o.timeout);
    return;
  }
  EndRequest(c);
  ++counters_.timeouts;
  switch (c.state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd: {
      // Linux: REQ_ERROR / REP_ERROR, back to IDLE, no REJ is sent.
      RemoveRemoteQpn(c);
      RemoveRemoteId(c);
      c.state = CmState::kIdle;
      CmEvent e = MakeEvent(CmEventType::kUnreachable, c);
      e.status = -kEtimedout;
      if (!c.destroyed) Emit(std::move(e));
      MaybeFree(id);
      return;
    }
    case CmState::kDreqSent: {
      CmEvent e = MakeEvent(CmEventType::kDisconnected, c);
      e.status = -kEtimedout;
      if (!c.destroyed) Emit(std::move(e));
      EnterTimeWait(now, c, id);
      return;
    }
    case CmState::kSidrReqSent: {
      c.state = CmState::kIdle;
      CmEvent e = MakeEvent(CmEventType::kUnreachable, c);
      e.status = -kEtimedout;
      if (!c.destroyed) Emit(std::move(e));
      MaybeFree(id);
      return;
    }
    case CmState::kEstablished:
      if (c.lap == LapState::kLapSent || c.lap == LapState::kMraLapRcvd) {
        c.lap = LapState::kIdle;
        CmEvent e = MakeEvent(CmEventType::kLapError, c);
        e.status = -kEtimedout;
        if (!c.destroyed) Emit(std::move(e));
        return;
      }
      break;
    default:
      break;
  }
  assert(false && "retransmit timer in a state without an outstanding request");
}

// ---------------------------------------------------------- connections

CmEndpoint::Connection* CmEndpoint::Find(ConnId id) {
  return conns_.Get(id.index, id.generation);
}
const CmEndpoint::Connection* CmEndpoint::Find(ConnId id) const {
  return conns_.Get(id.index, id.generation);
}

absl::StatusOr<CmEndpoint::Connection*> CmEndpoint::FindOrError(ConnId id) {
  Connection* c = Find(id);
  if (c == nullptr || c->destroyed) {
    return absl::NotFoundError(absl::StrCat("unknown connection id ", id.index,
                                            "/", id.generation));
  }
  return c;
}

ConnId CmEndpoint::IdOf(const Connection& c) const {
  auto it = by_local_id_.find(c.local_comm_id);
  assert(it != by_local_id_.end());
  return ConnId{it->second, conns_.GenerationAt(it->second)};
}

CmEndpoint::Connection* CmEndpoint::ByLocalId(uint32_t local_comm_id) {
  auto it = by_local_id_.find(local_comm_id);
  return it == by_local_id_.end() ? nullptr : conns_.AtIndex(it->second);
}

CmEndpoint::Connection* CmEndpoint::ByRemoteId(uint32_t remote_comm_id,
                                               uint64_t guid) {
  auto it = by_remote_id_.find({remote_comm_id, guid});
  return it == by_remote_id_.end() ? nullptr : conns_.AtIndex(it->second);
}

uint32_t CmEndpoint::NewCommId() {
  // Random, never 0, unique among live and TimeWait connections (they stay
  // in by_local_id_ until freed).
  for (;;) {
    auto id = static_cast<uint32_t>(rng_());
    if (const uint8_t bits = config_.comm_id_prefix_bits; bits > 0 && bits < 32) {
      id = (config_.comm_id_prefix << (32 - bits)) | (id >> bits);
    }
    if (id != 0 && !by_local_id_.contains(id)) return id;
  }
}

ConnId CmEndpoint::NewConnection(Connection c) {
  if (c.local_comm_id == 0) c.local_comm_id = NewCommId();
  assert(!by_local_id_.contains(c.local_comm_id));
  const uint32_t local = c.local_comm_id;
  const auto key = conns_.Insert(std::move(c));
  by_local_id_.emplace(local, key.index);
  return ConnId{key.index, key.generation};
}

void CmEndpoint::MaybeFree(ConnId id) {
  Connection* c = Find(id);
  if (c == nullptr || !c->destroyed || c->state != CmState::kIdle) return;
  for (int k = 0; k < internal::kTimerKinds; ++k) {
    Disarm(*c, static_cast<TimerKind>(k));
  }
  EndRequest(*c);
  LeaveBacklog(*c);
  RemoveRemoteQpn(*c);
  RemoveRemoteId(*c);
  if (c->sidr_request_id != 0 && !c->active_side) {
    auto it = sidr_table_.find({c->sidr_request_id, c->sidr_source_lid});
    if (it != sidr_table_.end() && it->second == id.index) sidr_table_.erase(it);
  }
  by_local_id_.erase(c->local_comm_id);
  conns_.Remove(id.index, id.generation);
}

void CmEndpoint::SetRemote(Connection& c, uint32_t remote_comm_id,
                           uint64_t guid) {
  c.remote_comm_id = remote_comm_id;
  c.remote_ca_guid = guid;
}

void CmEndpoint::InsertRemoteQpn(Connection& c, ConnId id) {
  by_remote_qpn_[{c.remote_qpn, c.remote_ca_guid}] = id.index;
  c.in_remote_qpn_table = true;
}

void CmEndpoint::RemoveRemoteQpn(Connection& c) {
  if (!c.in_remote_qpn_table) return;
  by_remote_qpn_.erase({c.remote_qpn, c.remote_ca_guid});
  c.in_remote_qpn_table = false;
}

void CmEndpoint::RemoveRemoteId(Connection& c) {
  if (!c.in_remote_id_table) return;
  by_remote_id_.erase({c.remote_comm_id, c.remote_ca_guid});
  c.in_remote_id_table = false;
}

void CmEndpoint::LeaveBacklog(Connection& c) {
  if (!c.in_backlog) return;
  c.in_backlog = false;
  if (Listener* l = listeners_.Get(c.listen.index, c.listen.generation)) {
    --l->pending;
  }
}

absl::optional<ListenId> CmEndpoint::MatchListener(uint64_t service_id) {
  absl::optional<ListenId> found;
  listeners_.ForEach([&](SlotMap<Listener>::Key k, Listener& l) {
    if (!found.has_value() &&
        (service_id & l.service_mask) == (l.service_id & l.service_mask)) {
      found = ListenId{k.index, k.generation};
    }
  });
  return found;
}

absl::StatusOr<ListenId> CmEndpoint::Listen(uint64_t service_id, uint64_t mask,
                                            uint32_t backlog, bool reuse) {
  if ((service_id & ~mask) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "service ID 0x", absl::Hex(service_id), " has bits outside mask 0x",
        absl::Hex(mask)));
  }
  if (backlog == 0) {
    return absl::InvalidArgumentError("backlog must be at least 1");
  }
  absl::Status conflict;
  listeners_.ForEach([&](SlotMap<Listener>::Key, Listener& l) {
    const uint64_t common = mask & l.service_mask;
    if ((service_id & common) == (l.service_id & common) &&
        !(reuse && l.reuse) && conflict.ok()) {
      conflict = absl::AlreadyExistsError(absl::StrCat(
          "service ID 0x", absl::Hex(service_id), " overlaps listener 0x",
          absl::Hex(l.service_id), "/0x", absl::Hex(l.service_mask),
          " (both need reuse to share it)"));
    }
  });
  if (!conflict.ok()) return conflict;
  const auto k = listeners_.Insert(Listener{service_id, mask, backlog, 0, reuse});
  return ListenId{k.index, k.generation};
}

absl::Status CmEndpoint::SetBacklog(ListenId id, uint32_t backlog) {
  if (backlog == 0) {
    return absl::InvalidArgumentError("backlog must be at least 1");
  }
  Listener* l = listeners_.Get(id.index, id.generation);
  if (l == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown listen id ", id.index, "/",
                                            id.generation));
  }
  l->backlog = backlog;
  return absl::OkStatus();
}

absl::Status CmEndpoint::StopListening(ListenId id) {
  if (!listeners_.Remove(id.index, id.generation)) {
    return absl::NotFoundError(absl::StrCat("unknown listen id ", id.index, "/",
                                            id.generation));
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------ sending

void CmEndpoint::CountSent(CmAttr a) {
  if (int i = internal::AttrIndex(a); i >= 0) ++counters_.sent[i];
}
void CmEndpoint::CountReceived(CmAttr a) {
  if (int i = internal::AttrIndex(a); i >= 0) ++counters_.received[i];
}
void CmEndpoint::CountDuplicate(CmAttr a) {
  if (int i = internal::AttrIndex(a); i >= 0) ++counters_.duplicates[i];
}

void CmEndpoint::Queue(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  mad::QueueStorage<OutgoingMad>::Lend(tx_);
  OutgoingMad& o = tx_.emplace_back();
  o.to = to;
  std::copy(mad.begin(), mad.end(), o.mad.begin());
}

void CmEndpoint::QueueCounted(const mad::MadAddress& to,
                              std::span<const uint8_t> mad) {
  CountSent(static_cast<CmAttr>(uint16_t{mad[16]} << 8 | mad[17]));
  Queue(to, mad);
}

std::span<uint8_t, mad::kMadSize> CmEndpoint::RequestBuffer(Connection& c) {
  uint32_t& b = c.out.buffer;
  if (b == internal::kNoBuffer) {
    if (!free_requests_.empty()) {
      b = free_requests_.back();
      free_requests_.pop_back();
    } else {
      b = static_cast<uint32_t>(request_pool_.size());
      request_pool_.emplace_back();
    }
  }
  return request_pool_[b];
}

std::span<const uint8_t, mad::kMadSize> CmEndpoint::RequestMad(
    const Connection& c) const {
  assert(c.out.buffer != internal::kNoBuffer);
  return request_pool_[c.out.buffer];
}

void CmEndpoint::EndRequest(Connection& c) {
  c.out.armed = false;
  if (c.out.buffer == internal::kNoBuffer) return;
  free_requests_.push_back(c.out.buffer);
  c.out.buffer = internal::kNoBuffer;
}

void CmEndpoint::ArmRequest(TimePoint now, Connection& c, ConnId id,
                            CmAttr attr, Duration timeout, int retries,
                            const RetryPolicy& p) {
  internal::Outstanding& o = c.out;
  o.armed = true;
  o.attr = attr;
  o.timeout = p.response_timeout.value_or(timeout);
  o.retries_left = retries;
  o.policy = p;
  Arm(c, id, TimerKind::kRetransmit, now + o.timeout);
}

void CmEndpoint::KeepReply(Connection& c, CmAttr attr,
                           std::span<const uint8_t> private_data,
                           MsgRef mra_msg, uint8_t mra_timeout) {
  c.has_reply = true;
  c.reply_attr = attr;
  c.reply_mra_msg = mra_msg;
  c.reply_mra_timeout = mra_timeout;
  c.reply_private_data.Assign(private_data);
}

void CmEndpoint::ResendReply(Connection& c) {
  if (!c.has_reply) return;
  // The same bytes as the first time: every field comes from state that has
  // not changed since (the transaction ID of the REQ / LAP / DREQ answered).
  const auto pd = mad::wire::PrivateData(c.reply_private_data.bytes());
  switch (c.reply_attr) {
    case CmAttr::kRtu: {
      mad::wire::RtuRepr r;
      r.envelope.transaction_id = c.transaction_id;
      r.local_comm_id = c.local_comm_id;
      r.remote_comm_id = c.remote_comm_id;
      r.private_data = pd;
      return Send(c.peer, r);
    }
    case CmAttr::kMra: {
      mad::wire::MraRepr r;
      r.envelope.transaction_id = c.transaction_id;
      r.local_comm_id = c.local_comm_id;
      r.remote_comm_id = c.remote_comm_id;
      r.message_mraed = static_cast<mad::wire::MraMessage>(c.reply_mra_msg);
      r.service_timeout = c.reply_mra_timeout;
      r.private_data = pd;
      return Send(c.peer, r);
    }
    case CmAttr::kDrep: {
      mad::wire::DrepRepr r;
      r.envelope.transaction_id = c.transaction_id;
      r.local_comm_id = c.local_comm_id;
      r.remote_comm_id = c.remote_comm_id;
      r.private_data = pd;
      return Send(c.peer, r);
    }
    default:
      assert(false && "only RTU, MRA and DREP are kept as replies");
  }
}

void CmEndpoint::Emit(CmEvent e) {
  mad::QueueStorage<CmEvent>::Lend(events_);
  events_.push_back(std::move(e));
}

CmEvent CmEndpoint::MakeEvent(CmEventType t, const Connection& c) const {
  CmEvent e;
  e.type = t;
  e.conn = IdOf(c);
  e.listen = c.listen;
  return e;
}

Duration CmEndpoint::Ms(uint8_t code) const {
  // Callers pass values read from 5-bit fields or validated user input.
  auto t = mad::IbaTimeCode::Create(code & 0x1F, "time");
  return t->ToDuration(config_.rounding);
}

mad::MadAddress CmEndpoint::AddressForPath(const PathInfo& p,
                                           uint16_t pkey) const {
  mad::MadAddress a;
  a.lid = p.remote_lid;
  a.qpn = mad::kQp1;
  a.qkey = mad::kQp1Qkey;
  a.sl = p.sl;
  for (size_t i = 0; i < port_.pkeys.size(); ++i) {
    if ((port_.pkeys[i] & 0x7FFF) == (pkey & 0x7FFF)) {
      a.pkey_index = static_cast<uint16_t>(i);
      break;
    }
  }
  a.has_grh = !p.subnet_local || port_.link_layer == mad::LinkLayer::kEthernet;
  a.gid = p.remote_gid;
  a.hop_limit = p.hop_limit;
  a.traffic_class = p.traffic_class;
  a.flow_label = p.flow_label;
  return a;
}

// ---------------------------------------------------------- inspection

absl::StatusOr<CmState> CmEndpoint::State(ConnId id) const {
  const Connection* c = Find(id);
  if (c == nullptr) return absl::NotFoundError("unknown connection id");
  return c->state;
}

absl::StatusOr<LapState> CmEndpoint::GetLapState(ConnId id) const {
  const Connection* c = Find(id);
  if (c == nullptr) return absl::NotFoundError("unknown connection id");
  return c->lap;
}

absl::StatusOr<uint32_t> CmEndpoint::LocalCommId(ConnId id) const {
  const Connection* c = Find(id);
  if (c == nullptr) return absl::NotFoundError("unknown connection id");
  return c->local_comm_id;
}

absl::StatusOr<Ece> CmEndpoint::RemoteEce(ConnId id) const {
  const Connection* c = Find(id);
  if (c == nullptr) return absl::NotFoundError("unknown connection id");
  return c->remote_ece;
}

void CmEndpoint::PrefetchForWake() const {
  // From the counters behind rng_'s state to the end: the members every
  // HandleMad / HandleTimeout / PollTransmit reads (23 lines, of 64).
  const char* first = reinterpret_cast<const char*>(&tid_counter_);
  const char* end = reinterpret_cast<const char*>(this + 1);
  for (const char* c = first; c < end; c += 64) __builtin_prefetch(c);
}

}  // namespace uscm::cm
