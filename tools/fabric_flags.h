// The --fabric flag every uscm subcommand takes, and opening a real MAD
// transport for it:
//
//   sim                  the built-in simulated fabric (default)
//   ibsim                ibsim + OpenSM, started and stopped by the command
//                        (tools/ibsim_launcher.h); the command re-runs itself
//                        on ibsim nodes with --fabric=umad:ibsim0:1
//   umad:<ca>:<port>     QP1 through the kernel's umad interface
//   ud:<device>:<port>   a raw verbs UD QP
//   router:<socket>      through uscmd, the host's MAD router (docs/ROUTER.md);
//                        umad: falls back to it by itself when another process
//                        owns the port's CM class and uscmd serves that port
#ifndef USCM_TOOLS_FABRIC_FLAGS_H_
#define USCM_TOOLS_FABRIC_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mad/transport.h"

namespace uscm::tools {

inline constexpr char kFabricForms[] =
    "sim, ibsim, umad:<ca>:<port>, ud:<device>:<port>, router:<socket>";

struct FabricSpec {
  enum class Kind : uint8_t { kSim, kIbsim, kUmad, kUd, kRouter };
  Kind kind = Kind::kSim;
  std::string device;  // umad / ud: CA or device name; router: socket path
  int port = 1;        // umad / ud: port number (1..254)

  // umad, ud or router: a transport this process opens (OpenRealTransport).
  bool IsDevice() const { return kind == Kind::kUmad || kind == Kind::kUd || kind == Kind::kRouter; }

  std::string ToString() const;
};

// InvalidArgument naming the accepted forms for anything else.
absl::StatusOr<FabricSpec> ParseFabric(absl::string_view text);

struct RealTransportOptions {
  // Receive unsolicited CM MADs (REQ, REP, DREQ, ...). Under ibsim this also
  // claims IsSM for the port (UmadOptions::sim_claim_issm): ibsim hands
  // unsolicited QP1 MADs only to IsSM clients. Never on OpenSM's node.
  bool receive_cm = true;
};

// Opens the transport of a umad:, ud: or router: fabric. umad: uses the
// router at router::DefaultRouterSocket(ca, port) instead when the port's CM
// class is owned by another process and that socket exists. When the machine has no RDMA
// device at all the error says so and suggests --fabric=sim; a permission
// error says how to get access; otherwise it is the transport's own error
// with the fabric named.
absl::StatusOr<std::unique_ptr<mad::Transport>> OpenRealTransport(
    const FabricSpec& spec, RealTransportOptions options = {});

// The Q_Key of uscm's own UD QP on a RoCE port (--fabric=ud: on Ethernet):
// below 0x80000000, so it needs no CAP_NET_RAW; both peers use it, and the
// client redirects QP1 to the server's UD QP with it (docs/VM.md).
inline constexpr uint32_t kRoceUdQkey = 0x11111;

// True when /sys/class/infiniband/<device>/ports/<port>/link_layer says
// Ethernet (RoCE: no SA, no LIDs; OpenRealTransport then skips the SA agent
// on umad: and gives the ud: QP kRoceUdQkey).
bool IsEthernetPort(const std::string& device, int port);

// Number of entries in /sys/class/infiniband (0 when the directory is absent).
int CountRdmaDevices();

// True when this process runs on an ibsim node: libumad2sim.so is preloaded
// (it fakes the umad devices and sysfs for libibumad only, so
// /sys/class/infiniband says nothing about them).
bool UnderUmad2sim();

}  // namespace uscm::tools

#endif  // USCM_TOOLS_FABRIC_FLAGS_H_
