// uscm's SA client against a real OpenSM on an ibsim fabric, checked against
// saquery (infiniband-diags) run on the same node of the same fabric.
// Topology tests/topologies/hca6-sw3.net: OpenSM on "hca 1", clients on four
// other HCAs. Every query here is answered in one MAD: ibsim keeps only 224
// bytes of each MAD and does no RMPP segmenting (docs/TRANSPORTS.md), so
// multi-segment RMPP is tested against the simulated SA (sa/sim_sa_test).
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/gid.h"
#include "tests/ibsim/ibsim_fabric.h"

namespace uscm::tests {
namespace {

using ::testing::HasSubstr;

constexpr char kClient[] = "tests/ibsim/sa_query_client";  // runfiles-relative
constexpr char kProbe[] = "tests/ibsim/umad_client";
constexpr char kNetFile[] = "tests/topologies/hca6-sw3.net";
constexpr char kSaquery[] = "/usr/sbin/saquery";
constexpr char kSmNode[] = "H-0000000000100000";
const std::vector<std::string> kNodes = {"H-0000000000100002", "H-0000000000100004",
                                         "H-0000000000100006", "H-0000000000100008"};
constexpr int kRunTimeoutMs = 10000;
// OpenSM's default SM_Key. With it saquery is a trusted requester and sees the
// PortGID and JoinState of every MCMemberRecord (untrusted, they read 0).
constexpr char kSmKey[] = "1";

using Record = std::map<std::string, std::string>;

// saquery's "PathRecord dump:" blocks: "\t\tdlid....................3".
std::vector<Record> ParseSaqueryDumps(const std::string& out, absl::string_view title) {
  std::vector<Record> records;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, title)) {
      records.emplace_back();
      continue;
    }
    line = absl::StripAsciiWhitespace(line);
    const size_t dots = line.find("..");
    if (records.empty() || dots == absl::string_view::npos) continue;
    const size_t value = line.find_first_not_of('.', dots);
    if (value == absl::string_view::npos) continue;
    records.back()[std::string(line.substr(0, dots))] = std::string(line.substr(value));
  }
  return records;
}

// Our client's "path.<i>.<field>=value" lines, as records.
std::vector<Record> OurPaths(const std::map<std::string, std::string>& kv) {
  std::vector<Record> records;
  int count = 0;
  if (!absl::SimpleAtoi(kv.count("count") ? kv.at("count") : "", &count)) return records;
  records.resize(static_cast<size_t>(count));
  for (const auto& [k, v] : kv) {
    std::vector<std::string> parts = absl::StrSplit(k, absl::MaxSplits('.', 2));
    size_t i = 0;
    if (parts.size() == 3 && parts[0] == "path" && absl::SimpleAtoi(parts[1], &i) &&
        i < records.size()) {
      records[i][parts[2]] = v;
    }
  }
  return records;
}

// Same value: GIDs compared as GIDs, the rest as numbers (saquery prints
// "0xFFFF" where we print "0xFFFF" or "0x84"; base 0 reads both).
bool SameValue(const std::string& a, const std::string& b) {
  if (a.find(':') != std::string::npos || b.find(':') != std::string::npos) {
    auto ga = mad::Gid::Parse(a);
    auto gb = mad::Gid::Parse(b);
    return ga.ok() && gb.ok() && *ga == *gb;
  }
  char* ea = nullptr;
  char* eb = nullptr;
  const unsigned long long va = strtoull(a.c_str(), &ea, 0);
  const unsigned long long vb = strtoull(b.c_str(), &eb, 0);
  return !a.empty() && !b.empty() && *ea == '\0' && *eb == '\0' && va == vb;
}

class SaOpensmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    IbsimOptions o;
    o.net_file = kNetFile;
    o.sm_node = kSmNode;
    o.nodes = kNodes;
    o.port_probe = kProbe;
    auto f = IbsimFabric::Start(o);
    if (!f.ok()) {
      start_error_ = new std::string(f.status().ToString());
      return;
    }
    fabric_ = f->release();
    gids_ = new std::map<std::string, std::string>;
    for (const auto& node : kNodes) {
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
    ASSERT_EQ(gids_->size(), kNodes.size()) << "port probe failed" << fabric_->LogTail();
  }

  static std::string Lid(const std::string& node) {
    return absl::StrCat(fabric_->lids().at(node));
  }

  // Runs `argv` on `node`; expects exit status `want_exit`.
  static ProcessResult Run(const std::string& node, const std::vector<std::string>& argv,
                           int want_exit = 0) {
    auto r = fabric_->Run(node, argv, kRunTimeoutMs);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    EXPECT_EQ(r->exit_code, want_exit) << absl::StrJoin(argv, " ") << "\nstderr: " << r->err
                                       << "\nstdout: " << r->out << fabric_->LogTail();
    return *r;
  }
  static std::map<std::string, std::string> Client(const std::string& node,
                                                   std::vector<std::string> args,
                                                   int want_exit = 0) {
    args.insert(args.begin(), kClient);
    return ParseKeyValues(Run(node, args, want_exit).out);
  }

  // Our client's answer to `ours` and saquery's to `theirs`, on `node`: the
  // same number of PathRecords, and every field saquery prints equal
  // (resv2 is reserved: our repr does not keep it).
  static void ComparePaths(const std::string& node, std::vector<std::string> ours,
                           std::vector<std::string> theirs, size_t want_records) {
    const std::string what = absl::StrCat(node, ": ", absl::StrJoin(ours, " "));
    auto mine = OurPaths(Client(node, ours));
    theirs.insert(theirs.begin(), {kSaquery, "-p"});
    auto ref = ParseSaqueryDumps(Run(node, theirs).out, "PathRecord dump:");
    ASSERT_EQ(ref.size(), want_records) << what;
    ASSERT_EQ(mine.size(), ref.size()) << what;
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(ref[i].size(), 16u) << "saquery's PathRecord layout changed: " << what;
      for (const auto& [field, value] : ref[i]) {
        if (field == "resv2") continue;
        ASSERT_TRUE(mine[i].count(field)) << field << " missing from our output: " << what;
        EXPECT_TRUE(SameValue(mine[i][field], value))
            << what << " record " << i << " " << field << ": ours " << mine[i][field]
            << ", saquery " << value;
      }
    }
  }

  static IbsimFabric* fabric_;
  static std::string* start_error_;
  static std::map<std::string, std::string>* gids_;
};

IbsimFabric* SaOpensmTest::fabric_ = nullptr;
std::string* SaOpensmTest::start_error_ = nullptr;
std::map<std::string, std::string>* SaOpensmTest::gids_ = nullptr;

TEST_F(SaOpensmTest, PathByLidsMatchesSaqueryForEveryPair) {
  for (const auto& src : kNodes) {
    for (const auto& dst : kNodes) {
      ComparePaths(src, {"path", "--slid", Lid(src), "--dlid", Lid(dst)},
                   {"--slid", Lid(src), "--dlid", Lid(dst)}, 1);
    }
  }
}

TEST_F(SaOpensmTest, PathByGidsMatchesSaqueryForEveryPair) {
  for (const auto& src : kNodes) {
    for (const auto& dst : kNodes) {
      if (src == dst) continue;
      const std::string& s = gids_->at(src);
      const std::string& d = gids_->at(dst);
      ComparePaths(src, {"path", "--sgid", s, "--dgid", d}, {"--sgid", s, "--dgid", d}, 1);
    }
  }
}

// GetTable with P_Key, SL, Reversible and NumbPath in the mask (the
// ComponentMask rdma_cm-like queries use), against saquery's GetTable.
TEST_F(SaOpensmTest, PathTableWithPkeySlReversibleNumbPathMatchesSaquery) {
  const std::string& src = kNodes[0];
  for (const auto& dst : kNodes) {
    ComparePaths(src,
                 {"path", "--table", "--slid", Lid(src), "--dlid", Lid(dst), "--pkey", "0xffff",
                  "--sl", "0", "--reversible", "1", "--numb-path", "1"},
                 {"--slid", Lid(src), "--dlid", Lid(dst), "--pkey", "0xffff", "--sl", "0",
                  "--reversible", "1", "--numb_path", "1"},
                 1);
  }
}

TEST_F(SaOpensmTest, SaErrorStatusesReachTheUserNamed) {
  const std::string& node = kNodes[1];
  auto none = Client(node, {"path", "--slid", Lid(node), "--dlid", "999"}, 3);
  EXPECT_EQ(none["error.code"], "NOT_FOUND");
  EXPECT_THAT(none["error"], HasSubstr("SA has no path from LID"));
  EXPECT_THAT(none["error"], HasSubstr("ERR_NO_RECORDS"));

  auto gid = Client(node, {"path", "--sgid", gids_->at(node), "--dgid", "fe80::dead:beef"}, 3);
  EXPECT_THAT(gid["error"], HasSubstr("fe80::dead:beef"));
  EXPECT_THAT(gid["error"], HasSubstr("SA: ERR_"));

  // NonMember to a group that does not exist, without the create components.
  auto join = Client(node, {"join", "--mgid", "ff12:601b::dead", "--state", "2", "--no-create"}, 3);
  EXPECT_EQ(join["error.code"], "INVALID_ARGUMENT");
  EXPECT_THAT(join["error"], HasSubstr("SA rejected join of"));
  EXPECT_THAT(join["error"], HasSubstr("ff12:601b::dead"));
  EXPECT_THAT(join["error"], HasSubstr("ERR_REQ_INVALID"));
}

// Join with MGID 0 (OpenSM assigns one), see it in `saquery -m`, leave, and
// see it gone.
TEST_F(SaOpensmTest, JoinWithMgidZeroShowsInSaqueryAndLeaveRemovesIt) {
  const std::string& node = kNodes[2];
  const std::string port_gid = gids_->at(node);
  auto joined = Client(node, {"join", "--qkey", "0x1234", "--pkey", "0xffff", "--sl", "0"});
  ASSERT_EQ(joined["count"], "1") << "the Set answer carries the member record";
  const std::string mgid = joined["group.mgid"];
  auto parsed = mad::Gid::Parse(mgid);
  ASSERT_TRUE(parsed.ok()) << mgid;
  EXPECT_EQ(parsed->raw[0], 0xFF) << "a multicast GID: " << mgid;
  EXPECT_EQ(joined["group.qkey"], "0x00001234");
  EXPECT_EQ(joined["group.join_state"], "0x1");
  EXPECT_EQ(joined["member.0.port_gid"], port_gid);

  auto members = [&] {
    return ParseSaqueryDumps(Run(node, {kSaquery, "-m", "--smkey", kSmKey}).out,
                             "MCMemberRecord member dump:");
  };
  auto has_us = [&](const std::vector<Record>& rs) {
    for (const auto& r : rs) {
      if (r.count("MGID") && r.count("PortGid") && SameValue(r.at("MGID"), mgid) &&
          SameValue(r.at("PortGid"), port_gid)) {
        return true;
      }
    }
    return false;
  };
  auto before = members();
  EXPECT_TRUE(has_us(before)) << "saquery -m does not list " << port_gid << " in " << mgid;
  for (const auto& r : before) {
    if (r.count("MGID") && SameValue(r.at("MGID"), mgid)) {
      EXPECT_TRUE(SameValue(r.at("Mlid"), joined["group.mlid"])) << r.at("Mlid");
      EXPECT_EQ(r.at("ScopeState").back(), '1') << "JoinState FullMember";
    }
  }

  auto left = Client(node, {"leave", "--mgid", mgid, "--state", "1"});
  EXPECT_EQ(left.count("error"), 0u) << left["error"];
  EXPECT_FALSE(has_us(members())) << mgid << " still lists " << port_gid << " after the leave";
}

}  // namespace
}  // namespace uscm::tests
