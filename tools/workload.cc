#include "tools/workload.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "mad/wire/cm_rej.h"

namespace uscm::tools {
namespace {

constexpr uint16_t kAttrReq = 0x0010;
constexpr uint16_t kAttrRep = 0x0013;
constexpr uint32_t kEceVendor = 0x15B3;

uint16_t AttrOf(std::span<const uint8_t> mad) { return uint16_t{mad[16]} << 8 | mad[17]; }
uint32_t Be32(std::span<const uint8_t> mad, size_t at) {
  return uint32_t{mad[at]} << 24 | uint32_t{mad[at + 1]} << 16 | uint32_t{mad[at + 2]} << 8 |
         mad[at + 3];
}
uint64_t Key(cm::ConnId id) { return uint64_t{id.index} << 32 | id.generation; }

class Workload {
 public:
  Workload(SimWorld& world, const WorkloadOptions& o, std::function<void(int, int)> progress)
      : world_(world),
        o_(o),
        progress_(std::move(progress)),
        procs_(world.procs_per_host()),
        hosts_(world.hosts().size() / procs_) {
    results_.resize(o.connections);
    active_.resize(world.hosts().size());
    started_.resize(o.connections);
    settled_flag_.resize(o.connections);
  }

  // Client and server process of every connection, fixed before the run:
  // the pattern picks the hosts; each host hands its connections' client
  // ends to its processes in turn, and its server ends likewise.
  void PlanPairs() {
    std::vector<size_t> next_client(hosts_), next_server(hosts_);
    pairs_.resize(o_.connections);
    sim::Rng rng(o_.seed ^ 0x70a17e5ULL);
    const size_t g = o_.group >= 2 && static_cast<size_t>(o_.group) < hosts_
                         ? static_cast<size_t>(o_.group)
                         : hosts_;
    for (int k = 0; k < o_.connections; ++k) {
      const size_t uk = static_cast<size_t>(k);
      size_t c = 0, s = 1;
      if (!o_.spread) {
        // host 0 -> host 1
      } else if (o_.pattern == WorkloadOptions::Pattern::kRing) {
        c = uk % hosts_;
        s = (uk + 1) % hosts_;
      } else if (o_.pattern == WorkloadOptions::Pattern::kAllToAll) {
        const size_t pair = uk % (g * (g - 1));
        c = pair / (g - 1);
        const size_t other = pair % (g - 1);
        s = other < c ? other : other + 1;
      } else if (o_.pattern == WorkloadOptions::Pattern::kIncast) {
        c = 1 + uk % (hosts_ - 1);
        s = 0;
      } else {
        c = rng.Below(hosts_);
        s = (c + 1 + rng.Below(hosts_ - 1)) % hosts_;
      }
      pairs_[uk] = {c * procs_ + next_client[c]++ % procs_,
                    s * procs_ + next_server[s]++ % procs_};
    }
  }

  // Start times relative to t0.
  std::vector<mad::Duration> PlanStarts() {
    std::vector<mad::Duration> at(o_.connections);
    sim::Rng rng(o_.seed ^ 0xa771e5ULL);
    double t_ns = 0;
    for (int k = 0; k < o_.connections; ++k) {
      switch (o_.arrivals) {
        case WorkloadOptions::Arrivals::kFixed:
          at[k] = o_.interval * k;
          break;
        case WorkloadOptions::Arrivals::kStorm:
          at[k] = mad::Duration::Zero();
          break;
        case WorkloadOptions::Arrivals::kPoisson:
          if (k > 0) t_ns += -std::log1p(-rng.Uniform01()) * o_.interval.nanos();
          at[k] = mad::Duration::Nanos(static_cast<int64_t>(t_ns));
          break;
      }
    }
    return at;
  }

  absl::StatusOr<WorkloadResult> Run() {
    auto& hosts = world_.hosts();
    if (hosts_ < 2) return absl::InvalidArgumentError("the workload needs two hosts");
    for (size_t i = 0; i < hosts.size(); ++i) {
      SimHost& h = *hosts[i];
      // Each process of a host listens on its own service ID (the router
      // hands it the REQs for it).
      if (absl::Status c = h.ClaimService(ServiceOf(i)); !c.ok()) return c;
      auto l = h.cm().Listen(ServiceOf(i), ~0ULL, 1024, false);
      if (!l.ok()) return l.status();
      h.on_cm_event = [this, i](SimHost& host, TimePoint now, const cm::CmEvent& e) {
        OnCm(i, host, now, e);
      };
      h.on_sa_result = [this, i](SimHost& host, TimePoint now, sa::SaResult r) {
        OnPath(i, host, now, std::move(r));
      };
      h.on_cm_sent = [this](std::span<const uint8_t> mad) { OnSent(mad); };
    }
    // Read once: a host's port lives in its QP's cold lines.
    gids_.reserve(hosts.size());
    for (const auto& h : hosts) gids_.push_back(h->port().gid);
    const TimePoint t0 = world_.scheduler().Now();
    PlanPairs();
    const std::vector<mad::Duration> starts = PlanStarts();
    for (int k = 0; k < o_.connections; ++k) {
      world_.scheduler().Schedule(t0 + starts[k], [this, k] { Start(k); });
    }
    // Sampling only reads counters: the run is the same with or without it.
    if (o_.sample_interval > mad::Duration::Zero()) {
      world_.scheduler().Schedule(t0, [this, t0] { TakeSample(t0); });
    }
    absl::Status s = world_.scheduler().RunUntil(
        [this] { return settled_ == o_.connections || !error_.ok(); },
        t0 + mad::Duration::Seconds(3600), 100'000'000);
    if (!error_.ok()) return error_;
    if (!s.ok()) {
      std::string stuck;
      for (int k = 0; k < o_.connections && stuck.size() < 300; ++k) {
        if (!settled_flag_[k]) absl::StrAppend(&stuck, " #", k, "(", Where(k), ")");
      }
      return absl::DeadlineExceededError(absl::StrCat(settled_, " of ", o_.connections,
                                                      " connections settled (stuck:", stuck,
                                                      "): ", s.message()));
    }
    WorkloadResult r;
    r.elapsed = last_settled_ - t0;
    s = world_.scheduler().RunUntilIdle(100'000'000);
    if (!s.ok()) return s;
    r.conns = std::move(results_);
    r.samples = std::move(samples_);
    const auto& c = world_.fabric().counters();
    r.fabric_sent = c.sent;
    r.fabric_dropped = c.total_dropped();
    r.fabric_duplicated = c.duplicated;
    for (auto& h : hosts) {
      const mad::AgentCounters& ac = h->agent().counters();
      const sa::SaClientCounters& sc = h->sa().counters();
      r.sa_retries += ac.retries;
      r.sa_queries += sc.queries;
      r.sa_coalesced += sc.coalesced;
      r.sa_superseded += sc.superseded;
      r.sa_slots_released += ac.slots_released;
      r.path_cache_hits += sc.cache_hits;
      r.sa_on_wire += sc.queries - sc.coalesced + sc.superseded;
    }
    if (!hosts.empty()) {
      if (const mad::RtoEstimator* e = hosts[0]->agent().Rto(sa::SaAddressFor(hosts[0]->port()))) {
        r.sa_rto = e->rto();
        r.sa_srtt = e->srtt();
        r.sa_rttvar = e->rttvar();
      }
    }
    return r;
  }

 private:
  void TakeSample(TimePoint t0) {
    const TimePoint now = world_.scheduler().Now();
    Sample s;
    s.t_ms = (now - t0).millis();
    s.settled = settled_;
    s.sa_queue = world_.sa().queue_depth();
    s.sa_dropped = world_.sa().counters().dropped;
    for (const auto& h : world_.hosts()) {
      s.sa_retries += h->agent().counters().retries;
      for (uint64_t n : h->cm().counters().retransmitted) s.cm_retransmissions += n;
    }
    samples_.push_back(s);
    if (settled_ < o_.connections && error_.ok()) {
      world_.scheduler().Schedule(now + o_.sample_interval, [this, t0] { TakeSample(t0); });
    }
  }

  // Indexes into world_.hosts() (processes).
  size_t ClientOf(int k) const { return pairs_[k].first; }
  size_t ServerOf(int k) const { return pairs_[k].second; }
  // The service ID process `proc` listens on: the option's, plus the
  // process's index on its host.
  uint64_t ServiceOf(size_t proc) const { return o_.service_id + proc % procs_; }

  void Start(int k) {
    WarmNextClients(k);
    SimHost& c = *world_.hosts()[ClientOf(k)];
    SimHost& s = *world_.hosts()[ServerOf(k)];
    results_[k].index = k;
    results_[k].client = c.name();
    results_[k].server = s.name();
    started_[k] = world_.scheduler().Now();
    auto q = c.sa().GetPath(started_[k], sa::PathQuery::RdmaCm(gids_[ClientOf(k)],
                                                               gids_[ServerOf(k)],
                                                               0xFFFF,
                                                               ServiceOf(ServerOf(k))));
    if (!q.ok()) return Settle(k, std::string(q.status().message()));
    path_queries_[{ClientOf(k), *q}] = k;
    c.Touch();
  }

  // Connections start in index order (PlanStarts): while connection k
  // starts, k + 1's client gets its endpoints warmed and k + 2's its own
  // lines (SimHost::Warm's two steps), so that with thousands of hosts a
  // start does not find its client cold. Only prefetches.
  void WarmNextClients(int k) {
    if (!world_.warm_hosts()) return;
    const auto& hosts = world_.hosts();
    if (k + 1 < o_.connections) hosts[ClientOf(k + 1)]->Warm(sim::WarmStage::kParts);
    if (k + 2 < o_.connections) hosts[ClientOf(k + 2)]->Warm(sim::WarmStage::kObject);
  }

  void OnPath(size_t i, SimHost& h, TimePoint now, sa::SaResult r) {
    auto it = path_queries_.find(std::make_pair(i, r.id));
    if (it == path_queries_.end()) return;
    int k = it->second;
    path_queries_.erase(it);
    if (!r.status.ok()) return Settle(k, absl::StrCat("path query: ", r.status.message()));
    cm::ConnectParams p;
    p.service_id = ServiceOf(ServerOf(k));
    p.primary = PathFromRecord(r.paths[0]);
    if (o_.profile.packet_life_time) p.primary.packet_life_time = *o_.profile.packet_life_time;
    if (o_.profile.local_ack_timeout) p.primary.local_ack_timeout = *o_.profile.local_ack_timeout;
    p.remote_cm_response_timeout = o_.profile.response_timeout;
    p.local_cm_response_timeout = o_.profile.response_timeout;
    p.max_cm_retries = o_.max_cm_retries;
    p.qpn = 0x100 + static_cast<uint32_t>(k % 0xFFFF00);
    p.starting_psn = static_cast<uint32_t>(k) & 0xFFFFFF;
    p.responder_resources = 4;
    p.initiator_depth = 4;
    p.private_data = o_.private_data;
    if (o_.ece) p.ece = cm::Ece{kEceVendor, 1};
    auto id = h.cm().Connect(now, p);
    if (!id.ok()) return Settle(k, absl::StrCat("connect: ", id.status().message()));
    active_[i][Key(*id)] = k;
    if (auto cid = h.cm().LocalCommId(*id); cid.ok()) by_comm_id_[*cid] = k;
  }

  void OnSent(std::span<const uint8_t> mad) {
    uint16_t attr = AttrOf(mad);
    if (attr != kAttrReq && attr != kAttrRep) return;
    // REQ: LocalCommID at MAD byte 24; REP: RemoteCommID (the active side's) at 28.
    auto it = by_comm_id_.find(Be32(mad, attr == kAttrReq ? 24 : 28));
    if (it == by_comm_id_.end()) return;
    int& n = attr == kAttrReq ? req_sends_[it->second] : rep_sends_[it->second];
    if (++n > 1) ++results_[it->second].retransmissions;
  }

  void OnCm(size_t i, SimHost& h, TimePoint now, const cm::CmEvent& e) {
    auto& active = active_[i];
    auto it = active.find(Key(e.conn));
    const bool is_active = it != active.end();
    switch (e.type) {
      case cm::CmEventType::kConnectRequest: {
        static constexpr uint8_t kReply[] = "uscm ping reply";
        if (o_.reject) {
          (void)h.cm().Reject(now, e.conn, mad::wire::RejReason::kConsumerReject, kReply);
          (void)h.cm().Destroy(now, e.conn);
        } else {
          cm::AcceptParams ap;
          ap.qpn = 0x800000 + (next_passive_qpn_++ & 0x7FFFFF);  // distinct per connection
          ap.responder_resources = 4;
          ap.initiator_depth = 4;
          if (o_.ece) ap.ece_options = e.remote_ece.options;
          ap.private_data.assign(kReply, kReply + sizeof(kReply) - 1);
          (void)h.cm().Accept(now, e.conn, ap);
        }
        return;
      }
      case cm::CmEventType::kConnectResponse:
        if (is_active) (void)h.cm().Rtu(now, e.conn);
        return;
      case cm::CmEventType::kEstablished:
        if (!is_active) return;
        results_[it->second].established = true;
        Settle(it->second, "", now);
        if (o_.disconnect) (void)h.cm().Disconnect(now, e.conn);
        return;
      case cm::CmEventType::kRejected:
        if (!is_active) return;
        results_[it->second].rejected = true;
        Settle(it->second, o_.reject ? "" : absl::StrCat("rejected, reason ", e.status), now);
        (void)h.cm().Destroy(now, e.conn);
        active.erase(it);
        return;
      case cm::CmEventType::kUnreachable:
      case cm::CmEventType::kConnectError:
        if (!is_active) return;
        Settle(it->second, absl::StrCat(cm::CmEventTypeName(e.type), " status ", e.status), now);
        (void)h.cm().Destroy(now, e.conn);
        active.erase(it);
        return;
      case cm::CmEventType::kDisconnected:
        if (!is_active) (void)h.cm().Disconnect(now, e.conn);  // DREQ in: answer DREP
        return;
      case cm::CmEventType::kTimewaitExit:
        (void)h.cm().Destroy(now, e.conn);
        if (is_active) active.erase(it);
        return;
      default:
        return;
    }
  }

  // Where an unsettled connection is, for the error message.
  std::string Where(int k) const {
    for (const auto& [q, kk] : path_queries_) {
      if (kk == k) return "path query outstanding";
    }
    for (size_t i = 0; i < active_.size(); ++i) {
      for (const auto& [key, kk] : active_[i]) {
        if (kk != k) continue;
        cm::ConnId id{static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key)};
        auto st = world_.hosts()[i]->cm().State(id);
        return st.ok() ? cm::CmStateName(*st) : std::string(st.status().message());
      }
    }
    return started_[k] == TimePoint() && k > 0 ? "not started" : "no connection";
  }

  void Settle(int k, std::string error, absl::optional<TimePoint> now = absl::nullopt) {
    if (settled_flag_[k]) return;
    settled_flag_[k] = true;
    TimePoint t = now.value_or(world_.scheduler().Now());
    results_[k].setup_us = (t - started_[k]).micros();
    results_[k].error = std::move(error);
    last_settled_ = std::max(last_settled_, t);
    ++settled_;
    if (progress_) progress_(settled_, o_.connections);
  }

  SimWorld& world_;
  WorkloadOptions o_;
  std::function<void(int, int)> progress_;
  size_t procs_;  // processes per host
  size_t hosts_;  // CA ports
  std::vector<std::pair<size_t, size_t>> pairs_;  // (client, server) per connection
  std::vector<ConnResult> results_;
  std::vector<Sample> samples_;
  std::vector<TimePoint> started_;
  std::vector<mad::Gid> gids_;  // by host index: each host's port GID
  std::vector<bool> settled_flag_;
  absl::flat_hash_map<std::pair<size_t, uint64_t>, int> path_queries_;  // (host, query id)
  // Per host: its active-side connections (ConnId key -> connection).
  std::vector<absl::flat_hash_map<uint64_t, int>> active_;
  absl::flat_hash_map<uint32_t, int> by_comm_id_;
  absl::flat_hash_map<int, int> req_sends_, rep_sends_;
  uint32_t next_passive_qpn_ = 0;
  int settled_ = 0;
  TimePoint last_settled_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<WorkloadResult> RunWorkload(SimWorld& world, const WorkloadOptions& options,
                                           std::function<void(int, int)> progress) {
  if (options.connections < 1) return absl::InvalidArgumentError("need at least one connection");
  Workload w(world, options, std::move(progress));
  return w.Run();
}

bool CmProfileByName(absl::string_view name, CmProfile* out) {
  CmProfile p;
  p.name = std::string(name);
  if (name == "linux") {
    p.rounding = mad::IbaTimeRounding::kLinux;
  } else if (name == "lowlat") {
    p.response_timeout = 11;
    p.packet_life_time = 7;
    p.local_ack_timeout = 10;
  } else if (name != "spec") {
    return false;
  }
  *out = std::move(p);
  return true;
}

absl::string_view PatternName(WorkloadOptions::Pattern p) {
  switch (p) {
    case WorkloadOptions::Pattern::kRing: return "ring";
    case WorkloadOptions::Pattern::kAllToAll: return "all-to-all";
    case WorkloadOptions::Pattern::kIncast: return "incast";
    case WorkloadOptions::Pattern::kRandomPairs: return "random";
  }
  return "?";
}

absl::string_view ArrivalsName(WorkloadOptions::Arrivals a) {
  switch (a) {
    case WorkloadOptions::Arrivals::kFixed: return "fixed";
    case WorkloadOptions::Arrivals::kStorm: return "storm";
    case WorkloadOptions::Arrivals::kPoisson: return "poisson";
  }
  return "?";
}

bool ParsePattern(absl::string_view text, WorkloadOptions::Pattern* out) {
  for (auto p : {WorkloadOptions::Pattern::kRing, WorkloadOptions::Pattern::kAllToAll,
                 WorkloadOptions::Pattern::kIncast, WorkloadOptions::Pattern::kRandomPairs}) {
    if (text == PatternName(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

bool ParseArrivals(absl::string_view text, WorkloadOptions::Arrivals* out) {
  for (auto a : {WorkloadOptions::Arrivals::kFixed, WorkloadOptions::Arrivals::kStorm,
                 WorkloadOptions::Arrivals::kPoisson}) {
    if (text == ArrivalsName(a)) {
      *out = a;
      return true;
    }
  }
  return false;
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(q * sorted.size()));
  if (rank == 0) rank = 1;
  return sorted[std::min(rank, sorted.size()) - 1];
}

}  // namespace uscm::tools
