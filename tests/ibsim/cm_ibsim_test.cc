// uscm's CM between two processes on two nodes of an ibsim fabric with a real
// OpenSM (tests/topologies/ibsim-2hosts.net: OpenSM on "sm"). Each test runs
// tests/ibsim/cm_peer as a server on hostB and as a client on hostA: the real
// umad transport under umad2sim, cm::RealNode through uscm::Device::Create,
// the rdma_cm-style API with AF_IB addresses, and the route from OpenSM's
// PathRecord through uscm's SA client. The checks read the key=value lines
// both processes print.
//
// Private data sizes are the parts that survive umad2sim's 224-byte cut
// (tests/ibsim/cm_peer_data.h): REQ 60 of 92, REP 164 of 196, REJ 116 of 148;
// the receiver must see exactly those bytes followed by zeros.
//
// No timing is asserted. Every wait is generous (the 2-core CI machine runs
// at load 10+), and the client starts only after the server printed
// "listening=1".
#include <stdio.h>
#include <sys/wait.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ibsim/cm_peer_data.h"
#include "tests/ibsim/ibsim_fabric.h"

namespace uscm::tests {
namespace {

constexpr char kPeer[] = "tests/ibsim/cm_peer";      // runfiles-relative
constexpr char kProbe[] = "tests/ibsim/umad_client";
constexpr char kNetFile[] = "tests/topologies/ibsim-2hosts.net";
constexpr char kServerNode[] = "hostB";
constexpr char kClientNode[] = "hostA";
constexpr int kListenTimeoutMs = 60000;
constexpr int kRunTimeoutMs = 120000;

using KeyValues = std::map<std::string, std::string>;

struct PairResult {
  KeyValues server;
  KeyValues client;
};

// The value of `key` as a number; -1 if missing or not a number.
int64_t Num(const KeyValues& kv, const std::string& key) {
  auto it = kv.find(key);
  int64_t v = -1;
  if (it == kv.end() || !absl::SimpleAtoi(it->second, &v)) return -1;
  return v;
}

std::string Get(const KeyValues& kv, const std::string& key) {
  auto it = kv.find(key);
  return it == kv.end() ? "<missing>" : it->second;
}

class CmIbsimTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    IbsimOptions o;
    o.net_file = kNetFile;
    o.sm_node = "sm";
    o.nodes = {kClientNode, kServerNode};
    o.port_probe = kProbe;
    auto f = IbsimFabric::Start(o);
    if (!f.ok()) {
      start_error_ = new std::string(f.status().ToString());
      return;
    }
    fabric_ = f->release();
    gids_ = new std::map<std::string, std::string>;
    for (const char* node : {kClientNode, kServerNode}) {
      auto r = fabric_->Run(node, {kProbe, "port"}, kRunTimeoutMs);
      if (r.ok() && r->exit_code == 0) (*gids_)[node] = ParseKeyValues(r->out)["gid"];
    }
  }
  static void TearDownTestSuite() {
    delete fabric_;
    fabric_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
    delete gids_;
    gids_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(fabric_, nullptr) << "ibsim fabric did not start: " << *start_error_;
    ASSERT_FALSE((*gids_)[kServerNode].empty()) << "no GID for " << kServerNode;
    ASSERT_FALSE((*gids_)[kClientNode].empty()) << "no GID for " << kClientNode;
  }

  static std::string Lid(const char* node) { return absl::StrCat(fabric_->lids().at(node)); }
  static std::string Gid(const char* node) { return (*gids_)[node]; }

  // Server on hostB (waits until it listens), then the client on hostA; both
  // must exit 0. Failures carry both outputs and the fabric's log tails.
  PairResult RunPair(const std::string& scenario, const std::string& disconnect_by,
                     uint32_t seed) {
    PairResult out;
    const std::vector<std::string> common = {"--scenario", scenario, "--seed",
                                             absl::StrCat(seed), "--disconnect-by",
                                             disconnect_by};
    std::vector<std::string> server_argv = {kPeer, "server"};
    server_argv.insert(server_argv.end(), common.begin(), common.end());
    auto server = fabric_->Spawn(kServerNode, server_argv);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return out;
    auto listening = server->WaitForLine("listening=1", kListenTimeoutMs);
    EXPECT_TRUE(listening.ok()) << listening.status() << fabric_->LogTail();
    if (!listening.ok()) return out;

    std::vector<std::string> client_argv = {kPeer, "client", "--dgid", Gid(kServerNode),
                                            "--dlid", Lid(kServerNode)};
    client_argv.insert(client_argv.end(), common.begin(), common.end());
    auto client = fabric_->Run(kClientNode, client_argv, kRunTimeoutMs);
    auto served = server->Wait(kRunTimeoutMs);
    EXPECT_TRUE(client.ok()) << client.status();
    EXPECT_TRUE(served.ok()) << served.status();
    if (!client.ok() || !served.ok()) return out;
    const std::string both = absl::StrCat("\n--- client stdout ---\n", client->out,
                                          "--- client stderr ---\n", client->err,
                                          "--- server stdout ---\n", served->out,
                                          "--- server stderr ---\n", served->err,
                                          fabric_->LogTail());
    EXPECT_EQ(client->exit_code, 0) << both;
    EXPECT_EQ(served->exit_code, 0) << both;
    out.client = ParseKeyValues(client->out);
    out.server = ParseKeyValues(served->out);
    EXPECT_EQ(Get(out.client, "done"), "1") << both;
    EXPECT_EQ(Get(out.server, "done"), "1") << both;
    return out;
  }

  // What every scenario shares: the route came from OpenSM's PathRecord (an
  // SA query was sent; LIDs and GIDs are the two nodes'), the REQ reached the
  // server with the client's private data, and nothing arrived malformed.
  void ExpectRouteAndRequest(const PairResult& r, uint32_t seed) {
    EXPECT_EQ(Get(r.client, "transport"), "umad");
    EXPECT_GE(Num(r.client, "sa.sent"), 1) << "the route must come from the SA";
    EXPECT_EQ(Get(r.client, "route.slid"), Lid(kClientNode));
    EXPECT_EQ(Get(r.client, "route.dlid"), Lid(kServerNode));
    EXPECT_EQ(Get(r.client, "route.sgid"), Gid(kClientNode));
    EXPECT_EQ(Get(r.client, "route.dgid"), Gid(kServerNode));
    EXPECT_EQ(Get(r.client, "route.subnet_local"), "1");
    EXPECT_EQ(Get(r.server, "req.peer_gid"), Gid(kClientNode));
    EXPECT_EQ(Get(r.server, "req.qp_num"), "0xc1c101");
    EXPECT_EQ(Get(r.server, "req.private_data"),
              Hex(Padded(PeerData(seed, DataTag::kReq, kReqDataSent), kReqDataField)));
    EXPECT_GE(Num(r.client, "cm.sent.req"), 1);
    EXPECT_GE(Num(r.server, "cm.received.req"), 1);
    EXPECT_EQ(Num(r.client, "cm.malformed"), 0);
    EXPECT_EQ(Num(r.server, "cm.malformed"), 0);
  }

  // Connected: REP data on the client, RTU on the server, ESTABLISHED and
  // the QP walk on both, DREQ from `by`, DREP from the other, DISCONNECTED
  // on both.
  void ExpectConnectedThenDisconnected(const PairResult& r, uint32_t seed,
                                       const std::string& by) {
    EXPECT_EQ(Get(r.server, "accepted"), "1");
    EXPECT_EQ(Get(r.client, "rep.private_data"),
              Hex(Padded(PeerData(seed, DataTag::kRep, kRepDataSent), kRepDataField)));
    EXPECT_EQ(Get(r.client, "established"), "1");
    EXPECT_EQ(Get(r.server, "established"), "1");
    EXPECT_GE(Num(r.client, "cm.received.rep"), 1);
    EXPECT_GE(Num(r.client, "cm.sent.rtu"), 1);
    EXPECT_GE(Num(r.server, "cm.received.rtu"), 1);
    // The runtime moved each side's QP with attributes from the exchange (the
    // active one to INIT again at the REP, as librdmacm's ucma_modify_qp_rtr).
    EXPECT_EQ(Get(r.client, "qp.states"), "INIT,INIT,RTR,RTS");
    EXPECT_EQ(Get(r.server, "qp.states"), "INIT,RTR,RTS");
    EXPECT_EQ(Get(r.client, "qp.rtr.dest_qpn"), "0x5e5e01");
    EXPECT_EQ(Get(r.server, "qp.rtr.dest_qpn"), "0xc1c101");
    EXPECT_EQ(Get(r.client, "qp.rtr.dlid"), Lid(kServerNode));
    EXPECT_EQ(Get(r.server, "qp.rtr.dlid"), Lid(kClientNode));

    const KeyValues& active = by == "client" ? r.client : r.server;
    const KeyValues& passive = by == "client" ? r.server : r.client;
    EXPECT_EQ(Get(active, "disconnect_called"), "1");
    EXPECT_EQ(Get(passive, "disconnect_called"), "<missing>");
    EXPECT_GE(Num(active, "cm.sent.dreq"), 1);
    EXPECT_GE(Num(passive, "cm.received.dreq"), 1);
    EXPECT_GE(Num(passive, "cm.sent.drep"), 1);
    EXPECT_GE(Num(active, "cm.received.drep"), 1);
    EXPECT_EQ(Num(passive, "cm.sent.dreq"), -1) << "only one side starts the disconnect";
    EXPECT_EQ(Get(r.client, "disconnected"), "1");
    EXPECT_EQ(Get(r.server, "disconnected"), "1");
    EXPECT_GE(Num(r.client, "qp.to_error"), 1);
    EXPECT_GE(Num(r.server, "qp.to_error"), 1);
  }

  static IbsimFabric* fabric_;
  static std::string* start_error_;
  static std::map<std::string, std::string>* gids_;
};

IbsimFabric* CmIbsimTest::fabric_ = nullptr;
std::string* CmIbsimTest::start_error_ = nullptr;
std::map<std::string, std::string>* CmIbsimTest::gids_ = nullptr;

TEST_F(CmIbsimTest, ConnectWithPrivateDataBothWaysClientDisconnects) {
  const uint32_t seed = 101;
  PairResult r = RunPair("accept", "client", seed);
  ExpectRouteAndRequest(r, seed);
  ExpectConnectedThenDisconnected(r, seed, "client");
  EXPECT_EQ(Get(r.server, "req.remote_ece.vendor_id"), "0x0") << "no ECE was set";
  EXPECT_EQ(Get(r.client, "est.remote_ece.vendor_id"), "0x0");
  // umad2sim cut the MADs whose private data ran past byte 223 (REQ, REP on
  // the receiving side): the transport zero-filled their tails.
  EXPECT_GE(Num(r.server, "umad.sim_tail_zeroed"), 1);
}

TEST_F(CmIbsimTest, ServerDisconnects) {
  const uint32_t seed = 202;
  PairResult r = RunPair("accept", "server", seed);
  ExpectRouteAndRequest(r, seed);
  ExpectConnectedThenDisconnected(r, seed, "server");
}

TEST_F(CmIbsimTest, RejectCarriesReason28AndPrivateData) {
  const uint32_t seed = 303;
  PairResult r = RunPair("reject", "client", seed);
  ExpectRouteAndRequest(r, seed);
  EXPECT_EQ(Get(r.server, "rejected"), "1");
  EXPECT_EQ(Get(r.client, "rej.status"), "28");
  EXPECT_EQ(Get(r.client, "rej.private_data"),
            Hex(Padded(PeerData(seed, DataTag::kRej, kRejDataSent), kRejDataField)));
  EXPECT_GE(Num(r.server, "cm.sent.rej"), 1);
  EXPECT_GE(Num(r.client, "cm.received.rej"), 1);
  EXPECT_EQ(Num(r.client, "cm.sent.rtu"), -1) << "a rejected REQ is never answered with RTU";
  EXPECT_EQ(Num(r.server, "cm.sent.rep"), -1);
  EXPECT_EQ(Get(r.client, "established"), "<missing>");
}

TEST_F(CmIbsimTest, EceIsNegotiated) {
  const uint32_t seed = 404;
  PairResult r = RunPair("ece", "client", seed);
  ExpectRouteAndRequest(r, seed);
  // The server reads the client's ECE from the REQ (event and
  // rdma_get_remote_ece) ...
  EXPECT_EQ(Get(r.server, "req.remote_ece.vendor_id"), "0x2c9");
  EXPECT_EQ(Get(r.server, "req.remote_ece.options"), "0x1f");
  EXPECT_EQ(Get(r.server, "get_remote_ece.vendor_id"), "0x2c9");
  EXPECT_EQ(Get(r.server, "get_remote_ece.options"), "0x1f");
  // ... and answers in the REP with the vendor echoed and the options it
  // supports (0x1f & 0x05); the client reads that answer.
  EXPECT_EQ(Get(r.client, "est.remote_ece.vendor_id"), "0x2c9");
  EXPECT_EQ(Get(r.client, "est.remote_ece.options"), "0x5");
  EXPECT_EQ(Get(r.client, "get_remote_ece.vendor_id"), "0x2c9");
  EXPECT_EQ(Get(r.client, "get_remote_ece.options"), "0x5");
  ExpectConnectedThenDisconnected(r, seed, "client");
}

TEST_F(CmIbsimTest, RejectEceCarriesReason35AndPrivateData) {
  const uint32_t seed = 505;
  PairResult r = RunPair("reject-ece", "client", seed);
  ExpectRouteAndRequest(r, seed);
  EXPECT_EQ(Get(r.server, "req.remote_ece.vendor_id"), "0x2c9");
  EXPECT_EQ(Get(r.server, "req.remote_ece.options"), "0x1f");
  EXPECT_EQ(Get(r.server, "rejected"), "1");
  EXPECT_EQ(Get(r.client, "rej.status"), "35");
  EXPECT_EQ(Get(r.client, "rej.private_data"),
            Hex(Padded(PeerData(seed, DataTag::kRej, kRejDataSent), kRejDataField)));
  EXPECT_EQ(Num(r.server, "cm.sent.rep"), -1);
}

// The driver's usage errors name the problem and exit 2 (no fabric needed:
// arguments are checked before the transport is opened).
TEST(CmPeerUsageTest, BadArgumentsNameTheProblem) {
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "no role"},
      {"listen --scenario accept", "role must be server or client"},
      {"server --scenario connect", "--scenario must be accept, reject, ece or reject-ece"},
      {"client --scenario accept", "a client needs --dgid and --dlid"},
      {"client --scenario accept --dgid fe80::1 --dlid 49152", "bad value for --dlid: 49152"},
      {"server --scenario accept --disconnect-by nobody", "bad value for --disconnect-by"},
      {"server --scenario", "--scenario needs a value"},
  };
  for (const Case& c : cases) {
    const std::string cmd = absl::StrCat(kPeer, " ", c.args, " 2>&1");
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[256];
    while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    const int status = pclose(p);
    ASSERT_TRUE(WIFEXITED(status)) << c.args;
    EXPECT_EQ(WEXITSTATUS(status), 2) << c.args << "\n" << out;
    EXPECT_THAT(out, ::testing::HasSubstr(c.message)) << c.args;
  }
}

}  // namespace
}  // namespace uscm::tests
