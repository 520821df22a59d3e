// `uscm demo --fabric=ibsim`: the demo story on a private ibsim + OpenSM.
// This process starts the subnet and runs itself twice, as the server
// (`demo --role=server`, hostB) and the client (`demo --role=client`,
// hostA), each a RealHost on umad:ibsim0:1. Every line the children print
// carries its CLOCK_MONOTONIC time; the parent merges them into one
// timeline (wall time since the first line) and the two per-host captures
// into one pcap.
#ifndef USCM_TOOLS_DEMO_IBSIM_H_
#define USCM_TOOLS_DEMO_IBSIM_H_

#include <cstdint>
#include <string>

#include "tools/fabric_flags.h"

namespace uscm::tools {

// The parent: returns the exit code.
int RunDemoIbsim(const std::string& capture);

// A child on a device fabric. `peer_lid`: the client's server.
int RunDemoRole(const FabricSpec& spec, bool server, int peer_lid, const std::string& capture);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_DEMO_IBSIM_H_
