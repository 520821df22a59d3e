#include "api/c/router_on_demand.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cm/router/router_launch.h"

namespace uscm::c_api {
namespace {

namespace fs = std::filesystem;

constexpr int kIdleExitSeconds = 30;  // as `uscm exec`

bool Set(const char* name) {
  const char* v = getenv(name);
  return v != nullptr && v[0] != '\0' && strcmp(v, "0") != 0;
}

void Debug(const std::string& ca, int port, const std::string& what) {
  if (Set("USCM_DEBUG")) {
    fprintf(stderr, "uscm: %s port %d: %s\n", ca.c_str(), port, what.c_str());
  }
}

// The path of the object this code is linked into (the shared library).
std::string OwnPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&StartRouterOnDemand), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  return info.dli_fname;
}

}  // namespace

std::string UscmdBesideLibrary(const std::string& library_path) {
  const fs::path lib(library_path);
  if (lib.filename().string().find(".so") == std::string::npos) return "";
  fs::path dir = fs::absolute(lib).parent_path();
  if (dir.filename() == "uscm") dir = dir.parent_path();  // lib/uscm/librdmacm.so.1
  if (dir.filename() != "lib") return "";
  const fs::path uscmd = dir.parent_path() / "bin" / "uscmd";
  return access(uscmd.c_str(), X_OK) == 0 ? uscmd.string() : "";
}

void StartRouterOnDemand(const std::string& ca, int port) { StartRoutersOnDemand({{ca, port}}); }

void StartRoutersOnDemand(const std::vector<std::pair<std::string, int>>& ports) {
  if (ports.empty()) return;
  if (Set("USCM_NO_USCMD")) {
    for (const auto& [ca, port] : ports) Debug(ca, port, "USCM_NO_USCMD set: no uscmd started");
    return;
  }
  // secure_getenv: a set-user-ID program must not run a uscmd its caller names.
  const char* given = secure_getenv("USCM_USCMD");
  const std::string own = OwnPath();
  const std::string uscmd = given != nullptr && given[0] != '\0' ? given : UscmdBesideLibrary(own);
  if (uscmd.empty()) {
    for (const auto& [ca, port] : ports) {
      Debug(ca, port,
            "no uscmd installed beside " + (own.empty() ? std::string("this library") : own) +
                " (set USCM_USCMD): the port is opened directly");
    }
    return;
  }
  std::vector<router::RouterLaunch> launches;
  for (const auto& [ca, port] : ports) {
    router::RouterLaunch launch;
    launch.uscmd = uscmd;
    launch.ca = ca;
    launch.port = port;
    launch.idle_exit_s = kIdleExitSeconds;
    launch.on_slow = [ca, port](const std::string& m) { Debug(ca, port, m); };
    launches.push_back(std::move(launch));
  }
  // Every port's uscmd started before any is waited for (router_launch.h).
  const std::vector<absl::StatusOr<router::RouterLaunched>> r = router::EnsureRouters(launches);
  for (size_t i = 0; i < ports.size(); ++i) {
    const auto& [ca, port] = ports[i];
    if (!r[i].ok()) {
      Debug(ca, port, std::string(r[i].status().message()) + ": the port is opened directly");
    } else if (*r[i] == router::RouterLaunched::kStarted) {
      Debug(ca, port, "started " + uscmd + " (log " + router::DefaultRouterLog(ca, port) + ")");
    }
  }
}

}  // namespace uscm::c_api
