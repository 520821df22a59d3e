// `uscm ping` over a device fabric (umad:<ca>:<port>, ud:<device>:<port>, or
// umad under ibsim): one process is the server, one the client, each a
// RealHost (the CM runtime's Node over the real transport, real clock).
#ifndef USCM_TOOLS_PING_DEVICE_H_
#define USCM_TOOLS_PING_DEVICE_H_

#include <cstdint>
#include <string>

#include "tools/fabric_flags.h"

namespace uscm::tools {

inline constexpr uint64_t kPingService = 0x0000000001060000ULL | 18515;  // RDMA_PS_TCP 18515

struct PingConfig {
  bool server = false;
  int connections = 10;
  std::string private_data = "uscm ping";
  bool reject = false;
  bool ece = false;
  bool disconnect = true;
  bool verbose = false;
  uint64_t service_id = kPingService;
  // Client: the server's LID, or its GID ("" = use the LID).
  int dlid = 0;
  std::string dgid;
  // Client on a RoCE port (no SA): --dgid is the server's IPv4-mapped GID
  // (::ffff:a.b.c.d) and the path is built from it and the port's own IPv4
  // GID (verbs::RocePathFromIps). On ud: the server's UD QPN (its listen line
  // prints it): the CM's QP1 sends go to that QP instead (RedirectQp1).
  uint32_t peer_ud_qpn = 0;
  // Server: stop after this long (0 = when `connections` have ended);
  // client: the limit on each wait (path query, connect, disconnect).
  int64_t seconds = 0;
  int64_t timeout_ms = 10000;
  // Client: connections in flight at once (cmtime starts all of them at once;
  // 1 = one after another).
  int window = 1;
};

// Runs the server or the client; returns the exit code (0 ok, 1 failure).
int RunPingDevice(const FabricSpec& spec, const PingConfig& config);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_PING_DEVICE_H_
