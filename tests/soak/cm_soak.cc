// Full-size reliability runs (docs/RELIABILITY.md). One scenario per run:
//   cm_soak --scenario=loss --connections=100000 --loss=0.1 --dup=0.01 --reorder=0.01 --seed=1
//   cm_soak --scenario=pair10k --connections=10000
//   cm_soak --scenario=recovery --trials=1000 --profile=lowlat
//   cm_soak --scenario=flood --rate=100000 --duration_ms=1000
//   cm_soak --scenario=bitflip --connections=250000 --copies=4
//   cm_soak --scenario=linkflap --connections=1000 --outage_ms=50
// Prints the figures, any invariant violation, and a digest line: two runs
// with the same flags print the same digest. Exit status 1 on a violation.
#include <chrono>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "tests/soak/scenarios.h"

ABSL_FLAG(std::string, scenario, "loss", "loss | pair10k | recovery | flood | bitflip | linkflap");
ABSL_FLAG(int, connections, 2000, "connection attempts (loss, pair10k, bitflip, linkflap)");
ABSL_FLAG(int, hosts, 8, "hosts (loss, bitflip)");
ABSL_FLAG(double, loss, 0.10, "end-to-end MAD loss (loss)");
ABSL_FLAG(double, dup, 0.01, "end-to-end duplication (loss)");
ABSL_FLAG(double, reorder, 0.01, "end-to-end reordering (loss)");
ABSL_FLAG(double, attempts_per_second, 20000, "attempt rate (loss)");
ABSL_FLAG(int, hold_us, 1000, "loss: ESTABLISHED -> Disconnect on the active side");
ABSL_FLAG(int, passive_hold_us, -1, "loss: if >= 0, the passive side disconnects too (crossing DREQs)");
ABSL_FLAG(int, accept_delay_us, 0, "loss: the passive app accepts this late (auto-MRA past 50%)");
ABSL_FLAG(int, rtu_delay_us, 0, "loss: the active app sends RTU this late");
ABSL_FLAG(uint64_t, seed, 1, "seed of the whole run");
ABSL_FLAG(std::string, profile, "", "linux | lowlat (default: per scenario)");
ABSL_FLAG(std::string, message, "all", "recovery: REQ | REP | RTU | DREQ | DREP | all");
ABSL_FLAG(int, trials, 1000, "recovery: trials per message");
ABSL_FLAG(double, rate, 100000, "flood: REQs per second");
ABSL_FLAG(int, duration_ms, 1000, "flood: duration");
ABSL_FLAG(int, legit, 50, "flood: legitimate connections");
ABSL_FLAG(int, backlog, 128, "flood: listener backlog");
ABSL_FLAG(int, service_us, 20, "flood: the listener app's time per request");
ABSL_FLAG(bool, drop_policy, false, "flood: backlog overflow drops (Linux) instead of REJ 3");
ABSL_FLAG(int, copies, 4, "bitflip: corrupted copies per MAD");
ABSL_FLAG(int, outage_ms, 50, "linkflap: outage length");
ABSL_FLAG(int, down_after_ms, 2, "linkflap: outage start");

namespace uscm::soak {
namespace {

Profile PickProfile(const std::string& dflt) {
  const std::string name = absl::GetFlag(FLAGS_profile).empty() ? dflt : absl::GetFlag(FLAGS_profile);
  auto p = ProfileByName(name);
  if (!p.ok()) {
    std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
    std::exit(2);
  }
  return *p;
}

bool Print(const std::string& title, const Result& r) {
  std::printf("== %s\n%s", title.c_str(), r.Summary().c_str());
  return r.violations.empty();
}

int Main() {
  const std::string s = absl::GetFlag(FLAGS_scenario);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const auto start = std::chrono::steady_clock::now();
  bool ok = true;
  if (s == "loss") {
    LossConfig c;
    c.attempts = absl::GetFlag(FLAGS_connections);
    c.hosts = absl::GetFlag(FLAGS_hosts);
    c.loss = absl::GetFlag(FLAGS_loss);
    c.duplicate = absl::GetFlag(FLAGS_dup);
    c.reorder = absl::GetFlag(FLAGS_reorder);
    c.attempts_per_second = absl::GetFlag(FLAGS_attempts_per_second);
    c.hold = mad::Duration::Micros(absl::GetFlag(FLAGS_hold_us));
    c.accept_delay = mad::Duration::Micros(absl::GetFlag(FLAGS_accept_delay_us));
    c.rtu_delay = mad::Duration::Micros(absl::GetFlag(FLAGS_rtu_delay_us));
    if (absl::GetFlag(FLAGS_passive_hold_us) >= 0) {
      c.passive_hold = mad::Duration::Micros(absl::GetFlag(FLAGS_passive_hold_us));
    }
    c.seed = seed;
    c.profile = PickProfile("linux");
    ok = Print("loss", RunLoss(c));
  } else if (s == "pair10k") {
    PairConfig c;
    c.connections = absl::GetFlag(FLAGS_connections);
    c.seed = seed;
    c.profile = PickProfile("linux");
    ok = Print("pair", RunPair(c));
  } else if (s == "recovery") {
    const std::string m = absl::GetFlag(FLAGS_message);
    for (auto attr : {mad::wire::CmAttr::kReq, mad::wire::CmAttr::kRep, mad::wire::CmAttr::kRtu,
                      mad::wire::CmAttr::kDreq, mad::wire::CmAttr::kDrep}) {
      if (m != "all" && m != mad::wire::CmAttrName(attr)) continue;
      RecoveryConfig c;
      c.attr = attr;
      c.trials = absl::GetFlag(FLAGS_trials);
      c.seed = seed;
      c.profile = PickProfile("lowlat");
      if (c.profile.name == "linux") c.bound = mad::Duration::Seconds(60);
      ok &= Print(absl::StrCat("recovery ", mad::wire::CmAttrName(attr)), RunRecovery(c));
    }
  } else if (s == "flood") {
    FloodConfig c;
    c.reqs_per_second = absl::GetFlag(FLAGS_rate);
    c.duration = mad::Duration::Millis(absl::GetFlag(FLAGS_duration_ms));
    c.legit_connections = absl::GetFlag(FLAGS_legit);
    c.backlog = static_cast<uint32_t>(absl::GetFlag(FLAGS_backlog));
    c.app_service_time = mad::Duration::Micros(absl::GetFlag(FLAGS_service_us));
    c.policy = absl::GetFlag(FLAGS_drop_policy) ? cm::BacklogPolicy::kDrop : cm::BacklogPolicy::kReject;
    c.seed = seed;
    c.profile = PickProfile("lowlat");
    ok = Print("flood", RunFlood(c));
  } else if (s == "bitflip") {
    BitflipConfig c;
    c.attempts = absl::GetFlag(FLAGS_connections);
    c.copies = absl::GetFlag(FLAGS_copies);
    c.hosts = absl::GetFlag(FLAGS_hosts);
    c.seed = seed;
    c.profile = PickProfile("lowlat");
    ok = Print("bitflip", RunBitflip(c));
  } else if (s == "linkflap") {
    LinkFlapConfig c;
    c.attempts = absl::GetFlag(FLAGS_connections);
    c.outage = mad::Duration::Millis(absl::GetFlag(FLAGS_outage_ms));
    c.down_after = mad::Duration::Millis(absl::GetFlag(FLAGS_down_after_ms));
    c.seed = seed;
    c.profile = PickProfile("lowlat");
    ok = Print("linkflap", RunLinkFlap(c));
  } else {
    std::fprintf(stderr, "unknown --scenario=%s\n", s.c_str());
    return 2;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wall: %.1fs\n%s\n", wall, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace uscm::soak

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return uscm::soak::Main();
}
