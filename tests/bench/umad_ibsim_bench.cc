// Reference figure: the MAD round trip over ibsim. Starts a private ibsim +
// OpenSM fabric (tests/topologies/ibsim-2hosts.net) and runs
// `umad_client bench` on hostA: N sequential SA ClassPortInfo Gets through
// the umad transport, each waiting for its GetResp, timed with
// CLOCK_MONOTONIC. It measures the simulator path (umad2sim -> ibsim's Unix
// sockets -> OpenSM and back), not an HCA.
//   bazel run //tests/bench:umad_ibsim_bench -- [N]
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "tests/ibsim/ibsim_fabric.h"

int main(int argc, char** argv) {
  int n = 1000;
  if (argc > 1 && (!absl::SimpleAtoi(argv[1], &n) || n <= 0 || n > 1000000)) {
    fprintf(stderr, "usage: umad_ibsim_bench [N (1..1000000)]\n");
    return 2;
  }
  uscm::tests::IbsimOptions o;
  o.net_file = "tests/topologies/ibsim-2hosts.net";
  o.sm_node = "sm";
  o.nodes = {"hostA"};
  o.port_probe = "tests/ibsim/umad_client";
  auto fabric = uscm::tests::IbsimFabric::Start(o);
  if (!fabric.ok()) {
    fprintf(stderr, "%s\n", fabric.status().ToString().c_str());
    return 1;
  }
  for (int round = 0; round < 3; ++round) {
    auto r = (*fabric)->Run("hostA", {o.port_probe, "bench", "--n", std::to_string(n)},
                            60000 + n * 50);
    if (!r.ok() || r->exit_code != 0) {
      fprintf(stderr, "bench failed: %s %s\n", r.ok() ? r->err.c_str() : "",
              r.ok() ? "" : r.status().ToString().c_str());
      return 1;
    }
    auto kv = uscm::tests::ParseKeyValues(r->out);
    printf("round %d: SA ClassPortInfo Get round trip over ibsim, n=%s: mean %s us, p50 %s us, "
           "p99 %s us, max %s us\n",
           round + 1, kv["n"].c_str(), kv["mean_us"].c_str(), kv["p50_us"].c_str(),
           kv["p99_us"].c_str(), kv["max_us"].c_str());
  }
  return 0;
}
