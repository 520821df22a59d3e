#include "sa/client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "mad/wire/mad_header.h"
#include "mad/wire/sa_header.h"

namespace uscm::sa {
namespace {

using mad::wire::ClassPortInfo;
using mad::wire::McMemberRecord;
using mad::wire::McMemberRecordMask;
using mad::wire::Method;
using mad::wire::PathRecord;
using mad::wire::PathRecordMask;
using mad::wire::SaRecordMad;

constexpr uint8_t kSaStatusNoResources = 1;
constexpr uint8_t kSaStatusReqInvalid = 2;
constexpr uint8_t kSaStatusNoRecords = 3;
constexpr uint8_t kSaStatusTooManyRecords = 4;
constexpr uint8_t kSaStatusInvalidGid = 5;
constexpr uint8_t kSaStatusInsufficientComponents = 6;
constexpr uint8_t kSaStatusDenied = 7;

template <typename Record>
absl::StatusOr<std::array<uint8_t, mad::kMadSize>> EmitRequest(Method method,
                                                               const Record& record,
                                                               typename Record::Mask mask) {
  SaRecordMad<Record> m;
  m.envelope.method = static_cast<uint8_t>(method);
  // RMPPVersion 1 with no flags, as libibmad sends SA requests: OpenSM copies
  // the request's RMPP header into its GetTableResp and, without kernel RMPP
  // (ibsim), that copy is what arrives.
  m.envelope.rmpp.version = 1;
  m.component_mask = mask;
  m.record = record;
  std::array<uint8_t, mad::kMadSize> buf{};
  if (absl::Status s = m.Emit(buf); !s.ok()) return s;
  return buf;
}

// The records of a GetTable response (single MAD or reassembled): stride =
// AttributeOffset * 8, count = data bytes / stride.
template <typename Record>
absl::StatusOr<std::vector<Record>> ParseTable(std::span<const uint8_t> response) {
  if (response.size() < mad::wire::kSaDataOffset) {
    return absl::DataLossError(absl::StrFormat(
        "GetTableResp is %d bytes; the MAD, RMPP and SA headers alone take 56", response.size()));
  }
  const size_t stride =
      size_t{mad::wire::FieldView::Unchecked(response.data() + mad::wire::kSaHeaderOffset)
                 .Get(mad::wire::sa_header::kAttributeOffset)} * 8;
  std::vector<Record> out;
  if (stride == 0) return out;
  if (stride < Record::kBytes) {
    return absl::DataLossError(absl::StrFormat(
        "GetTableResp AttributeOffset is %d bytes; a %s takes %d", stride, Record::kName,
        Record::kBytes));
  }
  const std::span<const uint8_t> data = response.subspan(mad::wire::kSaDataOffset);
  out.reserve(data.size() / stride);
  for (size_t off = 0; off + Record::kBytes <= data.size(); off += stride) {
    auto r = Record::Parse(data.subspan(off, Record::kBytes));
    if (!r.ok()) return r.status();
    out.push_back(*r);
  }
  return out;
}

// The later of two deadlines; none (no deadline) is the latest.
absl::optional<TimePoint> Later(absl::optional<TimePoint> a, absl::optional<TimePoint> b) {
  if (!a.has_value() || !b.has_value()) return absl::nullopt;
  return std::max(*a, *b);
}

}  // namespace

// ---------------------------------------------------------------- PathQuery

PathQuery& PathQuery::Sgid(const Gid& g) {
  record_.sgid = g;
  mask_ |= PathRecordMask::kSgid;
  return *this;
}
PathQuery& PathQuery::Dgid(const Gid& g) {
  record_.dgid = g;
  mask_ |= PathRecordMask::kDgid;
  return *this;
}
PathQuery& PathQuery::Slid(uint16_t lid) {
  record_.slid = lid;
  mask_ |= PathRecordMask::kSlid;
  return *this;
}
PathQuery& PathQuery::Dlid(uint16_t lid) {
  record_.dlid = lid;
  mask_ |= PathRecordMask::kDlid;
  return *this;
}
PathQuery& PathQuery::PKey(uint16_t pkey) {
  record_.pkey = pkey;
  mask_ |= PathRecordMask::kPKey;
  return *this;
}
PathQuery& PathQuery::ServiceId(uint64_t id) {
  record_.service_id = id;
  mask_ |= PathRecordMask::kServiceId;
  return *this;
}
PathQuery& PathQuery::Sl(uint8_t sl) {
  record_.sl = sl;
  mask_ |= PathRecordMask::kSl;
  return *this;
}
PathQuery& PathQuery::TClass(uint8_t tclass) {
  record_.tclass = tclass;
  mask_ |= PathRecordMask::kTClass;
  return *this;
}
PathQuery& PathQuery::QosClass(uint16_t qos) {
  record_.qos_class = qos;
  mask_ |= PathRecordMask::kQosClass;
  return *this;
}
PathQuery& PathQuery::FlowLabel(uint32_t label) {
  record_.flow_label = label;
  mask_ |= PathRecordMask::kFlowLabel;
  return *this;
}
PathQuery& PathQuery::HopLimit(uint8_t hops) {
  record_.hop_limit = hops;
  mask_ |= PathRecordMask::kHopLimit;
  return *this;
}
PathQuery& PathQuery::Mtu(mad::wire::Selector sel, mad::wire::Mtu mtu) {
  record_.mtu_selector = sel;
  record_.mtu = mtu;
  mask_ |= PathRecordMask::kMtuSelector | PathRecordMask::kMtu;
  return *this;
}
PathQuery& PathQuery::Rate(mad::wire::Selector sel, uint8_t rate) {
  record_.rate_selector = sel;
  record_.rate = rate;
  mask_ |= PathRecordMask::kRateSelector | PathRecordMask::kRate;
  return *this;
}
PathQuery& PathQuery::PacketLifeTime(mad::wire::Selector sel, uint8_t plt) {
  record_.packet_life_time_selector = sel;
  record_.packet_life_time = plt;
  mask_ |= PathRecordMask::kPacketLifeTimeSelector | PathRecordMask::kPacketLifeTime;
  return *this;
}
PathQuery& PathQuery::NumbPath(uint8_t n) {
  record_.numb_path = n;
  mask_ |= PathRecordMask::kNumbPath;
  return *this;
}
PathQuery& PathQuery::Reversible(bool r) {
  record_.reversible = r;
  mask_ |= PathRecordMask::kReversible;
  return *this;
}

PathQuery PathQuery::RdmaCm(const Gid& sgid, const Gid& dgid, uint16_t pkey,
                            uint64_t service_id) {
  PathQuery q;
  q.Sgid(sgid).Dgid(dgid).PKey(pkey).NumbPath(1).Reversible(true).ServiceId(service_id);
  return q;
}

std::string PathQuery::Describe() const {
  std::string from = mask_.Has(PathRecordMask::kSgid) ? record_.sgid.ToString()
                     : mask_.Has(PathRecordMask::kSlid)
                         ? absl::StrFormat("LID %d", record_.slid)
                         : "any port";
  std::string to = mask_.Has(PathRecordMask::kDgid) ? record_.dgid.ToString()
                   : mask_.Has(PathRecordMask::kDlid)
                       ? absl::StrFormat("LID %d", record_.dlid)
                       : "any port";
  return absl::StrFormat("from %s to %s", from, to);
}

McGroup McGroup::FromRecord(const McMemberRecord& r) {
  McGroup g;
  g.mgid = r.mgid;
  g.mlid = r.mlid;
  g.qkey = r.qkey;
  g.pkey = r.pkey;
  g.sl = r.sl;
  g.tclass = r.tclass;
  g.flow_label = r.flow_label;
  g.hop_limit = r.hop_limit;
  g.rate = r.rate;
  g.mtu = r.mtu;
  g.packet_life_time = r.packet_life_time;
  g.join_state = r.join_state;
  return g;
}

mad::MadAddress SaAddressFor(const mad::LocalPort& port) {
  mad::MadAddress a;
  a.lid = port.sm_lid;
  a.sl = port.sm_sl;
  a.qpn = mad::kQp1;
  a.qkey = mad::kQp1Qkey;
  for (size_t i = 0; i < port.pkeys.size(); ++i) {
    if ((port.pkeys[i] & 0x7FFF) == 0x7FFF && (port.pkeys[i] & 0x8000)) {
      a.pkey_index = static_cast<uint16_t>(i);
      break;
    }
  }
  return a;
}

// ---------------------------------------------------------------- SaClient

SaClient::SaClient(mad::Agent* agent, SaClientConfig config)
    : agent_(agent), config_(std::move(config)) {}

SaClient::~SaClient() {
  for (auto& [id, q] : queries_) {
    for (const Waiter& w : q.waiters) {
      if (w.timer != 0) agent_->CancelTimer(w.timer);
    }
  }
}

absl::StatusOr<uint64_t> SaClient::Start(TimePoint now, Kind kind, std::string what,
                                         std::span<const uint8_t> mad,
                                         absl::optional<PathCacheKey> cache_key,
                                         absl::optional<TimePoint> deadline) {
  // The emitted request (TID still 0) names the query exactly. Deadlines do
  // not split queries: each waiter keeps its own (AddWaiter).
  std::string key;
  std::vector<Waiter> inherited;  // a lost query's waiters, answered with this one
  if (config_.coalesce) {
    key.assign(reinterpret_cast<const char*>(mad.data()), mad.size());
    auto in_flight = flight_.find(key);
    if (in_flight != flight_.end()) {
      const uint64_t lost_id = in_flight->second;
      Query& on_wire = queries_.at(lost_id);
      if (!agent_->PresumedLost(now, on_wire.request)) {
        const uint64_t id = next_id_++;
        AddWaiter(lost_id, on_wire, Waiter{id, deadline});
        ++counters_.queries;
        ++counters_.coalesced;
        return id;
      }
      ++counters_.superseded;
      inherited = std::move(on_wire.waiters);
      agent_->Cancel(now, on_wire.request);
      queries_.erase(lost_id);
      flight_.erase(in_flight);
    }
  }
  const uint64_t id = next_id_++;
  absl::optional<TimePoint> wire_deadline = deadline;
  for (const Waiter& w : inherited) wire_deadline = Later(wire_deadline, w.deadline);
  auto sent = agent_->SendRequest(now, config_.sa, mad, id, this, wire_deadline);
  if (!sent.ok()) {
    for (const Waiter& w : inherited) {  // they lose their query with this one
      if (w.timer != 0) {
        agent_->CancelTimer(w.timer);
        timed_waiters_.erase(w.id);
      }
      SaResult r;
      r.id = w.id;
      r.status = sent.status();
      results_.push_back(std::move(r));
    }
    return sent.status();
  }
  if (!inherited.empty()) ++counters_.coalesced;  // the lost one (its waiters were counted)
  Query& q = queries_[id];
  q = Query{kind, std::move(what), std::move(cache_key), *sent, key, {}, wire_deadline, 0};
  q.waiters.reserve(inherited.size() + 1);
  for (const Waiter& w : inherited) Place(id, q, w);
  Place(id, q, Waiter{id, deadline});
  if (config_.coalesce) flight_[std::move(key)] = id;
  ++counters_.queries;
  return id;
}

void SaClient::Place(uint64_t qid, Query& q, Waiter w) {
  if (w.timer != 0) {
    timed_waiters_[w.id] = qid;
  } else if (w.deadline.has_value()) {
    if (!q.deadline.has_value() || *w.deadline < *q.deadline) {
      w.timer = agent_->StartTimer(*w.deadline, this, w.id);
      timed_waiters_[w.id] = qid;
    } else {
      ++q.untimed;  // the request's own deadline: its expiry answers this one
    }
  }
  q.waiters.push_back(w);
}

void SaClient::AddWaiter(uint64_t qid, Query& q, Waiter w) {
  const absl::optional<TimePoint> later = Later(q.deadline, w.deadline);
  if (later != q.deadline) {
    agent_->ExtendDeadline(q.request, later);
    // The waiters the old deadline answered need timers of their own now (in
    // a burst the latest is the newest: found from the back).
    for (auto it = q.waiters.rbegin(); q.untimed > 0 && it != q.waiters.rend(); ++it) {
      if (it->timer == 0 && it->deadline.has_value() && *it->deadline == *q.deadline) {
        it->timer = agent_->StartTimer(*it->deadline, this, it->id);
        timed_waiters_[it->id] = qid;
        --q.untimed;
      }
    }
    q.untimed = 0;
    q.deadline = later;
  }
  Place(qid, q, w);
}

void SaClient::OnTimer(TimePoint now, uint64_t waiter) {
  (void)now;
  auto t = timed_waiters_.find(waiter);
  if (t == timed_waiters_.end()) return;
  const uint64_t qid = t->second;
  timed_waiters_.erase(t);
  auto it = queries_.find(qid);
  if (it == queries_.end()) return;
  Query& q = it->second;
  auto w = std::find_if(q.waiters.begin(), q.waiters.end(),
                        [waiter](const Waiter& x) { return x.id == waiter; });
  if (w == q.waiters.end()) return;
  q.waiters.erase(w);
  ++counters_.waiter_deadlines;
  SaResult r;
  r.id = waiter;
  r.status = absl::DeadlineExceededError(absl::StrFormat(
      "%s: no SA answer by this query's deadline (an identical query in flight answers it and "
      "goes on for the later deadlines of others)",
      q.what));
  results_.push_back(std::move(r));
}

absl::StatusOr<uint64_t> SaClient::GetPath(TimePoint now, const PathQuery& q,
                                           absl::optional<TimePoint> deadline) {
  absl::optional<mad::wire::PathRecord> hit;
  absl::StatusOr<uint64_t> id = GetPathOrCached(now, q, &hit, deadline);
  if (id.ok() && hit.has_value()) {
    SaResult r;
    r.id = *id;
    r.paths.push_back(*std::move(hit));
    r.from_cache = true;
    results_.push_back(std::move(r));
  }
  return id;
}

absl::StatusOr<uint64_t> SaClient::GetPathOrCached(TimePoint now, const PathQuery& q,
                                                   absl::optional<mad::wire::PathRecord>* hit,
                                                   absl::optional<TimePoint> deadline) {
  hit->reset();
  absl::optional<PathCacheKey> key;
  if (config_.path_cache != nullptr && q.mask().Has(PathRecordMask::kSgid) &&
      q.mask().Has(PathRecordMask::kDgid)) {
    key.emplace();
    key->sgid = q.record().sgid;
    key->dgid = q.record().dgid;
    if (q.mask().Has(PathRecordMask::kPKey)) key->pkey = q.record().pkey;
    if (q.mask().Has(PathRecordMask::kServiceId)) key->service_id = q.record().service_id;
    if (q.mask().Has(PathRecordMask::kSl)) key->sl = q.record().sl;
    if (q.mask().Has(PathRecordMask::kTClass)) key->tclass = q.record().tclass;
    *hit = config_.path_cache->Lookup(now, *key);
    if (hit->has_value()) {
      ++counters_.queries;
      ++counters_.cache_hits;
      return next_id_++;
    }
  }
  auto mad = EmitRequest(Method::kGet, q.record(), q.mask());
  if (!mad.ok()) return mad.status();
  return Start(now, Kind::kPath, "path " + q.Describe(), *mad, key, deadline);
}

absl::StatusOr<uint64_t> SaClient::GetPaths(TimePoint now, const PathQuery& q) {
  auto mad = EmitRequest(Method::kGetTable, q.record(), q.mask());
  if (!mad.ok()) return mad.status();
  return Start(now, Kind::kPaths, "paths " + q.Describe(), *mad);
}

absl::StatusOr<uint64_t> SaClient::Join(TimePoint now, const McJoin& join) {
  McMemberRecord r;
  r.mgid = join.mgid;
  r.port_gid = join.port_gid;
  r.join_state = join.join_state;
  McMemberRecordMask mask =
      McMemberRecordMask::kMgid | McMemberRecordMask::kPortGid | McMemberRecordMask::kJoinState;
  if (join.join_state.bits() == 0) {
    return absl::InvalidArgumentError("multicast join with JoinState 0 joins nothing");
  }
  if (join.create) {
    r.qkey = join.qkey;
    r.pkey = join.pkey;
    r.sl = join.sl;
    r.tclass = join.tclass;
    r.flow_label = join.flow_label;
    mask |= McMemberRecordMask::kQKey | McMemberRecordMask::kPKey | McMemberRecordMask::kSl |
            McMemberRecordMask::kTClass | McMemberRecordMask::kFlowLabel;
  }
  if (join.mtu) {
    r.mtu_selector = mad::wire::Selector::kExactly;
    r.mtu = *join.mtu;
    mask |= McMemberRecordMask::kMtuSelector | McMemberRecordMask::kMtu;
  }
  if (join.rate) {
    r.rate_selector = mad::wire::Selector::kExactly;
    r.rate = *join.rate;
    mask |= McMemberRecordMask::kRateSelector | McMemberRecordMask::kRate;
  }
  if (join.scope) {
    r.scope = *join.scope;
    mask |= McMemberRecordMask::kScope;
  }
  auto mad = EmitRequest(Method::kSet, r, mask);
  if (!mad.ok()) return mad.status();
  const std::string group = join.mgid.is_zero() ? "a new group (SA-assigned MGID)"
                                                 : "group " + join.mgid.ToString();
  return Start(now, Kind::kJoin,
               absl::StrFormat("join of %s to %s as %s", join.port_gid.ToString(), group,
                               join.join_state.ToString()),
               *mad);
}

absl::StatusOr<uint64_t> SaClient::Leave(TimePoint now, const Gid& mgid, const Gid& port_gid,
                                         mad::wire::JoinState bits) {
  McMemberRecord r;
  r.mgid = mgid;
  r.port_gid = port_gid;
  r.join_state = bits;
  auto mad = EmitRequest(Method::kDelete, r,
                         McMemberRecordMask::kMgid | McMemberRecordMask::kPortGid |
                             McMemberRecordMask::kJoinState);
  if (!mad.ok()) return mad.status();
  return Start(now, Kind::kLeave,
               absl::StrFormat("leave of %s from group %s (%s)", port_gid.ToString(),
                               mgid.ToString(), bits.ToString()),
               *mad);
}

absl::StatusOr<uint64_t> SaClient::GetMcMembers(TimePoint now, const McMemberRecord& tmpl,
                                                McMemberRecordMask mask) {
  auto mad = EmitRequest(Method::kGetTable, tmpl, mask);
  if (!mad.ok()) return mad.status();
  return Start(now, Kind::kMembers, "MCMemberRecord table", *mad);
}

absl::StatusOr<uint64_t> SaClient::GetClassPortInfo(TimePoint now) {
  auto mad = EmitRequest(Method::kGet, ClassPortInfo{}, mad::wire::ClassPortInfoMask());
  if (!mad.ok()) return mad.status();
  return Start(now, Kind::kClassPortInfo, "SA ClassPortInfo", *mad);
}

absl::Status SaClient::SaError(const Query& q, uint16_t status) const {
  const std::string text = mad::wire::StatusText(status);
  switch (status >> 8) {
    case kSaStatusNoRecords:
      return absl::NotFoundError(absl::StrFormat("SA has no %s (%s)", q.what, text));
    case kSaStatusTooManyRecords:
      return absl::FailedPreconditionError(absl::StrFormat(
          "SA found more than one match for %s (%s); narrow the query or use a table query",
          q.what, text));
    case kSaStatusInvalidGid:
      return absl::NotFoundError(
          absl::StrFormat("SA knows no port with a GID named in %s (%s)", q.what, text));
    case kSaStatusReqInvalid:
    case kSaStatusInsufficientComponents:
      return absl::InvalidArgumentError(
          absl::StrFormat("SA rejected %s as invalid (%s)", q.what, text));
    case kSaStatusNoResources:
      return absl::ResourceExhaustedError(
          absl::StrFormat("SA is out of resources for %s (%s)", q.what, text));
    case kSaStatusDenied:
      return absl::PermissionDeniedError(
          absl::StrFormat("SA denied %s (%s)", q.what, text));
    default:
      return absl::UnknownError(
          absl::StrFormat("SA answered %s with status 0x%04x (%s)", q.what, status, text));
  }
}

SaResult SaClient::Convert(const Query& q, const mad::Completion& c) {
  SaResult r;
  r.id = c.cookie;
  if (!c.status.ok()) {
    ++counters_.failures;
    r.status = absl::Status(c.status.code(),
                            absl::StrFormat("%s: %s", q.what, c.status.message()));
    return r;
  }
  auto header = mad::wire::MadHeader::Parse(c.response);
  if (!header.ok()) {
    ++counters_.bad_responses;
    r.status = header.status();
    return r;
  }
  if (header->status != 0) {
    ++counters_.sa_errors;
    r.status = SaError(q, header->status);
    return r;
  }
  auto fail = [&](const absl::Status& s) {
    ++counters_.bad_responses;
    r.status = absl::DataLossError(absl::StrFormat("bad SA answer to %s: %s", q.what, s.message()));
  };
  switch (q.kind) {
    case Kind::kPath: {
      auto m = SaRecordMad<PathRecord>::Parse(c.response);
      if (!m.ok()) {
        fail(m.status());
        break;
      }
      r.paths.push_back(m->record);
      break;
    }
    case Kind::kPaths: {
      auto t = ParseTable<PathRecord>(c.response);
      if (!t.ok()) {
        fail(t.status());
        break;
      }
      r.paths = std::move(*t);
      break;
    }
    case Kind::kJoin:
    case Kind::kLeave: {
      auto m = SaRecordMad<McMemberRecord>::Parse(c.response);
      if (!m.ok()) {
        fail(m.status());
        break;
      }
      r.members.push_back(m->record);
      r.group = McGroup::FromRecord(m->record);
      break;
    }
    case Kind::kMembers: {
      auto t = ParseTable<McMemberRecord>(c.response);
      if (!t.ok()) {
        fail(t.status());
        break;
      }
      r.members = std::move(*t);
      break;
    }
    case Kind::kClassPortInfo: {
      auto m = SaRecordMad<ClassPortInfo>::Parse(c.response);
      if (!m.ok()) {
        fail(m.status());
        break;
      }
      r.class_port_info = m->record;
      break;
    }
  }
  return r;
}

void SaClient::OnCompletion(TimePoint now, mad::Completion c) {
  auto it = queries_.find(c.cookie);
  if (it == queries_.end()) return;
  Query q = std::move(it->second);
  queries_.erase(it);
  if (!q.flight_key.empty()) flight_.erase(q.flight_key);
  SaResult r = Convert(q, c);
  if (r.status.ok() && q.cache_key && r.paths.size() == 1) {
    config_.path_cache->Insert(now, *q.cache_key, r.paths[0], config_.path_ttl);
  }
  if (r.class_port_info) {
    // IBA 13.4.6.2: an answer is due within 4.096 us * 2^RespTimeValue plus
    // the request's and the response's packet lifetimes.
    const mad::Duration resp =
        mad::Duration::Nanos(int64_t{4096} << (r.class_port_info->resp_time_value & 0x1F));
    const mad::Duration life =
        mad::Duration::Nanos(int64_t{4096} << std::min<int>(config_.sa_packet_life_time, 31));
    agent_->SetResponseBound(config_.sa, resp + life * 2);
  }
  // In the order the queries were asked.
  for (const Waiter& w : q.waiters) {
    if (w.timer != 0) {
      agent_->CancelTimer(w.timer);
      timed_waiters_.erase(w.id);
    }
    results_.push_back(r);
    results_.back().id = w.id;
  }
}

absl::optional<SaResult> SaClient::PollResult() {
  if (results_.empty()) return absl::nullopt;
  SaResult r = std::move(results_.front());
  results_.pop_front();
  return r;
}

void SaClient::PrefetchForWake() const {
  const char* self = reinterpret_cast<const char*>(this);
  for (size_t i = 0; i < sizeof(*this); i += 64) __builtin_prefetch(self + i);
}

}  // namespace uscm::sa
