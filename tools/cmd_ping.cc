// `uscm ping`: CM connection setup in the spirit of ucmatose. On the
// simulated fabric the server and the client run in one process (virtual
// time); on a device fabric this process is the server or the client
// (tools/ping_device.h); --fabric=ibsim starts ibsim + OpenSM and runs this
// binary as the server on hostB and the client on hostA.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/fabric_flags.h"
#include "tools/ibsim_tool.h"
#include "tools/ping_device.h"
#include "tools/sim_world.h"
#include "tools/workload.h"

namespace uscm::tools {
namespace {

int RunPingIbsim(const PingConfig& c) {
  auto fabric = StartToolFabric("ping");
  if (!fabric.ok()) return Failure("ping", std::string(fabric.status().message()));
  auto self = SelfExecutable();
  if (!self.ok()) return Failure("ping", std::string(self.status().message()));
  std::vector<std::string> common = {
      *self,
      "ping",
      absl::StrCat("--fabric=", kIbsimFabric),
      absl::StrCat("--connections=", c.connections),
      absl::StrCat("--private-data=", c.private_data),
      c.reject ? "--reject" : "--no-reject",
      c.ece ? "--ece" : "--no-ece",
      c.disconnect ? "--disconnect" : "--no-disconnect",
      c.verbose ? "--verbose" : "--no-verbose",
      absl::StrCat("--timeout-ms=", c.timeout_ms),
      absl::StrCat("--window=", c.window),
  };
  std::vector<std::string> server_argv = common;
  server_argv.push_back("--role=server");
  auto server = (*fabric)->Spawn("hostB", server_argv);
  if (!server.ok()) return Failure("ping", std::string(server.status().message()));
  if (auto line = server->WaitForLine("uscm ping: server listening", 60000); !line.ok()) {
    return Failure("ping", absl::StrCat("the server on hostB: ", line.status().message(),
                                        (*fabric)->LogTail()));
  }
  std::vector<std::string> client_argv = common;
  client_argv.push_back("--role=client");
  client_argv.push_back(absl::StrCat("--dlid=", (*fabric)->lids().at("hostB")));
  const int budget_ms = static_cast<int>(
      std::min<int64_t>(60000 + int64_t{c.connections} * 2 * c.timeout_ms, 3600000));
  auto client = (*fabric)->Run("hostA", client_argv, budget_ms);
  if (!client.ok()) return Failure("ping", std::string(client.status().message()));
  std::fputs(client->out.c_str(), stdout);
  ForwardStderr(client->err);
  auto served = server->Wait(client->exit_code == 0 ? 30000 : 1000);
  if (served.ok()) {
    std::fputs(served->out.c_str(), stdout);
    ForwardStderr(served->err);
  }
  std::fflush(stdout);
  if (client->exit_code != 0) return kExitFailure;
  if (!served.ok()) return Failure("ping", std::string(served.status().message()));
  return served->exit_code == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int RunPing(int argc, char** argv) {
  std::string fabric = "sim", private_data = "uscm ping", role;
  int64_t connections = 10, seed = 1, interval_us = 10;
  double loss = 0;
  bool reject = false, ece = false, disconnect = true, verbose = false;
  int64_t dlid = 0, seconds = 0, timeout_ms = 10000, peer_ud_qpn = 0, window = 1;
  std::string dgid;
  FlagSet flags("ping [options]",
                "Sets up N CM connections (path query, REQ/REP/RTU with private data) and\n"
                "reports setup time min / p50 / p99 / max and connections per second.\n"
                "On --fabric=sim the server and the client run in this process; on a device\n"
                "fabric run one --role=server and one --role=client (--dlid or --dgid of the\n"
                "server); --fabric=ibsim starts ibsim + OpenSM and runs both on it.");
  flags.String("fabric", &fabric, "sim, ibsim, umad:<ca>:<port>, ud:<device>:<port> or router:<socket>");
  flags.String("role", &role, "device fabrics: server or client");
  flags.Int("dlid", &dlid, "client: the server's LID (path query by LIDs)", 0, 0xBFFF);
  flags.String("dgid", &dgid, "client: the server's GID (path query as rdma_cm does; on "
                              "RoCE its IPv4-mapped GID, path without SA)");
  flags.Int("peer-ud-qpn", &peer_ud_qpn,
            "client, ud: on RoCE: the server's UD QPN (its listen line prints it)", 0,
            0xFFFFFF);
  flags.Int("seconds", &seconds, "server: stop after N seconds (0: after -c connections ended)",
            0);
  flags.Int("timeout-ms", &timeout_ms, "device fabrics: limit on each wait (ms)", 1, 3600000);
  flags.Int("connections", &connections, "number of connections (-c of ucmatose)", 1, 1000000);
  flags.Int("window", &window,
            "client, device fabrics and ibsim: connections in flight at once (cmtime starts "
            "all -c at once)",
            1, 1024);
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
  PingConfig pc;
  pc.connections = static_cast<int>(connections);
  pc.private_data = private_data;
  pc.reject = reject;
  pc.ece = ece;
  pc.disconnect = disconnect;
  pc.verbose = verbose;
  pc.dlid = static_cast<int>(dlid);
  pc.dgid = dgid;
  pc.peer_ud_qpn = static_cast<uint32_t>(peer_ud_qpn);
  pc.seconds = seconds;
  pc.timeout_ms = timeout_ms;
  pc.window = static_cast<int>(window);
  if (spec->kind == FabricSpec::Kind::kIbsim) {
    if (!role.empty()) return UsageError("ping", "--role is for device fabrics; ibsim runs both");
    return RunPingIbsim(pc);
  }
  if (spec->kind != FabricSpec::Kind::kSim) {
    if (role != "server" && role != "client") {
      return UsageError("ping", "a device fabric needs --role=server or --role=client");
    }
    pc.server = role == "server";
    if (!pc.server && dlid == 0 && dgid.empty()) {
      return UsageError("ping", "the client needs the server's --dlid=LID or --dgid=GID");
    }
    return RunPingDevice(*spec, pc);
  }
  if (!role.empty()) return UsageError("ping", "--role is for device fabrics; sim runs both");
  if (window != 1) {
    return UsageError("ping", "--window is for device fabrics and ibsim; on sim connections "
                              "start every --interval-us");
  }
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
  absl::PrintF(
      "SA: %d path queries, %d on the wire, %d coalesced (%d onto a query presumed lost), "
      "%d retries; RTO %s (SRTT %s, RTTVAR %s)\n",
      r->sa_queries, r->sa_on_wire, r->sa_coalesced, r->sa_superseded, r->sa_retries,
      r->sa_rto.ToString(), r->sa_srtt.ToString(), r->sa_rttvar.ToString());
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace uscm::tools
