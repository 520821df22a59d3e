// `uscm ping`: CM connection setup in the spirit of ucmatose. On the
// simulated fabric the server and the client run in one process (virtual
// time); on a device fabric the transport is opened for real.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/fabric_flags.h"
#include "tools/sim_world.h"
#include "tools/workload.h"

namespace uscm::tools {

int RunPing(int argc, char** argv) {
  std::string fabric = "sim", private_data = "uscm ping", role;
  int64_t connections = 10, seed = 1, interval_us = 10;
  double loss = 0;
  bool reject = false, ece = false, disconnect = true, verbose = false;
  FlagSet flags("ping [options]",
                "Sets up N CM connections (path query, REQ/REP/RTU with private data) and\n"
                "reports setup time min / p50 / p99 / max and connections per second.\n"
                "On --fabric=sim the server and the client run in this process.");
  flags.String("fabric", &fabric, "sim, ibsim, umad:<ca>:<port> or ud:<device>:<port>");
  flags.String("role", &role, "device fabrics: server or client");
  flags.Int("connections", &connections, "number of connections (-c of ucmatose)", 1, 1000000);
  flags.String("private-data", &private_data, "REQ private data (at most 92 bytes)");
  flags.Bool("reject", &reject, "the server rejects every connection (REJ 28)");
  flags.Bool("ece", &ece, "carry ECE in REQ and REP");
  flags.Bool("disconnect", &disconnect, "disconnect each connection once established");
  flags.Int("interval-us", &interval_us, "sim: time between connection starts (us)", 0,
            1000000000);
  flags.Double("loss", &loss, "sim: per-link loss probability", 0, 1);
  flags.Int("seed", &seed, "sim: seed", 0);
  flags.Bool("verbose", &verbose, "one line per connection");
  flags.Epilog("Example: uscm ping -c 1000 --ece   (--connections=1000)\n");
  // ucmatose's -c N.
  std::vector<std::string> args(argv, argv + argc);
  for (auto& a : args) {
    if (a == "-c") a = "--connections";
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(static_cast<int>(cargs.size()), cargs.data(), &positional)) return *rc;
  if (!positional.empty()) return UsageError("ping", "unexpected argument '" + positional[0] + "'");
  if (private_data.size() > 92) {
    return UsageError("ping", absl::StrCat("--private-data is ", private_data.size(),
                                           " bytes; a REQ carries at most 92"));
  }
  auto spec = ParseFabric(fabric);
  if (!spec.ok()) return UsageError("ping", std::string(spec.status().message()));
  if (spec->kind == FabricSpec::Kind::kIbsim) {
    return Failure("ping", "--fabric=ibsim is not supported by ping yet; use --fabric=sim");
  }
  if (spec->kind != FabricSpec::Kind::kSim) {
    if (role != "server" && role != "client") {
      return UsageError("ping", "a device fabric needs --role=server or --role=client");
    }
    auto t = OpenRealTransport(*spec);
    if (!t.ok()) return Failure("ping", std::string(t.status().message()));
    return Failure("ping", absl::StrCat("opened ", spec->ToString(),
                                        " but ping over a device needs the CM runtime "
                                        "(cm/runtime.h), which is not in this build yet"));
  }
  if (!role.empty()) return UsageError("ping", "--role is for device fabrics; sim runs both");
  SimWorldOptions wo;
  wo.seed = static_cast<uint64_t>(seed);
  wo.link.loss = loss;
  auto world = SimWorld::Create(wo, nullptr);
  if (!world.ok()) return Failure("ping", std::string(world.status().message()));
  WorkloadOptions o;
  o.connections = static_cast<int>(connections);
  o.interval = Duration::Micros(interval_us);
  o.reject = reject;
  o.ece = ece;
  o.disconnect = disconnect;
  o.private_data.assign(private_data.begin(), private_data.end());
  SimHost& client = *(*world)->hosts()[0];
  SimHost& server = *(*world)->hosts()[1];
  absl::PrintF("uscm ping: %s -> %s on the simulated fabric, %d connection%s%s%s\n",
               client.name(), server.name(), connections, connections == 1 ? "" : "s",
               reject ? ", server rejects" : "", ece ? ", ECE" : "");
  auto r = RunWorkload(**world, o);
  if (!r.ok()) return Failure("ping", std::string(r.status().message()));
  std::vector<double> times;
  int ok = 0, failed = 0;
  for (const ConnResult& c : r->conns) {
    const bool good = reject ? c.rejected : c.established;
    if (verbose) {
      absl::PrintF("  #%-5d %-12s %10.3f us  retx %d%s\n", c.index,
                   c.established ? "established" : c.rejected ? "rejected" : "failed",
                   c.setup_us, c.retransmissions, c.error.empty() ? "" : "  " + c.error);
    }
    if (good) {
      ++ok;
      times.push_back(c.setup_us);
    } else {
      ++failed;
    }
  }
  std::sort(times.begin(), times.end());
  const double secs = r->elapsed.seconds();
  absl::PrintF("%d %s, %d failed\n", ok, reject ? "rejected as asked" : "established", failed);
  if (!times.empty()) {
    absl::PrintF("setup time (us, virtual): min %.3f  p50 %.3f  p99 %.3f  max %.3f\n",
                 times.front(), Percentile(times, 0.5), Percentile(times, 0.99), times.back());
  }
  absl::PrintF("%.0f connections/s (%d in %.3f ms of virtual time)\n",
               secs > 0 ? ok / secs : 0.0, ok, r->elapsed.millis());
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace uscm::tools
