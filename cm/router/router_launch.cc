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
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
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
  static absl::StatusOr<StartLock> Open(const std::string& path) {
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
    return StartLock(fd);
  }
  StartLock(StartLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  StartLock& operator=(StartLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~StartLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  // Takes the lock if nobody holds it: true, or false with errno
  // (EWOULDBLOCK: another process holds it).
  bool TryLock() { return flock(fd_, LOCK_EX | LOCK_NB) == 0; }

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

// One port's start, stepped every kPollEvery by EnsureRouters until it has
// its result: first trying the start lock (another process may hold it, and
// be starting the port's uscmd), then, the lock taken and still no router,
// watching the uscmd it forked by the rules in router_launch.h.
class Start {
 public:
  explicit Start(const RouterLaunch& launch)
      : launch_(launch),
        socket_(launch.socket_path.empty() ? DefaultRouterSocket(launch.ca, launch.port)
                                           : launch.socket_path),
        log_(launch.log_path.empty() ? DefaultRouterLog(launch.ca, launch.port)
                                     : launch.log_path),
        what_(absl::StrCat("uscmd for ", launch.ca, " port ", launch.port)) {
    if (RouterServesAt(socket_)) {
      result_ = RouterLaunched::kAlreadyServing;
      return;
    }
    absl::StatusOr<StartLock> lock = StartLock::Open(socket_ + ".lock");
    if (!lock.ok()) {
      result_ = lock.status();
      return;
    }
    lock_ = std::move(*lock);
    // Whoever holds the lock may take up to ready_within to get its uscmd up.
    lock_deadline_ = Clock::now() + ToClock(launch.ready_within) + std::chrono::seconds(5);
  }

  bool Done() const { return result_.has_value(); }
  absl::StatusOr<RouterLaunched> TakeResult() { return std::move(*result_); }

  // Moves the start on by one look; sets the result when it has one.
  void Step() {
    if (Done()) return;
    if (pid_ < 0) {
      TryToSpawn();
    } else {
      Look();
    }
    if (Done()) lock_.reset();  // another program may start or find it now
  }

 private:
  void TryToSpawn() {
    if (!lock_->TryLock()) {
      const int err = errno;
      if (err != EWOULDBLOCK || Clock::now() >= lock_deadline_) {
        result_ = absl::InternalError(
            absl::StrCat("cannot lock ", socket_, ".lock: ", strerror(err)));
      }
      return;
    }
    // Another program may have started it while this one waited for the lock.
    if (RouterServesAt(socket_)) {
      result_ = RouterLaunched::kAlreadyServing;
      return;
    }
    pid_ = SpawnDetached({launch_.uscmd, "--ca", launch_.ca, "--port",
                          std::to_string(launch_.port), "--socket", socket_,
                          absl::StrCat("--idle-exit=", launch_.idle_exit_s)},
                         log_);
    if (pid_ < 0) {
      result_ = absl::InternalError(
          absl::StrCat("cannot start ", launch_.uscmd, ": ", strerror(errno)));
      return;
    }
    started_ = last_progress_ = Clock::now();
  }

  void Look() {
    if (RouterServesAt(socket_)) {
      result_ = RouterLaunched::kStarted;
      return;
    }
    const std::optional<Progress> p = ProgressOf(pid_, log_);
    if (!p.has_value()) {
      result_ = absl::FailedPreconditionError(
          absl::StrCat(what_, " did not start: ", LastLine(log_), " (", log_, ")"));
      return;
    }
    const Clock::time_point now = Clock::now();
    if (p->Busy() || p != last_) last_progress_ = now;
    last_ = p;
    absl::Status hung;
    if (now - last_progress_ >= ToClock(launch_.stall_within)) {
      hung = absl::DeadlineExceededError(absl::StrCat(
          what_, " made no progress for ", launch_.stall_within.ToString(), " (state ",
          std::string(1, p->state), ") and did not answer on ", socket_, ": stopped (see ", log_,
          ")"));
    } else if (now - started_ >= ToClock(launch_.ready_within)) {
      hung = absl::DeadlineExceededError(absl::StrCat(what_, " did not answer on ", socket_,
                                                      " within ", launch_.ready_within.ToString(),
                                                      ": stopped (see ", log_, ")"));
    }
    if (!hung.ok()) {
      kill(pid_, SIGTERM);
      result_ = hung;
      return;
    }
    if (!told_ && launch_.on_slow && now - started_ >= ToClock(launch_.slow_after)) {
      told_ = true;
      launch_.on_slow(absl::StrCat(what_, " has not answered after ",
                                   launch_.slow_after.ToString(),
                                   " but is still starting (a busy machine?): waiting up to ",
                                   launch_.ready_within.ToString(), " (", log_, ")"));
    }
  }

  const RouterLaunch& launch_;
  const std::string socket_, log_, what_;
  std::optional<absl::StatusOr<RouterLaunched>> result_;
  std::optional<StartLock> lock_;
  Clock::time_point lock_deadline_;
  pid_t pid_ = -1;
  Clock::time_point started_, last_progress_;
  std::optional<Progress> last_;
  bool told_ = false;
};

}  // namespace

std::string DefaultRouterLog(const std::string& ca_name, int port_num) {
  return absl::StrCat("/tmp/uscmd-", ca_name, "-", port_num, ".log");
}

std::vector<absl::StatusOr<RouterLaunched>> EnsureRouters(
    const std::vector<RouterLaunch>& launches) {
  // Every start is stepped in turn, so all the uscmds are forked (or their
  // locks tried) before any is waited for, and their waits overlap.
  std::vector<std::unique_ptr<Start>> starts;
  for (const RouterLaunch& launch : launches) starts.push_back(std::make_unique<Start>(launch));
  for (;;) {
    bool all_done = true;
    for (const std::unique_ptr<Start>& s : starts) {
      s->Step();
      all_done = all_done && s->Done();
    }
    if (all_done) break;
    std::this_thread::sleep_for(kPollEvery);
  }
  std::vector<absl::StatusOr<RouterLaunched>> results;
  for (const std::unique_ptr<Start>& s : starts) results.push_back(s->TakeResult());
  return results;
}

absl::StatusOr<RouterLaunched> EnsureRouter(const RouterLaunch& launch) {
  return std::move(EnsureRouters({launch})[0]);
}

}  // namespace uscm::router
