// `uscm topo`: writes an ibsim net file for a two- or three-level fat tree
// (mad/sim/fat_tree.h), for `uscm sim --topology=` and for ibsim itself.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/sim/fat_tree.h"
#include "mad/sim/topology.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace uscm::tools {

int RunTopo(int argc, char** argv) {
  int64_t radix = 36, levels = 2, hosts = 0;
  double oversubscription = 1;
  std::string out;
  FlagSet flags("topo --hosts=N [options]",
                "Writes an ibsim net file for a fat tree: leaves with down and up ports\n"
                "(down : up = the oversubscription), spines (two levels) or pods of\n"
                "aggregation switches under core switches (three levels). Only the\n"
                "switches the hosts need are written. The file loads in uscm sim\n"
                "(--topology) and in ibsim + OpenSM.");
  flags.Int("hosts", &hosts, "CAs (one port each)", 1, 1000000);
  flags.Int("radix", &radix, "ports per switch", 4, 255);
  flags.Int("levels", &levels, "switch levels: 2 or 3", 2, 3);
  flags.Double("oversubscription", &oversubscription, "down : up ports at a leaf (1 = full "
               "bisection)", 1, 254);
  flags.String("out", &out, "net file to write (default: standard output)");
  flags.Epilog(
      "Examples:\n"
      "  uscm topo --hosts=648 --radix=36 --out=ft2.net         (2 levels, 36 leaves)\n"
      "  uscm topo --hosts=10240 --radix=36 --levels=3 --out=ft3.net\n"
      "  uscm topo --hosts=1024 --radix=32 --oversubscription=3 --out=ft-3to1.net\n");
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(argc, argv, &positional)) return *rc;
  if (!positional.empty()) return UsageError("topo", "unexpected argument '" + positional[0] + "'");
  if (hosts == 0) return UsageError("topo", "--hosts is required");
  sim::FatTreeOptions o;
  o.radix = static_cast<int>(radix);
  o.levels = static_cast<int>(levels);
  o.hosts = static_cast<int>(hosts);
  o.oversubscription = oversubscription;
  auto shape = sim::FatTreeShapeFor(o);
  if (!shape.ok()) return UsageError("topo", std::string(shape.status().message()));
  auto topo = sim::GenerateFatTree(o);
  if (!topo.ok()) return Failure("topo", std::string(topo.status().message()));
  const std::string text = sim::FormatNetFile(*topo);
  std::FILE* f = out.empty() ? stdout : std::fopen(out.c_str(), "w");
  if (f == nullptr) return Failure("topo", "cannot write " + out);
  std::fputs(text.c_str(), f);
  if (f != stdout && std::fclose(f) != 0) return Failure("topo", "cannot write " + out);
  std::string parts =
      o.levels == 2 ? absl::StrCat(shape->spines, " spines")
                    : absl::StrCat(shape->cores, " cores, ", shape->pods, " pods, ", shape->aggs,
                                   " aggregation switches");
  std::fprintf(out.empty() ? stderr : stdout,
               "%s: %d-level fat tree, radix %d, %d hosts on %d leaves (%d down, %d up), %s; "
               "%d switches (at most %d hosts at this radix)\n",
               out.empty() ? "(stdout)" : out.c_str(), o.levels, o.radix, o.hosts,
               shape->leaves, shape->down, shape->up, parts.c_str(), shape->switches(),
               shape->max_hosts);
  return kExitOk;
}

}  // namespace uscm::tools
