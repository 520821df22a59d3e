#include "tools/sim_plots.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace uscm::tools {
namespace {

// gnuplot single-quoted string: '' stands for a quote.
std::string GpQuote(const std::string& s) {
  return "'" + absl::StrReplaceAll(s, {{"'", "''"}}) + "'";
}

}  // namespace

bool HaveGnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

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

}  // namespace uscm::tools
