// A private simulated InfiniBand subnet for `uscm <cmd> --fabric=ibsim`:
// ibsim on a net file plus an unmodified OpenSM, and helpers that run
// programs (the uscm binary itself, re-executed) on chosen ibsim nodes under
// LD_PRELOAD=libumad2sim.so. The same design as the test harness
// tests/ibsim/ibsim_fabric.h (which stays testonly and separate); this copy
// is what the installed command uses, with its own net file built in.
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
  std::string net_text = kIbsimNetFile;  // ibsim topology (ibnetdiscover format)
  std::string sm_node = "sm";            // node OpenSM attaches to (SIM_HOST)
  // Wait until these nodes' ports are ACTIVE.
  std::vector<std::string> nodes = {"hostA", "hostB"};
  // argv that, run on a node, prints "state=N" and "lid=N" lines
  // (`uscm ibsim-port`).
  std::vector<std::string> port_probe;
  int start_timeout_ms = 20000;
  std::string ibsim = "/usr/bin/ibsim";
  std::string opensm = "/usr/sbin/opensm";
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

  // Starts `argv` on `node` (SIM_HOST) with the umad2sim environment. uscm
  // receives unsolicited CM MADs through UmadOptions::sim_claim_issm, not
  // SIM_SET_ISSM=1 (see mad/umad_transport.h).
  absl::StatusOr<Child> Spawn(const std::string& node, const std::vector<std::string>& argv);
  // Spawn + Wait.
  absl::StatusOr<ProcessResult> Run(const std::string& node, const std::vector<std::string>& argv,
                                    int timeout_ms);
  // The environment Spawn adds, for the log and for scripts.
  std::vector<std::string> Environment(const std::string& node) const;

  const std::string& dir() const { return dir_; }
  const std::string& sockname() const { return sockname_; }
  // The LID each waited-for node got from OpenSM.
  const std::map<std::string, int>& lids() const { return lids_; }
  // Last lines of ibsim's and OpenSM's logs, for failure messages.
  // USCM_IBSIM_KEEP=1 in the environment keeps dir() after the run.
  std::string LogTail() const;

 private:
  IbsimFabric() = default;
  absl::StatusOr<Child> SpawnRaw(const std::string& label, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& extra_env);
  absl::Status WaitUntilActive(const IbsimOptions& options);

  std::string dir_;
  std::string sockname_;
  std::unique_ptr<Child> ibsim_;
  std::unique_ptr<Child> opensm_;
  std::map<std::string, int> lids_;
  int spawned_ = 0;
};

}  // namespace uscm::tools

#endif  // USCM_TOOLS_IBSIM_LAUNCHER_H_
