#include "api/c/router_on_demand.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
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

namespace {

using Clock = std::chrono::steady_clock;

// Ports whose uscmd a start of several (StartRoutersOnDemand) failed to start,
// and when: the port's own open right after (StartRouterOnDemand) does not
// start it a second time (a uscmd that hangs would cost its stall window
// twice). Taken once; a failure older than kFailureKept is forgotten.
constexpr auto kFailureKept = std::chrono::seconds(60);
struct FailedStart {
  std::string ca;
  int port;
  Clock::time_point at;
};
std::mutex g_failed_mu;
std::vector<FailedStart>& FailedStarts() {
  static auto* failed = new std::vector<FailedStart>;
  return *failed;
}

bool TakeFailedStart(const std::string& ca, int port) {
  std::lock_guard<std::mutex> lock(g_failed_mu);
  std::vector<FailedStart>& failed = FailedStarts();
  const Clock::time_point now = Clock::now();
  bool found = false;
  for (auto it = failed.begin(); it != failed.end();) {
    const bool mine = it->ca == ca && it->port == port;
    if (mine || now - it->at > kFailureKept) {
      found = found || (mine && now - it->at <= kFailureKept);
      it = failed.erase(it);
    } else {
      ++it;
    }
  }
  return found;
}

// Starts the ports' routers together. `several`: the start of a call that
// then opens each port, whose own start says why none was started.
void StartRouters(const std::vector<std::pair<std::string, int>>& ports, bool several) {
  if (Set("USCM_NO_USCMD")) {
    if (!several) Debug(ports[0].first, ports[0].second, "USCM_NO_USCMD set: no uscmd started");
    return;
  }
  // secure_getenv: a set-user-ID program must not run a uscmd its caller names.
  const char* given = secure_getenv("USCM_USCMD");
  const std::string own = OwnPath();
  const std::string uscmd = given != nullptr && given[0] != '\0' ? given : UscmdBesideLibrary(own);
  if (uscmd.empty()) {
    if (!several) {
      Debug(ports[0].first, ports[0].second,
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
      if (several) {
        std::lock_guard<std::mutex> lock(g_failed_mu);
        FailedStarts().push_back({ca, port, Clock::now()});
      }
    } else if (*r[i] == router::RouterLaunched::kStarted) {
      Debug(ca, port, "started " + uscmd + " (log " + router::DefaultRouterLog(ca, port) + ")");
    }
  }
}

}  // namespace

void StartRouterOnDemand(const std::string& ca, int port) {
  if (TakeFailedStart(ca, port)) {
    Debug(ca, port, "its uscmd did not start just before (above): the port is opened directly");
    return;
  }
  StartRouters({{ca, port}}, /*several=*/false);
}

void StartRoutersOnDemand(const std::vector<std::pair<std::string, int>>& ports) {
  if (!ports.empty()) StartRouters(ports, /*several=*/true);
}

}  // namespace uscm::c_api
