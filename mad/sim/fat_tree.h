// Fat-tree topologies for large simulations, written as ibsim net files by
// `uscm topo` and built by `uscm sim --hosts=N` when no file is given.
//
// Two levels: L leaf switches, each with `down` CA ports and `up` uplinks,
// uplink j of every leaf to spine j (so `up` spines of L ports; L <= radix).
// Three levels (k-ary fat tree, k = radix): pods of radix/2 leaves and `up`
// aggregation switches, uplink j of a leaf to aggregation switch j of its
// pod; each aggregation switch has radix/2 uplinks, uplink u of aggregation
// switch j to core j * radix/2 + u (so up * radix/2 cores of `pods` ports;
// pods <= radix). Oversubscription (down : up at the leaves) sets
// up = round(radix / (1 + oversubscription)), down = radix - up. Only as many
// leaves (and pods) as the hosts need are built; host i sits on leaf
// i / down, port i % down + 1 (hosts fill a leaf before the next).
//
// Node order: spines (or cores) first, so node 0 (the SM's by default, as in
// ibsim) is a spine; then aggregation switches, leaves, CAs. Ids spell the
// GUIDs ibsim assigns (S-0000000000200000.., H-0000000000100000..), as
// GenerateTopology's do.
#ifndef USCM_MAD_SIM_FAT_TREE_H_
#define USCM_MAD_SIM_FAT_TREE_H_

#include "absl/status/statusor.h"
#include "mad/sim/topology.h"

namespace uscm::sim {

struct FatTreeOptions {
  int radix = 36;   // ports per switch, 4..255
  int levels = 2;   // 2 or 3
  int hosts = 0;    // CAs (one port each), >= 1
  double oversubscription = 1;  // down : up ports at a leaf, >= 1
};

struct FatTreeShape {
  int down = 0, up = 0;         // per leaf
  int leaves = 0, spines = 0;   // two levels
  int pods = 0, aggs = 0, cores = 0;  // three levels (aggs in all)
  int switches() const { return leaves + spines + aggs + cores; }
  int max_hosts = 0;            // what this radix / levels / ratio can hold
};

// The switch counts for `options`, or InvalidArgument naming the limit
// ("10240 hosts need 569 leaves; a 2-level fat tree of radix 36 has at most
// 36 leaves (648 hosts): use 3 levels or a larger radix").
absl::StatusOr<FatTreeShape> FatTreeShapeFor(const FatTreeOptions& options);
absl::StatusOr<Topology> GenerateFatTree(const FatTreeOptions& options);

// The topology `uscm sim --hosts=N` uses without a net file: N CAs behind one
// switch (N <= 16), one core and two leaves (N <= 508, as before fat trees,
// so results for those sizes did not change), else the smallest fat tree of
// radix 36 (two levels up to 648 hosts, then three).
absl::StatusOr<Topology> DefaultTopology(int hosts);

}  // namespace uscm::sim

#endif  // USCM_MAD_SIM_FAT_TREE_H_
