// uscm exec: runs an unmodified rdma_cm program on uscm's drop-in
// librdmacm.so.1 (api/librdmacm).
//
//   uscm exec [--libdir DIR] [--device CA[:PORT]] [--idle-exit S] [--no-uscmd] -- PROGRAM [ARGS...]
//
// 1. Finds the drop-in: --libdir, $USCM_LIBDIR, <bindir>/../lib/uscm (an
//    installed tree, tools/install.sh), <bindir>/../api/librdmacm (bazel-bin).
// 2. For every ACTIVE RDMA port without a live uscmd, starts one (the port's
//    router, docs/ROUTER.md; cm/router/router_launch.h, which the drop-in
//    itself uses too) and waits until its socket answers, so that several
//    programs share the port: the first program would otherwise own the
//    port's CM class and lock the others out.
//    Always through uscmd: a program that owns the port itself cannot clean
//    up when it is killed (kill -9), while uscmd sends what the kernel sends
//    on process exit (DREQ for its established connections, REJ for pending
//    ones; docs/ROUTER.md). So a uscmd that cannot start (no permission on
//    /dev/infiniband/umad*, the kernel's ib_cm owns the CM class) is an
//    error, unless --no-uscmd says the program may own the port (it sets
//    USCM_NO_USCMD=1, so the drop-in does not start one either). A port that
//    appears later gets its uscmd from the drop-in, when the program first
//    uses it: USCM_USCMD names this one (unless set already).
// 3. Holds one connection to every router open across the exec (an
//    inherited descriptor): uscmd's idle timer (--idle-exit) starts only
//    once PROGRAM and every other client are gone.
// 4. Puts the drop-in first on LD_LIBRARY_PATH and execs PROGRAM. --device
//    sets USCM_DEVICE: the one port the drop-in serves the program on (by
//    default every ACTIVE one, each id on the port of its address;
//    api/librdmacm/ports.h), and only that port gets a uscmd.
//
// The uscmd it starts exits by itself S seconds (--idle-exit, default 30)
// after its last client left; its log is /tmp/uscmd-<ca>-<port>.log.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "api/librdmacm/port_choice.h"
#include "cm/router/router_launch.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace uscm::tools {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "Usage: uscm exec [--libdir DIR] [--device CA[:PORT]] [--idle-exit S] [--no-uscmd]\n"
    "                 -- PROGRAM [ARGS...]\n"
    "\n"
    "Runs an unmodified rdma_cm program (rping, ucmatose, ib_send_bw -R, ...) on\n"
    "uscm: its librdmacm.so.1 first on LD_LIBRARY_PATH, and a uscmd router\n"
    "started for every active RDMA port that has none, so several programs\n"
    "share a port, and a killed program's peers still get its DREQs and REJs\n"
    "(from uscmd). A router that cannot start is an error. The uscmd exits by\n"
    "itself S seconds after its last program (log in /tmp/uscmd-<ca>-<port>.log).\n"
    "\n"
    "Options:\n"
    "  --libdir DIR   where librdmacm.so.1 is (default: $USCM_LIBDIR, else next to\n"
    "                 this uscm: ../lib/uscm or ../api/librdmacm)\n"
    "  --device CA[:PORT]  the only RDMA port the program runs on (sets\n"
    "                 USCM_DEVICE; default: every ACTIVE port, each id on the\n"
    "                 port of the address it binds or resolves from)\n"
    "  --idle-exit S  a uscmd started here exits S seconds after its last client\n"
    "                 (default 30; 0: it keeps running)\n"
    "  --no-uscmd     start no router (the program owns the port itself and\n"
    "                 nothing cleans up for it if it is killed); sets\n"
    "                 USCM_NO_USCMD=1 so that the library starts none either\n";

constexpr int kDefaultIdleExitSeconds = 30;

std::string SelfDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

bool HasLibrary(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "librdmacm.so.1", ec);
}

// The drop-in's directory, or "" with `looked` listing where it looked.
std::string FindLibdir(const std::string& given, std::string* looked) {
  std::vector<fs::path> candidates;
  if (!given.empty()) {
    candidates.push_back(given);
  } else {
    if (const char* env = std::getenv("USCM_LIBDIR"); env != nullptr && *env != '\0') {
      candidates.push_back(env);
    }
    const fs::path bin = SelfDir();
    candidates.push_back(bin / ".." / "lib" / "uscm");
    candidates.push_back(bin / ".." / "api" / "librdmacm");
  }
  for (const fs::path& c : candidates) {
    absl::StrAppend(looked, looked->empty() ? "" : ", ", c.lexically_normal().string());
    if (HasLibrary(c)) return fs::absolute(c).lexically_normal().string();
  }
  return "";
}

struct ActivePort {
  std::string ca;
  int port = 0;
};

std::vector<ActivePort> ActivePorts() {
  std::vector<ActivePort> out;
  std::error_code ec;
  for (const auto& dev : fs::directory_iterator("/sys/class/infiniband", ec)) {
    std::error_code ec2;
    for (const auto& p : fs::directory_iterator(dev.path() / "ports", ec2)) {
      std::ifstream state(p.path() / "state");
      std::string line;
      std::getline(state, line);
      int n = 0;
      if (line.find("ACTIVE") == std::string::npos) continue;
      if (!absl::SimpleAtoi(p.path().filename().string(), &n)) continue;
      out.push_back(ActivePort{dev.path().filename().string(), n});
    }
  }
  return out;
}

// A connection to the router at `socket`, inherited by the program (no
// FD_CLOEXEC): the router counts it as a client until the program exits.
// It never sends a frame; the program's own library connects separately.
bool HoldRouter(const std::string& socket) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, socket.data(), socket.size());
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  if (fd < 0) return false;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return false;
  }
  return true;
}

}  // namespace

int RunExec(int argc, char** argv) {
  std::string libdir_flag;
  const char* device = nullptr;
  bool start_uscmd = true;
  int idle_exit_s = kDefaultIdleExitSeconds;
  int i = 0;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return kExitOk;
    }
    if (a == "--no-uscmd") {
      start_uscmd = false;
    } else if ((a == "--idle-exit" && i + 1 < argc) || absl::StartsWith(a, "--idle-exit=")) {
      const std::string v = a == "--idle-exit" ? argv[++i] : a.substr(strlen("--idle-exit="));
      if (!absl::SimpleAtoi(v, &idle_exit_s) || idle_exit_s < 0) {
        std::fprintf(stderr, "uscm exec: --idle-exit %s: seconds, 0 or more\n", v.c_str());
        return kExitUsage;
      }
    } else if (a == "--libdir" && i + 1 < argc) {
      libdir_flag = argv[++i];
    } else if (a == "--device" && i + 1 < argc) {
      device = argv[++i];
    } else if (absl::StartsWith(a, "--device=")) {
      device = argv[i] + strlen("--device=");
    } else if (absl::StartsWith(a, "--libdir=")) {
      libdir_flag = std::string(absl::StripPrefix(a, "--libdir="));
    } else if (absl::StartsWith(a, "-")) {
      std::fprintf(stderr, "uscm exec: unknown option %s\n\n%s", a.c_str(), kUsage);
      return kExitUsage;
    } else {
      break;  // the program, without "--"
    }
  }
  if (i >= argc) {
    std::fprintf(stderr, "uscm exec: no program to run\n\n%s", kUsage);
    return kExitUsage;
  }
  std::string looked;
  const std::string libdir = FindLibdir(libdir_flag, &looked);
  if (libdir.empty()) {
    std::fprintf(stderr,
                 "uscm exec: no librdmacm.so.1 in %s; install uscm (tools/install.sh), build "
                 "//api/librdmacm:librdmacm.so.1, or pass --libdir\n",
                 looked.c_str());
    return kExitFailure;
  }
  librdmacm::PortChoice choice;
  std::string why;
  if (device != nullptr) {
    if (!librdmacm::ParsePortChoice(device, &choice, &why) || choice.ca.empty()) {
      std::fprintf(stderr, "uscm exec: --device %s: %s\n", device,
                   why.empty() ? "expected CA or CA:PORT, e.g. rxe1 or rxe1:1" : why.c_str());
      return kExitUsage;
    }
    setenv("USCM_DEVICE", device, 1);
  } else if (!librdmacm::ParsePortChoice(std::getenv("USCM_DEVICE"), &choice, &why)) {
    std::fprintf(stderr, "uscm exec: %s\n", why.c_str());
    return kExitUsage;
  }
  // The drop-in would start a uscmd by itself (api/c/router_on_demand.h):
  // --no-uscmd tells it not to.
  if (!start_uscmd) setenv("USCM_NO_USCMD", "1", 1);
  if (start_uscmd) {
    const std::string uscmd = (fs::path(SelfDir()) / "uscmd").string();
    // A port that becomes ACTIVE, or whose device appears, after the program
    // started is not among those below: the drop-in starts its router when it
    // first opens it (api/c/router_on_demand.h), this uscmd unless the user
    // named one (a build tree has none beside the library).
    setenv("USCM_USCMD", uscmd.c_str(), 0);
    // Every chosen port's uscmd is started first and all are waited for
    // together (router_launch.h EnsureRouters): two ports take about as
    // long as the slower start, not the sum.
    std::vector<std::string> sockets;
    std::vector<router::RouterLaunch> launches;
    for (const ActivePort& p : ActivePorts()) {
      if (!librdmacm::PortChosen(choice, p.ca.c_str(), p.port)) continue;
      sockets.push_back(router::DefaultRouterSocket(p.ca, p.port));
      if (router::RouterServesAt(sockets.back())) continue;
      if (access(uscmd.c_str(), X_OK) != 0) {
        std::fprintf(stderr,
                     "uscm exec: no uscmd next to uscm (%s) for %s port %d; reinstall uscm, "
                     "or pass --no-uscmd to let the program own the port\n",
                     uscmd.c_str(), p.ca.c_str(), p.port);
        return kExitFailure;
      }
      router::RouterLaunch launch;
      launch.uscmd = uscmd;
      launch.ca = p.ca;
      launch.port = p.port;
      launch.idle_exit_s = idle_exit_s;
      launch.on_slow = [](const std::string& m) {
        std::fprintf(stderr, "uscm exec: %s\n", m.c_str());
      };
      launches.push_back(std::move(launch));
    }
    const std::vector<absl::StatusOr<router::RouterLaunched>> started =
        router::EnsureRouters(launches);
    bool all_started = true;
    for (size_t k = 0; k < launches.size(); ++k) {
      if (started[k].ok()) continue;
      all_started = false;
      std::fprintf(stderr,
                   "uscm exec: %s\nuscm exec: not running %s without a router on %s port %d "
                   "(pass --no-uscmd to let the program own the port)\n",
                   std::string(started[k].status().message()).c_str(), argv[i],
                   launches[k].ca.c_str(), launches[k].port);
    }
    if (!all_started) return kExitFailure;
    for (const std::string& socket : sockets) {
      // Between the check and here an idle router may have exited: then the
      // program would own the port, so this is an error too.
      if (!HoldRouter(socket)) {
        std::fprintf(stderr, "uscm exec: the router on %s went away (%s); run it again\n",
                     socket.c_str(), std::strerror(errno));
        return kExitFailure;
      }
    }
  }
  const char* old = std::getenv("LD_LIBRARY_PATH");
  const std::string path = old != nullptr && *old != '\0' ? absl::StrCat(libdir, ":", old) : libdir;
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
  execvp(argv[i], argv + i);
  std::fprintf(stderr, "uscm exec: cannot run %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}

}  // namespace uscm::tools
