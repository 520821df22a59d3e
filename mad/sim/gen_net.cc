// Writes an ibsim net file with N single-port CAs behind K switches:
//   bazel run //mad/sim:gen_net -- 500 17 > tests/topologies/hca500.net
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "mad/sim/topology.h"

int main(int argc, char** argv) {
  int cas = 0, switches = 0;
  if (argc != 3 || !absl::SimpleAtoi(argv[1], &cas) || !absl::SimpleAtoi(argv[2], &switches)) {
    std::fprintf(stderr, "usage: %s <num_cas> <num_switches>\n", argv[0]);
    return 2;
  }
  absl::StatusOr<uscm::sim::Topology> topo = uscm::sim::GenerateTopology(cas, switches);
  if (!topo.ok()) {
    std::fprintf(stderr, "%s\n", std::string(topo.status().message()).c_str());
    return 1;
  }
  const std::string text = uscm::sim::FormatNetFile(*topo);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
