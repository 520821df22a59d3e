#include "tools/sim_sweep.h"

#include <algorithm>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace uscm::tools {

size_t SweepPlan::RunCount() const {
  size_t n = 1;
  for (const SweepDimension& d : dims_) n *= d.shown.size();
  return n;
}

std::vector<SweepPoint> SweepPlan::Points() const {
  std::vector<size_t> fastest_first(dims_.size());
  std::iota(fastest_first.begin(), fastest_first.end(), 0);
  std::stable_sort(fastest_first.begin(), fastest_first.end(), [&](size_t a, size_t b) {
    return dims_[a].run_order < dims_[b].run_order;
  });
  std::vector<SweepPoint> points;
  SweepPoint p(dims_.size(), 0);
  for (size_t n = RunCount(); n > 0; --n) {
    points.push_back(p);
    // An odometer: the fastest dimension steps, and carries when it wraps.
    for (size_t d : fastest_first) {
      if (++p[d] < dims_[d].shown.size()) break;
      p[d] = 0;
    }
  }
  return points;
}

SimRunOptions SweepPlan::Apply(const SweepPoint& p, SimRunOptions base) const {
  for (size_t d = 0; d < dims_.size(); ++d) dims_[d].apply(p[d], base);
  return base;
}

bool SweepPlan::Swept(const std::string& name) const {
  for (const SweepDimension& d : dims_) {
    if (d.name == name) return d.swept();
  }
  return false;
}

std::string SweepPlan::Header() const {
  std::vector<std::string> names;
  for (size_t d = 0; d < dims_.size(); ++d) {
    if (d == 0 || dims_[d].swept()) names.push_back(dims_[d].name);
  }
  return absl::StrJoin(names, ",");
}

std::string SweepPlan::Values(const SweepPoint& p) const {
  std::vector<std::string> values;
  for (size_t d = 0; d < dims_.size(); ++d) {
    if (d == 0 || dims_[d].swept()) values.push_back(dims_[d].shown[p[d]]);
  }
  return absl::StrJoin(values, ",");
}

bool SweepPlan::SweptBeyondFirst() const {
  return std::any_of(dims_.begin() + std::min<size_t>(1, dims_.size()), dims_.end(),
                     [](const SweepDimension& d) { return d.swept(); });
}

std::string SweepPlan::Label(const SweepPoint& p) const {
  std::vector<std::string> parts;
  for (size_t d = 0; d < dims_.size(); ++d) {
    if (dims_[d].swept() || (d == 0 && !SweptBeyondFirst())) {
      parts.push_back(absl::StrCat(dims_[d].name, " ", dims_[d].shown[p[d]]));
    }
  }
  return absl::StrJoin(parts, ", ");
}

std::string SweepPlan::Grouping() const {
  std::vector<std::string> names;
  for (const SweepDimension& d : dims_) {
    if (d.swept()) names.push_back(d.name);
  }
  return absl::StrJoin(names, " x ");
}

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

// A list of names, each of which `valid` accepts.
template <typename Valid>
absl::StatusOr<std::vector<std::string>> ParseNames(const std::string& text, const char* flag,
                                                    Valid valid, const char* expected) {
  std::vector<std::string> v = absl::StrSplit(text, ',', absl::SkipEmpty());
  if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  for (const std::string& name : v) {
    if (!valid(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", name, "': expected ", expected));
    }
  }
  return v;
}

// The dimensions, in the CSV's column order. The second argument is the
// order of the runs: loss varies fastest, then duplicate, jitter, latency,
// hosts, topology, pattern, arrivals, SA queue limit, path cache, CM retries,
// CM profile, processes per host (a new dimension goes last there, so the
// runs of the old sweeps keep their order).
}  // namespace

absl::StatusOr<SweepPlan> PlanSimSweep(const SimSweepLists& f) {
  SweepPlan plan;
  auto losses = ParseList(f.loss, "loss", 0, 1, "a probability in [0, 1]");
  if (!losses.ok()) return losses.status();
  plan.Add(MakeDimension("loss", 0, *losses, [](double v, SimRunOptions& r) {
    r.world.link.loss = v;
  }));
  auto duplicates = ParseList(f.duplicate, "duplicate", 0, 1, "a probability in [0, 1]");
  if (!duplicates.ok()) return duplicates.status();
  plan.Add(MakeDimension("duplicate", 1, *duplicates, [](double v, SimRunOptions& r) {
    r.world.link.duplicate = v;
  }));
  auto latencies = ParseList(f.latency_us, "latency-us", 0, 1e9, "a delay in [0, 1e9] us");
  if (!latencies.ok()) return latencies.status();
  plan.Add(MakeDimension("latency_us", 3, *latencies, [](double v, SimRunOptions& r) {
    r.world.link.latency = MicrosAsDuration(v);
  }));
  auto jitters = ParseList(f.jitter_us, "jitter-us", 0, 1e9, "a delay in [0, 1e9] us");
  if (!jitters.ok()) return jitters.status();
  plan.Add(MakeDimension("jitter_us", 2, *jitters, [](double v, SimRunOptions& r) {
    r.world.link.jitter = MicrosAsDuration(v);
  }));
  auto hosts = ParseIntList(f.hosts, "hosts", 2, 100000);
  if (!hosts.ok()) return hosts.status();
  plan.Add(MakeDimension("hosts", 4, *hosts, [](int64_t v, SimRunOptions& r) {
    r.world.max_hosts = static_cast<size_t>(v);
  }));
  // Both lists are checked for emptiness before either's names.
  for (const auto& [list, empty] : {std::pair{&f.pattern, "--pattern is empty"},
                                    std::pair{&f.arrivals, "--arrivals is empty"}}) {
    if (std::vector<std::string>(absl::StrSplit(*list, ',', absl::SkipEmpty())).empty()) {
      return absl::InvalidArgumentError(empty);
    }
  }
  auto patterns = ParseNames(
      f.pattern, "pattern",
      [](const std::string& s) {
        WorkloadOptions::Pattern unused;
        return ParsePattern(s, &unused);
      },
      "ring, all-to-all, incast or random");
  auto arrivals = ParseNames(
      f.arrivals, "arrivals",
      [](const std::string& s) {
        WorkloadOptions::Arrivals unused;
        return ParseArrivals(s, &unused);
      },
      "fixed, storm or poisson");
  if (!patterns.ok()) return patterns.status();
  if (!arrivals.ok()) return arrivals.status();
  auto profiles = ParseNames(
      f.cm_profile, "cm-profile",
      [](const std::string& s) {
        CmProfile unused;
        return CmProfileByName(s, &unused);
      },
      "spec, linux or lowlat");
  if (!profiles.ok()) return profiles.status();
  auto retries = ParseIntList(f.cm_retries, "cm-retries", 0, 15);
  if (!retries.ok()) return retries.status();
  auto procs = ParseIntList(f.procs_per_host, "procs-per-host", 1, 255);
  if (!procs.ok()) return procs.status();
  auto queue_limits = ParseIntList(f.sa_queue_limit, "sa-queue-limit", 0, 100000000);
  if (!queue_limits.ok()) return queue_limits.status();
  auto caches = ParseNames(
      f.path_cache, "path-cache", [](const std::string& s) { return s == "on" || s == "off"; },
      "on or off");
  if (!caches.ok()) return caches.status();
  // "" (no --topology): two hosts, or a topology generated for --hosts.
  std::vector<std::string> topologies = absl::StrSplit(f.topology, ',', absl::SkipEmpty());
  if (topologies.empty()) topologies.push_back("");
  plan.Add(MakeDimension("topology", 5, topologies, [](const std::string& v, SimRunOptions& r) {
    r.world.topology_file = v;
  }));
  plan.Add(MakeDimension("pattern", 6, *patterns, [](const std::string& v, SimRunOptions& r) {
    (void)ParsePattern(v, &r.workload.pattern);
  }));
  plan.Add(MakeDimension("arrivals", 7, *arrivals, [](const std::string& v, SimRunOptions& r) {
    (void)ParseArrivals(v, &r.workload.arrivals);
  }));
  plan.Add(MakeDimension("cm_profile", 11, *profiles, [](const std::string& v, SimRunOptions& r) {
    (void)CmProfileByName(v, &r.workload.profile);
    r.world.cm.rounding = r.workload.profile.rounding;
  }));
  plan.Add(MakeDimension("cm_retries", 10, *retries, [](int64_t v, SimRunOptions& r) {
    r.workload.max_cm_retries = static_cast<uint8_t>(v);
  }));
  plan.Add(MakeDimension("path_cache", 9, *caches, [](const std::string& v, SimRunOptions& r) {
    r.world.path_cache = v == "on";
  }));
  plan.Add(MakeDimension("sa_queue_limit", 8, *queue_limits, [](int64_t v, SimRunOptions& r) {
    r.world.sa.queue_limit = static_cast<size_t>(v);
  }));
  plan.Add(MakeDimension("procs_per_host", 12, *procs, [](int64_t v, SimRunOptions& r) {
    r.world.procs_per_host = static_cast<size_t>(v);
  }));
  return plan;
}

}  // namespace uscm::tools
