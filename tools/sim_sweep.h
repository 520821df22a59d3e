// `uscm sim`'s sweep: each list-valued option is a dimension (its name, its
// values, how a value sets a run's options, its place in the order of the
// runs); the runs are the cartesian product of the dimensions. A new swept
// parameter is its list (SimSweepLists, a flag in cmd_sim.cc) and one
// MakeDimension entry in PlanSimSweep.
#ifndef USCM_TOOLS_SIM_SWEEP_H_
#define USCM_TOOLS_SIM_SWEEP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/sim_world.h"
#include "tools/workload.h"

namespace uscm::tools {

// What one run of the sweep is built from.
struct SimRunOptions {
  SimWorldOptions world;
  WorkloadOptions workload;
};

// A list option's microseconds as a Duration (to the nanosecond, truncated).
inline Duration MicrosAsDuration(double us) {
  return Duration::Nanos(static_cast<int64_t>(us * 1e3));
}

// One swept parameter.
struct SweepDimension {
  std::string name;                // its CSV column and its word in a run's label
  std::vector<std::string> shown;  // its values as the CSV prints them
  // Where it goes in the order of the runs: 0 varies fastest.
  int run_order = 0;
  // Sets value `i` (an index into `shown`) in a run's options.
  std::function<void(size_t i, SimRunOptions& run)> apply;

  bool swept() const { return shown.size() > 1; }
};

// A value as the CSV and the labels print it: %g, an integer, the text.
inline std::string ShowValue(double v) { return absl::StrFormat("%g", v); }
inline std::string ShowValue(int64_t v) { return absl::StrCat(v); }
inline std::string ShowValue(const std::string& v) { return v; }

// A dimension of typed values; `set(value, run)` puts one into a run's options.
template <typename T, typename Set>
SweepDimension MakeDimension(std::string name, int run_order, std::vector<T> values, Set set) {
  SweepDimension d;
  d.name = std::move(name);
  d.run_order = run_order;
  for (const T& v : values) d.shown.push_back(ShowValue(v));
  d.apply = [values = std::move(values), set = std::move(set)](size_t i, SimRunOptions& run) {
    set(values[i], run);
  };
  return d;
}

// One run: a value index per dimension, in the order the dimensions were added.
using SweepPoint = std::vector<size_t>;

class SweepPlan {
 public:
  // Dimensions are added in CSV column order. The first is a column even
  // when it has one value (loss: the historical first column).
  void Add(SweepDimension d) { dims_.push_back(std::move(d)); }

  // The product of the dimensions' sizes.
  size_t RunCount() const;
  // Every point of the product once, the lowest run_order varying fastest.
  std::vector<SweepPoint> Points() const;
  // `base` with every dimension's value of `p` applied.
  SimRunOptions Apply(const SweepPoint& p, SimRunOptions base) const;
  bool Swept(const std::string& name) const;

  // The CSV columns of the parameters: the first dimension, then each swept
  // one ("loss,latency_us"), and a run's values in them ("0.01,5").
  std::string Header() const;
  std::string Values(const SweepPoint& p) const;
  // The first dimension's value of `p` ("0.01").
  std::string FirstValue(const SweepPoint& p) const { return dims_[0].shown[p[0]]; }
  // Whether runs are told apart by more than the first dimension.
  bool SweptBeyondFirst() const;
  // The curve / progress label: the swept parameters ("loss 0.01,
  // latency_us 5"); the first dimension's when nothing is swept.
  std::string Label(const SweepPoint& p) const;
  // The swept parameters joined by " x " ("loss x latency_us").
  std::string Grouping() const;

 private:
  std::vector<SweepDimension> dims_;
};

// `uscm sim`'s swept options as given: comma-separated lists.
struct SimSweepLists {
  std::string loss = "0,0.01,0.05,0.1", duplicate = "0", latency_us = "0.5", jitter_us = "0";
  std::string hosts = "4", topology, pattern = "ring", arrivals = "fixed";
  std::string cm_profile = "spec", cm_retries = "15", path_cache = "off";
  std::string sa_queue_limit = "0", procs_per_host = "1";
};

// Their dimensions, or the first list's error ("--loss: 'x' is not a
// probability in [0, 1]").
absl::StatusOr<SweepPlan> PlanSimSweep(const SimSweepLists& lists);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_SIM_SWEEP_H_
