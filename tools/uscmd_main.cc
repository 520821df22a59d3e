// uscmd: the per-port MAD router (docs/ROUTER.md). Owns one port's QP1 CM and
// SA agents through umad and shares them with every uscm process on the host
// over a Unix socket; those processes use router::RouterTransport.
//
//   uscmd [--ca mlx5_0] [--port 1] [--socket PATH] [--slot-bits 8] [--idle-exit S]
//         [--capture FILE] [--max-claims-per-client N]
//
// Stops on SIGINT / SIGTERM, or after S seconds without a client, and prints
// its counters. Under systemd socket activation (tools/uscmd.socket) it serves
// the passed socket (LISTEN_FDS) instead of binding one.
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "mad/capture/capture_transport.h"
#include "mad/capture/pcap_writer.h"
#include "mad/port_page.h"
#include "mad/time.h"
#include "mad/umad_transport.h"

namespace {

constexpr char kUsage[] =
    "Usage: uscmd [--ca NAME] [--port N] [--socket PATH] [--socket-mode OCTAL] [--slot-bits B]\n"
    "             [--idle-exit SECONDS] [--sim-issm] [--capture FILE]\n"
    "             [--max-claims-per-client N]\n"
    "\n"
    "The uscm MAD router: owns the port's QP1 (CM class 0x07, SA class 0x03)\n"
    "and routes MADs to the uscm processes of this host, which connect to\n"
    "PATH (default /tmp/uscmd-<ca>-<port>.sock). B bits of every comm ID name\n"
    "the process: up to 2^B - 1 processes (default 8: 255).\n"
    "--socket-mode: the socket file's mode (default 0666: any local user, as\n"
    "/dev/infiniband/rdma_cm; 0660 with a group restricts it). A live uscmd's\n"
    "socket is never replaced.\n"
    "--idle-exit: exit (status 0) once no process has been connected for\n"
    "SECONDS (default 0: never); `uscm exec` starts its routers with it.\n"
    "Socket activation: with LISTEN_PID/LISTEN_FDS (systemd's uscmd.socket) it\n"
    "serves the passed socket and never binds, chmods or unlinks one.\n"
    "--sim-issm: under ibsim (LD_PRELOAD=libumad2sim.so) claim IsSM, without\n"
    "which ibsim hands this node's unsolicited CM MADs to no one.\n"
    "--capture: write every MAD to and from the wire to FILE (pcap; `uscm dump\n"
    "FILE`), time-stamped with CLOCK_MONOTONIC: to trace retries.\n"
    "--max-claims-per-client: binds and listens one process may hold on the\n"
    "port (default 1024); the next rdma_bind_addr / rdma_listen fails with\n"
    "ENOMEM.\n";

uscm::router::Server* g_server = nullptr;

// The path a socket is bound to ("" when unnamed).
std::string BoundPath(int fd) {
  sockaddr_un addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sun_path[0] == 0) {
    return "";
  }
  return std::string(addr.sun_path, strnlen(addr.sun_path, sizeof addr.sun_path));
}

// Milliseconds since this process was forked (/proc/self/stat's starttime,
// in clock ticks since boot, against CLOCK_BOOTTIME); -1 if unknown.
long MillisSinceFork() {
  std::ifstream in("/proc/self/stat");
  std::string s;
  std::getline(in, s);
  const size_t paren = s.rfind(')');
  if (paren == std::string::npos) return -1;
  // Fields 3 to 22 (proc(5)); starttime is the 20th after the name.
  const char* p = s.c_str() + paren + 2;
  for (int field = 3; field < 22 && *p != '\0'; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return -1;
    ++p;
  }
  const unsigned long long ticks = std::strtoull(p, nullptr, 10);
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) return -1;
  return static_cast<long>(now.tv_sec * 1000 + now.tv_nsec / 1000000 - ticks * 1000 / hz);
}

long MillisSince(const timespec& t0) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
}

void OnSignal(int) {
  if (g_server != nullptr) g_server->Stop();  // an atomic store and an eventfd write
}

}  // namespace

int main(int argc, char** argv) {
  // Where a start goes (docs/ROUTER.md "On demand"): to main (exec, the
  // dynamic loader), the umad port, the socket.
  const long to_main_ms = MillisSinceFork();
  timespec main_at{};
  clock_gettime(CLOCK_MONOTONIC, &main_at);
  uscm::mad::UmadOptions umad;
  std::string socket_path;
  std::string capture_path;
  int slot_bits = 8;
  uint32_t socket_mode = 0666;
  int idle_exit_s = 0;
  uint64_t max_claims = uscm::router::RouterOptions{}.max_claims_per_client;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--ca" && has_value) {
      umad.ca_name = argv[++i];
    } else if (a == "--port" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &umad.port_num) || umad.port_num < 0 ||
          umad.port_num > 255) {
        std::fprintf(stderr, "uscmd: --port %s is not a port number (0..255)\n", argv[i]);
        return 2;
      }
    } else if (a == "--sim-issm") {
      umad.sim_claim_issm = true;
    } else if (a == "--capture" && has_value) {
      capture_path = argv[++i];
    } else if (a == "--socket" && has_value) {
      socket_path = argv[++i];
    } else if (a == "--socket-mode" && has_value) {
      if (!absl::numbers_internal::safe_strtou32_base(argv[++i], &socket_mode, 8) ||
          socket_mode > 0777) {
        std::fprintf(stderr, "uscmd: --socket-mode %s: an octal mode 0..0777\n", argv[i]);
        return 2;
      }
    } else if ((a == "--idle-exit" && has_value) || a.rfind("--idle-exit=", 0) == 0) {
      const char* v = a == "--idle-exit" ? argv[++i] : argv[i] + std::strlen("--idle-exit=");
      if (!absl::SimpleAtoi(v, &idle_exit_s) || idle_exit_s < 0) {
        std::fprintf(stderr, "uscmd: --idle-exit %s: seconds, 0 or more\n", v);
        return 2;
      }
    } else if (a == "--max-claims-per-client" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &max_claims) || max_claims < 1) {
        std::fprintf(stderr, "uscmd: --max-claims-per-client %s: a count, 1 or more\n", argv[i]);
        return 2;
      }
    } else if (a == "--slot-bits" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &slot_bits) || slot_bits < 1 || slot_bits > 8) {
        std::fprintf(stderr, "uscmd: --slot-bits %s: must be 1..8\n", argv[i]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "uscmd: unknown or incomplete option %s\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  auto activated = uscm::router::ActivatedListenFd(getenv("LISTEN_PID"), getenv("LISTEN_FDS"),
                                                   getpid());
  if (!activated.ok()) {
    std::fprintf(stderr, "uscmd: %s\n", std::string(activated.status().message()).c_str());
    return 2;
  }
  unsetenv("LISTEN_PID");  // not for any child
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  auto wire = uscm::mad::UmadTransport::Open(umad);
  if (!wire.ok()) {
    std::fprintf(stderr, "uscmd: %s\n", std::string(wire.status().message()).c_str());
    return 1;
  }
  const long umad_ms = MillisSince(main_at);
  const uscm::mad::LocalPort& port = (*wire)->port();
  if (*activated >= 0) {
    socket_path = BoundPath(*activated);  // systemd's ListenSequentialPacket= path
  } else if (socket_path.empty()) {
    socket_path = uscm::router::DefaultRouterSocket(port.ca_name, port.port_num);
  }
  // --capture: the wire seen through a CaptureTransport (the router's own
  // view: every MAD it sends and every MAD umad hands it).
  std::unique_ptr<uscm::mad::capture::PcapWriter> pcap;
  std::unique_ptr<uscm::mad::capture::CaptureTransport> captured;
  static const uscm::mad::RealClock clock;
  uscm::mad::Transport* transport = wire->get();
  if (!capture_path.empty()) {
    auto w = uscm::mad::capture::PcapWriter::Create(capture_path);
    if (!w.ok()) {
      std::fprintf(stderr, "uscmd: --capture: %s\n", std::string(w.status().message()).c_str());
      return 1;
    }
    pcap = std::move(*w);
    captured = std::make_unique<uscm::mad::capture::CaptureTransport>(**wire, *pcap, clock);
    transport = captured.get();
  }
  uscm::router::ServerOptions options;
  options.socket_path = socket_path;
  options.socket_mode = socket_mode;
  options.listen_fd = *activated;
  options.idle_exit = uscm::mad::Duration::Seconds(idle_exit_s);
  options.router.slot_bits = static_cast<uint8_t>(slot_bits);
  options.router.max_claims_per_client = static_cast<size_t>(max_claims);
  uscm::mad::ReadLocalPortRange(&options.router.ephemeral_low, &options.router.ephemeral_high);
  auto server = uscm::router::Server::Create(*transport, options);
  if (!server.ok()) {
    std::fprintf(stderr, "uscmd: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  g_server = server->get();
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::printf("uscmd: %s port %d (LID %u) on %s%s\n", port.ca_name.c_str(), port.port_num,
              port.lid, socket_path.c_str(), *activated >= 0 ? " (socket activation)" : "");
  const long up_ms = MillisSince(main_at);
  std::printf("uscmd: serving %ld ms after its fork: %ld ms to main (exec, libraries), umad port "
              "%ld ms, socket %ld ms\n",
              to_main_ms + up_ms, to_main_ms, umad_ms, up_ms - umad_ms);
  std::fflush(stdout);
  absl::Status s = (*server)->Run();
  g_server = nullptr;
  const uscm::router::RouterCounters& c = (*server)->router().counters();
  std::printf(
      "uscmd: clients %llu accepted, %llu refused (hellos of another uscm release %llu); MADs %llu to wire, %llu from wire, %llu to "
      "clients; refused %llu, unroutable %llu, cleanup REJ %llu DREQ %llu; duplicate REQs %llu; "
      "to clients queued %llu (longest queue %llu), dropped %llu, duplicates not queued %llu; "
      "wire send errors %llu\n",
      static_cast<unsigned long long>(c.clients_accepted),
      static_cast<unsigned long long>(c.clients_refused),
      static_cast<unsigned long long>((*server)->counters().other_release_hellos),
      static_cast<unsigned long long>(c.to_wire), static_cast<unsigned long long>(c.from_wire),
      static_cast<unsigned long long>(c.to_clients),
      static_cast<unsigned long long>(c.refused_mads),
      static_cast<unsigned long long>(c.wire_unroutable),
      static_cast<unsigned long long>(c.cleanup_rej),
      static_cast<unsigned long long>(c.cleanup_dreq),
      static_cast<unsigned long long>(c.duplicate_reqs),
      static_cast<unsigned long long>((*server)->counters().queued_to_client),
      static_cast<unsigned long long>((*server)->counters().max_client_queue),
      static_cast<unsigned long long>((*server)->counters().dropped_to_client),
      static_cast<unsigned long long>((*server)->counters().duplicates_not_queued),
      static_cast<unsigned long long>(c.send_errors));
  std::printf("uscmd: claims %llu (REUSEADDR updates %llu), conflicts %llu, denied %llu, over "
              "the per-client limit %llu, held at exit %zu\n",
              static_cast<unsigned long long>(c.claims),
              static_cast<unsigned long long>(c.claim_updates),
              static_cast<unsigned long long>(c.claim_conflicts),
              static_cast<unsigned long long>(c.claims_denied),
              static_cast<unsigned long long>(c.claims_over_limit),
              (*server)->router().claim_count());
  std::printf("uscmd: CM MADs to wire: %s; from wire: %s\n",
              uscm::router::CmAttrCounts(c.cm_to_wire).c_str(),
              uscm::router::CmAttrCounts(c.cm_from_wire).c_str());
  if (!s.ok()) {
    std::fprintf(stderr, "uscmd: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if ((*server)->idle_exited()) {
    std::printf("uscmd: no client for %d s: exiting (--idle-exit)\n", idle_exit_s);
  }
  if (absl::Status lost = (*server)->wire_lost(); !lost.ok()) {
    // Exit 0: a unit's Restart=on-failure must not retry a port that is gone.
    std::printf("uscmd: %s: exiting\n", std::string(lost.message()).c_str());
  }
  return 0;
}
