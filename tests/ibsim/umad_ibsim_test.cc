// The umad transport against a real OpenSM on an ibsim fabric
// (tests/topologies/ibsim-2hosts.net: OpenSM on "sm", uscm on hostA/hostB).
// The driver is tests/ibsim/umad_client, run on a node under umad2sim.
#include <sys/stat.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ibsim/cm_pattern.h"
#include "tests/ibsim/ibsim_fabric.h"

namespace uscm::tests {
namespace {

using ::testing::HasSubstr;

constexpr char kClient[] = "tests/ibsim/umad_client";   // runfiles-relative
constexpr char kNetFile[] = "tests/topologies/ibsim-2hosts.net";
constexpr int kRunTimeoutMs = 10000;

class UmadIbsimTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    IbsimOptions o;
    o.net_file = kNetFile;
    o.sm_node = "sm";
    o.nodes = {"hostA", "hostB"};
    o.port_probe = kClient;
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
  }

  // Runs the client on `node`; expects exit 0 and returns its key=value lines.
  std::map<std::string, std::string> RunClient(const std::string& node,
                                               std::vector<std::string> args) {
    args.insert(args.begin(), kClient);
    auto r = fabric_->Run(node, args, kRunTimeoutMs);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    EXPECT_EQ(r->exit_code, 0) << "stderr: " << r->err << "\nstdout: " << r->out
                               << fabric_->LogTail();
    return ParseKeyValues(r->out);
  }

  static IbsimFabric* fabric_;
  static std::string* start_error_;
};

IbsimFabric* UmadIbsimTest::fabric_ = nullptr;
std::string* UmadIbsimTest::start_error_ = nullptr;

TEST_F(UmadIbsimTest, PortIsActiveWithSmLid) {
  auto kv = RunClient("hostA", {"port"});
  EXPECT_EQ(kv["state"], "4");
  EXPECT_EQ(kv["ca_type"], "simulator");
  EXPECT_EQ(kv["lid"], absl::StrCat(fabric_->lids().at("hostA")));
  EXPECT_NE(kv["sm_lid"], "0");
  EXPECT_NE(kv["lid"], absl::StrCat(fabric_->lids().at("hostB")));
}

TEST_F(UmadIbsimTest, SaClassPortInfoGet) {
  auto kv = RunClient("hostA", {"sa-cpi"});
  EXPECT_EQ(kv["transport"], "umad");
  EXPECT_EQ(kv["kernel_rmpp"], "0");  // umad2sim does no RMPP: detected
  EXPECT_EQ(kv["method"], "0x81");    // GetResp
  EXPECT_EQ(kv["status"], "0x0000");
  EXPECT_EQ(kv["attr_id"], "0x0001");
  // The lower 32 TID bits are ours; ibsim/umad rewrite the upper half.
  ASSERT_EQ(kv["tid"].size(), 18u);
  EXPECT_EQ(kv["tid"].substr(10), "5a000001");
  EXPECT_EQ(kv["cpi.base_version"], "1");
  EXPECT_EQ(kv["cpi.class_version"], "2");
  EXPECT_EQ(kv["length"], "256");
}

// OpenSM answers a GetTable with RMPP (Active flag set) and relies on the
// kernel to segment it; umad2sim passes the single MAD through unsegmented,
// 56 header bytes + one 64-byte PathRecord. The transport zero-fills it to
// 256 bytes and makes it one DATA segment (First|Last, segment 1), as the
// kernel would have sent it.
TEST_F(UmadIbsimTest, PathRecordGetTableArrivesRmppFramedInOneSegment) {
  auto kv = RunClient("hostA", {"sa-path"});
  EXPECT_EQ(kv["method"], "0x92");  // GetTableResp
  EXPECT_EQ(kv["status"], "0x0000");
  EXPECT_EQ(kv["attr_id"], "0x0035");
  EXPECT_EQ(kv["rmpp.version"], "1");
  int flags = 0;
  ASSERT_TRUE(absl::SimpleHexAtoi(kv["rmpp.flags"], &flags)) << kv["rmpp.flags"];
  EXPECT_EQ(flags & 1, 1) << "RMPP Active";
  EXPECT_EQ(kv["sa.attr_offset"], "8");  // 64-byte records
  EXPECT_EQ(kv["length"], "256");
  EXPECT_EQ(kv["rmpp.type"], "1");  // DATA
  EXPECT_EQ(flags, 0x7) << "Active|First|Last";
  EXPECT_EQ(kv["rmpp.segment"], "1");
  EXPECT_EQ(kv["rmpp.payload_length"], "84");  // 120 - 36: SA header + one record
  const std::string own = absl::StrCat(fabric_->lids().at("hostA"));
  EXPECT_EQ(kv["path.dlid"], own);
  EXPECT_EQ(kv["path.slid"], own);
  EXPECT_EQ(kv["path.pkey"], "0xffff");
}

TEST_F(UmadIbsimTest, CmMadCrossesBetweenNodes) {
  // ibsim hands a request on QP1 only to an IsSM client of the node; --issm
  // claims that after the agents exist (SIM_SET_ISSM=1 races with OpenSM).
  auto receiver = fabric_->Spawn("hostB", {kClient, "cm-recv", "--timeout-ms", "8000", "--issm"});
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto ready = receiver->WaitForLine("ready", kRunTimeoutMs);
  ASSERT_TRUE(ready.ok()) << ready.status() << fabric_->LogTail();

  const uint32_t seed = 42;
  auto sent = RunClient("hostA", {"cm-send", "--dlid", absl::StrCat(fabric_->lids().at("hostB")),
                                  "--seed", absl::StrCat(seed)});
  EXPECT_EQ(sent["sent"], "1");

  auto r = receiver->Wait(kRunTimeoutMs);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->err << fabric_->LogTail();
  auto kv = ParseKeyValues(r->out);
  EXPECT_EQ(kv["from.lid"], absl::StrCat(fabric_->lids().at("hostA")));
  EXPECT_EQ(kv["from.qpn"], "1");
  EXPECT_EQ(kv["length"], "256");
  const auto want = uscm::mad::CmPatternMad(seed);
  const std::string& hex = kv["hex"];
  ASSERT_EQ(hex.size(), 512u);
  // umad2sim delivers 224 MAD bytes (one 288-byte sim_request minus the
  // 64-byte umad header); the transport zero-fills the rest.
  for (size_t i = 0; i < want.size(); ++i) {
    if (i >= 8 && i < 12) continue;  // TID bits 63..32 belong to umad / ibsim
    const int byte = std::stoi(hex.substr(2 * i, 2), nullptr, 16);
    EXPECT_EQ(byte, i < 224 ? want[i] : 0) << "byte " << i;
  }
}

// Without LD_PRELOAD the client sees this host's real (absent) devices.
TEST(UmadNoDeviceTest, ClientWithoutSimulatorNamesTheFix) {
  struct stat st;
  if (stat("/sys/class/infiniband_mad/abi_version", &st) == 0) {
    GTEST_SKIP() << "this host has an ib_umad device";
  }
  const std::string cmd = absl::StrCat(kClient, " sa-cpi 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  const int status = pclose(p);
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("no InfiniBand device found"));
  EXPECT_THAT(out, HasSubstr("--fabric=sim"));
}

}  // namespace
}  // namespace uscm::tests
