// `uscm saquery`: PathRecord and MCMemberRecord queries, printed the way
// infiniband-diags' saquery prints them (tools/saquery_format.h).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/fabric_flags.h"
#include "tools/ibsim_tool.h"
#include "tools/real_host.h"
#include "tools/saquery_format.h"
#include "tools/sim_world.h"

namespace uscm::tools {
namespace {

struct Query {
  bool paths = true;  // PR, else MCMR
  int64_t slid = 0, dlid = 0, joins = 0;
};

void Print(const sa::SaResult& r) {
  for (const auto& p : r.paths) std::fputs(FormatPathRecord(p).c_str(), stdout);
  for (const auto& m : r.members) std::fputs(FormatMcMemberRecord(m).c_str(), stdout);
}

// The queries through the SA client of a RealHost (a device, or umad on an
// ibsim node).
int RunOnDevice(const FabricSpec& spec, const Query& q, int64_t timeout_ms) {
  RealTransportOptions to;
  to.receive_cm = false;  // SA client only
  auto host = RealHost::Open(spec, to);
  if (!host.ok()) return Failure("saquery", std::string(host.status().message()));
  RealHost& h = **host;
  absl::optional<sa::SaResult> result;
  h.on_sa_result = [&](TimePoint, sa::SaResult r) { result = std::move(r); };
  auto await = [&](absl::StatusOr<uint64_t> id, const char* what) -> absl::Status {
    if (!id.ok()) return id.status();
    h.Kick();
    absl::Status s = h.RunUntil([&] { return result.has_value(); },
                                Duration::Millis(timeout_ms), what);
    if (!s.ok()) return s;
    return result->status;
  };
  for (int64_t i = 0; i < q.joins; ++i) {
    sa::McJoin j;
    j.port_gid = h.port().gid;
    j.qkey = 0x00010000;
    result.reset();
    if (absl::Status s = await(h.sa().Join(h.Now(), j), "MCMemberRecord join"); !s.ok()) {
      return Failure("saquery", std::string(s.message()));
    }
  }
  result.reset();
  absl::Status s;
  if (q.paths) {
    sa::PathQuery pq;
    if (q.slid != 0) pq.Slid(static_cast<uint16_t>(q.slid));
    if (q.dlid != 0) pq.Dlid(static_cast<uint16_t>(q.dlid));
    s = await(h.sa().GetPaths(h.Now(), pq), "PathRecord GetTable");
  } else {
    s = await(h.sa().GetMcMembers(h.Now(), {}, {}), "MCMemberRecord GetTable");
  }
  if (!s.ok()) return Failure("saquery", std::string(s.message()));
  Print(*result);
  return kExitOk;
}

// --fabric=ibsim: this binary again, on hostA, against OpenSM. umad2sim keeps
// 224 bytes of each MAD, so only one-segment answers survive: a PathRecord
// query without LIDs asks for hostA -> hostB.
int RunOnIbsim(Query q, int64_t timeout_ms) {
  auto fabric = StartToolFabric("saquery");
  if (!fabric.ok()) return Failure("saquery", std::string(fabric.status().message()));
  auto self = SelfExecutable();
  if (!self.ok()) return Failure("saquery", std::string(self.status().message()));
  if (q.paths && q.slid == 0 && q.dlid == 0) {
    q.slid = (*fabric)->lids().at("hostA");
    q.dlid = (*fabric)->lids().at("hostB");
  }
  std::vector<std::string> argv = {*self,
                                   "saquery",
                                   q.paths ? "PR" : "MCMR",
                                   absl::StrCat("--fabric=", kIbsimFabric),
                                   absl::StrCat("--slid=", q.slid),
                                   absl::StrCat("--dlid=", q.dlid),
                                   absl::StrCat("--join=", q.joins),
                                   absl::StrCat("--timeout-ms=", timeout_ms)};
  auto r = (*fabric)->Run("hostA", argv, static_cast<int>(timeout_ms * (q.joins + 1) + 30000));
  if (!r.ok()) return Failure("saquery", std::string(r.status().message()));
  std::fputs(r->out.c_str(), stdout);
  ForwardStderr(r->err);
  return r->exit_code == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int RunSaquery(int argc, char** argv) {
  std::string fabric = "sim", topology;
  int64_t slid = 0, dlid = 0, joins = 0, seed = 1, timeout_ms = 10000;
  FlagSet flags("saquery [options] [PR|MCMR]",
                "Queries the SA: PR (PathRecord, the default) or MCMR (MCMemberRecord) with\n"
                "GetTable, printing records as infiniband-diags' saquery does.");
  flags.String("fabric", &fabric, "sim, ibsim, umad:<ca>:<port>, ud:<device>:<port> or router:<socket>");
  flags.String("topology", &topology, "sim: ibsim net file (default two hosts, one switch)");
  flags.Int("slid", &slid, "PR: only paths from this LID", 0, 0xBFFF);
  flags.Int("dlid", &dlid, "PR: only paths to this LID", 0, 0xBFFF);
  flags.Int("join", &joins, "sim: first join this many new groups, so MCMR has records", 0, 64);
  flags.Int("seed", &seed, "sim: seed", 0);
  flags.Int("timeout-ms", &timeout_ms, "device fabrics: limit on each query (ms)", 1, 3600000);
  flags.Epilog("Example: uscm saquery PR --slid=2   |   uscm saquery MCMR --join=1\n");
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(argc, argv, &positional)) return *rc;
  std::string what = positional.empty() ? "PR" : positional[0];
  if (positional.size() > 1 || (what != "PR" && what != "MCMR")) {
    return UsageError("saquery", "expected PR or MCMR");
  }
  auto spec = ParseFabric(fabric);
  if (!spec.ok()) return UsageError("saquery", std::string(spec.status().message()));
  Query query;
  query.paths = what == "PR";
  query.slid = slid;
  query.dlid = dlid;
  query.joins = joins;
  if (spec->IsDevice()) {
    if (!topology.empty()) return UsageError("saquery", "--topology is for --fabric=sim");
    return RunOnDevice(*spec, query, timeout_ms);
  }
  if (spec->kind == FabricSpec::Kind::kIbsim) {
    if (!topology.empty()) return UsageError("saquery", "--topology is for --fabric=sim");
    return RunOnIbsim(query, timeout_ms);
  }
  SimWorldOptions wo;
  wo.seed = static_cast<uint64_t>(seed);
  wo.topology_file = topology;
  wo.max_hosts = 1;
  auto world = SimWorld::Create(wo, nullptr);
  if (!world.ok()) return Failure("saquery", std::string(world.status().message()));
  SimHost& h = *(*world)->hosts()[0];
  auto& sched = (*world)->scheduler();
  absl::optional<sa::SaResult> result;
  h.on_sa_result = [&](SimHost&, TimePoint, sa::SaResult r) { result = std::move(r); };
  auto await = [&]() -> absl::Status {
    absl::Status s = sched.RunUntil([&] { return result.has_value(); },
                                    sched.Now() + Duration::Seconds(600));
    if (!s.ok()) return s;
    return result->status;
  };
  for (int64_t i = 0; i < joins; ++i) {
    sa::McJoin j;
    j.port_gid = h.port().gid;
    j.qkey = 0x00010000;
    result.reset();
    if (auto id = h.sa().Join(sched.Now(), j); !id.ok()) {
      return Failure("saquery", std::string(id.status().message()));
    }
    h.Touch();
    if (absl::Status s = await(); !s.ok()) return Failure("saquery", std::string(s.message()));
  }
  result.reset();
  absl::StatusOr<uint64_t> id;
  if (what == "PR") {
    sa::PathQuery q;
    if (slid != 0) q.Slid(static_cast<uint16_t>(slid));
    if (dlid != 0) q.Dlid(static_cast<uint16_t>(dlid));
    id = h.sa().GetPaths(sched.Now(), q);
  } else {
    id = h.sa().GetMcMembers(sched.Now(), {}, {});
  }
  if (!id.ok()) return Failure("saquery", std::string(id.status().message()));
  h.Touch();
  if (absl::Status s = await(); !s.ok()) return Failure("saquery", std::string(s.message()));
  Print(*result);
  return kExitOk;
}

}  // namespace uscm::tools
