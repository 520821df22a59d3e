// Link failure over real ibsim (issue 8): the switch link of the passive
// node is cut and restored with ibsim's console (Unlink / Link) while a
// connection is being set up and while it is being torn down, and the CM's
// retransmission and timeout behaviour is checked end to end: real OpenSM
// (which re-sweeps after each change), the real umad transport under
// umad2sim, the runtime and the rdma_cm-style API (tests/ibsim/cm_link_peer).
//
// Ordering is by events, never by sleeps: the client prints "gate=K" and
// waits for a file before each step; the test changes the link, waits until
// ibsim has processed the console command, then opens the gate, and waits
// for the client's "req_sent=N" lines to know that a REQ really went out
// while the link was down.
//
// The peers claim IsSM (ibsim hands them CM requests only then); OpenSM
// polls such ports with SMInfo, which the umad transport answers as a
// NOTACTIVE SM: unanswered, the poll stalled every later sweep and no route
// came back after Link (docs/RELIABILITY.md, Notes).
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/ibsim/ibsim_fabric.h"

namespace uscm::tests {
namespace {

constexpr char kPeer[] = "tests/ibsim/cm_link_peer";  // runfiles-relative
constexpr char kProbe[] = "tests/ibsim/umad_client";
// Three switches: a core and two leaves (tests/topologies/hca6-sw3.net).
// OpenSM on hca 1 and the client on hca 3 (leaf 1), the server on hca 2
// (leaf 2). The cut link is core port 2 - leaf 2 port 1: a switch-to-switch
// link, so no CA port changes state (uscm peers claim IsSM under ibsim, and
// OpenSM does not bring such a relinked CA port back to ACTIVE).
constexpr char kNetFile[] = "tests/topologies/hca6-sw3.net";
constexpr char kSmNode[] = "H-0000000000100000";
constexpr char kClientNode[] = "H-0000000000100004";
constexpr char kServerNode[] = "H-0000000000100002";
// Generous: the machine may run at load 10+ (one step takes milliseconds).
constexpr int kStepTimeoutMs = 60000;
constexpr char kUnlinkHostB[] = "Unlink \"S-0000000000200002\"[1]";
constexpr char kLinkHostB[] = "Link \"S-0000000000200002\"[1] \"S-0000000000200000\"[2]";

class CmLinkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    IbsimOptions o;
    o.net_file = kNetFile;
    o.sm_node = kSmNode;
    o.nodes = {kClientNode, kServerNode};
    o.port_probe = kProbe;
    o.console = true;
    auto f = IbsimFabric::Start(o);
    if (!f.ok()) {
      start_error_ = new std::string(f.status().ToString());
      return;
    }
    fabric_ = f->release();
  }
  static void TearDownTestSuite() {
    delete fabric_;
    fabric_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(fabric_, nullptr) << "ibsim fabric did not start: " << *start_error_;
    const char* tmp = getenv("TEST_TMPDIR");
    gate_dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/gates-XXXXXX");
    ASSERT_NE(mkdtemp(gate_dir_.data()), nullptr);
    WaitActive(kServerNode);  // a previous test's Link: OpenSM may still be sweeping
    WaitRouted(kServerNode);
  }
  void TearDown() override {
    // Leave the link up for the next test whatever happened ("already
    // connected" is refused, which is fine).
    if (fabric_ != nullptr && link_down_) (void)fabric_->SendConsoleCommand(kLinkHostB);
  }

  void Unlink() {
    ASSERT_TRUE(fabric_->SendConsoleCommand(kUnlinkHostB).ok());
    link_down_ = true;
  }
  void Relink() {
    auto s = fabric_->SendConsoleCommand(kLinkHostB);
    ASSERT_TRUE(s.ok()) << s;
    link_down_ = false;
  }
  // Polls the port probe on `node` until OpenSM has made its port ACTIVE.
  static void WaitActive(const std::string& node) {
    std::string last;
    for (int i = 0; i < 600; ++i) {  // each probe is a process: ~0.1 s or more
      if (i % 20 == 0) {
        auto s = fabric_->RequestSweep();  // again now and then: a sweep may race the Link
        ASSERT_TRUE(s.ok()) << s;
      }
      auto r = fabric_->Run(node, {kProbe, "port"}, kStepTimeoutMs);
      ASSERT_TRUE(r.ok()) << r.status();
      auto kv = ParseKeyValues(r->out);
      if (kv["state"] == "4") return;
      last = r->out + r->err;
    }
    FAIL() << node << " not ACTIVE: " << last << fabric_->LogTail();
  }
  // Polls until an SA request from `node` is answered. The SM (hca 1) sits on
  // the client's leaf, so the answer to the server travels leaf 1 -> core ->
  // leaf 2, the client's route to the server: an answer proves that OpenSM has
  // re-programmed the switches after Link (the port of a CA behind a relinked
  // switch-to-switch link is ACTIVE the whole time, so WaitActive proves
  // nothing there; ibsim logs "no route to dest lid" until the re-sweep).
  static void WaitRouted(const std::string& node) {
    std::string last;
    for (int i = 0; i < 12; ++i) {  // each failed probe waits 5 s for the answer
      if (i % 2 == 0) {
        auto s = fabric_->RequestSweep();
        ASSERT_TRUE(s.ok()) << s;
      }
      auto r = fabric_->Run(node, {kProbe, "sa-cpi"}, kStepTimeoutMs);
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->exit_code == 0) return;
      last = r->out + r->err;
      fprintf(stderr, "WaitRouted(%s): probe %d unanswered\n", node.c_str(), i + 1);
    }
    FAIL() << node << " gets no SA answer: " << last << fabric_->LogTail();
  }
  void OpenGate(int k) {
    const std::string path = absl::StrCat(gate_dir_, "/gate-", k);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0) << path;
    close(fd);
  }
  static void WaitLine(Child& c, const std::string& line) {
    auto s = c.WaitForLine(line, kStepTimeoutMs);
    ASSERT_TRUE(s.ok()) << s.status() << "\nstdout: " << c.Stdout() << "\nstderr: " << c.Stderr()
                        << fabric_->LogTail();
  }
  static std::map<std::string, std::string> Finish(Child& c) {
    auto r = c.Wait(kStepTimeoutMs);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    EXPECT_EQ(r->exit_code, 0) << "stdout: " << r->out << "\nstderr: " << r->err;
    auto kv = ParseKeyValues(r->out);
    for (const auto& [k, v] : kv) printf("  %s=%s\n", k.c_str(), v.c_str());  // the figures
    return kv;
  }
  static int Int(std::map<std::string, std::string>& kv, const std::string& key) {
    int v = -1;
    EXPECT_TRUE(absl::SimpleAtoi(kv[key], &v)) << key << "='" << kv[key] << "'";
    return v;
  }

  // Server on hostB; returns it once it listens, and its GID.
  Child StartServer(const std::string& service_id, std::string* gid) {
    auto s = fabric_->Spawn(kServerNode, {kPeer, "server", "--service-id", service_id,
                                      "--timeout-ms", absl::StrCat(kStepTimeoutMs)});
    EXPECT_TRUE(s.ok()) << s.status();
    auto line = s->WaitForLine("port.gid=", kStepTimeoutMs);
    EXPECT_TRUE(line.ok()) << line.status() << s->Stderr();
    if (line.ok()) *gid = line->substr(9);
    auto listening = s->WaitForLine("listening=1", kStepTimeoutMs);
    EXPECT_TRUE(listening.ok()) << listening.status() << s->Stderr();
    return std::move(*s);
  }
  Child StartClient(const std::string& service_id, const std::string& gid,
                    std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        kPeer,        "client",   "--service-id", service_id, "--dgid", gid, "--dlid",
        absl::StrCat(fabric_->lids().at(kServerNode)), "--gate-dir", gate_dir_, "--timeout-ms",
        absl::StrCat(kStepTimeoutMs)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto c = fabric_->Spawn(kClientNode, argv);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  static IbsimFabric* fabric_;
  static std::string* start_error_;
  std::string gate_dir_;
  bool link_down_ = false;
};

IbsimFabric* CmLinkTest::fabric_ = nullptr;
std::string* CmLinkTest::start_error_ = nullptr;

// The link goes down before the REQ: the REQ and at least one retransmission
// are lost; after Link (and OpenSM's re-sweep) a retransmitted REQ gets
// through and the connection is established on both sides. Then the link
// goes down again before the DREQ: DREQs are lost until Link, and the
// disconnect completes with a DREP (status 0), not a timeout.
TEST_F(CmLinkTest, ReqAndDreqRetriedAcrossAnOutageComplete) {
  std::string gid;
  Child server = StartServer("1ce5e11", &gid);
  ASSERT_FALSE(gid.empty());
  Child client = StartClient("1ce5e11", gid, {"--first-timeout-ms", "1000", "--first-retries",
                                              "15"});
  WaitLine(client, "gate=1");  // route resolved through the SA while the link is up
  Unlink();
  OpenGate(1);
  WaitLine(client, "req_sent=2");  // the first REQ and one retransmission went out...
  Relink();                         // ...into a dead link
  WaitRouted(kServerNode);          // while the client keeps retrying
  WaitLine(client, "attempt1.event=");
  WaitLine(server, "established=1");

  WaitLine(client, "gate=2");
  Unlink();
  OpenGate(2);
  WaitLine(client, "dreq_sent=2");
  Relink();
  WaitRouted(kServerNode);

  auto c = Finish(client);
  auto s = Finish(server);
  EXPECT_EQ(c["attempt1.event"], "RDMA_CM_EVENT_ESTABLISHED");
  EXPECT_EQ(c["attempt1.status"], "0");
  EXPECT_GE(Int(c, "attempt1.ms"), 1000);  // at least one full retransmission wait
  EXPECT_GE(Int(c, "cm.retransmitted.req"), 1);  // at least one REQ went into the dead link
  EXPECT_EQ(c["cm.sent.req"], "1");              // one connection
  EXPECT_EQ(c["disconnect.status"], "0");  // a DREP, not -ETIMEDOUT
  EXPECT_GE(Int(c, "cm.retransmitted.dreq"), 1);
  EXPECT_EQ(c["cm.timeouts"], "0");
  EXPECT_EQ(c["cm.malformed"], "0");
  // The server saw one connection, not one per retransmitted REQ.
  EXPECT_EQ(s["connect_request"], "1");
  EXPECT_EQ(s["established"], "1");
  EXPECT_EQ(s["disconnected"], "1");
  EXPECT_EQ(s["cm.timeouts"], "0");
}

// The link stays down for the whole REQ retry window (3 tries x 300 ms):
// the connect ends with UNREACHABLE / -ETIMEDOUT after exactly 3 REQs, and the
// server never heard of it. After Link, a new attempt connects, and the
// server counts one connection.
TEST_F(CmLinkTest, ReqTimesOutWhileTheLinkStaysDownThenReconnects) {
  std::string gid;
  Child server = StartServer("1ce5e12", &gid);
  ASSERT_FALSE(gid.empty());
  Child client = StartClient("1ce5e12", gid, {"--attempts", "2", "--first-timeout-ms", "300",
                                              "--first-retries", "2"});
  WaitLine(client, "gate=1");
  Unlink();
  OpenGate(1);
  WaitLine(client, "attempt1.event=");
  WaitLine(client, "gate=2");  // the second attempt waits for us
  Relink();
  WaitRouted(kServerNode);
  OpenGate(2);
  WaitLine(client, "attempt2.event=");
  WaitLine(client, "gate=3");
  OpenGate(3);

  auto c = Finish(client);
  auto s = Finish(server);
  EXPECT_EQ(c["attempt1.event"], "RDMA_CM_EVENT_UNREACHABLE");
  EXPECT_EQ(c["attempt1.status"], "-110");  // -ETIMEDOUT
  EXPECT_GE(Int(c, "attempt1.ms"), 900);    // 3 waits of 300 ms
  EXPECT_EQ(c["attempt2.event"], "RDMA_CM_EVENT_ESTABLISHED");
  EXPECT_EQ(c["cm.timeouts"], "1");
  EXPECT_EQ(c["cm.sent.req"], "2");  // one per attempt
  EXPECT_GE(Int(c, "cm.retransmitted.req"), 2);  // attempt 1: all 3 REQs lost
  EXPECT_EQ(c["disconnect.status"], "0");
  EXPECT_EQ(s["connect_request"], "1");  // nothing of attempt 1 arrived
  EXPECT_EQ(s["established"], "1");
  EXPECT_EQ(s["disconnected"], "1");
}

}  // namespace
}  // namespace uscm::tests
