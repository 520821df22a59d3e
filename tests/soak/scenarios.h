// The reliability scenarios of docs/RELIABILITY.md, shared by the CI tests
// (small sizes) and the cm_soak binary (full sizes). Each returns its figures,
// the invariant violations (empty = pass) and a digest of the run.
#ifndef USCM_TESTS_SOAK_SCENARIOS_H_
#define USCM_TESTS_SOAK_SCENARIOS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "mad/wire/cm_common.h"
#include "tests/soak/cm_fabric.h"

namespace uscm::soak {

struct Result {
  std::vector<std::string> violations;
  uint64_t digest = 0;
  std::vector<std::pair<std::string, std::string>> figures;  // name -> value, in order
  std::vector<std::string> notes;  // a few unusual (but correct) attempts, explained
  std::string Summary() const;  // one "name: value" line each, then "digest: ..."
  void Add(const std::string& name, const std::string& value) { figures.emplace_back(name, value); }
  void Add(const std::string& name, uint64_t value);
};

// Many attempts between random pairs of `hosts` under loss/dup/reorder.
struct LossConfig {
  int attempts = 2000;
  int hosts = 8;
  double loss = 0.10, duplicate = 0.01, reorder = 0.01;
  uint64_t seed = 1;
  Profile profile = LinuxProfile();
  double attempts_per_second = 20000;
  Duration hold = Duration::Millis(1);
  // Set: the passive side also disconnects this long after ESTABLISHED
  // (equal to `hold`: crossing DREQs).
  absl::optional<Duration> passive_hold;
  Duration accept_delay = Duration::Zero();  // > 50% of the REQ timeout: auto-MRA
  Duration rtu_delay = Duration::Zero();
};
Result RunLoss(const LossConfig& c);

// `connections` from host 0 to host 1 at once, each disconnected after the
// hold. Violation: any retransmission, or a setup / disconnect as long as one
// full response timeout.
struct PairConfig {
  int connections = 500;
  uint64_t seed = 1;
  Profile profile = LinuxProfile();
};
Result RunPair(const PairConfig& c);

// `trials` single connections, each losing the first MAD of `attr` (REQ, REP,
// RTU, DREQ or DREP). Recovery = the phase time: setup (REQ, REP), passive
// ESTABLISHED after active (RTU), disconnect (DREQ, DREP).
struct RecoveryConfig {
  mad::wire::CmAttr attr = mad::wire::CmAttr::kReq;
  int trials = 20;
  uint64_t seed = 1;
  Profile profile = LowLatencyProfile();
  Duration bound = Duration::Millis(20);  // violation if any trial reaches it
};
Result RunRecovery(const RecoveryConfig& c, std::vector<Duration>* times = nullptr);
// The no-loss phase time of the same message, for comparison.
Duration RecoveryBaseline(const RecoveryConfig& c);

// A listener (host 0) with a slow application, a REQ flood from host 2 (random
// comm IDs, CA GUIDs, QPNs) and a legitimate client on host 1.
struct FloodConfig {
  double reqs_per_second = 100000;
  Duration duration = Duration::Millis(200);
  int legit_connections = 20;
  uint32_t backlog = 128;
  Duration app_service_time = Duration::Micros(20);  // 50k requests/s
  uint64_t seed = 1;
  Profile profile = LowLatencyProfile();
  cm::BacklogPolicy policy = cm::BacklogPolicy::kReject;
};
Result RunFlood(const FloodConfig& c);

// Every MAD is sent intact followed by `copies` copies with one bit flipped.
struct BitflipConfig {
  int attempts = 2000;
  int copies = 4;
  int hosts = 4;
  uint64_t seed = 1;
  Profile profile = LowLatencyProfile();
};
Result RunBitflip(const BitflipConfig& c);

// Host 1's link goes down `down_after` after the first of `attempts` attempts
// (spaced `spacing`) and comes back `outage` later.
struct LinkFlapConfig {
  int attempts = 200;
  Duration spacing = Duration::Micros(50);
  Duration down_after = Duration::Millis(2);
  Duration outage = Duration::Millis(50);
  uint64_t seed = 1;
  Profile profile = LowLatencyProfile();
};
Result RunLinkFlap(const LinkFlapConfig& c, std::array<uint64_t, 5>* outcomes = nullptr);

std::string FormatDuration(Duration d);

}  // namespace uscm::soak

#endif  // USCM_TESTS_SOAK_SCENARIOS_H_
