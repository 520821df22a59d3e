// `uscm saquery`: PathRecord and MCMemberRecord queries, printed the way
// infiniband-diags' saquery prints them.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/fabric_flags.h"
#include "tools/sim_world.h"

namespace uscm::tools {
namespace {

void Row(const char* name, const std::string& value) {
  std::string dots = name;
  dots.resize(24, '.');
  absl::PrintF("\t\t%s%s\n", dots, value);
}

void PrintPath(const mad::wire::PathRecord& p) {
  absl::PrintF("PathRecord dump:\n");
  Row("service_id", absl::StrFormat("0x%016X", p.service_id));
  Row("dgid", p.dgid.ToString());
  Row("sgid", p.sgid.ToString());
  Row("dlid", absl::StrFormat("%d", p.dlid));
  Row("slid", absl::StrFormat("%d", p.slid));
  Row("hop_flow_raw", absl::StrFormat("0x%X", (p.raw_traffic ? 1u << 31 : 0) |
                                                  (p.flow_label << 8) | p.hop_limit));
  Row("tclass", absl::StrFormat("0x%X", p.tclass));
  Row("num_path_revers", absl::StrFormat("0x%X", (p.reversible ? 0x80 : 0) | p.numb_path));
  Row("pkey", absl::StrFormat("0x%04X", p.pkey));
  Row("qos_class", absl::StrFormat("0x%X", p.qos_class));
  Row("sl", absl::StrFormat("0x%X", p.sl));
  Row("mtu", absl::StrFormat("0x%X", static_cast<int>(p.mtu)));
  Row("rate", absl::StrFormat("0x%X", p.rate));
  Row("pkt_life", absl::StrFormat("0x%X", p.packet_life_time));
  Row("preference", absl::StrFormat("0x%X", p.preference));
}

void PrintMember(const mad::wire::McMemberRecord& m) {
  absl::PrintF("MCMemberRecord member dump:\n");
  Row("MGID", m.mgid.ToString());
  Row("Mlid", absl::StrFormat("0x%X", m.mlid));
  Row("PortGid", m.port_gid.ToString());
  Row("qkey", absl::StrFormat("0x%X", m.qkey));
  Row("mtu", absl::StrFormat("0x%X", static_cast<int>(m.mtu)));
  Row("pkey", absl::StrFormat("0x%X", m.pkey));
  Row("rate", absl::StrFormat("0x%X", m.rate));
  Row("SL", absl::StrFormat("0x%X", m.sl));
  Row("scope", absl::StrFormat("0x%X", static_cast<int>(m.scope)));
  Row("JoinState", absl::StrFormat("0x%X", m.join_state.bits()));
}

}  // namespace

int RunSaquery(int argc, char** argv) {
  std::string fabric = "sim", topology;
  int64_t slid = 0, dlid = 0, joins = 0, seed = 1;
  FlagSet flags("saquery [options] [PR|MCMR]",
                "Queries the SA: PR (PathRecord, the default) or MCMR (MCMemberRecord) with\n"
                "GetTable, printing records as infiniband-diags' saquery does.");
  flags.String("fabric", &fabric, "sim (ibsim and devices: not yet)");
  flags.String("topology", &topology, "sim: ibsim net file (default two hosts, one switch)");
  flags.Int("slid", &slid, "PR: only paths from this LID", 0, 0xBFFF);
  flags.Int("dlid", &dlid, "PR: only paths to this LID", 0, 0xBFFF);
  flags.Int("join", &joins, "sim: first join this many new groups, so MCMR has records", 0, 64);
  flags.Int("seed", &seed, "sim: seed", 0);
  flags.Epilog("Example: uscm saquery PR --slid=2   |   uscm saquery MCMR --join=1\n");
  std::vector<std::string> positional;
  if (auto rc = flags.Parse(argc, argv, &positional)) return *rc;
  std::string what = positional.empty() ? "PR" : positional[0];
  if (positional.size() > 1 || (what != "PR" && what != "MCMR")) {
    return UsageError("saquery", "expected PR or MCMR");
  }
  auto spec = ParseFabric(fabric);
  if (!spec.ok()) return UsageError("saquery", std::string(spec.status().message()));
  if (spec->kind == FabricSpec::Kind::kUmad || spec->kind == FabricSpec::Kind::kUd) {
    auto t = OpenRealTransport(*spec);
    if (!t.ok()) return Failure("saquery", std::string(t.status().message()));
    return Failure("saquery", "queries over a device fabric are not in this build yet");
  }
  if (spec->kind == FabricSpec::Kind::kIbsim) {
    return Failure("saquery", "--fabric=ibsim is not supported by saquery yet; use --fabric=sim");
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
  for (const auto& p : result->paths) PrintPath(p);
  for (const auto& m : result->members) PrintMember(m);
  return kExitOk;
}

}  // namespace uscm::tools
