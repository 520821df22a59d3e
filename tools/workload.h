// A connection workload on the simulated fabric, shared by `uscm sim` and
// `uscm ping --fabric=sim`: N connections, each a PathRecord query followed
// by REQ / REP / RTU (or a REJ in reject mode), optionally ECE and private
// data, optionally a disconnect. Setup time is measured in virtual time from
// the path query to ESTABLISHED (or REJ) at the active side; CM
// retransmissions are counted per connection from the MADs on the wire.
//
// With several processes per host (SimWorld::procs_per_host() = P) the
// pattern picks hosts as below, and each host hands its connections' client
// ends to its processes in turn (the first connection it starts to process 0,
// the next to 1, ...), and its server ends likewise; process p listens on
// service_id + p (claimed at the host's router), so a REQ reaches the one
// process that claimed it. P = 1 is the plain run.
#ifndef USCM_TOOLS_WORKLOAD_H_
#define USCM_TOOLS_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "absl/strings/string_view.h"
#include "mad/iba_time.h"
#include "mad/time.h"
#include "tools/sim_world.h"

namespace uscm::tools {

// The CM timing every connection of a run uses (tests/soak/cm_fabric.h has
// the same named profiles for the soak runs):
//   spec:   exact IBA times (4.096 us * 2^code), response timeout codes 20
//           (~4.3 s), the path's packet lifetime; the ConnectParams defaults,
//           what `uscm sim` always used.
//   linux:  as spec, but time codes rounded as Linux's cm.c does (ms).
//   lowlat: exact times, response timeout codes 11 (8.4 ms), packet lifetime
//           7 (0.52 ms) and local ACK timeout 10 in place of the path's.
struct CmProfile {
  std::string name = "spec";
  mad::IbaTimeRounding rounding = mad::IbaTimeRounding::kExact;  // for CmConfig
  uint8_t response_timeout = 20;  // remote and local CM response timeout codes
  absl::optional<uint8_t> packet_life_time;   // replaces the path's
  absl::optional<uint8_t> local_ack_timeout;  // replaces the path's
};
// "spec", "linux", "lowlat"; false for anything else.
bool CmProfileByName(absl::string_view name, CmProfile* out);

struct WorkloadOptions {
  int connections = 100;
  mad::Duration interval = mad::Duration::Micros(10);  // between connection starts
  uint64_t service_id = 0x0000000001060000ULL | 7471;  // + process index on its host
  bool reject = false;   // the passive side rejects every REQ (REJ 28)
  bool ece = false;      // REQ carries ECE; REP answers with the same options
  std::vector<uint8_t> private_data;  // in REQ; REP / REJ carry a fixed reply
  bool disconnect = true;             // DREQ / DREP after ESTABLISHED
  // false: host 0 connects to host 1 every time; true: connection k goes from
  // host k % N to host (k + 1) % N (the kRing pattern).
  bool spread = false;
  // With spread: who connects to whom.
  //   kRing: k % N -> (k + 1) % N.
  //   kAllToAll: every ordered pair of the first `group` hosts (all when 0)
  //     in turn: client k % G... (pair k mod G(G-1), client-major).
  //   kIncast: hosts 1..N-1 in turn -> host 0.
  //   kRandomPairs: a uniform client, a uniform other server (the workload's
  //     own seeded stream, so the fabric's random numbers do not move).
  enum class Pattern { kRing, kAllToAll, kIncast, kRandomPairs };
  Pattern pattern = Pattern::kRing;
  int group = 0;
  // When connection k starts (its path query):
  //   kFixed: t0 + k * interval; kStorm: all at t0; kPoisson: exponential
  //   gaps of mean `interval` (seeded).
  enum class Arrivals { kFixed, kStorm, kPoisson };
  Arrivals arrivals = Arrivals::kFixed;
  uint64_t seed = 1;  // for kRandomPairs and kPoisson
  // CM timing (the endpoint's rounding is the world's: CmConfig) and the
  // REQ / REP retries (MaxCMRetries, 0..15).
  CmProfile profile;
  uint8_t max_cm_retries = 15;
  // Not zero: a Sample every `sample_interval` of virtual time from the
  // first start until the last connection settled (and one just after).
  mad::Duration sample_interval = mad::Duration::Zero();
};

// "ring", "all-to-all", "incast", "random"; "fixed", "storm", "poisson".
absl::string_view PatternName(WorkloadOptions::Pattern p);
absl::string_view ArrivalsName(WorkloadOptions::Arrivals a);
bool ParsePattern(absl::string_view text, WorkloadOptions::Pattern* out);
bool ParseArrivals(absl::string_view text, WorkloadOptions::Arrivals* out);

struct ConnResult {
  int index = 0;
  std::string client, server;
  bool established = false;
  bool rejected = false;
  std::string error;        // why it failed (neither established nor rejected)
  double setup_us = 0;      // path query start -> ESTABLISHED / REJ
  int retransmissions = 0;  // REQ and REP resends for this connection
};

// The run at one instant; the counts are cumulative since the world began.
struct Sample {
  double t_ms = 0;                  // since the first start
  int settled = 0;                  // connections established, rejected or failed
  size_t sa_queue = 0;              // SA requests waiting or in service
  uint64_t sa_dropped = 0;          // at the SA's queue limit
  uint64_t sa_retries = 0;          // agent retransmissions of SA queries, all hosts
  uint64_t cm_retransmissions = 0;  // CM MADs resent on timeout, all hosts
};

struct WorkloadResult {
  std::vector<ConnResult> conns;
  mad::Duration elapsed;    // first start -> last connection settled
  uint64_t fabric_sent = 0;
  uint64_t fabric_dropped = 0;
  uint64_t fabric_duplicated = 0;
  uint64_t sa_retries = 0;  // agent retransmissions of SA queries, all hosts
  // SA client figures, all hosts (sa/client.h, mad/agent.h).
  uint64_t sa_queries = 0;
  uint64_t sa_on_wire = 0;     // agent requests sent (first transmissions)
  uint64_t sa_coalesced = 0;
  uint64_t sa_superseded = 0;
  uint64_t sa_slots_released = 0;
  uint64_t path_cache_hits = 0;  // queries answered by the host's PathRecord cache
  std::vector<Sample> samples;   // WorkloadOptions::sample_interval
  // The first host's retransmission timeout toward the SA at the end.
  mad::Duration sa_rto;
  mad::Duration sa_srtt;
  mad::Duration sa_rttvar;
};

// `progress(settled, total)` is called as connections settle.
absl::StatusOr<WorkloadResult> RunWorkload(SimWorld& world, const WorkloadOptions& options,
                                           std::function<void(int, int)> progress = nullptr);

// Nearest-rank percentile of `sorted` (q in [0, 1]); 0 for an empty vector.
double Percentile(const std::vector<double>& sorted, double q);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_WORKLOAD_H_
