#include "mad/sim/fat_tree.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uscm::sim {
namespace {

constexpr int kMaxRadix = 255;  // ibsim's port limit

std::string SwitchId(int i) { return absl::StrFormat("S-%016x", 0x200000 + i); }
std::string CaId(int i) { return absl::StrFormat("H-%016x", 0x100000 + 2 * i); }

}  // namespace

absl::StatusOr<FatTreeShape> FatTreeShapeFor(const FatTreeOptions& o) {
  if (o.radix < 4 || o.radix > kMaxRadix) {
    return absl::InvalidArgumentError(
        absl::StrCat("radix ", o.radix, ": a switch has 4..", kMaxRadix, " ports"));
  }
  if (o.levels != 2 && o.levels != 3) {
    return absl::InvalidArgumentError(absl::StrCat("levels ", o.levels, ": 2 or 3"));
  }
  if (o.hosts < 1) return absl::InvalidArgumentError("a fat tree needs at least one host");
  if (!(o.oversubscription >= 1) || o.oversubscription > o.radix - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oversubscription ", o.oversubscription, ": between 1 and ", o.radix - 1,
        " (down : up ports at a leaf)"));
  }
  FatTreeShape s;
  s.up = std::max(1, static_cast<int>(std::lround(o.radix / (1 + o.oversubscription))));
  s.down = o.radix - s.up;
  s.leaves = (o.hosts + s.down - 1) / s.down;
  if (o.levels == 2) {
    s.max_hosts = o.radix * s.down;
    if (s.leaves > o.radix) {
      return absl::InvalidArgumentError(absl::StrCat(
          o.hosts, " hosts need ", s.leaves, " leaves; a 2-level fat tree of radix ", o.radix,
          " has at most ", o.radix, " leaves (", s.max_hosts,
          " hosts): use 3 levels or a larger radix"));
    }
    s.spines = s.up;
    return s;
  }
  const int per_pod = o.radix / 2;       // leaves per pod = aggregation down ports
  const int agg_up = o.radix - per_pod;  // aggregation uplinks
  s.max_hosts = o.radix * per_pod * s.down;
  s.pods = (s.leaves + per_pod - 1) / per_pod;
  if (s.pods > o.radix) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.hosts, " hosts need ", s.pods, " pods; a 3-level fat tree of radix ", o.radix,
        " has at most ", o.radix, " pods (", s.max_hosts, " hosts): use a larger radix"));
  }
  s.aggs = s.pods * s.up;
  s.cores = s.up * agg_up;
  return s;
}

absl::StatusOr<Topology> GenerateFatTree(const FatTreeOptions& o) {
  auto shape = FatTreeShapeFor(o);
  if (!shape.ok()) return shape.status();
  const FatTreeShape& s = *shape;
  TopologyBuilder b;
  // Switch numbers: tops (spines / cores) first, then aggregation, then leaves.
  const int tops = o.levels == 2 ? s.spines : s.cores;
  const int first_agg = tops;
  const int first_leaf = first_agg + s.aggs;
  const int per_pod = o.radix / 2;
  const int agg_up = o.radix - per_pod;
  for (int i = 0; i < tops; ++i) {
    b.Switch(SwitchId(i), o.levels == 2 ? s.leaves : s.pods,
             absl::StrCat(o.levels == 2 ? "spine " : "core ", i + 1));
  }
  for (int i = 0; i < s.aggs; ++i) {
    const int pod = i / s.up;
    const int leaves_in_pod = std::min(per_pod, s.leaves - pod * per_pod);
    b.Switch(SwitchId(first_agg + i), leaves_in_pod + agg_up,
             absl::StrCat("pod ", pod + 1, " agg ", i % s.up + 1));
  }
  for (int l = 0; l < s.leaves; ++l) {
    const int cas = std::min(s.down, o.hosts - l * s.down);
    b.Switch(SwitchId(first_leaf + l), s.up + cas, absl::StrCat("leaf ", l + 1));
  }
  for (int i = 0; i < o.hosts; ++i) b.Ca(CaId(i), 1, absl::StrCat("hca ", i + 1));
  // Leaf port 1..up: uplinks; up+1..: CAs.
  for (int l = 0; l < s.leaves; ++l) {
    for (int j = 0; j < s.up; ++j) {
      if (o.levels == 2) {
        b.Link(SwitchId(first_leaf + l), j + 1, SwitchId(j), l + 1);
      } else {
        const int pod = l / per_pod;
        // Aggregation port 1..leaves_in_pod: leaves; then uplinks.
        b.Link(SwitchId(first_leaf + l), j + 1, SwitchId(first_agg + pod * s.up + j),
               l % per_pod + 1);
      }
    }
  }
  if (o.levels == 3) {
    for (int i = 0; i < s.aggs; ++i) {
      const int pod = i / s.up, j = i % s.up;
      const int leaves_in_pod = std::min(per_pod, s.leaves - pod * per_pod);
      for (int u = 0; u < agg_up; ++u) {
        b.Link(SwitchId(first_agg + i), leaves_in_pod + u + 1, SwitchId(j * agg_up + u),
               pod + 1);
      }
    }
  }
  for (int i = 0; i < o.hosts; ++i) {
    b.Link(SwitchId(first_leaf + i / s.down), s.up + i % s.down + 1, CaId(i), 1);
  }
  return b.Build();
}

absl::StatusOr<Topology> DefaultTopology(int hosts) {
  if (hosts <= 16) return GenerateTopology(hosts, 1);
  if (hosts <= 508) return GenerateTopology(hosts, 3);
  FatTreeOptions o;
  o.radix = 36;
  o.hosts = hosts;
  o.levels = hosts <= 648 ? 2 : 3;
  return GenerateFatTree(o);
}

}  // namespace uscm::sim
