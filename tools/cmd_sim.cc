// `uscm sim`: research runs on the simulated fabric. Every list-valued
// parameter (--loss, --duplicate, --latency-us, --jitter-us, --hosts,
// --topology, --pattern, --arrivals, --sa-queue-limit, --path-cache,
// --cm-retries, --cm-profile, --procs-per-host) is a dimension of the sweep
// (tools/sim_sweep.h): one run per point of the cross product of the lists
// (same seed, same workload each time), connections spread over the hosts;
// writes connections.csv (one row per connection), summary.csv (one row per
// run), setup_cdf.csv (each run's setup-time CDF), with --sample-us
// timeseries.csv (SA queue depth and retransmissions over virtual time), all
// with a column per swept parameter, and, when gnuplot is installed,
// setup_cdf.png, retransmissions.png (and timeseries.png) with one curve per
// run (tools/sim_plots.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/sim/fat_tree.h"
#include "mad/sim/topology.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/sim_plots.h"
#include "tools/sim_progress.h"
#include "tools/sim_router_host.h"
#include "tools/sim_sweep.h"
#include "tools/sim_world.h"
#include "tools/workload.h"

namespace uscm::tools {
namespace {

constexpr size_t kMaxRuns = 10000;

// The options as given.
struct SimFlags {
  SimSweepLists sweep;  // the swept ones, as comma-separated lists
  int64_t connections = 200, seed = 1, interval_us = 10, group = 0;
  double sa_service_us = 0, sample_us = 0;
  std::string out = "uscm-sim", progress = "auto";
  bool plots = true, reject = false, ece = false;
};

FlagSet SimFlagSet(SimFlags* f) {
  FlagSet flags("sim [options]",
                "Runs a connection workload on the simulated fabric once per point of the\n"
                "sweep and writes CSV (and PNG plots with gnuplot). Every list option takes\n"
                "comma-separated values; the runs are the cross product of all lists (loss\n"
                "varies fastest, then duplicate, jitter, latency, hosts, topology, pattern,\n"
                "arrivals, SA queue limit, path cache, CM retries, CM profile, processes\n"
                "per host). Virtual time: results depend only on the options and the\n"
                "seed, so the same seed gives the same files.");
  flags.String("hosts", &f->sweep.hosts,
               "hosts taking part, list (who connects to whom: --pattern)");
  flags.Int("connections", &f->connections, "connections per run", 1, 1000000);
  flags.String("loss", &f->sweep.loss, "per-link loss probabilities, list");
  flags.String("duplicate", &f->sweep.duplicate, "per-link duplication probabilities, list");
  flags.String("latency-us", &f->sweep.latency_us, "per-link latencies in microseconds, list");
  flags.String("jitter-us", &f->sweep.jitter_us,
               "per-link extra uniform delays in microseconds, list");
  flags.Int("interval-us", &f->interval_us,
            "time between connection starts (us; the mean gap with --arrivals=poisson)", 0,
            1000000000);
  flags.String("pattern", &f->sweep.pattern,
               "who connects to whom, list: ring (host k -> k+1), all-to-all (every ordered "
               "pair of --group hosts in turn), incast (every host -> host 0), random (seeded "
               "random pairs)");
  flags.Double("sa-service-us", &f->sa_service_us,
               "the SA as one server: microseconds per request, FIFO queue (0 = answers at "
               "once); adds sa_wait_mean_us, sa_max_queue, sa_dropped to summary.csv",
               0, 1e9);
  flags.String("sa-queue-limit", &f->sweep.sa_queue_limit,
               "with --sa-service-us: requests beyond this many (waiting + in service) are "
               "dropped and retried by the clients (0 = no limit), list");
  flags.String("procs-per-host", &f->sweep.procs_per_host,
               "uscm processes per host, list (1..255; 1 = the process owns QP1): more "
               "puts the host's MAD router (cm/router) in front of that many processes, each "
               "with its own CM endpoint, SA client and comm ID range, listening on its own "
               "service ID; connections' ends go to a host's processes in turn; adds "
               "router_to_clients, router_unroutable, router_refused to summary.csv");
  flags.Double("sample-us", &f->sample_us,
               "every this many us of virtual time, sample the SA queue depth and the "
               "retransmissions so far into timeseries.csv (and timeseries.png); 0 = off",
               0, 1e12);
  flags.Int("group", &f->group, "hosts taking part in --pattern=all-to-all (0 = all)", 0, 100000);
  flags.String("arrivals", &f->sweep.arrivals,
               "when connections start, list: fixed (every --interval-us), storm (all at "
               "once), poisson (exponential gaps, mean --interval-us)");
  flags.String("cm-profile", &f->sweep.cm_profile,
               "CM timer profiles, list: spec (exact IBA times, response timeout code 20, "
               "~4.3 s), linux (Linux's ms rounding of the same codes), lowlat (exact, "
               "codes 11 = 8.4 ms, packet lifetime 7, local ACK timeout 10)");
  flags.String("cm-retries", &f->sweep.cm_retries,
               "MaxCMRetries of every REQ (and so REP), list, 0..15");
  flags.String("path-cache", &f->sweep.path_cache,
               "each host's SA client caches PathRecords, list: on, off; 'on' adds "
               "path_cache_hits to summary.csv");
  flags.String("topology", &f->sweep.topology,
               "ibsim net files, list (default: two hosts, or --hosts CAs behind "
               "generated switches: one, a core and two leaves up to 508 hosts, then a "
               "radix-36 fat tree of two or three levels; see uscm topo)");
  flags.Int("seed", &f->seed, "simulation seed", 0);
  flags.String("out", &f->out, "output directory (created)");
  flags.Bool("plots", &f->plots, "draw PNG plots with gnuplot");
  flags.String("progress", &f->progress,
               "status line on stderr (run k of n, connections settled, virtual and wall "
               "time): always, auto (when stderr is a terminal), never");
  flags.Bool("reject", &f->reject, "the passive side rejects every connection");
  flags.Bool("ece", &f->ece, "connections carry ECE");
  flags.Epilog(
      "Examples:\n"
      "  uscm sim --hosts=8 --connections=1000 --loss=0,0.02,0.1 --out=/tmp/run\n"
      "  uscm sim --loss=0,0.05 --latency-us=0.5,50 --hosts=2,8 --out=/tmp/grid  (8 runs)\n");
  return flags;
}

std::string Fmt(double v) { return absl::StrFormat("%.3f", v); }

// The runs without --topology on more than two hosts get a generated
// topology, written once per host count (DIR/topology.net, or
// DIR/topology-hN.net when --hosts is a list). nullopt to go on, else the
// exit code.
absl::optional<int> UseGeneratedTopologies(const std::string& out, bool hosts_swept,
                                           std::vector<SimRunOptions>& runs) {
  std::map<size_t, std::string> written;  // by host count
  for (SimRunOptions& run : runs) {
    const size_t h = run.world.max_hosts;
    if (!run.world.topology_file.empty() || h <= 2) continue;
    auto [it, fresh] = written.try_emplace(h);
    if (fresh) {
      auto generated = sim::DefaultTopology(static_cast<int>(h));
      if (!generated.ok()) return UsageError("sim", std::string(generated.status().message()));
      it->second =
          hosts_swept ? absl::StrCat(out, "/topology-h", h, ".net") : out + "/topology.net";
      std::FILE* f = std::fopen(it->second.c_str(), "w");
      if (f == nullptr) return Failure("sim", "cannot write " + it->second);
      std::fputs(sim::FormatNetFile(*generated).c_str(), f);
      std::fclose(f);
    }
    run.world.topology_file = it->second;
  }
  return absl::nullopt;
}

// Runs every point of the sweep and writes the CSVs and the plots.
int RunSweep(const SimFlags& f, const SweepPlan& plan, const std::vector<SweepPoint>& points,
             const std::vector<SimRunOptions>& runs, bool show_progress) {
  const bool any_cache = std::any_of(runs.begin(), runs.end(),
                                     [](const SimRunOptions& r) { return r.world.path_cache; });
  const bool any_procs = std::any_of(runs.begin(), runs.end(), [](const SimRunOptions& r) {
    return r.world.procs_per_host > 1;
  });
  const std::string& out = f.out;
  const std::string conn_csv = out + "/connections.csv";
  const std::string sum_csv = out + "/summary.csv";
  std::FILE* cf = std::fopen(conn_csv.c_str(), "w");
  std::FILE* sf = std::fopen(sum_csv.c_str(), "w");
  const std::string cdf_csv = out + "/setup_cdf.csv";
  const std::string ts_csv = out + "/timeseries.csv";
  std::FILE* df = std::fopen(cdf_csv.c_str(), "w");
  std::FILE* tf = f.sample_us > 0 ? std::fopen(ts_csv.c_str(), "w") : nullptr;
  if (cf == nullptr || sf == nullptr || df == nullptr || (f.sample_us > 0 && tf == nullptr)) {
    return Failure("sim", "cannot write CSV files in " + out);
  }
  const std::string param_header = plan.Header();
  absl::FPrintF(cf, "%s,connection,client,server,outcome,setup_us,retransmissions\n",
                param_header);
  absl::FPrintF(sf, "%s,connections,established,rejected,failed,setup_min_us,setup_p50_us,"
                "setup_p99_us,setup_max_us,retransmissions_mean,sa_retries,fabric_sent,"
                "fabric_dropped,virtual_ms%s%s%s\n", param_header,
                f.sa_service_us > 0 ? ",sa_wait_mean_us,sa_max_queue,sa_dropped" : "",
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
  const bool by_label = plan.SweptBeyondFirst();
  int first_width = 8;
  if (by_label) {
    for (const SweepPoint& p : points) {
      first_width = std::max(first_width, static_cast<int>(plan.Label(p).size()));
    }
  }
  absl::PrintF("%-*s %8s %8s %8s %12s %12s %12s %10s\n", first_width,
               by_label ? "run" : "loss", "conns", "estab", "failed", "p50 (us)", "p99 (us)",
               "max (us)", "retx/conn");
  for (size_t run = 0; run < points.size(); ++run) {
    const SweepPoint& p = points[run];
    const std::string label = plan.Label(p);
    auto world = SimWorld::Create(runs[run].world, nullptr);
    if (!world.ok()) {
      return Failure("sim", absl::StrCat("run ", label, ": ", world.status().message()));
    }
    const WorkloadOptions& o = runs[run].workload;
    progress.StartRun(run, points.size(), label);
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
    const std::string values = plan.Values(p);
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
    if (f.sa_service_us > 0) {
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
    const std::string first = by_label ? label : plan.FirstValue(p);
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
  if (f.plots) {
    const std::string grouping = by_label ? plan.Grouping() : "loss rate";
    if (!HaveGnuplot()) {
      absl::PrintF("gnuplot is not installed: no PNG plots (apt-get install gnuplot-nox, or "
                   "tools/setup.sh); the .csv files have the data\n");
    } else if (absl::Status s = WritePlots(out, grouping, labels, setups, retx, series); !s.ok()) {
      return Failure("sim", std::string(s.message()));
    } else {
      absl::PrintF("wrote %s/setup_cdf.png and %s/retransmissions.png\n", out, out);
      if (!series.empty()) absl::PrintF("wrote %s/timeseries.png\n", out);
    }
  }
  return kExitOk;
}

}  // namespace

int RunSim(int argc, char** argv) {
  SimFlags f;
  FlagSet flags = SimFlagSet(&f);
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(argc, argv, &positional)) return *rc;
  if (!positional.empty()) return UsageError("sim", "unexpected argument '" + positional[0] + "'");
  absl::StatusOr<SweepPlan> plan = PlanSimSweep(f.sweep);
  if (!plan.ok()) return UsageError("sim", std::string(plan.status().message()));
  bool show_progress;
  if (f.progress == "always") {
    show_progress = true;
  } else if (f.progress == "never") {
    show_progress = false;
  } else if (f.progress == "auto") {
    show_progress = isatty(STDERR_FILENO);
  } else {
    return UsageError("sim", "--progress=" + f.progress + ": expected always, auto or never");
  }
  const size_t run_count = plan->RunCount();
  if (run_count > kMaxRuns) {
    return UsageError("sim", absl::StrCat("the sweep has ", run_count, " runs (the cross product "
                                          "of the lists); at most ", kMaxRuns));
  }
  if (std::system(("mkdir -p '" + f.out + "'").c_str()) != 0) {
    return Failure("sim", "cannot create the output directory " + f.out);
  }
  // What every run shares; the dimensions set the rest.
  SimRunOptions base;
  base.world.seed = static_cast<uint64_t>(f.seed);
  base.world.sa.service_time = MicrosAsDuration(f.sa_service_us);
  base.workload.connections = static_cast<int>(f.connections);
  base.workload.interval = Duration::Micros(f.interval_us);
  base.workload.reject = f.reject;
  base.workload.ece = f.ece;
  base.workload.spread = true;
  base.workload.group = static_cast<int>(f.group);
  base.workload.seed = static_cast<uint64_t>(f.seed);
  base.workload.sample_interval = MicrosAsDuration(f.sample_us);
  const std::vector<SweepPoint> points = plan->Points();
  std::vector<SimRunOptions> runs;
  runs.reserve(points.size());
  for (const SweepPoint& p : points) runs.push_back(plan->Apply(p, base));
  if (auto rc = UseGeneratedTopologies(f.out, plan->Swept("hosts"), runs)) return *rc;
  return RunSweep(f, *plan, points, runs, show_progress);
}

}  // namespace uscm::tools
