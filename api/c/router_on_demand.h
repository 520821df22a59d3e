// The C API's device opening (uscm_device_open, so the drop-in librdmacm.so.1
// too) starts the port's uscmd when none answers, before it would own the
// port itself: several programs then share the port with no step by the user
// (no `uscm exec`: LD_LIBRARY_PATH=DIR/lib/uscm PROGRAM is enough), and a
// killed program's peers get its DREQs and REJs from uscmd. The same start as
// `uscm exec` (cm/router/router_launch.h: one start under a lock, the same
// socket and log, --idle-exit 30).
//
// Which uscmd: $USCM_USCMD, else the one installed with this library, found
// from the library's own path (dladdr): DIR/lib/uscm/librdmacm.so.1 and
// DIR/lib/libuscm.so.0 -> DIR/bin/uscmd. None found (a build tree, a
// statically linked program), USCM_NO_USCMD=1 (or `uscm exec --no-uscmd`), or
// a uscmd that does not start: the caller opens the port directly as before,
// and USCM_DEBUG=1 prints why.
#ifndef USCM_API_C_ROUTER_ON_DEMAND_H_
#define USCM_API_C_ROUTER_ON_DEMAND_H_

#include <string>
#include <utility>
#include <vector>

namespace uscm::c_api {

void StartRouterOnDemand(const std::string& ca, int port);
// The same for several ports at once, for a call that needs them all (the
// drop-in's wildcard rdma_bind_addr): every port's uscmd is started before
// any is waited for (router_launch.h EnsureRouters), each port's failure
// said (USCM_DEBUG) on its own. Says nothing when no uscmd is to be started
// (USCM_NO_USCMD, none installed): each port's StartRouterOnDemand says it.
// A port whose start failed here is not started again by the next
// StartRouterOnDemand of it (within 60 s): the caller's open of the port.
void StartRoutersOnDemand(const std::vector<std::pair<std::string, int>>& ports);

// The uscmd installed next to the library at `library_path`, or "" when the
// path is not a shared library in lib/ or lib/uscm/ of a tree with bin/uscmd.
std::string UscmdBesideLibrary(const std::string& library_path);

}  // namespace uscm::c_api

#endif  // USCM_API_C_ROUTER_ON_DEMAND_H_
