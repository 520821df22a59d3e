// `uscm sim`: research runs on the simulated fabric. One run per loss rate of
// the sweep (same seed, same workload), connections spread over the hosts;
// writes connections.csv (one row per connection), summary.csv (one row per
// run) and, when gnuplot is installed, setup_cdf.png and retransmissions.png.
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
#include "absl/strings/str_split.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/sim_world.h"
#include "mad/sim/topology.h"
#include "tools/workload.h"

namespace uscm::tools {
namespace {

absl::StatusOr<std::vector<double>> ParseList(const std::string& text, const char* flag) {
  std::vector<double> v;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double x = 0;
    if (!absl::SimpleAtod(part, &x) || x < 0 || x > 1) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", part,
                                                     "' is not a probability in [0, 1]"));
    }
    v.push_back(x);
  }
  if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return v;
}

bool HaveGnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled) {}
  void Show(size_t run, size_t runs, double loss, int done, int total) {
    if (!enabled_) return;
    const int width = 30;
    int filled = total == 0 ? width : done * width / total;
    std::fprintf(stderr, "\r[%-*s] run %zu/%zu loss %.4g: %d/%d connections ", width,
                 std::string(filled, '#').c_str(), run + 1, runs, loss, done, total);
    std::fflush(stderr);
  }
  void Done() {
    if (enabled_) std::fputs("\r\033[K", stderr);
  }

 private:
  bool enabled_;
};

std::string Fmt(double v) { return absl::StrFormat("%.3f", v); }

absl::Status WritePlots(const std::string& dir, const std::vector<double>& losses,
                        const std::vector<std::vector<double>>& setups,
                        const std::vector<std::map<int, int>>& retx) {
  std::FILE* f = std::fopen((dir + "/setup_cdf.dat").c_str(), "w");
  if (f == nullptr) return absl::UnavailableError("cannot write " + dir + "/setup_cdf.dat");
  for (size_t i = 0; i < losses.size(); ++i) {
    absl::FPrintF(f, "# loss %g\n", losses[i]);
    for (size_t j = 0; j < setups[i].size(); ++j) {
      absl::FPrintF(f, "%.3f %.5f\n", setups[i][j] / 1e3, double(j + 1) / setups[i].size());
    }
    absl::FPrintF(f, "\n\n");
  }
  std::fclose(f);
  f = std::fopen((dir + "/retransmissions.dat").c_str(), "w");
  if (f == nullptr) return absl::UnavailableError("cannot write " + dir + "/retransmissions.dat");
  for (size_t i = 0; i < losses.size(); ++i) {
    absl::FPrintF(f, "# loss %g\n", losses[i]);
    for (const auto& [n, count] : retx[i]) absl::FPrintF(f, "%d %d\n", n, count);
    absl::FPrintF(f, "\n\n");
  }
  std::fclose(f);
  std::string script = absl::StrCat(
      "set terminal png size 900,600\nset grid\n",
      "set output '", dir, "/setup_cdf.png'\n",
      "set title 'Connection setup time (path query to ESTABLISHED), CDF per loss rate'\n",
      "set xlabel 'setup time (ms, virtual)'\nset ylabel 'fraction of connections'\n",
      "set logscale x\nset key bottom right\nplot ");
  for (size_t i = 0; i < losses.size(); ++i) {
    absl::StrAppend(&script, i ? ", " : "", "'", dir, "/setup_cdf.dat' index ", i,
                    " with steps title 'loss ", absl::StrFormat("%g", losses[i]), "'");
  }
  absl::StrAppend(&script, "\nunset logscale x\nset output '", dir,
                  "/retransmissions.png'\nset title 'CM retransmissions per connection'\n"
                  "set xlabel 'retransmissions (REQ + REP resends)'\nset ylabel 'connections'\n"
                  "set key top right\nset style data linespoints\nplot ");
  for (size_t i = 0; i < losses.size(); ++i) {
    absl::StrAppend(&script, i ? ", " : "", "'", dir, "/retransmissions.dat' index ", i,
                    " title 'loss ", absl::StrFormat("%g", losses[i]), "'");
  }
  absl::StrAppend(&script, "\n");
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

}  // namespace

int RunSim(int argc, char** argv) {
  int64_t hosts = 4, connections = 200, seed = 1, interval_us = 10;
  double duplicate = 0, latency_us = 0.5, jitter_us = 0;
  std::string loss_list = "0,0.01,0.05,0.1";
  std::string topology, out = "uscm-sim";
  bool plots = true, reject = false, ece = false;
  FlagSet flags("sim [options]",
                "Runs a connection workload on the simulated fabric once per loss rate and\n"
                "writes CSV (and PNG plots with gnuplot). Virtual time: results depend only\n"
                "on the options and the seed, so the same seed gives the same files.");
  flags.Int("hosts", &hosts, "hosts taking part (connections go host k -> k+1)", 2, 100000);
  flags.Int("connections", &connections, "connections per run", 1, 1000000);
  flags.String("loss", &loss_list, "comma-separated per-link loss probabilities (one run each)");
  flags.Double("duplicate", &duplicate, "per-link duplication probability", 0, 1);
  flags.Double("latency-us", &latency_us, "per-link latency in microseconds", 0, 1e9);
  flags.Double("jitter-us", &jitter_us, "per-link extra uniform delay in microseconds", 0, 1e9);
  flags.Int("interval-us", &interval_us, "time between connection starts (us)", 0, 1000000000);
  flags.String("topology", &topology, "ibsim net file (default: two hosts, or --hosts CAs "
                                      "behind generated switches)");
  flags.Int("seed", &seed, "simulation seed", 0);
  flags.String("out", &out, "output directory (created)");
  flags.Bool("plots", &plots, "draw PNG plots with gnuplot");
  flags.Bool("reject", &reject, "the passive side rejects every connection");
  flags.Bool("ece", &ece, "connections carry ECE");
  flags.Epilog("Example: uscm sim --hosts=8 --connections=1000 --loss=0,0.02,0.1 --out=/tmp/run\n");
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(argc, argv, &positional)) return *rc;
  if (!positional.empty()) return UsageError("sim", "unexpected argument '" + positional[0] + "'");
  auto losses = ParseList(loss_list, "loss");
  if (!losses.ok()) return UsageError("sim", std::string(losses.status().message()));
  if (std::system(("mkdir -p '" + out + "'").c_str()) != 0) {
    return Failure("sim", "cannot create the output directory " + out);
  }
  std::string generated;
  if (topology.empty() && hosts > 2) {
    auto topo = sim::GenerateTopology(static_cast<int>(hosts), hosts > 16 ? 3 : 1);
    if (!topo.ok()) return UsageError("sim", std::string(topo.status().message()));
    generated = out + "/topology.net";
    std::FILE* f = std::fopen(generated.c_str(), "w");
    if (f == nullptr) return Failure("sim", "cannot write " + generated);
    std::fputs(sim::FormatNetFile(*topo).c_str(), f);
    std::fclose(f);
  }
  const std::string conn_csv = out + "/connections.csv";
  const std::string sum_csv = out + "/summary.csv";
  std::FILE* cf = std::fopen(conn_csv.c_str(), "w");
  std::FILE* sf = std::fopen(sum_csv.c_str(), "w");
  if (cf == nullptr || sf == nullptr) return Failure("sim", "cannot write CSV files in " + out);
  std::fputs("loss,connection,client,server,outcome,setup_us,retransmissions\n", cf);
  std::fputs("loss,connections,established,rejected,failed,setup_min_us,setup_p50_us,"
             "setup_p99_us,setup_max_us,retransmissions_mean,sa_retries,fabric_sent,"
             "fabric_dropped,virtual_ms\n", sf);
  Progress progress(isatty(STDERR_FILENO));
  std::vector<std::vector<double>> setups;
  std::vector<std::map<int, int>> retx;
  absl::PrintF("%-8s %8s %8s %8s %12s %12s %12s %10s\n", "loss", "conns", "estab", "failed",
               "p50 (us)", "p99 (us)", "max (us)", "retx/conn");
  for (size_t run = 0; run < losses->size(); ++run) {
    const double loss = (*losses)[run];
    SimWorldOptions wo;
    wo.seed = static_cast<uint64_t>(seed);
    wo.link.loss = loss;
    wo.link.duplicate = duplicate;
    wo.link.latency = Duration::Nanos(static_cast<int64_t>(latency_us * 1e3));
    wo.link.jitter = Duration::Nanos(static_cast<int64_t>(jitter_us * 1e3));
    wo.topology_file = topology.empty() ? generated : topology;
    wo.max_hosts = static_cast<size_t>(hosts);
    auto world = SimWorld::Create(wo, nullptr);
    if (!world.ok()) return Failure("sim", std::string(world.status().message()));
    WorkloadOptions o;
    o.connections = static_cast<int>(connections);
    o.interval = Duration::Micros(interval_us);
    o.reject = reject;
    o.ece = ece;
    o.spread = true;
    auto r = RunWorkload(**world, o, [&](int done, int total) {
      if (done == total || done % std::max(1, total / 100) == 0) {
        progress.Show(run, losses->size(), loss, done, total);
      }
    });
    if (!r.ok()) {
      progress.Done();
      return Failure("sim", absl::StrCat("run with loss ", loss, ": ", r.status().message()));
    }
    std::vector<double> times;
    std::map<int, int> hist;
    int established = 0, rejected = 0, failed = 0;
    double retx_sum = 0;
    for (const ConnResult& c : r->conns) {
      const char* outcome = c.established ? "established" : c.rejected ? "rejected" : "failed";
      absl::FPrintF(cf, "%g,%d,%s,%s,%s,%s,%d\n", loss, c.index, c.client, c.server, outcome,
                    Fmt(c.setup_us), c.retransmissions);
      if (c.established) ++established;
      if (c.rejected) ++rejected;
      if (!c.established && !c.rejected) ++failed;
      if (c.established || c.rejected) times.push_back(c.setup_us);
      ++hist[c.retransmissions];
      retx_sum += c.retransmissions;
    }
    std::sort(times.begin(), times.end());
    const double mean_retx = retx_sum / r->conns.size();
    absl::FPrintF(sf, "%g,%d,%d,%d,%d,%s,%s,%s,%s,%.4f,%d,%d,%d,%s\n", loss, r->conns.size(),
                  established, rejected, failed, Fmt(times.empty() ? 0 : times.front()),
                  Fmt(Percentile(times, 0.5)), Fmt(Percentile(times, 0.99)),
                  Fmt(times.empty() ? 0 : times.back()), mean_retx, r->sa_retries, r->fabric_sent,
                  r->fabric_dropped, Fmt(r->elapsed.millis()));
    progress.Done();
    absl::PrintF("%-8g %8d %8d %8d %12.1f %12.1f %12.1f %10.3f\n", loss, r->conns.size(),
                 established + rejected, failed, Percentile(times, 0.5),
                 Percentile(times, 0.99), times.empty() ? 0.0 : times.back(), mean_retx);
    setups.push_back(std::move(times));
    retx.push_back(std::move(hist));
  }
  std::fclose(cf);
  std::fclose(sf);
  absl::PrintF("wrote %s and %s\n", conn_csv, sum_csv);
  if (plots) {
    if (!HaveGnuplot()) {
      absl::PrintF("gnuplot is not installed: no PNG plots (apt-get install gnuplot-nox, or "
                   "tools/setup.sh); the .csv files have the data\n");
    } else if (absl::Status s = WritePlots(out, *losses, setups, retx); !s.ok()) {
      return Failure("sim", std::string(s.message()));
    } else {
      absl::PrintF("wrote %s/setup_cdf.png and %s/retransmissions.png\n", out, out);
    }
  }
  return kExitOk;
}

}  // namespace uscm::tools
