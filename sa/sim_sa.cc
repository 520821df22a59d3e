#include "sa/sim_sa.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "mad/agent_pump.h"
#include "mad/wire/class_port_info.h"
#include "mad/wire/mad_header.h"
#include "mad/wire/sa_header.h"

namespace uscm::sa {
namespace {

using mad::Gid;
using mad::TimePoint;
using mad::wire::ClassPortInfo;
using mad::wire::JoinState;
using mad::wire::McMemberRecord;
using mad::wire::McMemberRecordMask;
using mad::wire::PathRecord;
using mad::wire::PathRecordMask;
using mad::wire::SaRecordMad;
using mad::wire::Selector;

constexpr uint16_t kNoResources = 0x0100;
constexpr uint16_t kReqInvalid = 0x0200;
constexpr uint16_t kNoRecords = 0x0300;
constexpr uint16_t kTooManyRecords = 0x0400;
constexpr uint16_t kInvalidGid = 0x0500;
constexpr uint16_t kInsufficientComponents = 0x0600;
constexpr uint16_t kMethodAttrUnsupported = 0x000C;
constexpr uint16_t kInvalidValue = 0x001C;

constexpr uint8_t kGet = 0x01, kSet = 0x02, kGetTable = 0x12, kDelete = 0x15;
constexpr uint8_t kGetResp = 0x81, kDeleteResp = 0x95, kGetTableResp = 0x92;
constexpr size_t kMcStride = 56;  // MCMemberRecord AttributeOffset 7

constexpr uint8_t kCreators = JoinState::kFullMember | JoinState::kSendOnlyFullMember;

// Whether `have` satisfies "selector want" (IBA 15.2.5.16).
bool Satisfies(Selector sel, int have, int want) {
  switch (sel) {
    case Selector::kGreaterThan: return have > want;
    case Selector::kLessThan: return have < want;
    case Selector::kExactly: return have == want;
    case Selector::kBest: return true;
  }
  return false;
}

// The value a group gets for "selector want", bounded by `max`; 0 if none fits.
int Choose(Selector sel, int want, int max) {
  switch (sel) {
    case Selector::kGreaterThan: return want + 1 <= max ? max : 0;
    case Selector::kLessThan: return want - 1 >= 1 ? std::min(want - 1, max) : 0;
    case Selector::kExactly: return want <= max ? want : 0;
    case Selector::kBest: return max;
  }
  return 0;
}

mad::MadAddress ReplyTo(const mad::MadAddress& from) {
  mad::MadAddress to = from;
  to.qkey = mad::kQp1Qkey;
  return to;
}

bool PkeyMatches(uint16_t a, uint16_t b) { return (a & 0x7FFF) == (b & 0x7FFF); }

}  // namespace

// ---------------------------------------------------------------- AgentActor

AgentActor::AgentActor(mad::Transport& transport, mad::Agent& agent,
                       std::function<bool()> has_input,
                       std::function<absl::optional<TimePoint>()> extra_deadline,
                       std::function<void(TimePoint)> on_wake)
    : transport_(transport),
      agent_(agent),
      has_input_(std::move(has_input)),
      extra_deadline_(std::move(extra_deadline)),
      on_wake_(std::move(on_wake)) {}

absl::optional<TimePoint> AgentActor::NextDeadline() const {
  if (agent_.has_output() || (has_input_ && has_input_())) return TimePoint::Epoch();
  absl::optional<TimePoint> d = agent_.NextDeadline();
  if (extra_deadline_) {
    absl::optional<TimePoint> e = extra_deadline_();
    if (e && (!d || *e < *d)) d = e;
  }
  return d;
}

void AgentActor::Wake(TimePoint now) {
  if (!mad::Pump(now, transport_, agent_).ok()) ++send_errors_;
  if (on_wake_) on_wake_(now);
  if (!mad::FlushTransmit(transport_, agent_).ok()) ++send_errors_;
}

// ---------------------------------------------------------------- SimSa

absl::StatusOr<std::unique_ptr<SimSa>> SimSa::Create(sim::Fabric& fabric, SimSaConfig config) {
  const sim::Endpoint* sm = fabric.FindByLid(fabric.sm_lid());
  if (sm == nullptr) {
    return absl::FailedPreconditionError("the fabric has no SM port to run the SA on");
  }
  auto transport = fabric.Open(sm->node_id, sm->port);
  if (!transport.ok()) return transport.status();
  return std::unique_ptr<SimSa>(new SimSa(fabric, std::move(*transport), std::move(config)));
}

SimSa::SimSa(sim::Fabric& fabric, std::unique_ptr<sim::SimTransport> transport,
             SimSaConfig config)
    : fabric_(fabric), transport_(std::move(transport)), config_(std::move(config)) {
  mad::AgentConfig ac = mad::ConfigFor(*transport_, config_.agent);
  agent_ = std::make_unique<mad::Agent>(ac, fabric_.scheduler().Now());
  agent_->RegisterHandler(0x03, mad::kAnyAttribute, this);
  sim::SimTransport* t = transport_.get();
  actor_ = std::make_unique<AgentActor>(*transport_, *agent_,
                                        [t] { return t->pending() > 0; });
  fabric_.scheduler().AddActor(actor_.get());
}

SimSa::~SimSa() {
  if (busy_) fabric_.scheduler().Cancel(service_event_);
  fabric_.scheduler().RemoveActor(actor_.get());
}

size_t SimSa::members(const Gid& mgid) const {
  auto it = groups_.find(mgid);
  return it == groups_.end() ? 0 : it->second.members.size();
}

void SimSa::OnMad(TimePoint now, const mad::ReceivedMad& mad) {
  if (config_.service_time <= mad::Duration::Zero()) return Serve(now, mad);
  if (config_.queue_limit != 0 && queue_.size() >= config_.queue_limit) {
    ++counters_.dropped;
    return;
  }
  Queued& q = queue_.emplace_back();
  q.arrived = now;
  q.from = mad.from;
  q.len = static_cast<uint16_t>(std::min(mad.data.size(), q.data.size()));
  std::copy_n(mad.data.begin(), q.len, q.data.begin());
  counters_.max_queue = std::max(counters_.max_queue, queue_.size());
  if (!busy_) StartService(now);
}

void SimSa::StartService(TimePoint now) {
  busy_ = true;
  ++counters_.served;
  counters_.wait_ns_total += (now - queue_.front().arrived).nanos();
  service_event_ =
      fabric_.scheduler().Schedule(now + config_.service_time, [this] { CompleteService(); });
}

void SimSa::CompleteService() {
  const TimePoint now = fabric_.scheduler().Now();
  const Queued q = queue_.front();
  queue_.pop_front();
  busy_ = false;
  Serve(now, mad::ReceivedMad{q.from, std::span<const uint8_t>(q.data.data(), q.len)});
  if (!queue_.empty()) StartService(now);
}

void SimSa::Serve(TimePoint now, const mad::ReceivedMad& mad) {
  auto h = mad::wire::MadHeader::Parse(mad.data);
  if (!h.ok()) return;
  ++counters_.requests;
  if (counters_.busy < static_cast<uint64_t>(std::max(config_.busy_answers, 0))) {
    ++counters_.busy;
    Reply(mad, h->method == kSet ? kGetResp : h->method | 0x80, mad::wire::kStatusBusy, {}, 0);
    return;
  }
  switch (h->attribute_id) {
    case PathRecord::kAttributeId: return OnPathRecord(now, mad, h->method);
    case McMemberRecord::kAttributeId: return OnMcMember(now, mad, h->method);
    case ClassPortInfo::kAttributeId: return OnClassPortInfo(now, mad, h->method);
    default: return ReplyError(now, mad, kMethodAttrUnsupported);
  }
}

// ----- answers

void SimSa::Reply(const mad::ReceivedMad& req, uint8_t method, uint16_t status,
                  std::span<const uint8_t> record, size_t record_bytes) {
  Mad m{};
  std::memcpy(m.data(), req.data.data(), std::min(req.data.size(), size_t{56}));
  m[3] = method;
  m[4] = static_cast<uint8_t>(status >> 8);
  m[5] = static_cast<uint8_t>(status);
  std::fill(m.begin() + 24, m.begin() + 44, 0);  // RMPP header, SM_Key
  m[44] = 0;
  m[45] = static_cast<uint8_t>((record_bytes + 7) / 8);
  if (!record.empty()) {
    std::memcpy(&m[56], record.data(), std::min(record.size(), size_t{200}));
  } else if (status != 0 && req.data.size() >= 256) {
    std::memcpy(&m[56], &req.data[56], 200);  // errors echo the request's record
  }
  if (status != 0) ++counters_.errors;
  (void)agent_->SendUntracked(ReplyTo(req.from), m);
}

void SimSa::ReplyTable(TimePoint now, const mad::ReceivedMad& req, uint16_t status,
                       std::span<const uint8_t> payload, uint16_t attribute_offset) {
  std::array<uint8_t, 56> header{};
  std::memcpy(header.data(), req.data.data(), 56);
  header[3] = kGetTableResp;
  header[4] = static_cast<uint8_t>(status >> 8);
  header[5] = static_cast<uint8_t>(status);
  std::fill(header.begin() + 36, header.begin() + 44, 0);  // SM_Key
  header[44] = static_cast<uint8_t>(attribute_offset >> 8);
  header[45] = static_cast<uint8_t>(attribute_offset);
  if (status != 0) ++counters_.errors;
  ++counters_.tables;
  // AlreadyExists: a retransmitted GetTable whose transfer is still running.
  (void)agent_->SendRmpp(now, ReplyTo(req.from), header, payload);
}

void SimSa::ReplyError(TimePoint now, const mad::ReceivedMad& req, uint16_t status) {
  const uint8_t method = req.data[3];
  if (method == kGetTable) return ReplyTable(now, req, status, {}, 0);
  Reply(req, method == kSet ? kGetResp : method | 0x80, status, {}, 0);
}

// ----- PathRecord

absl::StatusOr<std::vector<PathRecord>> SimSa::FindPaths(const PathRecord& q,
                                                         PathRecordMask mask,
                                                         uint16_t* status) const {
  // The endpoints matching a GID and / or LID, in fabric order. A GID or a
  // LID names at most one endpoint, found through the fabric's indexes (a
  // query costs the same on 10,000 hosts as on 2); neither: all of them.
  auto matching = [&](bool by_gid, const mad::Gid& gid, bool by_lid, uint16_t lid) {
    std::vector<const sim::Endpoint*> out;
    if (by_gid || by_lid) {
      const sim::Endpoint* ep = by_gid ? fabric_.FindByGid(gid) : fabric_.FindByLid(lid);
      if (ep != nullptr && (!by_lid || ep->lid == lid)) out.push_back(ep);
      return out;
    }
    for (const sim::Endpoint& ep : fabric_.endpoints()) out.push_back(&ep);
    return out;
  };
  const std::vector<const sim::Endpoint*> srcs =
      matching(mask.Has(PathRecordMask::kSgid), q.sgid, mask.Has(PathRecordMask::kSlid), q.slid);
  const std::vector<const sim::Endpoint*> dsts =
      matching(mask.Has(PathRecordMask::kDgid), q.dgid, mask.Has(PathRecordMask::kDlid), q.dlid);
  if ((mask.Has(PathRecordMask::kSgid) && fabric_.FindByGid(q.sgid) == nullptr) ||
      (mask.Has(PathRecordMask::kDgid) && fabric_.FindByGid(q.dgid) == nullptr)) {
    *status = kInvalidGid;
    return absl::NotFoundError("unknown GID");
  }
  const std::vector<uint16_t>& pkeys =
      fabric_.LocalPortOf(fabric_.endpoints().front()).pkeys;
  uint16_t pkey = pkeys.empty() ? 0xFFFF : pkeys.front();
  if (mask.Has(PathRecordMask::kPKey)) {
    if (std::none_of(pkeys.begin(), pkeys.end(),
                     [&](uint16_t p) { return PkeyMatches(p, q.pkey); })) {
      return std::vector<PathRecord>{};
    }
    pkey = q.pkey;
  }
  std::vector<PathRecord> out;
  for (const sim::Endpoint* s : srcs) {
    for (const sim::Endpoint* d : dsts) {
      auto p = fabric_.Path(s->lid, d->lid);
      if (!p.ok() || !p->all_links_up) continue;
      PathRecord r;
      if (mask.Has(PathRecordMask::kServiceId)) r.service_id = q.service_id;
      r.dgid = d->gid;
      r.sgid = s->gid;
      r.dlid = d->lid;
      r.slid = s->lid;
      if (mask.Has(PathRecordMask::kFlowLabel)) r.flow_label = q.flow_label;
      if (mask.Has(PathRecordMask::kHopLimit)) r.hop_limit = q.hop_limit;
      if (mask.Has(PathRecordMask::kTClass)) r.tclass = q.tclass;
      if (mask.Has(PathRecordMask::kQosClass)) r.qos_class = q.qos_class;
      r.reversible = true;
      r.pkey = pkey;
      r.sl = p->sl;
      r.mtu_selector = Selector::kExactly;
      r.mtu = static_cast<mad::wire::Mtu>(p->mtu);
      r.rate_selector = Selector::kExactly;
      r.rate = p->rate;
      r.packet_life_time_selector = Selector::kExactly;
      r.packet_life_time = config_.packet_life_time;
      if (mask.Has(PathRecordMask::kSl) && q.sl != r.sl) continue;
      if (mask.Has(PathRecordMask::kMtu) &&
          !Satisfies(mask.Has(PathRecordMask::kMtuSelector) ? q.mtu_selector : Selector::kExactly,
                     p->mtu, static_cast<int>(q.mtu))) {
        continue;
      }
      if (mask.Has(PathRecordMask::kRate) &&
          !Satisfies(mask.Has(PathRecordMask::kRateSelector) ? q.rate_selector
                                                              : Selector::kExactly,
                     p->rate, q.rate)) {
        continue;
      }
      if (mask.Has(PathRecordMask::kPacketLifeTime) &&
          !Satisfies(mask.Has(PathRecordMask::kPacketLifeTimeSelector)
                         ? q.packet_life_time_selector
                         : Selector::kExactly,
                     r.packet_life_time, q.packet_life_time)) {
        continue;
      }
      out.push_back(r);
    }
  }
  return out;
}

void SimSa::OnPathRecord(TimePoint now, const mad::ReceivedMad& mad, uint8_t method) {
  if (method != kGet && method != kGetTable) return ReplyError(now, mad, kMethodAttrUnsupported);
  auto req = SaRecordMad<PathRecord>::Parse(mad.data);
  if (!req.ok()) return ReplyError(now, mad, kInvalidValue);
  uint16_t status = 0;
  auto paths = FindPaths(req->record, req->component_mask, &status);
  if (!paths.ok()) return ReplyError(now, mad, status);
  if (method == kGet) {
    if (paths->empty()) return ReplyError(now, mad, kNoRecords);
    if (paths->size() > 1) return ReplyError(now, mad, kTooManyRecords);
    std::array<uint8_t, PathRecord::kBytes> rec{};
    (void)(*paths)[0].Emit(rec);
    return Reply(mad, kGetResp, 0, rec, PathRecord::kBytes);
  }
  std::vector<uint8_t> payload(paths->size() * PathRecord::kBytes);
  for (size_t i = 0; i < paths->size(); ++i) {
    (void)(*paths)[i].Emit(std::span(payload).subspan(i * PathRecord::kBytes, PathRecord::kBytes));
  }
  ReplyTable(now, mad, 0, payload, paths->empty() ? 0 : PathRecord::kBytes / 8);
}

// ----- MCMemberRecord

uint16_t SimSa::Join(const McMemberRecord& q, McMemberRecordMask mask, McMemberRecord* out) {
  if (!mask.Has(McMemberRecordMask::kMgid | McMemberRecordMask::kPortGid |
                McMemberRecordMask::kJoinState)) {
    return kInsufficientComponents;
  }
  const uint8_t state = q.join_state.bits() & 0xF;
  if (state == 0 || fabric_.FindByGid(q.port_gid) == nullptr) return kReqInvalid;
  auto it = q.mgid.is_zero() ? groups_.end() : groups_.find(q.mgid);
  if (it == groups_.end()) {
    if ((state & kCreators) == 0) return kReqInvalid;
    if (!mask.Has(McMemberRecordMask::kQKey | McMemberRecordMask::kTClass |
                  McMemberRecordMask::kPKey | McMemberRecordMask::kSl |
                  McMemberRecordMask::kFlowLabel)) {
      return kInsufficientComponents;
    }
    Gid mgid = q.mgid;
    if (mgid.is_zero()) {
      const uint8_t scope = mask.Has(McMemberRecordMask::kScope)
                                ? static_cast<uint8_t>(q.scope)
                                : static_cast<uint8_t>(mad::wire::McScope::kLinkLocal);
      const uint64_t prefix = q.port_gid.subnet_prefix();
      mgid.raw[0] = 0xFF;
      mgid.raw[1] = static_cast<uint8_t>(0x10 | (scope & 0xF));
      mgid.raw[2] = 0xA0;
      mgid.raw[3] = 0x1B;
      for (int i = 0; i < 8; ++i) mgid.raw[4 + i] = static_cast<uint8_t>(prefix >> (56 - 8 * i));
      const uint32_t n = next_mgid_++;
      for (int i = 0; i < 4; ++i) mgid.raw[12 + i] = static_cast<uint8_t>(n >> (24 - 8 * i));
    } else if (mgid.raw[0] != 0xFF) {
      return kReqInvalid;  // not a multicast GID
    }
    const int port_mtu = fabric_.Path(fabric_.sm_lid(), fabric_.sm_lid()).ok()
                             ? fabric_.Path(fabric_.sm_lid(), fabric_.sm_lid())->mtu
                             : 4;
    int mtu = port_mtu;
    if (mask.Has(McMemberRecordMask::kMtu)) {
      mtu = Choose(mask.Has(McMemberRecordMask::kMtuSelector) ? q.mtu_selector : Selector::kExactly,
                   static_cast<int>(q.mtu), port_mtu);
      if (mtu == 0) return kReqInvalid;
    }
    int rate = config_.default_mc_rate;
    if (mask.Has(McMemberRecordMask::kRate)) {
      rate = Choose(mask.Has(McMemberRecordMask::kRateSelector) ? q.rate_selector
                                                                : Selector::kExactly,
                    q.rate, 63);
      if (rate == 0) return kReqInvalid;
    }
    uint16_t mlid = next_mlid_;
    while (mlids_.contains(mlid)) {
      if (++mlid == 0xFFFF) mlid = 0xC000;
      if (mlid == next_mlid_) return kNoResources;
    }
    mlids_.insert(mlid);
    next_mlid_ = mlid == 0xFFFE ? 0xC000 : mlid + 1;
    Group g;
    McMemberRecord& r = g.record;
    r.mgid = mgid;
    r.qkey = q.qkey;
    r.mlid = mlid;
    r.mtu_selector = Selector::kExactly;
    r.mtu = static_cast<mad::wire::Mtu>(mtu);
    r.tclass = q.tclass;
    r.pkey = q.pkey;
    r.rate_selector = Selector::kExactly;
    r.rate = static_cast<uint8_t>(rate);
    r.packet_life_time_selector = Selector::kExactly;
    r.packet_life_time = config_.packet_life_time;
    r.sl = q.sl;
    r.flow_label = q.flow_label;
    r.hop_limit = mask.Has(McMemberRecordMask::kHopLimit) ? q.hop_limit : 0;
    r.scope = static_cast<mad::wire::McScope>(mgid.raw[1] & 0xF);
    it = groups_.emplace(mgid, std::move(g)).first;
  } else {
    const McMemberRecord& g = it->second.record;
    if (mask.Has(McMemberRecordMask::kQKey) && q.qkey != g.qkey) return kReqInvalid;
    if (mask.Has(McMemberRecordMask::kPKey) && !PkeyMatches(q.pkey, g.pkey)) return kReqInvalid;
    if (mask.Has(McMemberRecordMask::kMtu) &&
        !Satisfies(mask.Has(McMemberRecordMask::kMtuSelector) ? q.mtu_selector
                                                              : Selector::kExactly,
                   static_cast<int>(g.mtu), static_cast<int>(q.mtu))) {
      return kReqInvalid;
    }
    if (mask.Has(McMemberRecordMask::kRate) &&
        !Satisfies(mask.Has(McMemberRecordMask::kRateSelector) ? q.rate_selector
                                                               : Selector::kExactly,
                   g.rate, q.rate)) {
      return kReqInvalid;
    }
  }
  uint8_t& member = it->second.members[q.port_gid];
  member |= state;
  *out = it->second.record;
  out->port_gid = q.port_gid;
  out->join_state = JoinState(member);
  return 0;
}

uint16_t SimSa::Leave(const McMemberRecord& q, McMemberRecordMask mask, McMemberRecord* out) {
  if (!mask.Has(McMemberRecordMask::kMgid | McMemberRecordMask::kPortGid |
                McMemberRecordMask::kJoinState)) {
    return kInsufficientComponents;
  }
  auto it = groups_.find(q.mgid);
  if (it == groups_.end()) return kReqInvalid;
  auto m = it->second.members.find(q.port_gid);
  if (m == it->second.members.end()) return kReqInvalid;
  const uint8_t bits = q.join_state.bits() & 0xF;
  *out = it->second.record;
  out->port_gid = q.port_gid;
  out->join_state = JoinState(bits);
  m->second &= static_cast<uint8_t>(~bits);
  if (m->second == 0) it->second.members.erase(m);
  const bool creators_left =
      std::any_of(it->second.members.begin(), it->second.members.end(),
                  [](const auto& kv) { return (kv.second & kCreators) != 0; });
  if (!creators_left) {
    mlids_.erase(it->second.record.mlid);
    groups_.erase(it);
  }
  return 0;
}

std::vector<McMemberRecord> SimSa::FindMembers(const McMemberRecord& q,
                                               McMemberRecordMask mask) const {
  std::vector<McMemberRecord> out;
  for (const auto& [mgid, g] : groups_) {
    if (mask.Has(McMemberRecordMask::kMgid) && mgid != q.mgid) continue;
    if (mask.Has(McMemberRecordMask::kMlid) && g.record.mlid != q.mlid) continue;
    if (mask.Has(McMemberRecordMask::kQKey) && g.record.qkey != q.qkey) continue;
    if (mask.Has(McMemberRecordMask::kPKey) && !PkeyMatches(g.record.pkey, q.pkey)) continue;
    for (const auto& [port, state] : g.members) {
      if (mask.Has(McMemberRecordMask::kPortGid) && port != q.port_gid) continue;
      if (mask.Has(McMemberRecordMask::kJoinState) && (state & q.join_state.bits()) == 0) {
        continue;
      }
      McMemberRecord r = g.record;
      r.port_gid = port;
      r.join_state = JoinState(state);
      out.push_back(r);
    }
  }
  return out;
}

void SimSa::OnMcMember(TimePoint now, const mad::ReceivedMad& mad, uint8_t method) {
  auto req = SaRecordMad<McMemberRecord>::Parse(mad.data);
  if (!req.ok()) return ReplyError(now, mad, kInvalidValue);
  std::array<uint8_t, McMemberRecord::kBytes> rec{};
  McMemberRecord out;
  switch (method) {
    case kSet:
    case kDelete: {
      const uint16_t status = method == kSet ? Join(req->record, req->component_mask, &out)
                                             : Leave(req->record, req->component_mask, &out);
      const uint8_t resp = method == kSet ? kGetResp : kDeleteResp;
      if (status != 0) return Reply(mad, resp, status, {}, 0);
      (void)out.Emit(rec);
      return Reply(mad, resp, 0, rec, McMemberRecord::kBytes);
    }
    case kGet: {
      auto found = FindMembers(req->record, req->component_mask);
      if (found.empty()) return ReplyError(now, mad, kNoRecords);
      if (found.size() > 1) return ReplyError(now, mad, kTooManyRecords);
      (void)found[0].Emit(rec);
      return Reply(mad, kGetResp, 0, rec, McMemberRecord::kBytes);
    }
    case kGetTable: {
      auto found = FindMembers(req->record, req->component_mask);
      std::vector<uint8_t> payload(found.size() * kMcStride);
      for (size_t i = 0; i < found.size(); ++i) {
        (void)found[i].Emit(std::span(payload).subspan(i * kMcStride, McMemberRecord::kBytes));
      }
      return ReplyTable(now, mad, 0, payload, found.empty() ? 0 : kMcStride / 8);
    }
    default:
      return ReplyError(now, mad, kMethodAttrUnsupported);
  }
}

// ----- ClassPortInfo

void SimSa::OnClassPortInfo(TimePoint now, const mad::ReceivedMad& mad, uint8_t method) {
  if (method != kGet) return ReplyError(now, mad, kMethodAttrUnsupported);
  ClassPortInfo cpi;
  cpi.base_version = 1;
  cpi.class_version = 2;
  cpi.capability_mask =
      mad::wire::kCapIsCapabilityMask2Supported | mad::wire::kCapIsGetSetSupported;
  cpi.capability_mask2 =
      config_.send_only_full_member ? mad::wire::kSaCap2SendOnlyFullMemberSupported : 0;
  cpi.resp_time_value = config_.resp_time_value;
  std::array<uint8_t, ClassPortInfo::kBytes> rec{};
  (void)cpi.Emit(rec);
  Reply(mad, kGetResp, 0, rec, ClassPortInfo::kBytes);
}

}  // namespace uscm::sa
