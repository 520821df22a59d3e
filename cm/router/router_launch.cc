#include "cm/router/router_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"

namespace uscm::router {
namespace {

constexpr auto kPollEvery = std::chrono::milliseconds(10);

using Clock = std::chrono::steady_clock;

Clock::duration ToClock(mad::Duration d) { return std::chrono::nanoseconds(d.nanos()); }

std::string LastLine(const std::string& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// What shows that a started uscmd is getting on: /proc/<pid>/stat's state,
// page faults and CPU time, and its log's size.
struct Progress {
  char state = '?';
  unsigned long long minflt = 0, majflt = 0, utime = 0, stime = 0;
  off_t log_size = -1;

  // Runnable or in disk wait: waiting for a CPU or for its pages.
  bool Busy() const { return state == 'R' || state == 'D'; }
  bool operator==(const Progress&) const = default;
};

// `pid`'s progress, or nothing when it is gone: reaped (ESRCH) or a zombie
// waiting for its new parent.
std::optional<Progress> ProgressOf(pid_t pid, const std::string& log) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return std::nullopt;
  std::ifstream proc_stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string s;
  std::getline(proc_stat, s);
  Progress p;
  const size_t paren = s.rfind(')');
  if (paren != std::string::npos && paren + 2 < s.size()) {
    // Fields 3 on (proc(5)): state ppid pgrp session tty_nr tpgid flags
    // minflt cminflt majflt cmajflt utime stime.
    std::istringstream fields(s.substr(paren + 2));
    long skip;
    unsigned long long cminflt, cmajflt;
    fields >> p.state >> skip >> skip >> skip >> skip >> skip >> skip >> p.minflt >> cminflt >>
        p.majflt >> cmajflt >> p.utime >> p.stime;
  }
  if (p.state == 'Z') return std::nullopt;
  struct stat st;
  if (stat(log.c_str(), &st) == 0) p.log_size = st.st_size;
  return p;
}

// The exclusive start lock on `<socket>.lock`, held until destruction. Any
// user may take it (a read-only descriptor is enough for flock).
class StartLock {
 public:
  static absl::StatusOr<StartLock> Take(const std::string& path, Clock::duration within) {
    // O_NOFOLLOW and a regular file only: the lock lives in a directory
    // anyone may write (/tmp), and a root program must not chmod what a
    // planted symlink points at.
    const int fd = open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
      return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return absl::InternalError(absl::StrCat("cannot lock ", path, ": not a regular file"));
    }
    // So that another user's program can open it too (umask aside); only
    // our own file.
    if (st.st_uid == geteuid()) (void)fchmod(fd, 0666);
    const auto deadline = Clock::now() + within;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK || Clock::now() >= deadline) {
        const int err = errno;
        close(fd);
        return absl::InternalError(absl::StrCat("cannot lock ", path, ": ", strerror(err)));
      }
      std::this_thread::sleep_for(kPollEvery);
    }
    return StartLock(fd);
  }
  StartLock(StartLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ~StartLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }

 private:
  explicit StartLock(int fd) : fd_(fd) {}
  int fd_;
};

// Runs `argv` as a daemon: fork, setsid, fork. The grandchild's pid, or -1.
// Between fork and exec only async-signal-safe calls: everything is prepared
// before the first fork.
pid_t SpawnDetached(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  const pid_t child = fork();
  if (child < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return -1;
  }
  if (child == 0) {
    setsid();  // its own session and process group, no controlling terminal
    const pid_t daemon = fork();
    if (daemon != 0) {
      (void)!write(pipefd[1], &daemon, sizeof daemon);
      _exit(0);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    (void)!chdir("/");
    const int in = open("/dev/null", O_RDONLY);
    // O_NOFOLLOW: the log is in /tmp too (see StartLock); no log rather than
    // truncating what a planted symlink points at.
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
    if (out < 0) out = open("/dev/null", O_WRONLY);
    if (in >= 0) dup2(in, STDIN_FILENO);
    if (out >= 0) {
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
    }
    syscall(SYS_close_range, 3u, ~0u, 0u);  // nothing else of the program's
    execv(argv[0], argv.data());
    static constexpr char kCannot[] = "uscmd: cannot be run (execv failed)\n";
    (void)!write(STDERR_FILENO, kCannot, sizeof kCannot - 1);
    _exit(127);
  }
  close(pipefd[1]);
  pid_t daemon = -1;
  if (read(pipefd[0], &daemon, sizeof daemon) != sizeof daemon) daemon = -1;
  close(pipefd[0]);
  waitpid(child, nullptr, 0);  // the middle process exits at once
  return daemon;
}

// Waits for the uscmd `pid` started for `launch` to answer on `socket`, by
// the rules in router_launch.h.
absl::StatusOr<RouterLaunched> AwaitStarted(const RouterLaunch& launch, pid_t pid,
                                            const std::string& socket, const std::string& log) {
  const std::string what = absl::StrCat("uscmd for ", launch.ca, " port ", launch.port);
  const Clock::time_point start = Clock::now();
  Clock::time_point last_progress = start;
  std::optional<Progress> last;
  bool told = false;
  while (!RouterServesAt(socket)) {
    const std::optional<Progress> p = ProgressOf(pid, log);
    if (!p.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " did not start: ", LastLine(log), " (", log, ")"));
    }
    const Clock::time_point now = Clock::now();
    if (p->Busy() || p != last) last_progress = now;
    last = p;
    absl::Status hung;
    if (now - last_progress >= ToClock(launch.stall_within)) {
      hung = absl::DeadlineExceededError(absl::StrCat(
          what, " made no progress for ", launch.stall_within.ToString(), " (state ",
          std::string(1, p->state), ") and did not answer on ", socket, ": stopped (see ", log,
          ")"));
    } else if (now - start >= ToClock(launch.ready_within)) {
      hung = absl::DeadlineExceededError(absl::StrCat(what, " did not answer on ", socket,
                                                      " within ", launch.ready_within.ToString(),
                                                      ": stopped (see ", log, ")"));
    }
    if (!hung.ok()) {
      kill(pid, SIGTERM);
      return hung;
    }
    if (!told && launch.on_slow && now - start >= ToClock(launch.slow_after)) {
      told = true;
      launch.on_slow(absl::StrCat(what, " has not answered after ", launch.slow_after.ToString(),
                                  " but is still starting (a busy machine?): waiting up to ",
                                  launch.ready_within.ToString(), " (", log, ")"));
    }
    std::this_thread::sleep_for(kPollEvery);
  }
  return RouterLaunched::kStarted;
}

}  // namespace

std::string DefaultRouterLog(const std::string& ca_name, int port_num) {
  return absl::StrCat("/tmp/uscmd-", ca_name, "-", port_num, ".log");
}

absl::StatusOr<RouterLaunched> EnsureRouter(const RouterLaunch& launch) {
  const std::string socket = launch.socket_path.empty()
                                 ? DefaultRouterSocket(launch.ca, launch.port)
                                 : launch.socket_path;
  const std::string log =
      launch.log_path.empty() ? DefaultRouterLog(launch.ca, launch.port) : launch.log_path;
  if (RouterServesAt(socket)) return RouterLaunched::kAlreadyServing;
  // Whoever holds the lock may take up to ready_within to get its uscmd up.
  const Clock::duration wait = ToClock(launch.ready_within) + std::chrono::seconds(5);
  absl::StatusOr<StartLock> lock = StartLock::Take(socket + ".lock", wait);
  if (!lock.ok()) return lock.status();
  // Another program may have started it while this one waited for the lock.
  if (RouterServesAt(socket)) return RouterLaunched::kAlreadyServing;
  const pid_t pid = SpawnDetached(
      {launch.uscmd, "--ca", launch.ca, "--port", std::to_string(launch.port), "--socket", socket,
       absl::StrCat("--idle-exit=", launch.idle_exit_s)},
      log);
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("cannot start ", launch.uscmd, ": ", strerror(errno)));
  }
  return AwaitStarted(launch, pid, socket, log);
}

}  // namespace uscm::router
