#include "tests/soak/scenarios.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/iba_time.h"
#include "mad/wire/cm_req.h"

namespace uscm::soak {

using mad::wire::CmAttr;

namespace {

constexpr TimePoint kT0 = TimePoint::Epoch();

Duration ReqTimeout(const Profile& p) {
  return mad::CmReqTimeout(*mad::IbaTimeCode::Create(p.packet_life_time, "PLT"),
                           *mad::IbaTimeCode::Create(p.remote_cm_response_timeout, "t"),
                           p.rounding);
}

void AddDistribution(Result& r, const std::string& name, const std::vector<Duration>& v) {
  r.Add(name, absl::StrCat("n=", v.size(), " min ", FormatDuration(Percentile(v, 0)),
                           " p50 ", FormatDuration(Percentile(v, 50)), " p99 ",
                           FormatDuration(Percentile(v, 99)), " max ",
                           FormatDuration(Percentile(v, 100))));
}

// Outcome counts, passive counts, counters and setup/disconnect times.
void AddCommon(Result& r, const SoakFabric& f) {
  const auto n = f.OutcomeCounts();
  r.Add("attempts", f.attempts().size());
  r.Add("established+closed", n[static_cast<int>(ActiveOutcome::kEstablishedClosed)]);
  r.Add("rejected", n[static_cast<int>(ActiveOutcome::kRejected)]);
  r.Add("timeout", n[static_cast<int>(ActiveOutcome::kTimeout)]);
  r.Add("pending", n[static_cast<int>(ActiveOutcome::kPending)]);
  r.Add("anomaly", n[static_cast<int>(ActiveOutcome::kAnomaly)]);
  const PassiveCounts& p = f.passive();
  r.Add("passive", absl::StrCat(p.connections, " conns: ", p.established_closed,
                                " established+closed, ", p.closed_before_rtu,
                                " closed before RTU, ", p.timeout, " timeout, ", p.rejected,
                                " rejected, ", p.app_rejected, " app-rejected, ", p.reaped,
                                " reaped, ", p.anomaly, " anomalies"));
  const cm::CmCounters t = f.TotalCounters();
  uint64_t dups = 0;
  for (uint64_t v : t.duplicates) dups += v;
  r.Add("retransmissions", f.retransmissions());
  r.Add("duplicates answered/dropped", dups);
  r.Add("counters", absl::StrCat("malformed ", t.malformed, ", unknown ", t.unknown_connection,
                                 ", unexpected-state ", t.unexpected_state, ", stale ",
                                 t.stale_connections, ", timeouts ", t.timeouts,
                                 ", auto-MRA ", t.auto_mra, ", MRA received ",
                                 t.received[static_cast<int>(CmAttr::kMra) - 0x10]));
  AddDistribution(r, "setup", f.SetupTimes());
  AddDistribution(r, "disconnect", f.DisconnectTimes());
  for (size_t i = 0; i < f.attempts().size() && r.notes.size() < 8; ++i) {
    const Attempt& a = f.attempts()[i];
    const bool odd = a.outcome == ActiveOutcome::kRejected || a.closed_by_rej ||
                     (a.established.has_value() && !a.disconnect_called.has_value());
    if (!odd) continue;
    r.notes.push_back(absl::StrCat(
        "attempt ", i, " ", a.from, "->", a.to, ": ", ActiveOutcomeName(a.outcome), " rej ",
        a.rej_reason, " tries ", a.tries, " started ", FormatDuration(a.started - kT0),
        a.established.has_value() ? " est " + FormatDuration(*a.established - kT0) : "",
        a.disconnect_called.has_value() ? " disc-call " + FormatDuration(*a.disconnect_called - kT0) : "",
        a.disconnected.has_value() ? absl::StrCat(" disc ", FormatDuration(*a.disconnected - kT0), " status ", a.disconnect_status) : "",
        " passive closed ", a.passive_closed, " timeouts ", a.passive_timeouts));
  }
}

void Finish(Result& r, SoakFabric& f, const absl::Status& run) {
  if (!run.ok()) r.violations.push_back("run: " + run.ToString());
  for (std::string& v : f.CheckInvariants()) r.violations.push_back(std::move(v));
  r.Add("virtual time", FormatDuration(f.scheduler().Now() - kT0));
  const sim::FabricCounters& fc = f.fabric().counters();
  r.Add("fabric", absl::StrCat(fc.sent, " sent, ", fc.delivered, " delivered, ",
                               fc.total_dropped(), " dropped, ", fc.duplicated, " duplicated, ",
                               fc.reordered, " reordered"));
  r.digest = f.Digest();
}

}  // namespace

std::string FormatDuration(Duration d) {
  const int64_t ns = d.nanos();
  if (ns >= 1'000'000'000) return absl::StrFormat("%.3fs", d.seconds());
  if (ns >= 1'000'000) return absl::StrFormat("%.3fms", d.millis());
  return absl::StrFormat("%.1fus", d.micros());
}

void Result::Add(const std::string& name, uint64_t value) { Add(name, absl::StrCat(value)); }

std::string Result::Summary() const {
  std::string s;
  for (const auto& [k, v] : figures) absl::StrAppend(&s, k, ": ", v, "\n");
  for (const std::string& n : notes) absl::StrAppend(&s, "note: ", n, "\n");
  for (const std::string& v : violations) absl::StrAppend(&s, "VIOLATION: ", v, "\n");
  absl::StrAppend(&s, "digest: ", absl::Hex(digest, absl::kZeroPad16), "\n");
  return s;
}

// ------------------------------------------------------------------- loss

Result RunLoss(const LossConfig& c) {
  SoakOptions o;
  o.hosts = c.hosts;
  o.seed = c.seed;
  o.profile = c.profile;
  o.faults.loss = c.loss;
  o.faults.duplicate = c.duplicate;
  o.faults.reorder = c.reorder;
  o.hold = c.hold;
  o.passive_hold = c.passive_hold;
  o.accept_delay = c.accept_delay;
  o.rtu_delay = c.rtu_delay;
  Result r;
  auto f = SoakFabric::Create(o);
  if (!f.ok()) {
    r.violations.push_back(f.status().ToString());
    return r;
  }
  sim::Rng rng(c.seed ^ 0x50a4'0000'0000'0001ULL);
  const Duration gap = Duration::Nanos(static_cast<int64_t>(1e9 / c.attempts_per_second));
  for (int i = 0; i < c.attempts; ++i) {
    const int from = static_cast<int>(rng.Below(c.hosts));
    const int to = static_cast<int>((from + 1 + rng.Below(c.hosts - 1)) % c.hosts);
    (*f)->ScheduleAttempt(kT0 + gap * i, from, to);
  }
  const absl::Status run = (*f)->RunToIdle();
  AddCommon(r, **f);
  Finish(r, **f, run);
  return r;
}

// ------------------------------------------------------------------- pair

Result RunPair(const PairConfig& c) {
  SoakOptions o;
  o.hosts = 2;
  o.seed = c.seed;
  o.profile = c.profile;
  o.hold = Duration::Millis(10);
  o.backlog = static_cast<uint32_t>(c.connections) + 1;
  Result r;
  auto f = SoakFabric::Create(o);
  if (!f.ok()) {
    r.violations.push_back(f.status().ToString());
    return r;
  }
  for (int i = 0; i < c.connections; ++i) (*f)->ScheduleAttempt(kT0, 0, 1);
  const absl::Status run = (*f)->RunToIdle();
  AddCommon(r, **f);
  const Duration full = ReqTimeout(c.profile);
  r.Add("one full REQ timeout", FormatDuration(full));
  const Duration setup = Percentile((*f)->SetupTimes(), 100);
  const Duration disc = Percentile((*f)->DisconnectTimes(), 100);
  if (setup >= full) r.violations.push_back("a setup took a full REQ timeout: " + FormatDuration(setup));
  if (disc >= full) r.violations.push_back("a disconnect took a full timeout: " + FormatDuration(disc));
  if ((*f)->retransmissions() != 0) {
    r.violations.push_back(absl::StrCat((*f)->retransmissions(), " retransmissions without loss"));
  }
  const auto n = (*f)->OutcomeCounts();
  if (n[static_cast<int>(ActiveOutcome::kEstablishedClosed)] != static_cast<uint64_t>(c.connections)) {
    r.violations.push_back("not every connection was established and closed");
  }
  r.Add("max connections on one host", (*f)->max_connections(1));
  Finish(r, **f, run);
  return r;
}

// --------------------------------------------------------------- recovery

namespace {

// One connection; drops the first MAD of `attr` (none if `drop` is false).
// Returns the phase time or a violation.
absl::StatusOr<Duration> RecoveryTrial(const RecoveryConfig& c, uint64_t seed, bool drop,
                                       uint64_t* digest) {
  SoakOptions o;
  o.hosts = 2;
  o.seed = seed;
  o.profile = c.profile;
  o.hold = ReqTimeout(c.profile) * 2 + Duration::Millis(50);  // RTU recovery ends first
  auto f = SoakFabric::Create(o);
  if (!f.ok()) return f.status();
  TargetedDropper dropper(c.attr, 1);
  if (drop) (*f)->set_send_filter(&dropper);
  sim::Rng rng(seed);
  (*f)->ScheduleAttempt(kT0 + Duration::Nanos(static_cast<int64_t>(rng.Below(100'000))), 0, 1);
  const absl::Status run = (*f)->RunToIdle();
  if (!run.ok()) return run;
  std::vector<std::string> bad = (*f)->CheckInvariants();
  if (!bad.empty()) return absl::InternalError(bad.front());
  if (drop && !dropper.dropped()) return absl::InternalError("the targeted MAD was never sent");
  *digest = *digest * 31 + (*f)->Digest();
  const Attempt& a = (*f)->attempts().front();
  if (a.outcome != ActiveOutcome::kEstablishedClosed || !a.established.has_value()) {
    return absl::InternalError(absl::StrCat("outcome ", ActiveOutcomeName(a.outcome)));
  }
  switch (c.attr) {
    case CmAttr::kReq:
    case CmAttr::kRep:
      return *a.established - a.started;
    case CmAttr::kRtu:
      if (!a.passive_established.has_value()) return absl::InternalError("passive never ESTABLISHED");
      return *a.passive_established - *a.established;
    default:
      if (!a.disconnected.has_value() || !a.disconnect_called.has_value()) {
        return absl::InternalError("never disconnected");
      }
      return *a.disconnected - *a.disconnect_called;
  }
}

}  // namespace

Duration RecoveryBaseline(const RecoveryConfig& c) {
  uint64_t digest = 0;
  auto d = RecoveryTrial(c, c.seed, false, &digest);
  return d.ok() ? *d : Duration::Zero();
}

Result RunRecovery(const RecoveryConfig& c, std::vector<Duration>* times) {
  Result r;
  std::vector<Duration> v;
  uint64_t digest = 0;
  for (int t = 0; t < c.trials; ++t) {
    auto d = RecoveryTrial(c, c.seed + static_cast<uint64_t>(t), true, &digest);
    if (!d.ok()) {
      r.violations.push_back(absl::StrCat("trial ", t, ": ", d.status().ToString()));
      continue;
    }
    if (*d >= c.bound) {
      r.violations.push_back(absl::StrCat("trial ", t, ": ", FormatDuration(*d), " >= ",
                                          FormatDuration(c.bound)));
    }
    v.push_back(*d);
  }
  r.Add("message lost", std::string(mad::wire::CmAttrName(c.attr)));
  r.Add("profile", c.profile.name);
  AddDistribution(r, "recovery (phase time)", v);
  r.Add("no-loss phase time", FormatDuration(RecoveryBaseline(c)));
  r.digest = digest;
  if (times != nullptr) *times = v;
  return r;
}

// ------------------------------------------------------------------ flood

namespace {

class Flooder {
 public:
  Flooder(SoakFabric& f, const FloodConfig& c)
      : f_(f), rng_(c.seed ^ 0xf100dULL),
        gap_(Duration::Nanos(static_cast<int64_t>(1e9 / c.reqs_per_second))),
        end_(kT0 + c.duration), profile_(c.profile) {}

  void Start() { f_.scheduler().Schedule(kT0, [this] { Tick(); }); }
  uint64_t sent() const { return sent_; }

 private:
  void Tick() {
    sim::SimTransport& t = f_.transport(2);
    const mad::LocalPort& me = t.port();
    const mad::LocalPort& them = f_.transport(0).port();
    mad::wire::ReqRepr r;
    r.envelope.transaction_id = rng_.Next();
    r.local_comm_id = static_cast<uint32_t>(rng_.Next()) | 1;
    r.service_id = SoakFabric::kService;
    r.local_ca_guid = rng_.Next();
    r.local_qpn = static_cast<uint32_t>(rng_.Below(0xFFFFFF)) + 1;
    r.starting_psn = static_cast<uint32_t>(rng_.Below(0xFFFFFF));
    r.remote_cm_response_timeout = profile_.remote_cm_response_timeout;
    r.local_cm_response_timeout = profile_.local_cm_response_timeout;
    r.max_cm_retries = profile_.max_cm_retries;
    r.partition_key = 0xFFFF;
    r.primary.local_lid = me.lid;
    r.primary.remote_lid = them.lid;
    r.primary.local_gid = me.gid;
    r.primary.remote_gid = them.gid;
    r.primary.subnet_local = true;
    r.primary.local_ack_timeout = profile_.local_ack_timeout;
    std::array<uint8_t, mad::kMadSize> buf{};
    if (r.Emit(buf).ok()) {
      mad::MadAddress to;
      to.lid = them.lid;
      if (t.Send(to, buf).ok()) ++sent_;
    }
    // The REJs that come back are drained by host 2's endpoint (unknown ids).
    const TimePoint next = f_.scheduler().Now() + gap_;
    if (next < end_) f_.scheduler().Schedule(next, [this] { Tick(); });
  }

  SoakFabric& f_;
  sim::Rng rng_;
  Duration gap_;
  TimePoint end_;
  Profile profile_;
  uint64_t sent_ = 0;
};

}  // namespace

Result RunFlood(const FloodConfig& c) {
  SoakOptions o;
  o.hosts = 3;
  o.seed = c.seed;
  o.profile = c.profile;
  o.backlog = c.backlog;
  o.backlog_policy = c.policy;
  o.app_service_time = c.app_service_time;
  o.busy_retries = 1000;
  o.busy_retry_delay = Duration::Millis(1);
  Result r;
  auto f = SoakFabric::Create(o);
  if (!f.ok()) {
    r.violations.push_back(f.status().ToString());
    return r;
  }
  for (int i = 0; i < c.legit_connections; ++i) {
    (*f)->ScheduleAttempt(kT0 + c.duration * (2 * i + 1) / (2 * c.legit_connections), 1, 0);
  }
  Flooder flooder(**f, c);
  flooder.Start();
  const absl::Status run = (*f)->RunToIdle();
  const cm::CmCounters& l = (*f)->endpoint(0).counters();
  r.Add("flood REQs sent", flooder.sent());
  r.Add("listener REQs received", l.received[0]);
  r.Add("listener backlog rejected (REJ 3)", l.backlog_rejected);
  r.Add("listener backlog dropped", l.backlog_dropped);
  r.Add("app rejected (no token)", (*f)->passive().app_rejected);
  r.Add("listener max connections", (*f)->max_connections(0));
  r.Add("app queue max", (*f)->max_app_queue());
  r.Add("backlog", c.backlog);
  uint64_t tries = 0;
  for (const Attempt& a : (*f)->attempts()) tries += a.tries;
  r.Add("legit Connect calls", tries);
  AddCommon(r, **f);
  // Memory: every flood connection waits in the backlog; legit ones past it.
  const size_t bound = c.backlog + static_cast<size_t>(c.legit_connections);
  if ((*f)->max_connections(0) > bound) {
    r.violations.push_back(absl::StrCat("listener held ", (*f)->max_connections(0),
                                        " connections; bound ", bound));
  }
  // With REJ 3 the legitimate client learns at once and retries; with the
  // Linux drop policy its REQ retries race the flood for a free slot and may
  // all lose (reported, not a violation of that policy).
  const auto n = (*f)->OutcomeCounts();
  if (c.policy == cm::BacklogPolicy::kReject &&
      n[static_cast<int>(ActiveOutcome::kEstablishedClosed)] !=
          static_cast<uint64_t>(c.legit_connections)) {
    r.violations.push_back("a legitimate connection did not get through");
  }
  if (l.received[0] < flooder.sent()) {
    r.violations.push_back("the listener did not count every flood REQ");
  }
  Finish(r, **f, run);
  return r;
}

// ---------------------------------------------------------------- bitflip

Result RunBitflip(const BitflipConfig& c) {
  SoakOptions o;
  o.hosts = c.hosts;
  o.seed = c.seed;
  o.profile = c.profile;
  o.passive_hold = Duration::Millis(100);
  o.strict_pairing = false;
  Result r;
  auto f = SoakFabric::Create(o);
  if (!f.ok()) {
    r.violations.push_back(f.status().ToString());
    return r;
  }
  BitFlipper flipper(c.seed ^ 0xb17f11bULL, c.copies);
  (*f)->set_send_filter(&flipper);
  sim::Rng rng(c.seed ^ 0xb17ULL);
  for (int i = 0; i < c.attempts; ++i) {
    const int from = static_cast<int>(rng.Below(c.hosts));
    const int to = static_cast<int>((from + 1 + rng.Below(c.hosts - 1)) % c.hosts);
    (*f)->ScheduleAttempt(kT0 + Duration::Micros(20) * i, from, to);
  }
  const absl::Status run = (*f)->RunToIdle();
  const cm::CmCounters t = (*f)->TotalCounters();
  r.Add("MADs bit-flipped", flipper.flipped());
  r.Add("flipped and rejected by the parsers", flipper.detected());
  r.Add("endpoint malformed counters", t.malformed);
  uint64_t closed_by_rej = 0;
  for (const Attempt& a : (*f)->attempts()) closed_by_rej += a.closed_by_rej;
  r.Add("closed by a corrupted-but-valid REJ", closed_by_rej);
  AddCommon(r, **f);
  if (t.malformed != flipper.detected()) {
    r.violations.push_back(absl::StrCat("malformed ", t.malformed, " != detected ",
                                        flipper.detected()));
  }
  // A copy whose flipped bit still parses is a valid message with other
  // contents (no ICRC at this layer): a REQ copy with another service ID
  // draws a REJ 8 that the active side rightly takes. Only such outcomes may
  // differ from established+closed; a timeout would mean a valid MAD was lost.
  const auto n = (*f)->OutcomeCounts();
  if (n[static_cast<int>(ActiveOutcome::kTimeout)] != 0) {
    r.violations.push_back("a connection timed out: a valid MAD was lost");
  }
  Finish(r, **f, run);
  return r;
}

// --------------------------------------------------------------- linkflap

Result RunLinkFlap(const LinkFlapConfig& c, std::array<uint64_t, 5>* outcomes) {
  SoakOptions o;
  o.hosts = 2;
  o.seed = c.seed;
  o.profile = c.profile;
  // Connections established before the cut disconnect after the link is back.
  o.hold = c.down_after + c.outage + Duration::Millis(20);
  Result r;
  auto f = SoakFabric::Create(o);
  if (!f.ok()) {
    r.violations.push_back(f.status().ToString());
    return r;
  }
  for (int i = 0; i < c.attempts; ++i) (*f)->ScheduleAttempt(kT0 + c.spacing * i, 0, 1);
  const std::string host1 = (*f)->host_name(1);
  absl::Status s = (*f)->fabric().ScheduleLinkUp(kT0 + c.down_after, host1, 1, false);
  if (s.ok()) s = (*f)->fabric().ScheduleLinkUp(kT0 + c.down_after + c.outage, host1, 1, true);
  if (!s.ok()) r.violations.push_back(s.ToString());
  const absl::Status run = (*f)->RunToIdle();
  r.Add("outage", absl::StrCat(FormatDuration(c.outage), " from ", FormatDuration(c.down_after)));
  r.Add("REQ retry window", FormatDuration(ReqTimeout(c.profile) * (c.profile.max_cm_retries + 1)));
  r.Add("dropped on the down link",
        (*f)->fabric().counters().drops(sim::DropReason::kLinkDown));
  AddCommon(r, **f);
  if (outcomes != nullptr) *outcomes = (*f)->OutcomeCounts();
  Finish(r, **f, run);
  return r;
}

}  // namespace uscm::soak
