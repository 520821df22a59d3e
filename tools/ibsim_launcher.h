// A private simulated InfiniBand subnet: ibsim on a net file plus an
// unmodified OpenSM, and helpers that run programs on chosen ibsim nodes under
// LD_PRELOAD=libumad2sim.so. The one launcher for `uscm <cmd> --fabric=ibsim`
// (its own net file built in) and for the tests (tests/ibsim/ibsim_fabric.h
// names these types in uscm::tests).
//
// Isolation: every fabric has its own IBSIM_SOCKNAME (ibsim's abstract Unix
// socket names) and its own temporary directory (OpenSM's cache and log,
// umad2sim's per-process fake sysfs, the children's stdout/stderr), so several
// fabrics can run at once. ibsim serves at most 10 clients: OpenSM is one,
// and every running child is one more.
//
// Teardown: every child runs in its own process group with
// PR_SET_PDEATHSIG=SIGKILL. The destructor sends SIGTERM then SIGKILL to each
// group and reaps it; if the test process dies instead, the kernel kills the
// children. Nothing is left running either way.
#ifndef USCM_TOOLS_IBSIM_LAUNCHER_H_
#define USCM_TOOLS_IBSIM_LAUNCHER_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace uscm::tools {

inline constexpr char kUmad2simLibrary[] = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

// The built-in subnet: OpenSM on "sm", uscm processes on "hostA" / "hostB",
// all behind switch "sw1". Under umad2sim every node's CA is "ibsim0".
inline constexpr char kIbsimNetFile[] =
    "Hca\t1 \"sm\"\n[1]\t\"sw1\"[1]\n\n"
    "Hca\t1 \"hostA\"\n[1]\t\"sw1\"[2]\n\n"
    "Hca\t1 \"hostB\"\n[1]\t\"sw1\"[3]\n\n"
    "Switch\t8 \"sw1\"\n[1]\t\"sm\"[1]\n[2]\t\"hostA\"[1]\n[3]\t\"hostB\"[1]\n";
inline constexpr char kIbsimFabric[] = "umad:ibsim0:1";

struct IbsimOptions {
  // ibsim topology (ibnetdiscover format): the file `net_file`, or when that
  // is empty `net_text` (written into the fabric's directory).
  std::string net_file;
  std::string net_text = kIbsimNetFile;
  std::string sm_node = "sm";  // node OpenSM attaches to (SIM_HOST)
  // Wait until these nodes' ports are ACTIVE.
  std::vector<std::string> nodes = {"hostA", "hostB"};
  // A program that, run as `<port_probe> <port_probe_args...>` on a node,
  // prints "state=N" and "lid=N" lines (`uscm ibsim-port`,
  // `tests/ibsim/umad_client port`).
  std::string port_probe;
  std::vector<std::string> port_probe_args = {"port"};
  int start_timeout_ms = 20000;
  std::string ibsim = "/usr/bin/ibsim";
  std::string opensm = "/usr/sbin/opensm";
  // Run ibsim with its console on a pipe (SendConsoleCommand) instead of -n.
  bool console = false;
};

struct ProcessResult {
  int exit_code = -1;   // exit status, or 128 + signal
  std::string out;      // stdout
  std::string err;      // stderr
};

// Parses "key=value" lines.
std::map<std::string, std::string> ParseKeyValues(const std::string& text);

// A started process in its own process group; killed (group-wide) and reaped
// on destruction.
class Child {
 public:
  Child(pid_t pid, std::string out_path, std::string err_path, std::string label);
  ~Child();
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Polls the child's stdout until a line starting with `prefix` appears.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, int timeout_ms);
  // Waits for the exit; kills the group and fails after `timeout_ms`.
  absl::StatusOr<ProcessResult> Wait(int timeout_ms);
  bool Running();
  std::string Stdout() const;
  std::string Stderr() const;
  void Kill();

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  std::string out_path_, err_path_, label_;
};

class IbsimFabric {
 public:
  static absl::StatusOr<std::unique_ptr<IbsimFabric>> Start(const IbsimOptions& options);
  ~IbsimFabric();
  IbsimFabric(const IbsimFabric&) = delete;
  IbsimFabric& operator=(const IbsimFabric&) = delete;

  // Starts `argv` on `node` (SIM_HOST) with the umad2sim environment. `issm`
  // sets SIM_SET_ISSM=1: ibsim hands unsolicited QP1 MADs (every CM request)
  // only to IsSM clients. Beware: the flag is set at connect time, before the
  // program registers any agent, and OpenSM's SMInfo poll arriving in that
  // window crashes umad2sim. uscm programs use UmadOptions::sim_claim_issm
  // (umad_client --issm) instead and pass issm=false.
  absl::StatusOr<Child> Spawn(const std::string& node, const std::vector<std::string>& argv,
                              bool issm = false);
  // Spawn + Wait.
  absl::StatusOr<ProcessResult> Run(const std::string& node, const std::vector<std::string>& argv,
                                    int timeout_ms, bool issm = false);
  // The environment Spawn adds, for the log and for scripts.
  std::vector<std::string> Environment(const std::string& node, bool issm = false) const;

  const std::string& dir() const { return dir_; }
  const std::string& sockname() const { return sockname_; }
  // The LID each waited-for node got from OpenSM.
  const std::map<std::string, int>& lids() const { return lids_; }
  // Last lines of ibsim's and OpenSM's logs, for failure messages.
  // USCM_IBSIM_KEEP=1 in the environment keeps dir() after the run.
  std::string LogTail() const;

  // Runs one ibsim console command (IbsimOptions::console), e.g.
  // `Unlink "hostB"[1]` or `Link "hostB"[1] "sw1"[3]`, and returns once ibsim
  // has processed it (it echoes a comment line sent after the command). The
  // console reports errors as "# ..." lines; they are returned as an error.
  absl::Status SendConsoleCommand(const std::string& command, int timeout_ms = 10000);
  // Asks OpenSM for a heavy sweep now (SIGHUP), e.g. after a Link: ibsim
  // drops the port-change trap while OpenSM represses traps, and the periodic
  // light sweep does not bring a relinked CA port from INIT to ACTIVE.
  absl::Status RequestSweep();

 private:
  IbsimFabric() = default;
  absl::StatusOr<Child> SpawnRaw(const std::string& label, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& extra_env, int stdin_fd = -1);
  absl::Status WaitUntilActive(const IbsimOptions& options);

  std::string dir_;
  std::string sockname_;
  std::unique_ptr<Child> ibsim_;
  std::unique_ptr<Child> opensm_;
  std::map<std::string, int> lids_;
  int spawned_ = 0;
  int console_fd_ = -1;  // write end of ibsim's stdin (IbsimOptions::console)
  int console_commands_ = 0;
};

}  // namespace uscm::tools

#endif  // USCM_TOOLS_IBSIM_LAUNCHER_H_
