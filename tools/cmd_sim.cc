// `uscm sim`: research runs on the simulated fabric. Every list-valued
// parameter (--loss, --duplicate, --latency-us, --jitter-us, --hosts,
// --topology, --pattern, --arrivals, --sa-queue-limit, --path-cache,
// --cm-retries, --cm-profile, --procs-per-host) is swept: one run per point of the cross product of the lists
// (same seed, same workload each time), connections spread over the hosts;
// writes connections.csv (one row per connection), summary.csv (one row per
// run), setup_cdf.csv (each run's setup-time CDF), with --sample-us
// timeseries.csv (SA queue depth and retransmissions over virtual time), all
// with a column per swept parameter, and, when gnuplot is installed,
// setup_cdf.png, retransmissions.png (and timeseries.png) with one curve per run.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/sim_progress.h"
#include "tools/sim_router_host.h"
#include "tools/sim_world.h"
#include "mad/sim/fat_tree.h"
#include "mad/sim/topology.h"
#include "tools/workload.h"

namespace uscm::tools {
namespace {

absl::StatusOr<std::vector<double>> ParseList(const std::string& text, const char* flag,
                                              double min, double max, const char* what) {
  std::vector<double> v;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double x = 0;
    if (!absl::SimpleAtod(part, &x) || !(x >= min && x <= max)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", part, "' is not ", what));
    }
    v.push_back(x);
  }
  if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return v;
}

absl::StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text, const char* flag,
                                                  int64_t min, int64_t max) {
  std::vector<int64_t> v;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t x = 0;
    if (!absl::SimpleAtoi(part, &x) || x < min || x > max) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", part,
                                                     "' is not an integer in [", min, ", ", max,
                                                     "]"));
    }
    v.push_back(x);
  }
  if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return v;
}

bool HaveGnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

std::string Fmt(double v) { return absl::StrFormat("%.3f", v); }

// One point of the sweep.
struct RunParams {
  double loss = 0, duplicate = 0, latency_us = 0, jitter_us = 0;
  int64_t hosts = 2;
  std::string pattern = "ring", arrivals = "fixed";
  std::string cm_profile = "spec";
  int64_t cm_retries = 15;
  bool path_cache = false;
  int64_t sa_queue_limit = 0;
  int64_t procs_per_host = 1;
  std::string topology;       // the --topology value ("" = generated / default)
  std::string topology_file;  // what SimWorld loads
};

// The parameters as CSV columns: loss always (the historical first column),
// then each other parameter that has more than one value, in this order.
struct Columns {
  bool duplicate = false, latency_us = false, jitter_us = false, hosts = false, topology = false;
  bool pattern = false, arrivals = false;
  bool cm_profile = false, cm_retries = false, path_cache = false, sa_queue_limit = false;
  bool procs_per_host = false;

  std::string Header() const {
    std::string h = "loss";
    if (duplicate) h += ",duplicate";
    if (latency_us) h += ",latency_us";
    if (jitter_us) h += ",jitter_us";
    if (hosts) h += ",hosts";
    if (topology) h += ",topology";
    if (pattern) h += ",pattern";
    if (arrivals) h += ",arrivals";
    if (cm_profile) h += ",cm_profile";
    if (cm_retries) h += ",cm_retries";
    if (path_cache) h += ",path_cache";
    if (sa_queue_limit) h += ",sa_queue_limit";
    if (procs_per_host) h += ",procs_per_host";
    return h;
  }
  std::string Values(const RunParams& p) const {
    std::string v = absl::StrFormat("%g", p.loss);
    if (duplicate) absl::StrAppendFormat(&v, ",%g", p.duplicate);
    if (latency_us) absl::StrAppendFormat(&v, ",%g", p.latency_us);
    if (jitter_us) absl::StrAppendFormat(&v, ",%g", p.jitter_us);
    if (hosts) absl::StrAppendFormat(&v, ",%d", p.hosts);
    if (topology) absl::StrAppend(&v, ",", p.topology);
    if (pattern) absl::StrAppend(&v, ",", p.pattern);
    if (arrivals) absl::StrAppend(&v, ",", p.arrivals);
    if (cm_profile) absl::StrAppend(&v, ",", p.cm_profile);
    if (cm_retries) absl::StrAppend(&v, ",", p.cm_retries);
    if (path_cache) absl::StrAppend(&v, ",", p.path_cache ? "on" : "off");
    if (sa_queue_limit) absl::StrAppend(&v, ",", p.sa_queue_limit);
    if (procs_per_host) absl::StrAppend(&v, ",", p.procs_per_host);
    return v;
  }
  // The curve / progress label: the swept parameters ("loss 0.01, latency_us
  // 5"); just the loss when nothing but the loss varies.
  bool swept_loss = false;
  std::string Label(const RunParams& p) const {
    std::vector<std::string> parts;
    if (swept_loss || !(duplicate || latency_us || jitter_us || hosts || topology || pattern ||
                        arrivals || cm_profile || cm_retries || path_cache || sa_queue_limit ||
                        procs_per_host)) {
      parts.push_back(absl::StrFormat("loss %g", p.loss));
    }
    if (duplicate) parts.push_back(absl::StrFormat("duplicate %g", p.duplicate));
    if (latency_us) parts.push_back(absl::StrFormat("latency_us %g", p.latency_us));
    if (jitter_us) parts.push_back(absl::StrFormat("jitter_us %g", p.jitter_us));
    if (hosts) parts.push_back(absl::StrFormat("hosts %d", p.hosts));
    if (topology) parts.push_back("topology " + p.topology);
    if (pattern) parts.push_back("pattern " + p.pattern);
    if (arrivals) parts.push_back("arrivals " + p.arrivals);
    if (cm_profile) parts.push_back("cm_profile " + p.cm_profile);
    if (cm_retries) parts.push_back(absl::StrFormat("cm_retries %d", p.cm_retries));
    if (path_cache) parts.push_back(p.path_cache ? "path_cache on" : "path_cache off");
    if (sa_queue_limit) parts.push_back(absl::StrFormat("sa_queue_limit %d", p.sa_queue_limit));
    if (procs_per_host) parts.push_back(absl::StrFormat("procs_per_host %d", p.procs_per_host));
    return absl::StrJoin(parts, ", ");
  }
  // "loss rate", or the swept parameters joined by " x ".
  std::string Grouping() const {
    std::vector<std::string> names;
    if (swept_loss) names.push_back("loss");
    if (duplicate) names.push_back("duplicate");
    if (latency_us) names.push_back("latency_us");
    if (jitter_us) names.push_back("jitter_us");
    if (hosts) names.push_back("hosts");
    if (topology) names.push_back("topology");
    if (pattern) names.push_back("pattern");
    if (arrivals) names.push_back("arrivals");
    if (cm_profile) names.push_back("cm_profile");
    if (cm_retries) names.push_back("cm_retries");
    if (path_cache) names.push_back("path_cache");
    if (sa_queue_limit) names.push_back("sa_queue_limit");
    if (procs_per_host) names.push_back("procs_per_host");
    if (names.empty() || (names.size() == 1 && swept_loss)) return "loss rate";
    return absl::StrJoin(names, " x ");
  }
};

// gnuplot single-quoted string: '' stands for a quote.
std::string GpQuote(const std::string& s) {
  return "'" + absl::StrReplaceAll(s, {{"'", "''"}}) + "'";
}

absl::Status WritePlots(const std::string& dir, const std::string& grouping,
                        const std::vector<std::string>& labels,
                        const std::vector<std::vector<double>>& setups,
                        const std::vector<std::map<int, int>>& retx,
                        const std::vector<std::vector<Sample>>& series) {
  std::FILE* f = std::fopen((dir + "/setup_cdf.dat").c_str(), "w");
  if (f == nullptr) return absl::UnavailableError("cannot write " + dir + "/setup_cdf.dat");
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::FPrintF(f, "# %s\n", labels[i]);
    for (size_t j = 0; j < setups[i].size(); ++j) {
      absl::FPrintF(f, "%.3f %.5f\n", setups[i][j] / 1e3, double(j + 1) / setups[i].size());
    }
    absl::FPrintF(f, "\n\n");
  }
  std::fclose(f);
  f = std::fopen((dir + "/retransmissions.dat").c_str(), "w");
  if (f == nullptr) return absl::UnavailableError("cannot write " + dir + "/retransmissions.dat");
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::FPrintF(f, "# %s\n", labels[i]);
    for (const auto& [n, count] : retx[i]) absl::FPrintF(f, "%d %d\n", n, count);
    absl::FPrintF(f, "\n\n");
  }
  std::fclose(f);
  std::string script = absl::StrCat(
      "set terminal png size 900,600 noenhanced\nset grid\n",
      "set output ", GpQuote(dir + "/setup_cdf.png"), "\n",
      "set title ", GpQuote("Connection setup time (path query to ESTABLISHED), CDF per " +
                            grouping), "\n",
      "set xlabel 'setup time (ms, virtual)'\nset ylabel 'fraction of connections'\n",
      "set logscale x\nset key bottom right\nplot ");
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StrAppend(&script, i ? ", " : "", GpQuote(dir + "/setup_cdf.dat"), " index ", i,
                    " with steps title ", GpQuote(labels[i]));
  }
  absl::StrAppend(&script, "\nunset logscale x\nset output ", GpQuote(dir + "/retransmissions.png"),
                  "\nset title ", GpQuote("CM retransmissions per connection, per " + grouping),
                  "\nset xlabel 'retransmissions (REQ + REP resends)'\nset ylabel 'connections'\n"
                  "set key top right\nset style data linespoints\nplot ");
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StrAppend(&script, i ? ", " : "", GpQuote(dir + "/retransmissions.dat"), " index ", i,
                    " title ", GpQuote(labels[i]));
  }
  absl::StrAppend(&script, "\n");
  if (!series.empty()) {
    const std::string dat = dir + "/timeseries.dat";
    f = std::fopen(dat.c_str(), "w");
    if (f == nullptr) return absl::UnavailableError("cannot write " + dat);
    for (size_t i = 0; i < labels.size(); ++i) {
      absl::FPrintF(f, "# %s\n", labels[i]);
      for (const Sample& s : series[i]) {
        absl::FPrintF(f, "%.3f %d %d %d\n", s.t_ms, s.sa_queue, s.sa_retries,
                      s.cm_retransmissions);
      }
      absl::FPrintF(f, "\n\n");
    }
    std::fclose(f);
    absl::StrAppend(&script, "set terminal png size 900,900 noenhanced\nset output ",
                    GpQuote(dir + "/timeseries.png"), "\nset multiplot layout 2,1\n",
                    "set key top right\nset logscale x\n",
                    "set xlabel 'virtual time (ms, log; the sample at 0 is off the axis)'\n",
                    "set title ", GpQuote("SA queue depth (waiting + in service), per " +
                                          grouping), "\nset ylabel 'requests'\nplot ");
    for (size_t i = 0; i < labels.size(); ++i) {
      absl::StrAppend(&script, i ? ", " : "", GpQuote(dat), " index ", i,
                      " using 1:2 with steps title ", GpQuote(labels[i]));
    }
    absl::StrAppend(&script, "\nset title ",
                    GpQuote("Retransmissions so far (SA queries + CM MADs), per " + grouping),
                    "\nset ylabel 'retransmissions'\nset key bottom right\nplot ");
    for (size_t i = 0; i < labels.size(); ++i) {
      absl::StrAppend(&script, i ? ", " : "", GpQuote(dat), " index ", i,
                      " using 1:($3+$4) with steps title ", GpQuote(labels[i]));
    }
    absl::StrAppend(&script, "\nunset multiplot\n");
  }
  const std::string gp = dir + "/plots.gp";
  f = std::fopen(gp.c_str(), "w");
  if (f == nullptr) return absl::UnavailableError("cannot write " + gp);
  std::fputs(script.c_str(), f);
  std::fclose(f);
  if (std::system(("gnuplot '" + gp + "'").c_str()) != 0) {
    return absl::InternalError("gnuplot failed on " + gp);
  }
  return absl::OkStatus();
}

constexpr size_t kMaxRuns = 10000;

}  // namespace

int RunSim(int argc, char** argv) {
  int64_t connections = 200, seed = 1, interval_us = 10, group = 0;
  double sa_service_us = 0, sample_us = 0;
  std::string pattern_list = "ring", arrivals_list = "fixed";
  std::string profile_list = "spec", retries_list = "15", path_cache_list = "off";
  std::string queue_limit_list = "0", procs_list = "1";
  std::string loss_list = "0,0.01,0.05,0.1", duplicate_list = "0", latency_list = "0.5",
              jitter_list = "0", hosts_list = "4";
  std::string topology_list, out = "uscm-sim", progress_mode = "auto";
  bool plots = true, reject = false, ece = false;
  FlagSet flags("sim [options]",
                "Runs a connection workload on the simulated fabric once per point of the\n"
                "sweep and writes CSV (and PNG plots with gnuplot). Every list option takes\n"
                "comma-separated values; the runs are the cross product of all lists (loss\n"
                "varies fastest, then duplicate, jitter, latency, hosts, topology, pattern,\n"
                "arrivals, SA queue limit, path cache, CM retries, CM profile, processes\n"
                "per host). Virtual time: results depend only on the options and the\n"
                "seed, so the same seed gives the same files.");
  flags.String("hosts", &hosts_list, "hosts taking part, list (who connects to whom: --pattern)");
  flags.Int("connections", &connections, "connections per run", 1, 1000000);
  flags.String("loss", &loss_list, "per-link loss probabilities, list");
  flags.String("duplicate", &duplicate_list, "per-link duplication probabilities, list");
  flags.String("latency-us", &latency_list, "per-link latencies in microseconds, list");
  flags.String("jitter-us", &jitter_list, "per-link extra uniform delays in microseconds, list");
  flags.Int("interval-us", &interval_us,
            "time between connection starts (us; the mean gap with --arrivals=poisson)", 0,
            1000000000);
  flags.String("pattern", &pattern_list,
               "who connects to whom, list: ring (host k -> k+1), all-to-all (every ordered "
               "pair of --group hosts in turn), incast (every host -> host 0), random (seeded "
               "random pairs)");
  flags.Double("sa-service-us", &sa_service_us,
               "the SA as one server: microseconds per request, FIFO queue (0 = answers at "
               "once); adds sa_wait_mean_us, sa_max_queue, sa_dropped to summary.csv",
               0, 1e9);
  flags.String("sa-queue-limit", &queue_limit_list,
               "with --sa-service-us: requests beyond this many (waiting + in service) are "
               "dropped and retried by the clients (0 = no limit), list");
  flags.String("procs-per-host", &procs_list,
               "uscm processes per host, list (1..255; 1 = the process owns QP1): more "
               "puts the host's MAD router (cm/router) in front of that many processes, each "
               "with its own CM endpoint, SA client and comm ID range, listening on its own "
               "service ID; connections' ends go to a host's processes in turn; adds "
               "router_to_clients, router_unroutable, router_refused to summary.csv");
  flags.Double("sample-us", &sample_us,
               "every this many us of virtual time, sample the SA queue depth and the "
               "retransmissions so far into timeseries.csv (and timeseries.png); 0 = off",
               0, 1e12);
  flags.Int("group", &group, "hosts taking part in --pattern=all-to-all (0 = all)", 0, 100000);
  flags.String("arrivals", &arrivals_list,
               "when connections start, list: fixed (every --interval-us), storm (all at "
               "once), poisson (exponential gaps, mean --interval-us)");
  flags.String("cm-profile", &profile_list,
               "CM timer profiles, list: spec (exact IBA times, response timeout code 20, "
               "~4.3 s), linux (Linux's ms rounding of the same codes), lowlat (exact, "
               "codes 11 = 8.4 ms, packet lifetime 7, local ACK timeout 10)");
  flags.String("cm-retries", &retries_list, "MaxCMRetries of every REQ (and so REP), list, 0..15");
  flags.String("path-cache", &path_cache_list,
               "each host's SA client caches PathRecords, list: on, off; 'on' adds "
               "path_cache_hits to summary.csv");
  flags.String("topology", &topology_list,
               "ibsim net files, list (default: two hosts, or --hosts CAs behind "
               "generated switches: one, a core and two leaves up to 508 hosts, then a "
               "radix-36 fat tree of two or three levels; see uscm topo)");
  flags.Int("seed", &seed, "simulation seed", 0);
  flags.String("out", &out, "output directory (created)");
  flags.Bool("plots", &plots, "draw PNG plots with gnuplot");
  flags.String("progress", &progress_mode,
               "status line on stderr (run k of n, connections settled, virtual and wall "
               "time): always, auto (when stderr is a terminal), never");
  flags.Bool("reject", &reject, "the passive side rejects every connection");
  flags.Bool("ece", &ece, "connections carry ECE");
  flags.Epilog(
      "Examples:\n"
      "  uscm sim --hosts=8 --connections=1000 --loss=0,0.02,0.1 --out=/tmp/run\n"
      "  uscm sim --loss=0,0.05 --latency-us=0.5,50 --hosts=2,8 --out=/tmp/grid  (8 runs)\n");
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(argc, argv, &positional)) return *rc;
  if (!positional.empty()) return UsageError("sim", "unexpected argument '" + positional[0] + "'");
  auto losses = ParseList(loss_list, "loss", 0, 1, "a probability in [0, 1]");
  if (!losses.ok()) return UsageError("sim", std::string(losses.status().message()));
  auto duplicates = ParseList(duplicate_list, "duplicate", 0, 1, "a probability in [0, 1]");
  if (!duplicates.ok()) return UsageError("sim", std::string(duplicates.status().message()));
  auto latencies = ParseList(latency_list, "latency-us", 0, 1e9, "a delay in [0, 1e9] us");
  if (!latencies.ok()) return UsageError("sim", std::string(latencies.status().message()));
  auto jitters = ParseList(jitter_list, "jitter-us", 0, 1e9, "a delay in [0, 1e9] us");
  if (!jitters.ok()) return UsageError("sim", std::string(jitters.status().message()));
  auto hosts = ParseIntList(hosts_list, "hosts", 2, 100000);
  if (!hosts.ok()) return UsageError("sim", std::string(hosts.status().message()));
  std::vector<std::string> patterns = absl::StrSplit(pattern_list, ',', absl::SkipEmpty());
  std::vector<std::string> arrivals = absl::StrSplit(arrivals_list, ',', absl::SkipEmpty());
  if (patterns.empty()) return UsageError("sim", "--pattern is empty");
  if (arrivals.empty()) return UsageError("sim", "--arrivals is empty");
  for (const std::string& p : patterns) {
    WorkloadOptions::Pattern unused;
    if (!ParsePattern(p, &unused)) {
      return UsageError("sim", "--pattern: '" + p + "': expected ring, all-to-all, incast or random");
    }
  }
  for (const std::string& a : arrivals) {
    WorkloadOptions::Arrivals unused;
    if (!ParseArrivals(a, &unused)) {
      return UsageError("sim", "--arrivals: '" + a + "': expected fixed, storm or poisson");
    }
  }
  std::vector<std::string> profiles = absl::StrSplit(profile_list, ',', absl::SkipEmpty());
  if (profiles.empty()) return UsageError("sim", "--cm-profile is empty");
  for (const std::string& name : profiles) {
    CmProfile unused;
    if (!CmProfileByName(name, &unused)) {
      return UsageError("sim", "--cm-profile: '" + name + "': expected spec, linux or lowlat");
    }
  }
  auto retries = ParseIntList(retries_list, "cm-retries", 0, 15);
  if (!retries.ok()) return UsageError("sim", std::string(retries.status().message()));
  auto procs = ParseIntList(procs_list, "procs-per-host", 1, 255);
  if (!procs.ok()) return UsageError("sim", std::string(procs.status().message()));
  const bool any_procs = *std::max_element(procs->begin(), procs->end()) > 1;
  auto queue_limits = ParseIntList(queue_limit_list, "sa-queue-limit", 0, 100000000);
  if (!queue_limits.ok()) {
    return UsageError("sim", std::string(queue_limits.status().message()));
  }
  std::vector<bool> caches;
  bool any_cache = false;
  for (absl::string_view v : absl::StrSplit(path_cache_list, ',', absl::SkipEmpty())) {
    if (v != "on" && v != "off") {
      return UsageError("sim", absl::StrCat("--path-cache: '", v, "': expected on or off"));
    }
    caches.push_back(v == "on");
    any_cache = any_cache || v == "on";
  }
  if (caches.empty()) return UsageError("sim", "--path-cache is empty");
  std::vector<std::string> topologies = absl::StrSplit(topology_list, ',', absl::SkipEmpty());
  if (topologies.empty()) topologies.push_back("");
  bool show_progress;
  if (progress_mode == "always") {
    show_progress = true;
  } else if (progress_mode == "never") {
    show_progress = false;
  } else if (progress_mode == "auto") {
    show_progress = isatty(STDERR_FILENO);
  } else {
    return UsageError("sim", "--progress=" + progress_mode + ": expected always, auto or never");
  }
  const size_t runs = losses->size() * duplicates->size() * latencies->size() * jitters->size() *
                      hosts->size() * topologies.size() * patterns.size() * arrivals.size() *
                      profiles.size() * retries->size() * caches.size() * queue_limits->size() *
                      procs->size();
  if (runs > kMaxRuns) {
    return UsageError("sim", absl::StrCat("the sweep has ", runs, " runs (the cross product of "
                                          "the lists); at most ", kMaxRuns));
  }
  Columns cols;
  cols.swept_loss = losses->size() > 1;
  cols.duplicate = duplicates->size() > 1;
  cols.latency_us = latencies->size() > 1;
  cols.jitter_us = jitters->size() > 1;
  cols.hosts = hosts->size() > 1;
  cols.topology = topologies.size() > 1;
  cols.pattern = patterns.size() > 1;
  cols.arrivals = arrivals.size() > 1;
  cols.cm_profile = profiles.size() > 1;
  cols.cm_retries = retries->size() > 1;
  cols.path_cache = caches.size() > 1;
  cols.sa_queue_limit = queue_limits->size() > 1;
  cols.procs_per_host = procs->size() > 1;
  if (std::system(("mkdir -p '" + out + "'").c_str()) != 0) {
    return Failure("sim", "cannot create the output directory " + out);
  }
  // The sweep, loss varying fastest; generated topologies written once per
  // host count (DIR/topology.net, or DIR/topology-hN.net when --hosts is a list).
  std::vector<RunParams> sweep;
  for (const std::string& topo : topologies) {
    for (int64_t h : *hosts) {
      std::string file = topo;
      if (topo.empty() && h > 2) {
        auto generated = sim::DefaultTopology(static_cast<int>(h));
        if (!generated.ok()) return UsageError("sim", std::string(generated.status().message()));
        file = cols.hosts ? absl::StrCat(out, "/topology-h", h, ".net") : out + "/topology.net";
        std::FILE* f = std::fopen(file.c_str(), "w");
        if (f == nullptr) return Failure("sim", "cannot write " + file);
        std::fputs(sim::FormatNetFile(*generated).c_str(), f);
        std::fclose(f);
      }
      for (double lat : *latencies) {
        for (double jit : *jitters) {
          for (double dup : *duplicates) {
            for (double loss : *losses) {
              RunParams p;
              p.loss = loss;
              p.duplicate = dup;
              p.latency_us = lat;
              p.jitter_us = jit;
              p.hosts = h;
              p.topology = topo;
              p.topology_file = file;
              sweep.push_back(std::move(p));
            }
          }
        }
      }
    }
  }
  // Then the traffic pattern, the arrivals, the SA queue limit, the path
  // cache, the CM retries, the CM profile and the processes per host slowest.
  {
    std::vector<RunParams> base = std::move(sweep);
    sweep.clear();
    for (int64_t np : *procs) {
      for (const std::string& prof : profiles) {
        for (int64_t retry : *retries) {
          for (bool cache : caches) {
            for (int64_t limit : *queue_limits) {
              for (const std::string& arr : arrivals) {
                for (const std::string& pat : patterns) {
                  for (RunParams p : base) {
                    p.pattern = pat;
                    p.arrivals = arr;
                    p.sa_queue_limit = limit;
                    p.path_cache = cache;
                    p.cm_retries = retry;
                    p.cm_profile = prof;
                    p.procs_per_host = np;
                    sweep.push_back(std::move(p));
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  const std::string conn_csv = out + "/connections.csv";
  const std::string sum_csv = out + "/summary.csv";
  std::FILE* cf = std::fopen(conn_csv.c_str(), "w");
  std::FILE* sf = std::fopen(sum_csv.c_str(), "w");
  const std::string cdf_csv = out + "/setup_cdf.csv";
  const std::string ts_csv = out + "/timeseries.csv";
  std::FILE* df = std::fopen(cdf_csv.c_str(), "w");
  std::FILE* tf = sample_us > 0 ? std::fopen(ts_csv.c_str(), "w") : nullptr;
  if (cf == nullptr || sf == nullptr || df == nullptr || (sample_us > 0 && tf == nullptr)) {
    return Failure("sim", "cannot write CSV files in " + out);
  }
  const std::string param_header = cols.Header();
  absl::FPrintF(cf, "%s,connection,client,server,outcome,setup_us,retransmissions\n",
                param_header);
  absl::FPrintF(sf, "%s,connections,established,rejected,failed,setup_min_us,setup_p50_us,"
                "setup_p99_us,setup_max_us,retransmissions_mean,sa_retries,fabric_sent,"
                "fabric_dropped,virtual_ms%s%s%s\n", param_header,
                sa_service_us > 0 ? ",sa_wait_mean_us,sa_max_queue,sa_dropped" : "",
                any_cache ? ",path_cache_hits" : "",
                any_procs ? ",router_to_clients,router_unroutable,router_refused" : "");
  absl::FPrintF(df, "%s,setup_us,fraction\n", param_header);
  if (tf != nullptr) {
    absl::FPrintF(tf, "%s,t_ms,settled,sa_queue,sa_dropped,sa_retries,cm_retransmissions\n",
                  param_header);
  }
  SweepProgress progress(show_progress, isatty(STDERR_FILENO) != 0);
  std::vector<std::vector<Sample>> series;
  std::vector<std::vector<double>> setups;
  std::vector<std::map<int, int>> retx;
  std::vector<std::string> labels;
  const bool by_label = cols.Grouping() != "loss rate";
  int first_width = 8;
  if (by_label) {
    for (const RunParams& p : sweep) {
      first_width = std::max(first_width, static_cast<int>(cols.Label(p).size()));
    }
  }
  absl::PrintF("%-*s %8s %8s %8s %12s %12s %12s %10s\n", first_width,
               by_label ? "run" : "loss", "conns", "estab", "failed", "p50 (us)", "p99 (us)",
               "max (us)", "retx/conn");
  for (size_t run = 0; run < sweep.size(); ++run) {
    const RunParams& p = sweep[run];
    const std::string label = cols.Label(p);
    SimWorldOptions wo;
    wo.seed = static_cast<uint64_t>(seed);
    wo.link.loss = p.loss;
    wo.link.duplicate = p.duplicate;
    wo.link.latency = Duration::Nanos(static_cast<int64_t>(p.latency_us * 1e3));
    wo.link.jitter = Duration::Nanos(static_cast<int64_t>(p.jitter_us * 1e3));
    wo.topology_file = p.topology_file;
    wo.max_hosts = static_cast<size_t>(p.hosts);
    wo.sa.service_time = Duration::Nanos(static_cast<int64_t>(sa_service_us * 1e3));
    wo.sa.queue_limit = static_cast<size_t>(p.sa_queue_limit);
    wo.path_cache = p.path_cache;
    wo.procs_per_host = static_cast<size_t>(p.procs_per_host);
    CmProfile profile;
    (void)CmProfileByName(p.cm_profile, &profile);
    wo.cm.rounding = profile.rounding;
    auto world = SimWorld::Create(wo, nullptr);
    if (!world.ok()) {
      return Failure("sim", absl::StrCat("run ", label, ": ", world.status().message()));
    }
    WorkloadOptions o;
    o.connections = static_cast<int>(connections);
    o.interval = Duration::Micros(interval_us);
    o.reject = reject;
    o.ece = ece;
    o.spread = true;
    (void)ParsePattern(p.pattern, &o.pattern);
    (void)ParseArrivals(p.arrivals, &o.arrivals);
    o.group = static_cast<int>(group);
    o.seed = static_cast<uint64_t>(seed);
    o.profile = profile;
    o.max_cm_retries = static_cast<uint8_t>(p.cm_retries);
    o.sample_interval = Duration::Nanos(static_cast<int64_t>(sample_us * 1e3));
    progress.StartRun(run, sweep.size(), label);
    sim::Scheduler& scheduler = (*world)->scheduler();
    const TimePoint t0 = scheduler.Now();
    progress.Update(0, o.connections, 0);
    auto r = RunWorkload(**world, o, [&](int done, int total) {
      if (done == total || done % std::max(1, total / 1000) == 0) {
        progress.Update(done, total, (scheduler.Now() - t0).millis());
      }
    });
    if (!r.ok()) {
      progress.Done();
      return Failure("sim", absl::StrCat("run ", label, ": ", r.status().message()));
    }
    const std::string values = cols.Values(p);
    std::vector<double> times;
    std::map<int, int> hist;
    int established = 0, rejected = 0, failed = 0;
    double retx_sum = 0;
    for (const ConnResult& c : r->conns) {
      const char* outcome = c.established ? "established" : c.rejected ? "rejected" : "failed";
      absl::FPrintF(cf, "%s,%d,%s,%s,%s,%s,%d\n", values, c.index, c.client, c.server, outcome,
                    Fmt(c.setup_us), c.retransmissions);
      if (c.established) ++established;
      if (c.rejected) ++rejected;
      if (!c.established && !c.rejected) ++failed;
      if (c.established || c.rejected) times.push_back(c.setup_us);
      ++hist[c.retransmissions];
      retx_sum += c.retransmissions;
    }
    std::sort(times.begin(), times.end());
    for (size_t j = 0; j < times.size(); ++j) {
      absl::FPrintF(df, "%s,%s,%.5f\n", values, Fmt(times[j]), double(j + 1) / times.size());
    }
    if (tf != nullptr) {
      for (const Sample& s : r->samples) {
        absl::FPrintF(tf, "%s,%s,%d,%d,%d,%d,%d\n", values, Fmt(s.t_ms), s.settled, s.sa_queue,
                      s.sa_dropped, s.sa_retries, s.cm_retransmissions);
      }
      series.push_back(std::move(r->samples));
    }
    const double mean_retx = retx_sum / r->conns.size();
    std::string sa_columns;
    if (sa_service_us > 0) {
      const sa::SimSaCounters& c = (*world)->sa().counters();
      sa_columns = absl::StrFormat(",%s,%d,%d",
                                   Fmt(c.served == 0 ? 0 : c.wait_ns_total / 1e3 / c.served),
                                   c.max_queue, c.dropped);
    }
    if (any_cache) absl::StrAppend(&sa_columns, ",", r->path_cache_hits);
    if (any_procs) {
      router::RouterCounters sum;  // all hosts' routers (none with one process)
      for (const auto& rh : (*world)->routers()) {
        sum.to_clients += rh->counters().to_clients;
        sum.wire_unroutable += rh->counters().wire_unroutable;
        sum.refused_mads += rh->counters().refused_mads;
      }
      absl::StrAppend(&sa_columns, ",", sum.to_clients, ",", sum.wire_unroutable, ",",
                      sum.refused_mads);
    }
    absl::FPrintF(sf, "%s,%d,%d,%d,%d,%s,%s,%s,%s,%.4f,%d,%d,%d,%s%s\n", values, r->conns.size(),
                  established, rejected, failed, Fmt(times.empty() ? 0 : times.front()),
                  Fmt(Percentile(times, 0.5)), Fmt(Percentile(times, 0.99)),
                  Fmt(times.empty() ? 0 : times.back()), mean_retx, r->sa_retries, r->fabric_sent,
                  r->fabric_dropped, Fmt(r->elapsed.millis()), sa_columns);
    progress.Done();
    const std::string first = by_label ? label : absl::StrFormat("%g", p.loss);
    absl::PrintF("%-*s %8d %8d %8d %12.1f %12.1f %12.1f %10.3f\n", first_width, first,
                 r->conns.size(), established + rejected, failed, Percentile(times, 0.5),
                 Percentile(times, 0.99), times.empty() ? 0.0 : times.back(), mean_retx);
    setups.push_back(std::move(times));
    retx.push_back(std::move(hist));
    labels.push_back(label);
  }
  std::fclose(cf);
  std::fclose(sf);
  std::fclose(df);
  if (tf != nullptr) std::fclose(tf);
  absl::PrintF("wrote %s and %s\n", conn_csv, sum_csv);
  absl::PrintF("wrote %s%s\n", cdf_csv, tf != nullptr ? " and " + ts_csv : "");
  if (plots) {
    if (!HaveGnuplot()) {
      absl::PrintF("gnuplot is not installed: no PNG plots (apt-get install gnuplot-nox, or "
                   "tools/setup.sh); the .csv files have the data\n");
    } else if (absl::Status s = WritePlots(out, cols.Grouping(), labels, setups, retx, series);
               !s.ok()) {
      return Failure("sim", std::string(s.message()));
    } else {
      absl::PrintF("wrote %s/setup_cdf.png and %s/retransmissions.png\n", out, out);
      if (!series.empty()) absl::PrintF("wrote %s/timeseries.png\n", out);
    }
  }
  return kExitOk;
}

}  // namespace uscm::tools
