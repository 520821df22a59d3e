// `uscm ... --fabric=ibsim` and `uscm dump --live` on an ibsim node, run as a
// user runs them: the uscm binary as a subprocess, checking output and exit
// code. Needs ibsim-utils, libumad2sim0 and opensm (tools/setup.sh).
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/ibsim_launcher.h"

namespace uscm::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kUscm[] = "tools/uscm";  // runfiles-relative

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result RunUscm(const std::string& args) {
  Result r;
  FILE* p = popen(absl::StrCat(kUscm, " ", args, " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

TEST(UscmIbsimTest, PingConnectsAndDisconnects) {
  Result r = RunUscm("ping --fabric=ibsim -c 5 --ece --private-data=hello --verbose");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("5 established, 0 failed")) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex(
                            "setup time \\(us, wall clock\\): min [0-9.]+  p50 [0-9.]+  p99"));
  EXPECT_THAT(r.output, HasSubstr("REQ: private data \"hello\""));
  EXPECT_THAT(r.output, HasSubstr("server: 5 established, 0 rejected, 5 ended"));
  EXPECT_THAT(r.output, Not(HasSubstr("ERR: received data size")));
}

// --window=N: N connections in flight, as cmtime runs them; every one is
// set up and torn down, and the summary says how they ran.
TEST(UscmIbsimTest, PingWindow) {
  Result r = RunUscm("ping --fabric=ibsim -c 24 --window=6 --ece");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("24 established, 0 failed")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("connect + disconnect, up to 6 in flight")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("server: 24 established, 0 rejected, 24 ended")) << r.output;
}

TEST(UscmIbsimTest, PingReject) {
  Result r = RunUscm("ping --fabric=ibsim -c 3 --reject");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 rejected as asked, 0 failed"));
  EXPECT_THAT(r.output, HasSubstr("server: 0 established, 3 rejected, 3 ended"));
}

// A private fabric for the saquery comparisons: ibsim + OpenSM, hostA and
// hostB ACTIVE (IbsimFabric::Start waits for that).
std::unique_ptr<IbsimFabric> StartFabric() {
  IbsimOptions o;
  o.port_probe = kUscm;
  o.port_probe_args = {"ibsim-port"};
  o.start_timeout_ms = 60000;
  auto fabric = IbsimFabric::Start(o);
  EXPECT_TRUE(fabric.ok()) << fabric.status();
  return fabric.ok() ? std::move(*fabric) : nullptr;
}

// Set-up, retried: infiniband-diags' saquery on `node` until it exits 0 and
// prints `want` (an ACTIVE port can precede OpenSM's routes and multicast
// tables by a sweep). Returns its stdout, or "" after ~30 s.
std::string SaqueryWhenReady(IbsimFabric& f, const std::string& node,
                             const std::vector<std::string>& argv, const std::string& want) {
  std::string last;
  for (int attempt = 0; attempt < 60; ++attempt) {
    auto r = f.Run(node, argv, 30000);
    if (r.ok() && r->exit_code == 0 && r->out.find(want) != std::string::npos) return r->out;
    last = r.ok() ? absl::StrCat("exit ", r->exit_code, ": ", r->out, r->err)
                  : std::string(r.status().message());
    usleep(500 * 1000);
  }
  ADD_FAILURE() << "saquery never answered " << want << "; last: " << last << f.LogTail();
  return "";
}

// `uscm saquery` prints what infiniband-diags' saquery prints for the same
// record from the same OpenSM: the whole stdout, character for character
// (neither tool prints a banner on stdout; umad2sim's complaints go to stderr).
TEST(UscmIbsimTest, SaqueryPrintsWhatSaqueryPrints) {
  auto fabric = StartFabric();
  ASSERT_NE(fabric, nullptr);
  const std::string a = absl::StrCat(fabric->lids().at("hostA"));
  const std::string b = absl::StrCat(fabric->lids().at("hostB"));
  // PathRecord hostA -> hostB.
  const std::string theirs_pr = SaqueryWhenReady(
      *fabric, "hostA", {"/usr/sbin/saquery", "-p", "--src-to-dst", a + ":" + b}, "PathRecord dump:");
  ASSERT_FALSE(theirs_pr.empty());
  auto ours_pr = fabric->Run("hostA",
                             {kUscm, "saquery", "PR", "--fabric=umad:ibsim0:1", "--slid=" + a,
                              "--dlid=" + b},
                             30000);
  ASSERT_TRUE(ours_pr.ok()) << ours_pr.status();
  ASSERT_EQ(ours_pr->exit_code, 0) << ours_pr->out << ours_pr->err;
  EXPECT_EQ(ours_pr->out, theirs_pr);
  EXPECT_THAT(ours_pr->out, HasSubstr("mtu.....................0x8"));  // selector "exactly"
  EXPECT_THAT(ours_pr->out, HasSubstr("resv2..................."));

  // MCMemberRecords: OpenSM's IPoIB broadcast group and one hostA creates
  // (set-up: a join through uscm, whose GetTable must then list it).
  auto joined = fabric->Run(
      "hostA", {kUscm, "saquery", "MCMR", "--fabric=umad:ibsim0:1", "--join=1"}, 60000);
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->exit_code, 0) << joined->out << joined->err;
  const std::string theirs_mc =
      SaqueryWhenReady(*fabric, "hostA", {"/usr/sbin/saquery", "MCMR"}, "qkey....................0x10000");
  ASSERT_FALSE(theirs_mc.empty());
  auto ours_mc = fabric->Run("hostA", {kUscm, "saquery", "MCMR", "--fabric=umad:ibsim0:1"}, 30000);
  ASSERT_TRUE(ours_mc.ok()) << ours_mc.status();
  ASSERT_EQ(ours_mc->exit_code, 0) << ours_mc->out << ours_mc->err;
  EXPECT_EQ(ours_mc->out, theirs_mc);
  EXPECT_THAT(ours_mc->out, HasSubstr("MCMember Record dump:"));
}

TEST(UscmIbsimTest, SaqueryPathRecordFromOpenSm) {
  Result r = RunUscm("saquery PR --fabric=ibsim");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("PathRecord dump:"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("slid\\.+[0-9]+\n"));
  EXPECT_THAT(r.output, HasSubstr("pkey....................0xFFFF"));
}

TEST(UscmIbsimTest, SaqueryMcMemberAfterJoin) {
  Result r = RunUscm("saquery MCMR --join=1 --fabric=ibsim");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("MCMember Record dump:"));
  EXPECT_THAT(r.output, HasSubstr("qkey....................0x10000"));  // the group we made
}

// The demo story against OpenSM: one merged timeline of real MADs and events
// from both hosts, and one capture.
TEST(UscmIbsimTest, DemoStory) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string pcap = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/demo-ibsim.pcap");
  Result r = RunUscm("demo --fabric=ibsim --capture=" + pcap);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line :
       {"hostA -> OpenSM +SA PathRecord Get", "OpenSM -> hostA +SA PathRecord GetResp",
        "hostA -> hostB +CM REQ", "hostB -> hostA +CM REP", "CM RTU", "CM REJ",
        "Reason=0x001c", "private data \"busy, try later\"", "ECE vendor 0x0015b3 options 0x1",
        "MCMemberRecord Set", "MCMemberRecord Delete", "CM DREQ", "CM DREP",
        "DREQ with private data \"bye\"", "TIMEWAIT_EXIT: connection 1 is gone"}) {
    EXPECT_THAT(r.output, ::testing::ContainsRegex(line)) << r.output;
  }
  // Merged in time order: the REQ before the REP before the RTU.
  const size_t req = r.output.find("CM REQ"), rep = r.output.find("CM REP"),
               rtu = r.output.find("CM RTU");
  EXPECT_LT(req, rep);
  EXPECT_LT(rep, rtu);
  EXPECT_THAT(r.output, HasSubstr("Capture: " + pcap));
  Result decoded = RunUscm("dump " + pcap);
  ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
  EXPECT_THAT(decoded.output, ::testing::ContainsRegex("[0-9]+ packets, 0 not decodable"));
  EXPECT_THAT(decoded.output, HasSubstr("CM REQ Send"));
}

// dump --live on hostB shows the REQ a client on hostA sends it, and writes
// it to a capture that `uscm dump FILE` decodes.
TEST(UscmIbsimTest, DumpLiveSeesTheRequest) {
  IbsimOptions o;
  o.port_probe = kUscm;
  o.port_probe_args = {"ibsim-port"};
  o.start_timeout_ms = 60000;
  auto fabric = IbsimFabric::Start(o);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  const std::string pcap = absl::StrCat((*fabric)->dir(), "/live.pcap");
  auto dump = (*fabric)->Spawn("hostB", {kUscm, "dump", "--live", "--fabric=umad:ibsim0:1",
                                         "--count=1", "--seconds=120", "--write=" + pcap});
  ASSERT_TRUE(dump.ok()) << dump.status();
  auto listening = dump->WaitForLine("listening on umad:ibsim0:1", 60000);
  ASSERT_TRUE(listening.ok()) << listening.status() << (*fabric)->LogTail();
  // No server listens on hostB: the client times out (exit 1), but its REQ
  // reached the wire.
  auto client = (*fabric)->Run(
      "hostA",
      {kUscm, "ping", "--fabric=umad:ibsim0:1", "--role=client",
       absl::StrCat("--dlid=", (*fabric)->lids().at("hostB")), "-c", "1", "--timeout-ms=2000",
       "--private-data=seen by dump"},
      60000);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(client->exit_code, 1) << client->out << client->err;
  auto dumped = dump->Wait(60000);
  ASSERT_TRUE(dumped.ok()) << dumped.status();
  EXPECT_EQ(dumped->exit_code, 0) << dumped->err;
  EXPECT_THAT(dumped->out, ::testing::ContainsRegex(
                               absl::StrCat((*fabric)->lids().at("hostA"), " -> ",
                                            (*fabric)->lids().at("hostB"), " +QP1 +CM REQ")))
      << dumped->out;
  EXPECT_THAT(dumped->out, HasSubstr("1 MADs"));
  Result decoded = RunUscm("dump --verbose " + pcap);
  ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
  EXPECT_THAT(decoded.output, HasSubstr("1 packets, 0 not decodable"));
  EXPECT_THAT(decoded.output, HasSubstr("CM REQ Send"));
}

}  // namespace
}  // namespace uscm::tools
