// The --fabric flag every uscm subcommand takes, and opening a real MAD
// transport for it:
//
//   sim                  the built-in simulated fabric (default)
//   ibsim                ibsim + OpenSM, started and stopped by the command
//   umad:<ca>:<port>     QP1 through the kernel's umad interface
//   ud:<device>:<port>   a raw verbs UD QP
#ifndef USCM_TOOLS_FABRIC_FLAGS_H_
#define USCM_TOOLS_FABRIC_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mad/transport.h"

namespace uscm::tools {

inline constexpr char kFabricForms[] = "sim, ibsim, umad:<ca>:<port>, ud:<device>:<port>";

struct FabricSpec {
  enum class Kind : uint8_t { kSim, kIbsim, kUmad, kUd };
  Kind kind = Kind::kSim;
  std::string device;  // umad / ud: CA or device name
  int port = 1;        // umad / ud: port number (1..254)

  std::string ToString() const;
};

// InvalidArgument naming the accepted forms for anything else.
absl::StatusOr<FabricSpec> ParseFabric(absl::string_view text);

// Opens the transport of a umad: or ud: fabric. When the machine has no RDMA
// device at all the error says so and suggests --fabric=sim; otherwise it is
// the transport's own error with the fabric named.
absl::StatusOr<std::unique_ptr<mad::Transport>> OpenRealTransport(const FabricSpec& spec);

// Number of entries in /sys/class/infiniband (0 when the directory is absent).
int CountRdmaDevices();

}  // namespace uscm::tools

#endif  // USCM_TOOLS_FABRIC_FLAGS_H_
