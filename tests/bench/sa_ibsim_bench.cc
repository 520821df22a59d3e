// PathRecord queries per second against OpenSM over ibsim: libibmad's
// synchronous SA query (sa_rpc_call, one at a time) vs uscm's SA client with
// W queries outstanding, in the same process on the same fabric.
//
//   bazel run -c opt //tests/bench:sa_ibsim_bench -- [NETFILE] [ROUNDS]
//
// The driver starts ibsim + OpenSM on NETFILE (default
// tests/topologies/hca500-sw17.net; OpenSM on the first HCA) and runs this
// binary again as "--worker" on the second HCA under umad2sim. The worker
// finds every CA's LID with SMP NodeInfo (untimed), then times a Get
// PathRecord (SLID = own, DLID = the CA) to every CA: libibmad first, then
// ours with W = 1, 16, 64. Every answer must come back with SA status 0 and
// the asked DLID; a lost or wrong answer fails the run.
#include <infiniband/mad.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/ibsim/ibsim_fabric.h"
#include "tests/ibsim/sa_session.h"

namespace {

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// LIDs 1..max_lid whose NodeInfo says CA (SMPs answered by ibsim itself).
std::vector<uint16_t> FindCas(ibmad_port* port, int max_lid) {
  std::vector<uint16_t> cas;
  for (int lid = 1; lid <= max_lid; ++lid) {
    ib_portid_t id = {};
    ib_portid_set(&id, lid, 0, 0);
    uint8_t buf[IB_SMP_DATA_SIZE] = {};
    if (smp_query_via(buf, &id, IB_ATTR_NODE_INFO, 0, 1000, port) == nullptr) continue;
    uint32_t type = 0;
    mad_decode_field(buf, IB_NODE_TYPE_F, &type);
    if (type == 1) cas.push_back(static_cast<uint16_t>(lid));
  }
  return cas;
}

// libibmad: one synchronous Get PathRecord per CA. Returns answers matched.
int IbmadRound(ibmad_port* port, uint16_t sm_lid, uint16_t own, const std::vector<uint16_t>& cas) {
  int ok = 0;
  for (uint16_t dlid : cas) {
    ib_portid_t sm = {};
    ib_portid_set(&sm, sm_lid, 1, IB_DEFAULT_QP1_QKEY);
    uint8_t buf[IB_SA_DATA_SIZE] = {};
    mad_set_field(buf, 0, IB_SA_PR_DLID_F, dlid);
    mad_set_field(buf, 0, IB_SA_PR_SLID_F, own);
    ib_sa_call_t sa = {};
    sa.attrid = IB_SA_ATTR_PATHRECORD;
    sa.method = IB_MAD_METHOD_GET;
    sa.mask = (1u << 4) | (1u << 5);  // DLID, SLID
    if (sa_rpc_call(port, buf, &sm, &sa, 0) == nullptr) continue;
    if (mad_get_field(buf, 0, IB_SA_PR_DLID_F) == dlid) ++ok;
  }
  return ok;
}

// uscm: every query started at once; the agent keeps `window` outstanding.
// The clock runs from the first query to the last answer (opening the umad
// port is outside, as for libibmad). Sets *seconds.
int OursRound(int window, uint16_t own, const std::vector<uint16_t>& cas, uint64_t* retries,
              double* seconds) {
  uscm::mad::AgentConfig base;
  base.window = static_cast<size_t>(window);
  auto s = uscm::tests::SaSession::Open(base);
  if (!s.ok()) {
    fprintf(stderr, "%s\n", s.status().ToString().c_str());
    return -1;
  }
  auto& session = **s;
  absl::flat_hash_map<uint64_t, uint16_t> want;
  const double t0 = NowSeconds();
  const auto now = session.Now();
  for (uint16_t dlid : cas) {
    auto id = session.client().GetPath(now, uscm::sa::PathQuery().Slid(own).Dlid(dlid));
    if (!id.ok()) return -1;
    want[*id] = dlid;
  }
  int ok = 0;
  size_t done = 0;
  auto st = session.RunUntil([&] { return done == cas.size(); },
                             [&](uscm::sa::SaResult r) {
                               ++done;
                               if (r.status.ok() && r.paths.size() == 1 &&
                                   r.paths[0].dlid == want[r.id]) {
                                 ++ok;
                               } else if (!r.status.ok()) {
                                 fprintf(stderr, "%s\n", r.status.ToString().c_str());
                               }
                             },
                             uscm::mad::Duration::Seconds(120));
  *seconds = NowSeconds() - t0;
  if (!st.ok()) fprintf(stderr, "%s\n", st.ToString().c_str());
  *retries = session.agent().counters().retries;
  return ok;
}

int Worker(int max_lid, int rounds) {
  auto p = uscm::mad::QueryUmadPort("", 1);
  if (!p.ok()) {
    fprintf(stderr, "%s\n", p.status().ToString().c_str());
    return 1;
  }
  const uint16_t own = p->port.lid, sm_lid = p->port.sm_lid;
  // libibmad's port is open only during its own phase: two SA agents in
  // one umad2sim process could receive each other's answers.
  int classes[] = {IB_SMI_CLASS, IB_SA_CLASS};
  std::vector<uint16_t> cas;
  bool lost = false;
  for (int round = 1; round <= rounds; ++round) {
    ibmad_port* port = mad_rpc_open_port(nullptr, 0, classes, 2);
    if (port == nullptr) {
      fprintf(stderr, "mad_rpc_open_port failed\n");
      return 1;
    }
    if (round == 1) {
      cas = FindCas(port, max_lid);
      printf("cas=%zu own_lid=%u sm_lid=%u\n", cas.size(), own, sm_lid);
    }
    double t0 = NowSeconds();
    const int ib_ok = IbmadRound(port, sm_lid, own, cas);
    const double ib_rate = static_cast<double>(cas.size()) / (NowSeconds() - t0);
    mad_rpc_close_port(port);
    printf("round=%d libibmad answered=%d/%zu qps=%.0f\n", round, ib_ok, cas.size(), ib_rate);
    fflush(stdout);
    lost |= ib_ok != static_cast<int>(cas.size());
    for (int w : {1, 16, 64}) {
      uint64_t retries = 0;
      double seconds = 1;
      const int ok = OursRound(w, own, cas, &retries, &seconds);
      const double rate = static_cast<double>(cas.size()) / seconds;
      printf("round=%d uscm W=%d answered=%d/%zu retries=%llu qps=%.0f ratio=%.2f\n", round, w,
             ok, cas.size(), static_cast<unsigned long long>(retries), rate, rate / ib_rate);
      fflush(stdout);
      lost |= ok != static_cast<int>(cas.size());
    }
  }
  return lost ? 3 : 0;
}

volatile sig_atomic_t exit_code = 0;
void ExitNow(int) { _exit(exit_code); }

int Driver(const std::string& self, const std::string& net, int rounds) {
  std::ifstream in(net);
  std::string line;
  std::vector<std::string> hcas;
  int nodes = 0;
  while (std::getline(in, line)) {
    const bool hca = line.rfind("Hca", 0) == 0 || line.rfind("Ca", 0) == 0;
    if (!hca && line.rfind("Switch", 0) != 0) continue;
    ++nodes;
    const size_t a = line.find('"'), b = line.find('"', a + 1);
    if (hca && a != std::string::npos && b != std::string::npos) {
      hcas.push_back(line.substr(a + 1, b - a - 1));
    }
  }
  if (hcas.size() < 2) {
    fprintf(stderr, "%s: need at least 2 HCAs\n", net.c_str());
    return 2;
  }
  uscm::tests::IbsimOptions o;
  o.net_file = net;
  o.sm_node = hcas[0];
  o.nodes = {hcas[1]};
  o.port_probe = "tests/ibsim/umad_client";
  o.start_timeout_ms = 300000;
  const double t0 = NowSeconds();
  auto fabric = uscm::tests::IbsimFabric::Start(o);
  if (!fabric.ok()) {
    fprintf(stderr, "%s\n", fabric.status().ToString().c_str());
    return 1;
  }
  printf("fabric %s: %d nodes, %zu HCAs, up in %.1f s; worker on %s\n", net.c_str(), nodes,
         hcas.size(), NowSeconds() - t0, hcas[1].c_str());
  fflush(stdout);
  auto r = (*fabric)->Run(hcas[1],
                          {self, "--worker", absl::StrCat(nodes + 16), absl::StrCat(rounds)},
                          600000);
  if (!r.ok()) {
    fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return 1;
  }
  printf("%s", r->out.c_str());
  if (r->exit_code != 0) fprintf(stderr, "worker exit %d: %s\n", r->exit_code, r->err.c_str());
  return r->exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--worker") {
    int max_lid = 0, rounds = 1;
    if (argc < 4 || !absl::SimpleAtoi(argv[2], &max_lid) || !absl::SimpleAtoi(argv[3], &rounds)) {
      return 2;
    }
    exit_code = Worker(max_lid, rounds);
    fflush(stdout);
    signal(SIGALRM, ExitNow);  // umad2sim's exit deadlock (docs/TRANSPORTS.md)
    alarm(2);
    return exit_code;
  }
  const std::string net = argc > 1 ? argv[1] : "tests/topologies/hca500-sw17.net";
  int rounds = 2;
  if (argc > 2 && (!absl::SimpleAtoi(argv[2], &rounds) || rounds < 1)) return 2;
  return Driver(argv[0], net, rounds);
}
