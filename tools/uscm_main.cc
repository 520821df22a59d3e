// uscm: the command line of the user-space InfiniBand CM.
//   uscm <command> [options]      see `uscm --help`
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/ibsim_tool.h"

namespace {

constexpr char kUsage[] =
    "Usage: uscm <command> [options]\n"
    "\n"
    "A user-space InfiniBand Communication Manager: CM, SA client and MAD\n"
    "transports without the kernel's ib_cm / ib_sa / rdma_ucm.\n"
    "\n"
    "Commands:\n"
    "  demo      the CM at work: path query, connect with private data and ECE,\n"
    "            a rejected connect, multicast join/leave, disconnect; prints a\n"
    "            timeline of every MAD and event and writes a Wireshark capture\n"
    "  ping      CM connection setup client/server (like ucmatose): N connections,\n"
    "            setup time min/p50/p99/max and connections per second\n"
    "  saquery   PathRecord and MCMemberRecord queries (like saquery)\n"
    "  sim       research runs on the simulated fabric: loss/duplication/delay\n"
    "            sweeps, CSV and PNG plots, reproducible by seed\n"
    "  dump      decode a capture file, or capture live from a transport\n"
    "  exec      run an unmodified rdma_cm program on uscm (its librdmacm.so.1,\n"
    "            a uscmd per active port): uscm exec -- rping -s\n"
    "  topo      write an ibsim net file for a two- or three-level fat tree\n"
    "\n"
    "Fabrics (--fabric): sim (default), ibsim, umad:<ca>:<port>, ud:<device>:<port>\n"
    "Run 'uscm <command> --help' for a command's options.\n"
    "Exit status: 0 ok, 1 failure while running, 2 bad command line.\n";

// On an ibsim node (umad2sim preloaded, SIM_HOST set by the launcher):
// umad2sim's exit handler joins its receive thread while holding the lock
// that thread takes for every packet, so a MAD arriving during exit
// deadlocks the process (docs/TRANSPORTS.md). The output is flushed, then
// the process leaves within 2 s whatever the handler does, as
// tests/ibsim/umad_client does.
volatile sig_atomic_t g_exit_code = 0;
void ExitNow(int) { _exit(g_exit_code); }

int LeaveSafelyUnderUmad2sim(int rc) {
  if (std::getenv("SIM_HOST") == nullptr) return rc;
  std::fflush(stdout);
  std::fflush(stderr);
  g_exit_code = rc;
  signal(SIGALRM, ExitNow);
  alarm(2);
  return rc;
}

int Dispatch(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) { return LeaveSafelyUnderUmad2sim(Dispatch(argc, argv)); }

namespace {

int Dispatch(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return uscm::tools::kExitUsage;
  }
  const char* cmd = argv[1];
  if (std::strcmp(cmd, "--help") == 0 || std::strcmp(cmd, "-h") == 0 ||
      std::strcmp(cmd, "help") == 0) {
    std::fputs(kUsage, stdout);
    return uscm::tools::kExitOk;
  }
  struct Command {
    const char* name;
    int (*run)(int, char**);
  };
  static constexpr Command kCommands[] = {
      {"demo", uscm::tools::RunDemo},       {"ping", uscm::tools::RunPing},
      {"saquery", uscm::tools::RunSaquery}, {"sim", uscm::tools::RunSim},
      {"dump", uscm::tools::RunDump},       {"exec", uscm::tools::RunExec},
      {"topo", uscm::tools::RunTopo},
  };
  // Internal: the port probe --fabric=ibsim runs on each node (not listed).
  if (std::strcmp(cmd, "ibsim-port") == 0) return uscm::tools::RunIbsimPortProbe();
  for (const Command& c : kCommands) {
    if (std::strcmp(cmd, c.name) == 0) return c.run(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "uscm: unknown command '%s'\n\n%s", cmd, kUsage);
  return uscm::tools::kExitUsage;
}

}  // namespace
