// A soak harness: N CmEndpoints as actors on the simulated fabric, a
// workload driver that opens connections and closes them after a hold time,
// per-attempt outcome records and end-of-run invariants (docs/RELIABILITY.md).
//
// Each host is one CA behind one switch. A host's SimTransport feeds
// CmEndpoint::HandleMad; PollTransmit goes out through an optional send
// filter (targeted drop, bit flips) to the transport; NextDeadline wakes the
// host through the scheduler. Every random choice comes from the scheduler's
// seed, so a seed reproduces the run and its digest.
#ifndef USCM_TESTS_SOAK_CM_FABRIC_H_
#define USCM_TESTS_SOAK_CM_FABRIC_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "cm/endpoint.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/time.h"

namespace uscm::soak {

using mad::Duration;
using mad::TimePoint;

// CM timing of every connection in a run.
struct Profile {
  std::string name;
  mad::IbaTimeRounding rounding = mad::IbaTimeRounding::kLinux;
  uint8_t packet_life_time = 14;
  uint8_t remote_cm_response_timeout = 20;
  uint8_t local_cm_response_timeout = 20;
  uint8_t local_ack_timeout = 15;
  uint8_t max_cm_retries = 15;
};
// Linux rdma_cm: response timeout code 20 (~4 s with Linux's ms rounding), 15 retries.
Profile LinuxProfile();
// Codes 11 (8.4 ms) with exact rounding and PLT 7: a REQ waits ~9.4 ms.
Profile LowLatencyProfile();
absl::StatusOr<Profile> ProfileByName(const std::string& name);

// Loss, duplication and reordering end to end (converted to per-hop
// probabilities over the two hops host-switch-host).
struct LinkFaults {
  double loss = 0;
  double duplicate = 0;
  double reorder = 0;
  Duration latency = Duration::Micros(1);
  Duration jitter = Duration::Micros(1);
  Duration reorder_delay = Duration::Micros(50);
};

// Looks at every MAD a host sends (middleware on the send path): returns
// false to drop it, may change its bytes, and may append MADs to send after it.
class SendFilter {
 public:
  virtual ~SendFilter() = default;
  virtual bool OnSend(int host, TimePoint now, cm::OutgoingMad& mad,
                      std::vector<cm::OutgoingMad>& extra) = 0;
};

// Drops exactly the `nth` (1-based) MAD with attribute `attr` sent by anyone.
class TargetedDropper final : public SendFilter {
 public:
  TargetedDropper(mad::wire::CmAttr attr, int nth) : attr_(attr), nth_(nth) {}
  bool OnSend(int host, TimePoint now, cm::OutgoingMad& mad,
              std::vector<cm::OutgoingMad>& extra) override;
  bool dropped() const { return dropped_at_.has_value(); }
  absl::optional<TimePoint> dropped_at() const { return dropped_at_; }

 private:
  mad::wire::CmAttr attr_;
  int nth_;
  int seen_ = 0;
  absl::optional<TimePoint> dropped_at_;
};

// Sends every MAD intact and then `copies` corrupted copies of it, each with
// one uniformly chosen bit flipped. Counts the copies the CM parsers reject
// ("detected"); the endpoints' malformed counters must add up to that.
class BitFlipper final : public SendFilter {
 public:
  BitFlipper(uint64_t seed, int copies) : rng_(seed), copies_(copies) {}
  bool OnSend(int host, TimePoint now, cm::OutgoingMad& mad,
              std::vector<cm::OutgoingMad>& extra) override;
  uint64_t flipped() const { return flipped_; }
  uint64_t detected() const { return detected_; }

 private:
  sim::Rng rng_;
  int copies_;
  uint64_t flipped_ = 0;
  uint64_t detected_ = 0;
};

// True if the endpoint's parsers refuse these bytes (counted as malformed).
bool CmParserRejects(std::span<const uint8_t> mad);

enum class ActiveOutcome : uint8_t {
  kPending,
  kEstablishedClosed,  // ESTABLISHED, then DISCONNECTED
  kRejected,           // REJ before ESTABLISHED
  kTimeout,            // REQ retries exhausted
  kAnomaly,            // any other sequence (a bug)
};
const char* ActiveOutcomeName(ActiveOutcome o);

// One connection attempt, seen from the active side.
struct Attempt {
  int from = 0, to = 0;  // host indexes
  TimePoint started;     // Connect (first REQ)
  absl::optional<TimePoint> established;
  absl::optional<TimePoint> passive_established;  // the first passive ESTABLISHED
  bool closed_by_rej = false;  // ESTABLISHED, then a REJ (undetected corruption)
  absl::optional<TimePoint> disconnect_called;
  absl::optional<TimePoint> disconnected;
  int tries = 0;        // Connect calls (REJ 3 retries add some)
  int passive_closed = 0;    // passive connections that closed (with or without RTU)
  int passive_timeouts = 0;  // passive connections whose REP retries ran out
  int rej_reason = 0;
  int disconnect_status = 0;
  ActiveOutcome outcome = ActiveOutcome::kPending;
  std::string anomaly;  // why, for kAnomaly
};

struct PassiveCounts {
  uint64_t connections = 0;
  uint64_t established_closed = 0;
  uint64_t closed_before_rtu = 0;  // DREQ arrived in REP_SENT (RTU lost)
  uint64_t timeout = 0;            // REP retries exhausted
  uint64_t rejected = 0;           // REJ received
  uint64_t app_rejected = 0;       // the listener's application said no
  uint64_t reaped = 0;             // closed by the passive app after passive_hold
  uint64_t anomaly = 0;
};

struct SoakOptions {
  int hosts = 2;
  uint64_t seed = 1;
  Profile profile = LinuxProfile();
  LinkFaults faults;
  Duration hold = Duration::Millis(1);  // ESTABLISHED -> Disconnect
  uint32_t backlog = 1024;
  cm::BacklogPolicy backlog_policy = cm::BacklogPolicy::kReject;
  // The passive application accepts at once, or (flood) serves one
  // CONNECT_REQUEST per `app_service_time` and rejects those without the token.
  Duration app_service_time = Duration::Zero();
  // The applications answer CONNECT_REQUEST (Accept) and CONNECT_RESPONSE
  // (Rtu) this late; past half the peer's timeout the CM sends auto-MRA.
  Duration accept_delay = Duration::Zero();
  Duration rtu_delay = Duration::Zero();
  // If set, the passive application disconnects a connection still open this
  // long after ESTABLISHED (an idle reaper; closes what a corrupted-but-valid
  // MAD left half-open).
  absl::optional<Duration> passive_hold;
  // Check that each active outcome matches the passive one. Off when
  // corrupted-but-parseable MADs (bit flips) may end either side on their own.
  bool strict_pairing = true;
  // Legit clients retry a REJ 3 (no resources) after this long, up to N times.
  int busy_retries = 0;
  Duration busy_retry_delay = Duration::Millis(1);
};

class SoakFabric {
 public:
  static absl::StatusOr<std::unique_ptr<SoakFabric>> Create(const SoakOptions& o);
  ~SoakFabric();

  // Schedules one attempt from host `from` to host `to` at `at`.
  void ScheduleAttempt(TimePoint at, int from, int to);
  // Runs until nothing is left to do (including TimeWait), bounded.
  absl::Status RunToIdle(uint64_t max_steps = 2'000'000'000);

  // Empty when every invariant holds; otherwise one line per violation.
  std::vector<std::string> CheckInvariants() const;

  void set_send_filter(SendFilter* f) { filter_ = f; }
  sim::Scheduler& scheduler() { return scheduler_; }
  sim::Fabric& fabric() { return *fabric_; }
  cm::CmEndpoint& endpoint(int host);
  sim::SimTransport& transport(int host);
  std::string host_name(int host) const;
  uint16_t lid(int host) const;

  const std::vector<Attempt>& attempts() const { return attempts_; }
  const PassiveCounts& passive() const { return passive_; }
  std::array<uint64_t, 5> OutcomeCounts() const;  // by ActiveOutcome
  cm::CmCounters TotalCounters() const;
  uint64_t retransmissions() const;
  size_t max_connections(int host) const { return max_conns_[host]; }
  size_t max_app_queue() const { return max_app_queue_; }
  // FNV-1a over the fabric trace digest, every attempt's outcome and times,
  // the passive counts and the final clock.
  uint64_t Digest() const;
  // Setup times (first REQ -> active ESTABLISHED) of the established attempts.
  std::vector<Duration> SetupTimes() const;
  // Disconnect call -> DISCONNECTED on the active side.
  std::vector<Duration> DisconnectTimes() const;

  static constexpr uint64_t kService = 0x0000000001060000ull | 4791;
  static constexpr uint64_t kToken = 0x5573636d536f616bull;  // "UscmSoak"

 private:
  class Host;
  struct ConnRecord {
    int attempt = -1;  // active side: index into attempts_
    bool passive = false;
    bool established = false;
    bool destroyed = false;
  };

  explicit SoakFabric(const SoakOptions& o);
  absl::Status Init();
  void OnEvent(int host, const cm::CmEvent& e, TimePoint now);
  void OnActiveEvent(int host, ConnRecord& r, const cm::CmEvent& e, TimePoint now);
  void OnPassiveEvent(int host, ConnRecord& r, const cm::CmEvent& e, TimePoint now);
  void StartConnect(int attempt, TimePoint now);
  void ServeApp(int host);
  void Destroy(int host, ConnRecord& r, cm::ConnId id, TimePoint now);
  void Anomaly(int attempt, std::string why);
  cm::ConnectParams MakeConnect(int attempt) const;
  void Flush(int host, TimePoint now);

  SoakOptions options_;
  sim::Scheduler scheduler_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::vector<std::unique_ptr<Host>> hosts_;
  std::vector<absl::flat_hash_map<uint64_t, ConnRecord>> conns_;  // per host
  std::vector<size_t> max_conns_;
  std::vector<Attempt> attempts_;
  PassiveCounts passive_;
  SendFilter* filter_ = nullptr;
  // Per host: data QPNs are unique on a CA whether it connects or accepts
  // (a reused QPN is a stale connection, which the CM rightly rejects).
  std::vector<uint32_t> next_qpn_;
  uint32_t NewQpn(int host) { return next_qpn_[host]++ & 0xFFFFFF; }
  // Flood application: CONNECT_REQUESTs waiting for the app, per host.
  std::vector<std::vector<cm::CmEvent>> app_queue_;
  std::vector<bool> app_busy_;
  size_t max_app_queue_ = 0;
};

// Percentile (0..100) of a list of durations; Zero() if empty.
Duration Percentile(std::vector<Duration> v, double p);

}  // namespace uscm::soak

#endif  // USCM_TESTS_SOAK_CM_FABRIC_H_
