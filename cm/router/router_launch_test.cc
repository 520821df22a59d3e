// EnsureRouter (router_launch.h): N processes that find no router start one
// between them and are all served; the started router is detached from its
// starter (session, descriptors, stdio) and outlives it; a uscmd that cannot
// run is an error naming its log; how long a start is waited for (a slow
// uscmd that makes progress is waited for, one that hangs or spins is
// stopped, one that exits is reported with its log's last line). The router is sim_uscmd_for_testing: the
// real router::Server over a simulated port, with uscmd's command line.
#include "cm/router/router_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cm/router/router_testing.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "gtest/gtest.h"

namespace uscm::router {
namespace {

constexpr int kClients = 8;

// Exit codes of a client process.
constexpr int kClientStarted = 0;
constexpr int kClientFoundOne = 1;
constexpr int kClientLaunchFailed = 2;
constexpr int kClientNotServed = 3;

std::string SimUscmd() {
  const char* srcdir = getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/uscm/cm/router/sim_uscmd_for_testing";
}

std::vector<std::string> Lines(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class RouterLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ShortSocketDir() + "/launch";
    std::filesystem::remove_all(dir_);
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
    launch_.uscmd = SimUscmd();
    launch_.ca = "sim0";
    launch_.port = 1;
    launch_.socket_path = dir_ + "/uscmd.sock";
    launch_.log_path = dir_ + "/uscmd.log";
    launch_.idle_exit_s = 0;  // the test stops it
    starts_ = dir_ + "/starts";
    setenv("USCM_TEST_STARTS", starts_.c_str(), 1);
  }
  void TearDown() override {
    // Stop every router that was started (each wrote "started <pid>").
    for (const std::string& line : Lines(starts_)) {
      const pid_t pid = std::atoi(line.c_str() + strlen("started "));
      if (pid > 0) kill(pid, SIGKILL);
    }
    std::filesystem::remove_all(dir_);
  }

  // A fake uscmd: a shell script in the test's directory.
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    EXPECT_EQ(chmod(path.c_str(), 0755), 0);
    return path;
  }

  // Whether the process whose pid the script wrote to `file` has gone
  // (reaped, or a zombie of its new parent), within 10 s.
  static bool GoneWithin10s(const std::string& file) {
    const std::vector<std::string> lines = Lines(file);
    if (lines.empty()) return false;
    const std::string stat = absl::StrCat("/proc/", lines[0], "/stat");
    for (int i = 0; i < 1000; ++i) {
      std::ifstream in(stat);
      std::string s;
      if (!std::getline(in, s)) return true;
      const size_t paren = s.rfind(')');
      if (paren != std::string::npos && s.substr(paren + 2, 1) == "Z") return true;
      usleep(10000);
    }
    return false;
  }

  pid_t OnlyStartedPid() {
    const std::vector<std::string> lines = Lines(starts_);
    EXPECT_EQ(lines.size(), 1u);
    return lines.empty() ? -1 : std::atoi(lines[0].c_str() + strlen("started "));
  }

  std::string dir_, starts_;
  RouterLaunch launch_;
};

TEST_F(RouterLaunchTest, ConcurrentStartsStartOneRouterAndServeAll) {
  // A barrier: every client blocks on the pipe until the parent closes it.
  int barrier[2];
  ASSERT_EQ(pipe(barrier), 0);
  std::vector<pid_t> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(testing::SpawnChild([&] {
      close(barrier[1]);
      char c;
      (void)!read(barrier[0], &c, 1);
      absl::StatusOr<RouterLaunched> r = EnsureRouter(launch_);
      if (!r.ok()) return kClientLaunchFailed;
      auto t = RouterTransport::Connect(launch_.socket_path, mad::Duration::Seconds(10));
      if (!t.ok()) return kClientNotServed;
      return *r == RouterLaunched::kStarted ? kClientStarted : kClientFoundOne;
    }));
  }
  close(barrier[0]);
  close(barrier[1]);  // go
  int started = 0, found = 0;
  for (pid_t pid : clients) {
    const int status = testing::WaitForExit(pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    const int code = WEXITSTATUS(status);
    ASSERT_TRUE(code == kClientStarted || code == kClientFoundOne) << "client exit " << code;
    (code == kClientStarted ? started : found) += 1;
  }
  EXPECT_EQ(started, 1);
  EXPECT_EQ(found, kClients - 1);
  // Exactly one router process ran at all, and it still serves.
  EXPECT_EQ(Lines(starts_).size(), 1u) << "router processes started";
  EXPECT_TRUE(RouterServesAt(launch_.socket_path));
}

TEST_F(RouterLaunchTest, AServingRouterIsUsedAsItIs) {
  ASSERT_EQ(EnsureRouter(launch_).value(), RouterLaunched::kStarted);
  EXPECT_EQ(EnsureRouter(launch_).value(), RouterLaunched::kAlreadyServing);
  EXPECT_EQ(Lines(starts_).size(), 1u);
}

TEST_F(RouterLaunchTest, StartedRouterIsDetachedAndOutlivesItsStarter) {
  int marker[2];  // a descriptor the starter leaves inheritable
  ASSERT_EQ(pipe(marker), 0);
  struct stat pipe_stat;
  ASSERT_EQ(fstat(marker[1], &pipe_stat), 0);
  const pid_t starter = testing::SpawnChild([&] {
    setpgid(0, 0);
    if (!EnsureRouter(launch_).ok()) return kClientLaunchFailed;
    kill(0, SIGKILL);  // the starter's whole process group, as a ^C would
    return kClientLaunchFailed;
  });
  const int status = testing::WaitForExit(starter);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_TRUE(RouterServesAt(launch_.socket_path));
  const pid_t router = OnlyStartedPid();
  ASSERT_GT(router, 0);
  // A session of its own (led by the middle process of the double fork, gone
  // now, so no controlling terminal can come back), not the starter's group.
  EXPECT_NE(getsid(router), getsid(0));
  EXPECT_NE(getsid(router), router);
  EXPECT_EQ(getpgid(router), getsid(router));
  EXPECT_NE(getpgid(router), starter);
  const std::string fds = absl::StrCat("/proc/", router, "/fd/");
  EXPECT_EQ(std::filesystem::read_symlink(fds + "0"), "/dev/null");
  EXPECT_EQ(std::filesystem::read_symlink(fds + "1"), launch_.log_path);
  EXPECT_EQ(std::filesystem::read_symlink(fds + "2"), launch_.log_path);
  const std::string pipe_name = absl::StrCat("pipe:[", pipe_stat.st_ino, "]");
  for (const auto& fd : std::filesystem::directory_iterator(fds)) {
    std::error_code ec;
    EXPECT_NE(std::filesystem::read_symlink(fd.path(), ec).string(), pipe_name)
        << "inherited the starter's " << fd.path();
  }
  close(marker[0]);
  close(marker[1]);
  // Its log is its own stdout.
  const std::vector<std::string> log = Lines(launch_.log_path);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0], "sim uscmd: serving " + launch_.socket_path);
}

TEST_F(RouterLaunchTest, UscmdThatExitsIsAnErrorWithItsLogLine) {
  launch_.uscmd = dir_ + "/no-such-uscmd";
  absl::StatusOr<RouterLaunched> r = EnsureRouter(launch_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("cannot be run"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find(launch_.log_path), std::string::npos) << r.status();
}

// Slow but getting on (a busy host): a line in its log every 100 ms for 2 s,
// twice the stall window, before it serves. Waited for, and the user told.
TEST_F(RouterLaunchTest, ASlowUscmdThatMakesProgressIsWaitedFor) {
  launch_.uscmd = Script("slow-uscmd", "i=0\nwhile [ $i -lt 20 ]; do echo step $i; sleep 0.1; "
                                       "i=$((i+1)); done\nexec " + SimUscmd() + " \"$@\"");
  launch_.stall_within = mad::Duration::Seconds(1);
  launch_.slow_after = mad::Duration::Millis(200);
  std::vector<std::string> told;
  launch_.on_slow = [&](const std::string& m) { told.push_back(m); };
  absl::StatusOr<RouterLaunched> r = EnsureRouter(launch_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, RouterLaunched::kStarted);
  EXPECT_TRUE(RouterServesAt(launch_.socket_path));
  ASSERT_EQ(told.size(), 1u);
  EXPECT_NE(told[0].find("still starting"), std::string::npos) << told[0];
  EXPECT_NE(told[0].find(launch_.log_path), std::string::npos) << told[0];
}

// Asleep for good after its first line: stopped once the stall window has
// passed without progress, long before the hard bound.
TEST_F(RouterLaunchTest, AUscmdThatHangsIsStoppedAfterTheStallWindow) {
  const std::string pid_file = dir_ + "/pid";
  launch_.uscmd = Script("hung-uscmd", "echo $$ > " + pid_file +
                                           "\necho 'uscmd: opening'\nexec sleep 600");
  launch_.stall_within = mad::Duration::Millis(300);
  launch_.ready_within = mad::Duration::Seconds(600);
  absl::StatusOr<RouterLaunched> r = EnsureRouter(launch_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("made no progress for 300ms"), std::string::npos)
      << r.status();
  EXPECT_TRUE(GoneWithin10s(pid_file)) << "the hung uscmd was not stopped";
}

// Busy for ever (always runnable, CPU time growing): stopped at the hard bound.
TEST_F(RouterLaunchTest, AUscmdThatSpinsIsStoppedAtTheHardBound) {
  const std::string pid_file = dir_ + "/pid";
  launch_.uscmd = Script("spinning-uscmd", "echo $$ > " + pid_file + "\nwhile :; do :; done");
  launch_.stall_within = mad::Duration::Millis(300);
  launch_.ready_within = mad::Duration::Seconds(1);
  absl::StatusOr<RouterLaunched> r = EnsureRouter(launch_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("within 1s"), std::string::npos) << r.status();
  EXPECT_TRUE(GoneWithin10s(pid_file)) << "the spinning uscmd was not stopped";
}

TEST_F(RouterLaunchTest, AUscmdThatExitsReportsItsLastLogLine) {
  launch_.uscmd = Script("failing-uscmd",
                         "echo 'uscmd: rxe9 port 1'\n"
                         "echo 'uscmd: cannot open the umad device: Permission denied' >&2\n"
                         "exit 1");
  absl::StatusOr<RouterLaunched> r = EnsureRouter(launch_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("cannot open the umad device: Permission denied"),
            std::string::npos)
      << r.status();
}

// EnsureRouters: two ports' launches, sockets and logs of their own.
class RouterLaunchesTest : public RouterLaunchTest {
 protected:
  void SetUp() override {
    RouterLaunchTest::SetUp();
    for (int i = 0; i < 2; ++i) {
      RouterLaunch l = launch_;
      l.ca = absl::StrCat("sim", i);
      l.socket_path = absl::StrCat(dir_, "/uscmd", i, ".sock");
      l.log_path = absl::StrCat(dir_, "/uscmd", i, ".log");
      // A start waited for alone would be stopped at this bound.
      l.ready_within = mad::Duration::Seconds(3);
      launches_.push_back(l);
    }
  }
  // A uscmd for port `i` that marks itself started, waits until the other
  // port's uscmd has started too, then does `then`.
  std::string AfterTheOther(int i, const std::string& then) {
    return Script(absl::StrCat("uscmd", i),
                  absl::StrCat("touch ", dir_, "/started", i, "\nwhile [ ! -e ", dir_, "/started",
                               1 - i, " ]; do sleep 0.02; done\n", then));
  }
  std::vector<RouterLaunch> launches_;
};

// Each port's uscmd serves only once the other port's has been started: both
// must be started before either is waited for (one after the other, the
// first is stopped at its 3 s bound, the second never started by then).
TEST_F(RouterLaunchesTest, EveryPortsUscmdIsStartedBeforeAnyIsWaitedFor) {
  for (int i = 0; i < 2; ++i) {
    launches_[i].uscmd = AfterTheOther(i, "exec " + SimUscmd() + " \"$@\"");
  }
  const std::vector<absl::StatusOr<RouterLaunched>> r = EnsureRouters(launches_);
  ASSERT_EQ(r.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(r[i].ok()) << i << ": " << r[i].status();
    EXPECT_EQ(*r[i], RouterLaunched::kStarted) << i;
    EXPECT_TRUE(RouterServesAt(launches_[i].socket_path)) << i;
  }
  EXPECT_EQ(Lines(starts_).size(), 2u) << "router processes started";
}

// Port 0's uscmd fails (its log's last line) once port 1's has started, and
// port 1's serves: each result is its own port's, in the launches' order.
TEST_F(RouterLaunchesTest, OneFailingPortDoesNotHideTheOthersReadiness) {
  launches_[0].uscmd = AfterTheOther(
      0, "echo 'uscmd: cannot open the umad device: Permission denied' >&2\nexit 1");
  launches_[1].uscmd = AfterTheOther(1, "exec " + SimUscmd() + " \"$@\"");
  const std::vector<absl::StatusOr<RouterLaunched>> r = EnsureRouters(launches_);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].status().code(), absl::StatusCode::kFailedPrecondition) << r[0].status();
  EXPECT_NE(r[0].status().message().find("uscmd for sim0 port 1 did not start: uscmd: cannot "
                                         "open the umad device: Permission denied"),
            std::string::npos)
      << r[0].status();
  ASSERT_TRUE(r[1].ok()) << r[1].status();
  EXPECT_EQ(*r[1], RouterLaunched::kStarted);
  EXPECT_TRUE(RouterServesAt(launches_[1].socket_path));
}

// Each start keeps its own bounds while they wait together: port 0's uscmd
// hangs and is stopped after its 300 ms stall window, port 1's spins and is
// stopped at its 1 s hard bound, and a slow one that makes progress for 2 s
// (past both) is waited for.
TEST_F(RouterLaunchesTest, EachStartKeepsItsOwnBounds) {
  launches_.push_back(launches_[1]);
  launches_[2].ca = "sim2";
  launches_[2].socket_path = dir_ + "/uscmd2.sock";
  launches_[2].log_path = dir_ + "/uscmd2.log";
  const std::string hung_pid = dir_ + "/hung.pid", spinning_pid = dir_ + "/spinning.pid";
  launches_[0].uscmd =
      Script("hung-uscmd", "echo $$ > " + hung_pid + "\necho 'uscmd: opening'\nexec sleep 600");
  launches_[0].stall_within = mad::Duration::Millis(300);
  launches_[0].ready_within = mad::Duration::Seconds(600);
  launches_[1].uscmd = Script("spinning-uscmd", "echo $$ > " + spinning_pid + "\nwhile :; do :; done");
  launches_[1].stall_within = mad::Duration::Millis(300);
  launches_[1].ready_within = mad::Duration::Seconds(1);
  launches_[2].uscmd = Script("slow-uscmd", "i=0\nwhile [ $i -lt 20 ]; do echo step $i; sleep 0.1; "
                                            "i=$((i+1)); done\nexec " + SimUscmd() + " \"$@\"");
  launches_[2].stall_within = mad::Duration::Seconds(1);
  launches_[2].ready_within = mad::Duration::Seconds(30);
  const std::vector<absl::StatusOr<RouterLaunched>> r = EnsureRouters(launches_);
  ASSERT_EQ(r.size(), 3u);
  ASSERT_FALSE(r[0].ok());
  EXPECT_NE(r[0].status().message().find("sim0 port 1 made no progress for 300ms"),
            std::string::npos)
      << r[0].status();
  ASSERT_FALSE(r[1].ok());
  EXPECT_NE(r[1].status().message().find("sim1 port 1 did not answer on " +
                                         launches_[1].socket_path + " within 1s"),
            std::string::npos)
      << r[1].status();
  ASSERT_TRUE(r[2].ok()) << r[2].status();
  EXPECT_EQ(*r[2], RouterLaunched::kStarted);
  EXPECT_TRUE(GoneWithin10s(hung_pid)) << "the hung uscmd was not stopped";
  EXPECT_TRUE(GoneWithin10s(spinning_pid)) << "the spinning uscmd was not stopped";
}

// A port whose router already serves is used as it is; the other's is started.
TEST_F(RouterLaunchesTest, AServingRouterIsUsedAsItIsBesideAStart) {
  ASSERT_EQ(EnsureRouter(launches_[0]).value(), RouterLaunched::kStarted);
  const std::vector<absl::StatusOr<RouterLaunched>> r = EnsureRouters(launches_);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].value(), RouterLaunched::kAlreadyServing);
  EXPECT_EQ(r[1].value(), RouterLaunched::kStarted);
  EXPECT_EQ(Lines(starts_).size(), 2u);
}

// The start lock sits in a directory anyone may write: a symlink planted at
// its path is refused, and what it points at keeps its mode.
TEST_F(RouterLaunchTest, ASymlinkAtTheLockPathIsRefusedAndItsTargetUntouched) {
  const std::string target = dir_ + "/precious";
  std::ofstream(target) << "x";
  ASSERT_EQ(chmod(target.c_str(), 0600), 0);
  ASSERT_EQ(symlink(target.c_str(), (launch_.socket_path + ".lock").c_str()), 0);
  absl::StatusOr<RouterLaunched> r = EnsureRouter(launch_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(".lock"), std::string::npos) << r.status();
  struct stat st;
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
}

}  // namespace
}  // namespace uscm::router
