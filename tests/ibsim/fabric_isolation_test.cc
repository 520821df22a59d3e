// IbsimFabric's isolation and teardown promises (tests/ibsim/ibsim_fabric.h),
// asserted: two fabrics on the same net file at once get their own
// IBSIM_SOCKNAME and directory, a probe on each sees its own OpenSM's LID,
// one keeps working after the other is destroyed, and once both are gone no
// process they started is left: none whose parent is this test, and none
// anywhere whose environment names either fabric's socket or whose command
// line names its directory (a grandchild reparented to init would be caught
// there). The detector is checked against the running fabrics first, so it
// cannot pass by finding nothing.
#include <dirent.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/ibsim/ibsim_fabric.h"

namespace uscm::tests {
namespace {

constexpr char kProbe[] = "tests/ibsim/umad_client";  // runfiles-relative
constexpr char kNetFile[] = "tests/topologies/ibsim-2hosts.net";
constexpr int kRunTimeoutMs = 10000;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Proc {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';
  std::string cmdline;  // NULs as spaces
  std::string environ;  // NUL-separated; empty when not readable
};

std::vector<Proc> ListProcesses() {
  std::vector<Proc> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    const std::string base = absl::StrCat("/proc/", pid);
    const std::string stat = ReadAll(base + "/stat");
    // "pid (comm) S ppid ...": comm may hold spaces and parentheses.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
    Proc p;
    p.pid = pid;
    if (f.size() < 2 || !absl::SimpleAtoi(f[1], &p.ppid)) continue;
    p.state = f[0].empty() ? '?' : f[0][0];
    p.cmdline = ReadAll(base + "/cmdline");
    for (char& c : p.cmdline) {
      if (c == '\0') c = ' ';
    }
    p.environ = ReadAll(base + "/environ");
    out.push_back(std::move(p));
  }
  closedir(d);
  return out;
}

// Processes of the given fabrics (by socket name in the environment or
// directory in the command line), and with `children` every child of this
// test too.
std::vector<Proc> Leftovers(const std::vector<std::string>& socknames,
                            const std::vector<std::string>& dirs, bool children = true) {
  std::vector<Proc> out;
  const pid_t self = getpid();
  for (const Proc& p : ListProcesses()) {
    if (p.pid == self) continue;
    bool ours = children && p.ppid == self;
    for (const std::string& s : socknames) {
      const std::string var = absl::StrCat("IBSIM_SOCKNAME=", s);
      for (absl::string_view v : absl::StrSplit(p.environ, '\0')) ours = ours || v == var;
    }
    for (const std::string& d : dirs) ours = ours || p.cmdline.find(d) != std::string::npos;
    if (ours) out.push_back(p);
  }
  return out;
}

std::string Show(const std::vector<Proc>& procs) {
  std::vector<std::string> lines;
  for (const Proc& p : procs) {
    lines.push_back(absl::StrCat(p.pid, " ppid=", p.ppid, " state=", std::string(1, p.state),
                                 " ", p.cmdline));
  }
  return absl::StrJoin(lines, "\n");
}

std::unique_ptr<IbsimFabric> StartFabric() {
  IbsimOptions o;
  o.net_file = kNetFile;
  o.sm_node = "sm";
  o.nodes = {"hostA", "hostB"};
  o.port_probe = kProbe;
  auto f = IbsimFabric::Start(o);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *std::move(f) : nullptr;
}

TEST(FabricIsolationTest, TwoFabricsAtOnceThenNothingLeftRunning) {
  ASSERT_EQ(Leftovers({}, {}).size(), 0u) << "children before the test:\n"
                                          << Show(Leftovers({}, {}));
  std::vector<std::string> socknames, dirs;
  {
    std::unique_ptr<IbsimFabric> a = StartFabric();
    ASSERT_NE(a, nullptr);
    std::unique_ptr<IbsimFabric> b = StartFabric();
    ASSERT_NE(b, nullptr);
    socknames = {a->sockname(), b->sockname()};
    dirs = {a->dir(), b->dir()};
    EXPECT_NE(a->sockname(), b->sockname());
    EXPECT_NE(a->dir(), b->dir());

    // The detector sees both fabrics' ibsim and OpenSM now.
    {
      const std::vector<Proc> running = Leftovers(socknames, dirs, false);
      int ibsims = 0, opensms = 0;
      for (const Proc& p : running) {
        ibsims += p.cmdline.find("ibsim ") != std::string::npos;
        opensms += p.cmdline.find("opensm ") != std::string::npos;
      }
      EXPECT_EQ(ibsims, 2) << Show(running);
      EXPECT_EQ(opensms, 2) << Show(running);
    }

    // A probe on each fabric at the same time, plus a long-running client
    // on each that the fabric's teardown (not the test) has to end.
    auto long_a = a->Spawn("hostA", {kProbe, "cm-recv", "--timeout-ms", "120000"});
    auto long_b = b->Spawn("hostA", {kProbe, "cm-recv", "--timeout-ms", "120000"});
    ASSERT_TRUE(long_a.ok()) << long_a.status();
    ASSERT_TRUE(long_b.ok()) << long_b.status();
    ASSERT_TRUE(long_a->WaitForLine("ready", kRunTimeoutMs).ok()) << a->LogTail();
    ASSERT_TRUE(long_b->WaitForLine("ready", kRunTimeoutMs).ok()) << b->LogTail();
    auto pa = a->Spawn("hostB", {kProbe, "port"});
    auto pb = b->Spawn("hostB", {kProbe, "port"});
    ASSERT_TRUE(pa.ok() && pb.ok());
    auto ra = pa->Wait(kRunTimeoutMs);
    auto rb = pb->Wait(kRunTimeoutMs);
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    ASSERT_EQ(ra->exit_code, 0) << ra->err;
    ASSERT_EQ(rb->exit_code, 0) << rb->err;
    auto ka = ParseKeyValues(ra->out), kb = ParseKeyValues(rb->out);
    EXPECT_EQ(ka["state"], "4");
    EXPECT_EQ(kb["state"], "4");
    EXPECT_EQ(ka["lid"], absl::StrCat(a->lids().at("hostB")));
    EXPECT_EQ(kb["lid"], absl::StrCat(b->lids().at("hostB")));

    // Destroy a (its client first, as a test's scope does): nothing of a
    // is left, and b is unaffected.
    const pid_t long_a_pid = long_a->pid();
    long_a->Kill();
    a.reset();
    EXPECT_EQ(Leftovers({socknames[0]}, {dirs[0]}, false).size(), 0u)
        << "left running by fabric a:\n" << Show(Leftovers({socknames[0]}, {dirs[0]}, false));
    EXPECT_NE(kill(long_a_pid, 0), 0) << "a's client " << long_a_pid << " still exists";
    EXPECT_FALSE(std::filesystem::exists(dirs[0])) << dirs[0];

    auto again = b->Run("hostB", {kProbe, "port"}, kRunTimeoutMs);
    ASSERT_TRUE(again.ok()) << again.status();
    ASSERT_EQ(again->exit_code, 0) << again->err << b->LogTail();
    EXPECT_EQ(ParseKeyValues(again->out)["state"], "4");
    EXPECT_EQ(ParseKeyValues(again->out)["lid"], absl::StrCat(b->lids().at("hostB")));
    b.reset();  // long_b's Child outlives b: its process must still be killed below
  }
  // Every Child and both fabrics are gone.
  const std::vector<Proc> left = Leftovers(socknames, dirs);
  EXPECT_EQ(left.size(), 0u) << "left running:\n" << Show(left);
  EXPECT_FALSE(std::filesystem::exists(dirs[1])) << dirs[1];
}

}  // namespace
}  // namespace uscm::tests
