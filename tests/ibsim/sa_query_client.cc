// Runs one SA query through uscm's SA client over the umad transport, on an
// ibsim node (LD_PRELOAD=libumad2sim.so), and prints the answer as
// "key=value" lines for tests/ibsim/sa_opensm_test to compare with saquery.
//
//   sa_query_client path [--table] [--slid L] [--dlid L] [--sgid G] [--dgid G]
//                        [--pkey P] [--sl S] [--reversible 0|1] [--numb-path N]
//   sa_query_client join [--mgid G] [--state S] [--qkey Q] [--pkey P] [--sl S]
//                        [--tclass T] [--flow-label F] [--no-create]
//   sa_query_client leave --mgid G [--state S]
//   sa_query_client members [--mgid G]
//
// MGID defaults to 0 (the SA assigns one); S is a JoinState bit mask (1 Full,
// 2 Non, 4 SendOnlyNon, 8 SendOnlyFull; default 1). Path records print with
// saquery's field names ("path.0.dlid=3", "path.0.mtu=0x84": selector << 6 |
// code, as saquery prints them); the number of records is "count=N". An SA
// error prints "error=<status text>" on stdout and the message on stderr, with
// exit status 3. Usage errors exit 2, transport errors 1.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/ibsim/sa_session.h"

namespace uscm::tests {
namespace {

using mad::Gid;
using mad::wire::JoinState;
using mad::wire::McMemberRecord;
using mad::wire::PathRecord;

uint8_t Sel(mad::wire::Selector s, uint8_t value) {
  return static_cast<uint8_t>((static_cast<uint8_t>(s) << 6) | value);
}

void PrintPath(size_t i, const PathRecord& p) {
  const std::string k = absl::StrCat("path.", i, ".");
  const uint32_t hop_flow = (p.raw_traffic ? 1u << 31 : 0) | (p.flow_label << 8) | p.hop_limit;
  printf("%sservice_id=0x%016llx\n", k.c_str(), static_cast<unsigned long long>(p.service_id));
  printf("%sdgid=%s\n%ssgid=%s\n", k.c_str(), p.dgid.ToString().c_str(), k.c_str(),
         p.sgid.ToString().c_str());
  printf("%sdlid=%u\n%sslid=%u\n", k.c_str(), p.dlid, k.c_str(), p.slid);
  printf("%shop_flow_raw=0x%x\n%stclass=0x%x\n", k.c_str(), hop_flow, k.c_str(), p.tclass);
  printf("%snum_path_revers=0x%x\n", k.c_str(), (p.reversible ? 0x80u : 0) | p.numb_path);
  printf("%spkey=0x%04X\n%sqos_class=0x%x\n%ssl=0x%x\n", k.c_str(), p.pkey, k.c_str(),
         p.qos_class, k.c_str(), p.sl);
  printf("%smtu=0x%x\n%srate=0x%x\n%spkt_life=0x%x\n", k.c_str(),
         Sel(p.mtu_selector, static_cast<uint8_t>(p.mtu)), k.c_str(),
         Sel(p.rate_selector, p.rate), k.c_str(),
         Sel(p.packet_life_time_selector, p.packet_life_time));
  printf("%spreference=0x%x\n", k.c_str(), p.preference);
}

void PrintMember(size_t i, const McMemberRecord& m) {
  const std::string k = absl::StrCat("member.", i, ".");
  printf("%smgid=%s\n%sport_gid=%s\n", k.c_str(), m.mgid.ToString().c_str(), k.c_str(),
         m.port_gid.ToString().c_str());
  printf("%smlid=0x%04x\n%sqkey=0x%08x\n%spkey=0x%04x\n%ssl=%u\n", k.c_str(), m.mlid, k.c_str(),
         m.qkey, k.c_str(), m.pkey, k.c_str(), m.sl);
  printf("%sjoin_state=0x%x\n", k.c_str(), m.join_state.bits());
}

void PrintGroup(const sa::McGroup& g) {
  printf("group.mgid=%s\ngroup.mlid=0x%04x\ngroup.qkey=0x%08x\ngroup.pkey=0x%04x\n"
         "group.sl=%u\ngroup.mtu=%u\ngroup.rate=%u\ngroup.join_state=0x%x\n",
         g.mgid.ToString().c_str(), g.mlid, g.qkey, g.pkey, g.sl, static_cast<unsigned>(g.mtu),
         g.rate, g.join_state.bits());
}

int Usage(const std::string& why) {
  fprintf(stderr, "sa_query_client: %s\nusage: sa_query_client path|join|leave|members "
                  "[options] (see the file comment)\n", why.c_str());
  return 2;
}

int Main(int argc, char** argv) {
  if (argc < 2) return Usage("no command");
  const std::string cmd = argv[1];
  std::map<std::string, std::string> opt;
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--table" || k == "--no-create") {
      opt[k] = "1";
      continue;
    }
    if (k.rfind("--", 0) != 0 || i + 1 >= argc) return Usage("bad option " + k);
    opt[k] = argv[++i];
  }
  // Numeric options: decimal or 0x hex, range-checked.
  auto num = [&](const std::string& k, uint64_t max, uint64_t* out) -> bool {
    auto it = opt.find(k);
    if (it == opt.end()) return false;
    const std::string& v = it->second;
    const bool ok = v.rfind("0x", 0) == 0 ? absl::SimpleHexAtoi(v.substr(2), out)
                                          : absl::SimpleAtoi(v, out);
    if (!ok || *out > max) {
      fprintf(stderr, "sa_query_client: %s %s: not a number in 0..%llu\n", k.c_str(), v.c_str(),
              static_cast<unsigned long long>(max));
      exit(2);
    }
    return true;
  };
  auto gid = [&](const std::string& k, Gid* out) -> bool {
    auto it = opt.find(k);
    if (it == opt.end()) return false;
    auto g = Gid::Parse(it->second);
    if (!g.ok()) {
      fprintf(stderr, "sa_query_client: %s: %s\n", k.c_str(), g.status().ToString().c_str());
      exit(2);
    }
    *out = *g;
    return true;
  };

  mad::AgentConfig base;
  base.base_timeout = mad::Duration::Millis(500);
  base.max_retries = 3;
  auto session = SaSession::Open(base);
  if (!session.ok()) {
    fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  SaSession& s = **session;
  const mad::TimePoint now = s.Now();
  const Gid own = s.transport().port().gid;
  printf("port.lid=%u\nport.gid=%s\n", s.transport().port().lid, own.ToString().c_str());

  uint64_t v = 0;
  absl::StatusOr<uint64_t> id = absl::InvalidArgumentError("unknown command " + cmd);
  if (cmd == "path") {
    sa::PathQuery q;
    Gid g;
    if (num("--slid", 0xFFFF, &v)) q.Slid(static_cast<uint16_t>(v));
    if (num("--dlid", 0xFFFF, &v)) q.Dlid(static_cast<uint16_t>(v));
    if (gid("--sgid", &g)) q.Sgid(g);
    if (gid("--dgid", &g)) q.Dgid(g);
    if (num("--pkey", 0xFFFF, &v)) q.PKey(static_cast<uint16_t>(v));
    if (num("--sl", 15, &v)) q.Sl(static_cast<uint8_t>(v));
    if (num("--reversible", 1, &v)) q.Reversible(v != 0);
    if (num("--numb-path", 127, &v)) q.NumbPath(static_cast<uint8_t>(v));
    id = opt.count("--table") ? s.client().GetPaths(now, q) : s.client().GetPath(now, q);
  } else if (cmd == "join" || cmd == "leave") {
    sa::McJoin j;
    gid("--mgid", &j.mgid);
    j.port_gid = own;
    j.join_state = JoinState(num("--state", 15, &v) ? static_cast<uint8_t>(v)
                                                    : JoinState::kFullMember);
    if (cmd == "leave") {
      id = s.client().Leave(now, j.mgid, own, j.join_state);
    } else {
      j.qkey = num("--qkey", 0xFFFFFFFF, &v) ? static_cast<uint32_t>(v) : 0x1234;
      if (num("--pkey", 0xFFFF, &v)) j.pkey = static_cast<uint16_t>(v);
      if (num("--sl", 15, &v)) j.sl = static_cast<uint8_t>(v);
      if (num("--tclass", 255, &v)) j.tclass = static_cast<uint8_t>(v);
      if (num("--flow-label", 0xFFFFF, &v)) j.flow_label = static_cast<uint32_t>(v);
      j.create = !opt.count("--no-create");
      id = s.client().Join(now, j);
    }
  } else if (cmd == "members") {
    McMemberRecord tmpl;
    mad::wire::McMemberRecordMask mask;
    if (gid("--mgid", &tmpl.mgid)) mask = mask | mad::wire::McMemberRecordMask::kMgid;
    id = s.client().GetMcMembers(now, tmpl, mask);
  }
  if (!id.ok()) return Usage(id.status().ToString());

  absl::optional<sa::SaResult> result;
  auto run = s.RunUntil([&] { return result.has_value(); },
                        [&](sa::SaResult r) { result = std::move(r); }, mad::Duration::Seconds(10));
  if (!run.ok()) {
    fprintf(stderr, "%s\n", run.ToString().c_str());
    return 1;
  }
  if (!result->status.ok()) {
    printf("error=%s\nerror.code=%s\n", std::string(result->status.message()).c_str(),
           absl::StatusCodeToString(result->status.code()).c_str());
    fprintf(stderr, "%s\n", result->status.ToString().c_str());
    const auto& c = s.agent().counters();
    const auto& u = s.transport().stats();
    fprintf(stderr, "agent: sent=%llu received=%llu retries=%llu unmatched=%llu malformed=%llu "
            "dropped=%llu rmpp_out_of_window=%llu; umad: received=%llu status_errors=%llu\n",
            (unsigned long long)c.sent, (unsigned long long)c.received,
            (unsigned long long)c.retries, (unsigned long long)c.unmatched,
            (unsigned long long)c.malformed, (unsigned long long)c.dropped,
            (unsigned long long)c.rmpp.out_of_window, (unsigned long long)u.received,
            (unsigned long long)u.receive_status_errors);
    return 3;
  }
  printf("count=%zu\n", result->paths.size() + result->members.size());
  for (size_t i = 0; i < result->paths.size(); ++i) PrintPath(i, result->paths[i]);
  for (size_t i = 0; i < result->members.size(); ++i) PrintMember(i, result->members[i]);
  if (result->group) PrintGroup(*result->group);
  return 0;
}

}  // namespace
}  // namespace uscm::tests

namespace {
volatile sig_atomic_t exit_code = 0;
void ExitNow(int) { _exit(exit_code); }
}  // namespace

int main(int argc, char** argv) {
  const int rc = uscm::tests::Main(argc, argv);
  fflush(stdout);
  fflush(stderr);
  // umad2sim's exit handler can deadlock when a MAD arrives during exit
  // (docs/TRANSPORTS.md): leave after 2 s regardless; the output is flushed.
  exit_code = rc;
  signal(SIGALRM, ExitNow);
  alarm(2);
  return rc;
}
