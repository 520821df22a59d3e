// Several uscm processes on one ibsim node through one uscmd (issue 10): a
// router on each of hostA and hostB owns the node's QP1 (IsSM claimed, as
// ibsim hands unsolicited CM MADs to one client per node only), three
// cm_peer servers on hostB and three cm_peer clients on hostA use the
// routers' sockets, and all three connections are set up at once: REQ with
// private data, REP, RTU, ESTABLISHED, DREQ/DREP, each with its own service
// ID, and the route from OpenSM's PathRecord (SA through the router by TID).
// Without a router only one of the processes on a node could receive CM MADs.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/ibsim/ibsim_fabric.h"

namespace uscm::tests {
namespace {

constexpr char kPeer[] = "tests/ibsim/cm_peer";  // runfiles-relative
constexpr char kRouter[] = "tools/uscmd";
constexpr char kProbe[] = "tests/ibsim/umad_client";
constexpr char kNetFile[] = "tests/topologies/ibsim-2hosts.net";
constexpr int kTimeoutMs = 120000;
constexpr int kPairs = 3;

TEST(RouterIbsimTest, ThreeProcessesPerNodeConnectAtOnceThroughOneRouterEach) {
  IbsimOptions o;
  o.net_file = kNetFile;
  o.sm_node = "sm";
  o.nodes = {"hostA", "hostB"};
  o.port_probe = kProbe;
  auto fabric = IbsimFabric::Start(o);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  IbsimFabric& f = **fabric;
  auto probe = f.Run("hostB", {kProbe, "port"}, kTimeoutMs);
  ASSERT_TRUE(probe.ok() && probe->exit_code == 0);
  const std::string gid_b = ParseKeyValues(probe->out)["gid"];
  const std::string lid_b = absl::StrCat(f.lids().at("hostB"));

  // A Unix socket path has at most 107 bytes: not under the test's tmpdir.
  char dir_template[] = "/tmp/uscmd-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string socket_dir = dir_template;
  std::map<std::string, std::string> sockets;
  std::vector<Child> routers;
  for (const char* node : {"hostA", "hostB"}) {
    sockets[node] = absl::StrCat(socket_dir, "/", node, ".sock");
    auto r = f.Spawn(node, {kRouter, "--sim-issm", "--socket", sockets[node]});
    ASSERT_TRUE(r.ok()) << r.status();
    auto up = r->WaitForLine("uscmd:", kTimeoutMs);
    ASSERT_TRUE(up.ok()) << up.status() << r->Stderr() << f.LogTail();
    routers.push_back(std::move(*r));
  }

  std::vector<Child> servers, clients;
  for (int i = 0; i < kPairs; ++i) {
    const std::string sid = absl::StrCat(absl::Hex(0x1ce5e10 + i));
    auto s = f.Spawn("hostB", {kPeer, "server", "--scenario", "accept", "--seed",
                               absl::StrCat(10 + i), "--service-id", sid, "--router",
                               sockets["hostB"]});
    ASSERT_TRUE(s.ok()) << s.status();
    auto listening = s->WaitForLine("listening=1", kTimeoutMs);
    ASSERT_TRUE(listening.ok()) << listening.status() << s->Stderr();
    servers.push_back(std::move(*s));
  }
  for (int i = 0; i < kPairs; ++i) {  // all three clients at once
    const std::string sid = absl::StrCat(absl::Hex(0x1ce5e10 + i));
    auto c = f.Spawn("hostA", {kPeer, "client", "--scenario", "accept", "--seed",
                               absl::StrCat(10 + i), "--service-id", sid, "--dgid", gid_b,
                               "--dlid", lid_b, "--router", sockets["hostA"]});
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(std::move(*c));
  }

  std::vector<std::map<std::string, std::string>> client_kv, server_kv;
  for (int i = 0; i < kPairs; ++i) {
    auto c = clients[i].Wait(kTimeoutMs);
    auto s = servers[i].Wait(kTimeoutMs);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(s.ok()) << s.status();
    const std::string both = absl::StrCat("\n--- client ", i, " ---\n", c->out, c->err,
                                          "--- server ", i, " ---\n", s->out, s->err,
                                          f.LogTail());
    EXPECT_EQ(c->exit_code, 0) << both;
    EXPECT_EQ(s->exit_code, 0) << both;
    client_kv.push_back(ParseKeyValues(c->out));
    server_kv.push_back(ParseKeyValues(s->out));
  }
  for (int i = 0; i < kPairs; ++i) {
    auto& c = client_kv[i];
    auto& s = server_kv[i];
    EXPECT_EQ(c["transport"], "router") << "client " << i;
    EXPECT_EQ(s["transport"], "router") << "server " << i;
    EXPECT_EQ(c["done"], "1") << "client " << i;
    EXPECT_EQ(s["done"], "1") << "server " << i;
    EXPECT_EQ(c["cm.sent.req"], "1") << "client " << i;
    EXPECT_EQ(s["cm.sent.rep"], "1") << "server " << i;
    EXPECT_EQ(c["cm.malformed"], "0");
    EXPECT_EQ(s["cm.malformed"], "0");
  }

  // Stop the routers; each prints its counters on the way out.
  for (Child& r : routers) kill(r.pid(), SIGTERM);
  for (size_t i = 0; i < routers.size(); ++i) {
    auto r = routers[i].Wait(kTimeoutMs);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
    printf("%s", r->out.c_str());  // the counters, for the log
    EXPECT_NE(r->out.find(absl::StrCat("clients ", kPairs, " accepted, 0 refused")),
              std::string::npos)
        << r->out;
    EXPECT_NE(r->out.find("refused 0, unroutable 0"), std::string::npos) << r->out;
  }
  rmdir(socket_dir.c_str());  // the routers unlinked their sockets
}

}  // namespace
}  // namespace uscm::tests
