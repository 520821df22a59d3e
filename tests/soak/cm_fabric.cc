#include "tests/soak/cm_fabric.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/sim/topology.h"
#include "mad/wire/cm_message.h"
#include "mad/wire/cm_mra.h"

namespace uscm::soak {

using cm::CmEvent;
using cm::CmEventType;
using cm::ConnId;
using mad::wire::CmAttr;

namespace {

uint64_t Key(ConnId id) { return uint64_t{id.index} << 32 | id.generation; }

CmAttr AttrOf(const cm::OutgoingMad& m) {
  return static_cast<CmAttr>(uint16_t{m.mad[16]} << 8 | m.mad[17]);
}

// Per-hop probability so that two hops give `p` end to end.
double PerHop(double p) { return p <= 0 ? 0 : 1 - std::sqrt(1 - p); }

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ULL;
  void Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 0x100000001b3ULL;
    }
  }
};

}  // namespace

Profile LinuxProfile() {
  Profile p;
  p.name = "linux";
  return p;
}

Profile LowLatencyProfile() {
  Profile p;
  p.name = "lowlat";
  p.rounding = mad::IbaTimeRounding::kExact;
  p.packet_life_time = 7;             // 0.52 ms
  p.remote_cm_response_timeout = 11;  // 8.4 ms
  p.local_cm_response_timeout = 11;
  p.local_ack_timeout = 10;           // 4.2 ms: TimeWait
  p.max_cm_retries = 15;
  return p;
}

absl::StatusOr<Profile> ProfileByName(const std::string& name) {
  if (name == "linux") return LinuxProfile();
  if (name == "lowlat") return LowLatencyProfile();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown profile '", name, "' (linux, lowlat)"));
}

// ------------------------------------------------------------- middleware

bool TargetedDropper::OnSend(int, TimePoint now, cm::OutgoingMad& mad,
                             std::vector<cm::OutgoingMad>&) {
  if (AttrOf(mad) != attr_) return true;
  if (++seen_ != nth_) return true;
  dropped_at_ = now;
  return false;
}

bool CmParserRejects(std::span<const uint8_t> mad) {
  auto m = mad::wire::ParseAnyCm(mad);
  if (!m.ok()) return true;
  // The endpoint also refuses an MRA whose "message MRAed" is reserved.
  if (const auto* mra = std::get_if<mad::wire::MraRepr>(&*m)) {
    const auto v = static_cast<int>(mra->message_mraed);
    return v > static_cast<int>(mad::wire::MraMessage::kLap);
  }
  return false;
}

bool BitFlipper::OnSend(int, TimePoint, cm::OutgoingMad& mad,
                        std::vector<cm::OutgoingMad>& extra) {
  for (int i = 0; i < copies_; ++i) {
    cm::OutgoingMad copy = mad;
    const uint64_t bit = rng_.Below(mad::kMadSize * 8);
    copy.mad[bit / 8] ^= static_cast<uint8_t>(0x80 >> (bit % 8));
    ++flipped_;
    if (CmParserRejects(copy.mad)) ++detected_;
    extra.push_back(copy);
  }
  return true;
}

const char* ActiveOutcomeName(ActiveOutcome o) {
  switch (o) {
    case ActiveOutcome::kPending: return "pending";
    case ActiveOutcome::kEstablishedClosed: return "established+closed";
    case ActiveOutcome::kRejected: return "rejected";
    case ActiveOutcome::kTimeout: return "timeout";
    case ActiveOutcome::kAnomaly: return "anomaly";
  }
  return "?";
}

Duration Percentile(std::vector<Duration> v, double p) {
  if (v.empty()) return Duration::Zero();
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  return v[i];
}

// ------------------------------------------------------------------ hosts

class SoakFabric::Host final : public sim::Actor {
 public:
  Host(SoakFabric* f, int index, std::unique_ptr<sim::SimTransport> t,
       const cm::CmConfig& config, uint64_t seed)
      : f_(f),
        index_(index),
        transport_(std::move(t)),
        endpoint_(transport_->port(), config, seed) {}

  absl::optional<TimePoint> NextDeadline() const override {
    if (transport_->pending() > 0) return TimePoint::Epoch();  // due now
    return endpoint_.NextDeadline();
  }

  void Wake(TimePoint now) override {
    transport_->Drain([&](const mad::ReceivedMad& m) {
      endpoint_.HandleMad(now, m.from, m.data);
    });
    endpoint_.HandleTimeout(now);
    f_->Flush(index_, now);
  }

  sim::SimTransport& transport() { return *transport_; }
  cm::CmEndpoint& endpoint() { return endpoint_; }

 private:
  SoakFabric* f_;
  int index_;
  std::unique_ptr<sim::SimTransport> transport_;
  cm::CmEndpoint endpoint_;
};

SoakFabric::SoakFabric(const SoakOptions& o)
    : options_(o), scheduler_(o.seed) {}

SoakFabric::~SoakFabric() {
  for (auto& h : hosts_) scheduler_.RemoveActor(h.get());
}

absl::StatusOr<std::unique_ptr<SoakFabric>> SoakFabric::Create(const SoakOptions& o) {
  if (o.hosts < 2) return absl::InvalidArgumentError("need at least 2 hosts");
  std::unique_ptr<SoakFabric> f(new SoakFabric(o));
  if (absl::Status s = f->Init(); !s.ok()) return s;
  return f;
}

absl::Status SoakFabric::Init() {
  auto topo = sim::GenerateTopology(options_.hosts, 1);
  if (!topo.ok()) return topo.status();
  sim::FabricOptions fo;
  const LinkFaults& lf = options_.faults;
  fo.link.latency = lf.latency;
  fo.link.jitter = lf.jitter;
  fo.link.loss = PerHop(lf.loss);
  fo.link.duplicate = PerHop(lf.duplicate);
  fo.link.reorder = PerHop(lf.reorder);
  fo.link.reorder_delay = lf.reorder_delay;
  fo.receive_queue_depth = 1 << 16;
  if (absl::Status s = sim::ValidateLinkParams(fo.link); !s.ok()) return s;
  auto fabric = sim::Fabric::Create(scheduler_, *topo, fo);
  if (!fabric.ok()) return fabric.status();
  fabric_ = std::move(*fabric);

  cm::CmConfig config;
  config.rounding = options_.profile.rounding;
  config.backlog_overflow = options_.backlog_policy;
  conns_.resize(options_.hosts);
  max_conns_.assign(options_.hosts, 0);
  app_queue_.resize(options_.hosts);
  app_busy_.assign(options_.hosts, false);
  next_qpn_.assign(options_.hosts, 0x100);
  for (int i = 0; i < options_.hosts; ++i) {
    auto t = fabric_->Open(host_name(i));
    if (!t.ok()) return t.status();
    hosts_.push_back(std::make_unique<Host>(this, i, std::move(*t), config,
                                            scheduler_.rng().Next()));
    scheduler_.AddActor(hosts_.back().get());
    auto l = hosts_.back()->endpoint().Listen(kService, ~uint64_t{0},
                                              options_.backlog, false);
    if (!l.ok()) return l.status();
  }
  return absl::OkStatus();
}

std::string SoakFabric::host_name(int host) const {
  return absl::StrFormat("H-%016x", 0x100000 + 2 * host);  // GenerateTopology's CA ids
}

uint16_t SoakFabric::lid(int host) const {
  return hosts_[host]->transport().port().lid;
}

cm::CmEndpoint& SoakFabric::endpoint(int host) { return hosts_[host]->endpoint(); }
sim::SimTransport& SoakFabric::transport(int host) { return hosts_[host]->transport(); }

// --------------------------------------------------------------- workload

void SoakFabric::ScheduleAttempt(TimePoint at, int from, int to) {
  const int i = static_cast<int>(attempts_.size());
  Attempt& a = attempts_.emplace_back();
  a.from = from;
  a.to = to;
  scheduler_.Schedule(at, [this, i] { StartConnect(i, scheduler_.Now()); });
}

cm::ConnectParams SoakFabric::MakeConnect(int attempt) const {
  const Attempt& a = attempts_[attempt];
  const mad::LocalPort& lp = hosts_[a.from]->transport().port();
  const mad::LocalPort& rp = hosts_[a.to]->transport().port();
  const Profile& pr = options_.profile;
  cm::ConnectParams p;
  p.service_id = kService;
  p.primary.local_lid = lp.lid;
  p.primary.remote_lid = rp.lid;
  p.primary.local_gid = lp.gid;
  p.primary.remote_gid = rp.gid;
  p.primary.packet_life_time = pr.packet_life_time;
  p.primary.local_ack_timeout = pr.local_ack_timeout;
  p.starting_psn = static_cast<uint32_t>(attempt) & 0xFFFFFF;
  p.remote_cm_response_timeout = pr.remote_cm_response_timeout;
  p.local_cm_response_timeout = pr.local_cm_response_timeout;
  p.max_cm_retries = pr.max_cm_retries;
  p.private_data.resize(16);
  for (int i = 0; i < 8; ++i) p.private_data[i] = static_cast<uint8_t>(kToken >> (56 - 8 * i));
  for (int i = 0; i < 4; ++i) {
    p.private_data[8 + i] = static_cast<uint8_t>(static_cast<uint32_t>(attempt) >> (24 - 8 * i));
  }
  return p;
}

void SoakFabric::StartConnect(int attempt, TimePoint now) {
  Attempt& a = attempts_[attempt];
  if (a.tries++ == 0) a.started = now;
  cm::ConnectParams p = MakeConnect(attempt);
  p.qpn = NewQpn(a.from);
  auto id = hosts_[a.from]->endpoint().Connect(now, p);
  if (!id.ok()) {
    Anomaly(attempt, absl::StrCat("Connect: ", id.status().ToString()));
    return;
  }
  conns_[a.from][Key(*id)] = ConnRecord{attempt, false, false, false};
  Flush(a.from, now);
}

void SoakFabric::Anomaly(int attempt, std::string why) {
  if (attempt < 0) {
    ++passive_.anomaly;
    return;
  }
  Attempt& a = attempts_[attempt];
  a.outcome = ActiveOutcome::kAnomaly;
  if (a.anomaly.empty()) a.anomaly = std::move(why);
}

void SoakFabric::Flush(int host, TimePoint now) {
  cm::CmEndpoint& e = hosts_[host]->endpoint();
  sim::SimTransport& t = hosts_[host]->transport();
  std::vector<cm::OutgoingMad> extra;
  for (;;) {
    bool moved = false;
    CmEvent ev;
    while (e.PollEvent(&ev)) {
      moved = true;
      OnEvent(host, ev, now);
    }
    cm::OutgoingMad m;
    while (e.PollTransmit(&m)) {
      moved = true;
      extra.clear();
      if (filter_ != nullptr && !filter_->OnSend(host, now, m, extra)) continue;
      t.Send(m.to, m.mad).IgnoreError();  // a refused send is a lost MAD
      for (const cm::OutgoingMad& x : extra) t.Send(x.to, x.mad).IgnoreError();
    }
    if (!moved) break;
  }
  max_conns_[host] = std::max(max_conns_[host], e.connection_count());
}

void SoakFabric::Destroy(int host, ConnRecord& r, ConnId id, TimePoint now) {
  if (r.destroyed) return;
  r.destroyed = true;
  absl::Status s = hosts_[host]->endpoint().Destroy(now, id);
  if (!s.ok()) Anomaly(r.passive ? -1 : r.attempt, "Destroy: " + s.ToString());
  conns_[host].erase(Key(id));  // no events follow a Destroy
}

void SoakFabric::OnEvent(int host, const CmEvent& e, TimePoint now) {
  if (e.type == CmEventType::kConnectRequest) {
    ConnRecord r;
    r.passive = true;
    const auto pd = e.private_data.bytes();
    uint64_t token = 0;
    for (int i = 0; i < 8 && i < static_cast<int>(pd.size()); ++i) token = token << 8 | pd[i];
    if (token == kToken && pd.size() >= 12) {
      const uint32_t idx = uint32_t{pd[8]} << 24 | uint32_t{pd[9]} << 16 |
                           uint32_t{pd[10]} << 8 | pd[11];
      if (idx < attempts_.size()) r.attempt = static_cast<int>(idx);
    }
    ++passive_.connections;
    conns_[host][Key(e.conn)] = r;
    if (options_.app_service_time > Duration::Zero()) {
      app_queue_[host].push_back(e);
      max_app_queue_ = std::max(max_app_queue_, app_queue_[host].size());
      if (!app_busy_[host]) {
        app_busy_[host] = true;
        scheduler_.ScheduleIn(options_.app_service_time, [this, host] { ServeApp(host); });
      }
      return;
    }
    auto accept = [this, host, id = e.conn](TimePoint t) {
      if (!conns_[host].contains(Key(id))) return;  // ended meanwhile (REJ, ...)
      cm::AcceptParams ap;
      ap.qpn = NewQpn(host);
      ap.starting_psn = ap.qpn;
      if (absl::Status s = hosts_[host]->endpoint().Accept(t, id, ap); !s.ok()) {
        Anomaly(-1, "Accept: " + s.ToString());
      }
    };
    if (options_.accept_delay > Duration::Zero()) {
      scheduler_.ScheduleIn(options_.accept_delay, [this, host, accept] {
        accept(scheduler_.Now());
        Flush(host, scheduler_.Now());
      });
    } else {
      accept(now);
    }
    return;
  }
  auto it = conns_[host].find(Key(e.conn));
  if (it == conns_[host].end()) {
    Anomaly(-1, absl::StrCat("event ", cm::CmEventTypeName(e.type), " for an unknown id"));
    return;
  }
  ConnRecord& r = it->second;
  if (r.passive) {
    OnPassiveEvent(host, r, e, now);
  } else {
    OnActiveEvent(host, r, e, now);
  }
}

void SoakFabric::ServeApp(int host) {
  const TimePoint now = scheduler_.Now();
  std::vector<CmEvent>& q = app_queue_[host];
  if (!q.empty()) {
    const CmEvent e = q.front();
    q.erase(q.begin());
    auto it = conns_[host].find(Key(e.conn));
    if (it != conns_[host].end()) {
      ConnRecord& r = it->second;
      cm::CmEndpoint& ep = hosts_[host]->endpoint();
      if (r.attempt >= 0) {
        cm::AcceptParams ap;
        ap.qpn = NewQpn(host);
        if (absl::Status s = ep.Accept(now, e.conn, ap); !s.ok()) {
          Anomaly(-1, "Accept: " + s.ToString());
        }
      } else {
        ++passive_.app_rejected;
        if (absl::Status s = ep.Reject(now, e.conn, cm::RejReason::kConsumerReject, {});
            !s.ok()) {
          Anomaly(-1, "Reject: " + s.ToString());
        }
        Destroy(host, r, e.conn, now);
      }
      Flush(host, now);
    }
  }
  if (q.empty()) {
    app_busy_[host] = false;
  } else {
    scheduler_.ScheduleIn(options_.app_service_time, [this, host] { ServeApp(host); });
  }
}

void SoakFabric::OnPassiveEvent(int host, ConnRecord& r, const CmEvent& e, TimePoint now) {
  cm::CmEndpoint& ep = hosts_[host]->endpoint();
  Attempt* a = r.attempt >= 0 ? &attempts_[r.attempt] : nullptr;
  switch (e.type) {
    case CmEventType::kEstablished: {
      r.established = true;
      if (a != nullptr && !a->passive_established.has_value()) a->passive_established = now;
      if (!options_.passive_hold.has_value()) return;
      const ConnId id = e.conn;
      scheduler_.ScheduleIn(*options_.passive_hold, [this, host, id] {
        auto it = conns_[host].find(Key(id));
        if (it == conns_[host].end()) return;
        const TimePoint t = scheduler_.Now();
        ++passive_.reaped;
        if (absl::Status s = hosts_[host]->endpoint().Disconnect(t, id); !s.ok()) {
          Anomaly(-1, "passive reaper Disconnect: " + s.ToString());
        }
        Flush(host, t);
      });
      return;
    }
    case CmEventType::kDisconnected:
      if (r.established) {
        ++passive_.established_closed;
      } else {
        ++passive_.closed_before_rtu;
      }
      if (a != nullptr) ++a->passive_closed;
      if (absl::Status s = ep.Disconnect(now, e.conn); !s.ok()) {
        Anomaly(-1, "passive Disconnect: " + s.ToString());
      }
      Destroy(host, r, e.conn, now);
      return;
    case CmEventType::kRejected:
      ++passive_.rejected;
      Destroy(host, r, e.conn, now);
      return;
    case CmEventType::kUnreachable:
      ++passive_.timeout;
      if (a != nullptr) ++a->passive_timeouts;
      Destroy(host, r, e.conn, now);
      return;
    case CmEventType::kMraReceived:
      return;
    default:
      ++passive_.anomaly;
      Destroy(host, r, e.conn, now);
      return;
  }
}

void SoakFabric::OnActiveEvent(int host, ConnRecord& r, const CmEvent& e, TimePoint now) {
  cm::CmEndpoint& ep = hosts_[host]->endpoint();
  const int ai = r.attempt;
  Attempt& a = attempts_[ai];
  switch (e.type) {
    case CmEventType::kConnectResponse: {
      if (options_.rtu_delay == Duration::Zero()) {
        if (absl::Status s = ep.Rtu(now, e.conn); !s.ok()) {
          Anomaly(ai, "Rtu: " + s.ToString());
          Destroy(host, r, e.conn, now);
        }
        return;
      }
      scheduler_.ScheduleIn(options_.rtu_delay, [this, host, id = e.conn, ai] {
        auto it = conns_[host].find(Key(id));
        if (it == conns_[host].end()) return;
        const TimePoint t = scheduler_.Now();
        if (absl::Status s = hosts_[host]->endpoint().Rtu(t, id); !s.ok()) {
          Anomaly(ai, "Rtu: " + s.ToString());
          Destroy(host, it->second, id, t);
        }
        Flush(host, t);
      });
      return;
    }
    case CmEventType::kEstablished: {
      r.established = true;
      a.established = now;
      const ConnId id = e.conn;
      scheduler_.ScheduleIn(options_.hold, [this, host, id, ai] {
        auto it = conns_[host].find(Key(id));
        if (it == conns_[host].end()) return;  // already ended (REJ, ...)
        const TimePoint t = scheduler_.Now();
        attempts_[ai].disconnect_called = t;
        if (absl::Status s = hosts_[host]->endpoint().Disconnect(t, id); !s.ok()) {
          Anomaly(ai, "Disconnect: " + s.ToString());
        }
        Flush(host, t);
      });
      return;
    }
    case CmEventType::kDisconnected:
      a.disconnected = now;
      a.disconnect_status = e.status;
      if (a.outcome == ActiveOutcome::kPending) {
        if (r.established) {
          a.outcome = ActiveOutcome::kEstablishedClosed;
        } else {
          Anomaly(ai, "DISCONNECTED before ESTABLISHED");
        }
      }
      if (absl::Status s = ep.Disconnect(now, e.conn); !s.ok()) {
        Anomaly(ai, "Disconnect after DISCONNECTED: " + s.ToString());
      }
      Destroy(host, r, e.conn, now);
      return;
    case CmEventType::kRejected: {
      a.rej_reason = e.status;
      const bool busy = e.status == static_cast<int>(cm::RejReason::kNoResources);
      if (r.established) {
        a.closed_by_rej = true;  // the peer never sends this; a corrupted MAD can
        if (a.outcome == ActiveOutcome::kPending) a.outcome = ActiveOutcome::kEstablishedClosed;
      } else if (busy && a.tries <= options_.busy_retries) {
        scheduler_.ScheduleIn(options_.busy_retry_delay,
                              [this, ai] { StartConnect(ai, scheduler_.Now()); });
      } else if (a.outcome == ActiveOutcome::kPending) {
        a.outcome = ActiveOutcome::kRejected;
      }
      Destroy(host, r, e.conn, now);
      return;
    }
    case CmEventType::kUnreachable:
      if (r.established) {
        Anomaly(ai, "UNREACHABLE after ESTABLISHED");
      } else if (a.outcome == ActiveOutcome::kPending) {
        a.outcome = ActiveOutcome::kTimeout;
      }
      Destroy(host, r, e.conn, now);
      return;
    case CmEventType::kMraReceived:
      return;
    default:
      Anomaly(ai, absl::StrCat("unexpected ", cm::CmEventTypeName(e.type)));
      Destroy(host, r, e.conn, now);
      return;
  }
}

absl::Status SoakFabric::RunToIdle(uint64_t max_steps) {
  return scheduler_.RunUntilIdle(max_steps);
}

// ------------------------------------------------------------- results

std::array<uint64_t, 5> SoakFabric::OutcomeCounts() const {
  std::array<uint64_t, 5> n{};
  for (const Attempt& a : attempts_) ++n[static_cast<int>(a.outcome)];
  return n;
}

cm::CmCounters SoakFabric::TotalCounters() const {
  cm::CmCounters t;
  for (const auto& h : hosts_) {
    const cm::CmCounters& c = h->endpoint().counters();
    for (int i = 0; i < cm::kCmAttrCount; ++i) {
      t.sent[i] += c.sent[i];
      t.received[i] += c.received[i];
      t.retransmitted[i] += c.retransmitted[i];
      t.duplicates[i] += c.duplicates[i];
    }
    t.stale_connections += c.stale_connections;
    t.malformed += c.malformed;
    t.unknown_connection += c.unknown_connection;
    t.unexpected_state += c.unexpected_state;
    t.no_listener += c.no_listener;
    t.backlog_rejected += c.backlog_rejected;
    t.backlog_dropped += c.backlog_dropped;
    t.timeouts += c.timeouts;
    t.auto_mra += c.auto_mra;
  }
  return t;
}

uint64_t SoakFabric::retransmissions() const {
  uint64_t n = 0;
  const cm::CmCounters t = TotalCounters();
  for (uint64_t v : t.retransmitted) n += v;
  return n;
}

std::vector<Duration> SoakFabric::SetupTimes() const {
  std::vector<Duration> v;
  for (const Attempt& a : attempts_) {
    if (a.established.has_value()) v.push_back(*a.established - a.started);
  }
  return v;
}

std::vector<Duration> SoakFabric::DisconnectTimes() const {
  std::vector<Duration> v;
  for (const Attempt& a : attempts_) {
    if (a.disconnect_called.has_value() && a.disconnected.has_value()) {
      v.push_back(*a.disconnected - *a.disconnect_called);
    }
  }
  return v;
}

uint64_t SoakFabric::Digest() const {
  Fnv f;
  f.Add(fabric_->trace_digest());
  for (const Attempt& a : attempts_) {
    f.Add(static_cast<uint64_t>(a.outcome));
    f.Add(static_cast<uint64_t>(a.started.nanos()));
    f.Add(a.established.has_value() ? static_cast<uint64_t>(a.established->nanos()) : 0);
    f.Add(a.disconnected.has_value() ? static_cast<uint64_t>(a.disconnected->nanos()) : 0);
    f.Add(static_cast<uint64_t>(a.rej_reason));
  }
  for (uint64_t v : {passive_.connections, passive_.established_closed,
                     passive_.closed_before_rtu, passive_.timeout, passive_.rejected,
                     passive_.app_rejected}) {
    f.Add(v);
  }
  f.Add(static_cast<uint64_t>(scheduler_.Now().nanos()));
  return f.h;
}

std::vector<std::string> SoakFabric::CheckInvariants() const {
  std::vector<std::string> bad;
  auto fail = [&](std::string s) {
    if (bad.size() < 20) bad.push_back(std::move(s));
  };
  for (size_t i = 0; i < attempts_.size(); ++i) {
    const Attempt& a = attempts_[i];
    switch (a.outcome) {
      case ActiveOutcome::kPending:
        fail(absl::StrCat("attempt ", i, " never ended"));
        break;
      case ActiveOutcome::kAnomaly:
        fail(absl::StrCat("attempt ", i, ": ", a.anomaly));
        break;
      case ActiveOutcome::kEstablishedClosed:
        // The passive side closed exactly once, or its REP retries ran out
        // (every REP/RTU lost) and our DREQ was answered from the ids alone.
        if (options_.strict_pairing && a.passive_closed != 1 &&
            !(a.passive_closed == 0 && a.passive_timeouts > 0)) {
          fail(absl::StrCat("attempt ", i, ": active closed, passive closed ",
                            a.passive_closed, " times, timed out ", a.passive_timeouts));
        }
        break;
      case ActiveOutcome::kRejected:
      case ActiveOutcome::kTimeout:
        if (options_.strict_pairing && a.passive_closed != 0) {
          fail(absl::StrCat("attempt ", i, ": active ", ActiveOutcomeName(a.outcome),
                            " but passive closed an established connection"));
        }
        break;
    }
  }
  if (passive_.anomaly != 0) fail(absl::StrCat(passive_.anomaly, " passive anomalies"));
  const PassiveCounts& p = passive_;
  if (p.connections != p.established_closed + p.closed_before_rtu + p.timeout + p.rejected +
                           p.app_rejected + p.anomaly) {
    fail(absl::StrCat("passive outcomes do not add up to ", p.connections));
  }
  for (int h = 0; h < options_.hosts; ++h) {
    const cm::CmEndpoint& e = hosts_[h]->endpoint();
    if (e.connection_count() != 0 || e.table_entries() != 0 || !e.timers_empty() ||
        !conns_[h].empty()) {
      fail(absl::StrCat("host ", h, ": ", e.connection_count(), " connections, ",
                        e.table_entries(), " table entries, timers ",
                        e.timers_empty() ? "empty" : "armed", ", ", conns_[h].size(),
                        " ids not destroyed"));
    }
  }
  if (scheduler_.pending_events() != 0) {
    fail(absl::StrCat(scheduler_.pending_events(), " scheduler events pending"));
  }
  return bad;
}

}  // namespace uscm::soak
