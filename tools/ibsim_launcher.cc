#include "tools/ibsim_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace uscm::tools {
namespace {

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

void SleepMs(int ms) { usleep(static_cast<useconds_t>(ms) * 1000); }

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Tail(const std::string& text, size_t lines) {
  std::vector<absl::string_view> all = absl::StrSplit(text, '\n');
  const size_t from = all.size() > lines ? all.size() - lines : 0;
  return absl::StrJoin(all.begin() + static_cast<long>(from), all.end(), "\n");
}

// Variables the parent's environment must not leak into a child: the
// fabric sets them per child.
bool IsFabricVariable(absl::string_view entry) {
  for (absl::string_view k : {"LD_PRELOAD=", "SIM_HOST=", "SIM_SET_ISSM=", "IBSIM_SOCKNAME=",
                              "IBSIM_SERVER_NAME=", "IBSIM_SERVER_PORT=", "ASAN_OPTIONS="}) {
    if (absl::StartsWith(entry, k)) return true;
  }
  return false;
}

std::string AbsolutePath(const std::string& p) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(p, ec);
  return ec ? p : abs.string();
}

}  // namespace

std::map<std::string, std::string> ParseKeyValues(const std::string& text) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos || line.find(' ') < eq) continue;
    out[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return out;
}

// ---- Child ----

Child::Child(pid_t pid, std::string out_path, std::string err_path, std::string label)
    : pid_(pid), out_path_(std::move(out_path)), err_path_(std::move(err_path)),
      label_(std::move(label)) {}

Child::Child(Child&& o) noexcept
    : pid_(o.pid_), status_(o.status_), reaped_(o.reaped_), out_path_(std::move(o.out_path_)),
      err_path_(std::move(o.err_path_)), label_(std::move(o.label_)) {
  o.pid_ = -1;
}

Child::~Child() { Kill(); }

bool Child::Running() {
  if (pid_ <= 0 || reaped_) return false;
  const pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    kill(-pid_, SIGKILL);  // anything the child left in its group
    return false;
  }
  return true;
}

void Child::Kill() {
  if (pid_ <= 0) return;
  if (!reaped_) {
    kill(-pid_, SIGTERM);
    for (int i = 0; i < 100 && Running(); ++i) SleepMs(10);
    if (!reaped_) {
      kill(-pid_, SIGKILL);
      if (waitpid(pid_, &status_, 0) == pid_) reaped_ = true;
    }
  }
  kill(-pid_, SIGKILL);  // the group may outlive its leader
  pid_ = -1;
}

std::string Child::Stdout() const { return ReadFile(out_path_); }
std::string Child::Stderr() const { return ReadFile(err_path_); }

absl::StatusOr<std::string> Child::WaitForLine(const std::string& prefix, int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    for (absl::string_view line : absl::StrSplit(Stdout(), '\n')) {
      if (absl::StartsWith(line, prefix)) return std::string(line);
    }
    if (!Running()) {
      return absl::FailedPreconditionError(
          absl::StrCat(label_, " exited before printing '", prefix, "'; stderr: ", Stderr()));
    }
    if (NowMs() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(label_, " printed no line '", prefix,
                                                      "' within ", timeout_ms, " ms"));
    }
    SleepMs(10);
  }
}

absl::StatusOr<ProcessResult> Child::Wait(int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  while (Running()) {
    if (NowMs() >= deadline) {
      Kill();
      return absl::DeadlineExceededError(absl::StrCat(
          label_, " still running after ", timeout_ms, " ms (killed); stdout: ", Stdout(),
          "; stderr: ", Stderr()));
    }
    SleepMs(5);
  }
  ProcessResult r;
  r.exit_code = WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  r.out = Stdout();
  r.err = Stderr();
  return r;
}

// ---- IbsimFabric ----

absl::StatusOr<Child> IbsimFabric::SpawnRaw(const std::string& label,
                                            const std::vector<std::string>& argv,
                                            const std::vector<std::string>& extra_env,
                                            int stdin_fd) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  const int n = ++spawned_;
  const std::string out = absl::StrCat(dir_, "/", label, "-", n, ".out");
  const std::string err = absl::StrCat(dir_, "/", label, "-", n, ".err");

  // Everything the child needs is built before fork().
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!IsFabricVariable(*e)) env.emplace_back(*e);
  }
  // ASan binaries under LD_PRELOAD: the runtime must not insist on being
  // first in the library list (umad2sim is).
  const char* asan = getenv("ASAN_OPTIONS");
  env.push_back(absl::StrCat("ASAN_OPTIONS=", asan != nullptr ? asan : "",
                             asan != nullptr && *asan != '\0' ? ":" : "",
                             "verify_asan_link_order=0"));
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp, args;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  // The child runs in dir_: a relative program path must not depend on that.
  if (argv_copy[0].find('/') != std::string::npos) argv_copy[0] = AbsolutePath(argv_copy[0]);
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    if (chdir(dir_.c_str()) != 0) _exit(126);
    const int in = stdin_fd >= 0 ? stdin_fd : open("/dev/null", O_RDONLY);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0) _exit(126);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    execve(args[0], args.data(), envp.data());
    dprintf(2, "execve %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent: no race with an early kill(-pid)
  return Child(pid, out, err, absl::StrCat(label, "[", absl::StrJoin(argv, " "), "]"));
}

std::vector<std::string> IbsimFabric::Environment(const std::string& node, bool issm) const {
  std::vector<std::string> env = {absl::StrCat("LD_PRELOAD=", kUmad2simLibrary),
                                  absl::StrCat("IBSIM_SOCKNAME=", sockname_),
                                  absl::StrCat("SIM_HOST=", node)};
  if (issm) env.push_back("SIM_SET_ISSM=1");
  return env;
}

absl::StatusOr<Child> IbsimFabric::Spawn(const std::string& node,
                                         const std::vector<std::string>& argv, bool issm) {
  return SpawnRaw(node, argv, Environment(node, issm));
}

absl::StatusOr<ProcessResult> IbsimFabric::Run(const std::string& node,
                                               const std::vector<std::string>& argv,
                                               int timeout_ms, bool issm) {
  auto c = Spawn(node, argv, issm);
  if (!c.ok()) return c.status();
  return c->Wait(timeout_ms);
}

std::string IbsimFabric::LogTail() const {
  std::string out;
  for (const auto& f : std::filesystem::directory_iterator(dir_)) {
    const std::string name = f.path().filename().string();
    if (absl::StartsWith(name, "ibsim-") || name == "opensm.log" ||
        absl::StartsWith(name, "opensm-")) {
      absl::StrAppend(&out, "\n--- ", name, " ---\n", Tail(ReadFile(f.path().string()), 8));
    }
  }
  return out;
}

absl::Status IbsimFabric::WaitUntilActive(const IbsimOptions& options) {
  const int64_t deadline = NowMs() + options.start_timeout_ms;
  std::map<std::string, std::string> last;
  for (const std::string& node : options.nodes) {
    for (;;) {
      if (!ibsim_->Running() || !opensm_->Running()) {
        return absl::FailedPreconditionError(
            absl::StrCat(ibsim_->Running() ? "opensm" : "ibsim", " exited during start-up", LogTail()));
      }
      // umad2sim snapshots the port at start-up: every probe is a new process.
      std::vector<std::string> probe = {options.port_probe};
      probe.insert(probe.end(), options.port_probe_args.begin(), options.port_probe_args.end());
      auto r = Run(node, probe, 10000);
      if (r.ok() && r->exit_code == 0) {
        auto kv = ParseKeyValues(r->out);
        last[node] = absl::StrCat("state=", kv["state"], " lid=", kv["lid"]);
        int lid = 0;
        if (kv["state"] == "4" && absl::SimpleAtoi(kv["lid"], &lid) && lid > 0) {
          lids_[node] = lid;
          break;
        }
      } else if (r.ok() && (r->exit_code == 126 || r->exit_code == 127)) {
        // The probe could not be started (a relative path outside Bazel's
        // runfiles, say): waiting longer will not help.
        return absl::FailedPreconditionError(absl::StrCat(
            "port probe ", options.port_probe, " could not be run (exit ", r->exit_code,
            "): ", r->err));
      } else {
        last[node] = r.ok() ? absl::StrCat("probe exit ", r->exit_code, ": ", r->err)
                            : std::string(r.status().message());
      }
      if (NowMs() >= deadline) {
        std::string states;
        for (const auto& [n, s] : last) absl::StrAppend(&states, " ", n, ": ", s, ";");
        return absl::DeadlineExceededError(absl::StrCat(
            "ibsim ports not ACTIVE after ", options.start_timeout_ms, " ms (", states,
            " is OpenSM running on '", options.sm_node, "'?)", LogTail()));
      }
      SleepMs(100);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<IbsimFabric>> IbsimFabric::Start(const IbsimOptions& options) {
  for (const std::string& bin : {options.ibsim, options.opensm, std::string(kUmad2simLibrary)}) {
    if (access(bin.c_str(), R_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          bin, " not found; install ibsim-utils, libumad2sim0 and opensm (tools/setup.sh)"));
    }
  }
  if (!options.net_file.empty() && access(options.net_file.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("net file ", options.net_file, " not readable"));
  }
  if (options.port_probe.empty()) return absl::InvalidArgumentError("no port probe");
  std::unique_ptr<IbsimFabric> f(new IbsimFabric());
  const char* tmp = getenv("TEST_TMPDIR");
  std::string templ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/uscm-ibsim-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", templ, ": ", strerror(errno)));
  }
  f->dir_ = templ;
  static int instance = 0;
  f->sockname_ = absl::StrCat("uscm-", getpid(), "-", ++instance, "-",
                              std::filesystem::path(templ).filename().string());

  IbsimOptions opts = options;
  opts.port_probe = AbsolutePath(opts.port_probe);
  if (opts.net_file.empty()) {  // the topology as text: into the fabric's directory
    opts.net_file = f->dir_ + "/fabric.net";
    std::ofstream net(opts.net_file);
    net << opts.net_text;
    if (!net.flush()) return absl::InternalError(absl::StrCat("cannot write ", opts.net_file));
  } else {
    opts.net_file = AbsolutePath(opts.net_file);
  }

  // -s: start the fabric at once; -n: no console (ibsim spins on stdin EOF).
  // With a console, ibsim reads commands from a pipe the fabric keeps open.
  int console_read = -1;
  if (opts.console) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
    }
    console_read = fds[0];
    f->console_fd_ = fds[1];
  }
  std::vector<std::string> ibsim_argv = {opts.ibsim, "-s", "-n", opts.net_file};
  if (opts.console) ibsim_argv.erase(ibsim_argv.begin() + 2);
  auto ibsim = f->SpawnRaw("ibsim", ibsim_argv, {absl::StrCat("IBSIM_SOCKNAME=", f->sockname_)},
                           console_read);
  if (console_read >= 0) close(console_read);
  if (!ibsim.ok()) return ibsim.status();
  f->ibsim_ = std::make_unique<Child>(std::move(*ibsim));
  if (auto s = f->ibsim_->WaitForLine("Network simulator ready", 5000); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ibsim did not start: ", s.status().message(), f->LogTail()));
  }

  std::vector<std::string> env = f->Environment(opts.sm_node, false);
  env.push_back(absl::StrCat("OSM_TMP_DIR=", f->dir_));
  env.push_back(absl::StrCat("OSM_CACHE_DIR=", f->dir_));
  auto osm = f->SpawnRaw("opensm", {opts.opensm, "-f", f->dir_ + "/opensm.log"}, env);
  if (!osm.ok()) return osm.status();
  f->opensm_ = std::make_unique<Child>(std::move(*osm));

  if (auto s = f->WaitUntilActive(opts); !s.ok()) return s;
  return f;
}

IbsimFabric::~IbsimFabric() {
  // OpenSM first: it is ibsim's client.
  opensm_.reset();
  ibsim_.reset();
  if (console_fd_ >= 0) close(console_fd_);
  if (getenv("USCM_IBSIM_KEEP") == nullptr && !dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

absl::Status IbsimFabric::SendConsoleCommand(const std::string& command, int timeout_ms) {
  if (console_fd_ < 0) {
    return absl::FailedPreconditionError("ibsim runs without a console; set IbsimOptions::console");
  }
  if (command.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError("one console command per call (no newline)");
  }
  // ibsim echoes comment lines: the marker proves the command before it ran.
  const std::string marker = absl::StrCat("# uscm-console-", ++console_commands_);
  const size_t before = ibsim_->Stdout().size();
  const std::string text = absl::StrCat(command, "\n", marker, "\n");
  if (write(console_fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(absl::StrCat("write to ibsim's console: ", strerror(errno)));
  }
  const int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    const std::string out = ibsim_->Stdout();
    const size_t end = out.find(marker, before);
    if (end != std::string::npos) {
      // Between the prompt that took the command and the marker: ibsim's
      // own messages about it, "# ..." when it refused.
      const std::string reply(out.substr(before, end - before));
      for (absl::string_view line : absl::StrSplit(reply, '\n')) {
        const size_t hash = line.find("# ");
        if (hash != absl::string_view::npos) {
          return absl::InvalidArgumentError(
              absl::StrCat("ibsim refused '", command, "': ", line.substr(hash)));
        }
      }
      return absl::OkStatus();
    }
    if (!ibsim_->Running()) {
      return absl::FailedPreconditionError(absl::StrCat("ibsim exited", LogTail()));
    }
    if (NowMs() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "ibsim did not process '", command, "' within ", timeout_ms, " ms", LogTail()));
    }
    SleepMs(10);
  }
}

absl::Status IbsimFabric::RequestSweep() {
  if (opensm_ == nullptr || !opensm_->Running()) {
    return absl::FailedPreconditionError(absl::StrCat("OpenSM is not running", LogTail()));
  }
  if (kill(opensm_->pid(), SIGHUP) != 0) {
    return absl::InternalError(absl::StrCat("kill(SIGHUP) OpenSM: ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace uscm::tools
