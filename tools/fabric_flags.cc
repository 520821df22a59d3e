#include "tools/fabric_flags.h"

#include <dirent.h>
#include <stdlib.h>

#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "mad/umad_transport.h"
#include "cm/router/router_transport.h"
#include "verbs/ud_transport.h"

namespace uscm::tools {

std::string FabricSpec::ToString() const {
  switch (kind) {
    case Kind::kSim: return "sim";
    case Kind::kIbsim: return "ibsim";
    case Kind::kUmad: return absl::StrCat("umad:", device, ":", port);
    case Kind::kRouter: return absl::StrCat("router:", device);
    case Kind::kUd: return absl::StrCat("ud:", device, ":", port);
  }
  return "?";
}

absl::StatusOr<FabricSpec> ParseFabric(absl::string_view text) {
  FabricSpec spec;
  if (text == "sim") return spec;
  if (text == "ibsim") {
    spec.kind = FabricSpec::Kind::kIbsim;
    return spec;
  }
  if (absl::StartsWith(text, "router:")) {
    spec.kind = FabricSpec::Kind::kRouter;
    spec.device = std::string(text.substr(7));
    if (spec.device.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fabric=", text, ": the router's socket path is empty; accepted forms: ",
          kFabricForms));
    }
    return spec;
  }
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--fabric=", text, ": ", why,
                                                   "; accepted forms: ", kFabricForms));
  };
  if (parts.size() != 3 || (parts[0] != "umad" && parts[0] != "ud")) {
    return bad("unknown fabric");
  }
  spec.kind = parts[0] == "umad" ? FabricSpec::Kind::kUmad : FabricSpec::Kind::kUd;
  if (parts[1].empty()) return bad("the device name is empty");
  spec.device = parts[1];
  int port = 0;
  if (!absl::SimpleAtoi(parts[2], &port) || port < 1 || port > 254) {
    return bad(absl::StrCat("port '", parts[2], "' is not a number in 1..254"));
  }
  spec.port = port;
  return spec;
}

int CountRdmaDevices() {
  DIR* dir = opendir("/sys/class/infiniband");
  if (dir == nullptr) return 0;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

bool IsEthernetPort(const std::string& device, int port) {
  std::ifstream in(absl::StrCat("/sys/class/infiniband/", device, "/ports/", port, "/link_layer"));
  std::string layer;
  return in && std::getline(in, layer) && absl::StartsWith(layer, "Ethernet");
}

bool UnderUmad2sim() {
  const char* preload = getenv("LD_PRELOAD");
  return preload != nullptr && absl::StrContains(preload, "umad2sim");
}

absl::StatusOr<std::unique_ptr<mad::Transport>> OpenRealTransport(const FabricSpec& spec,
                                                                  RealTransportOptions options) {
  if (!spec.IsDevice()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fabric=", spec.ToString(), " is not a device fabric"));
  }
  if (spec.kind == FabricSpec::Kind::kRouter) {
    auto r = router::RouterTransport::Connect(spec.device);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat("--fabric=", spec.ToString(), ": ", r.status().message(),
                                       " (is uscmd running? start it with: uscmd --socket ",
                                       spec.device, ")"));
    }
    return std::unique_ptr<mad::Transport>(std::move(*r));
  }
  const bool simulated = UnderUmad2sim();
  if (simulated && spec.kind == FabricSpec::Kind::kUd) {
    return absl::FailedPreconditionError(
        absl::StrCat("--fabric=", spec.ToString(), ": ibsim (umad2sim) simulates umad only, not "
                     "verbs; use --fabric=umad:ibsim0:", spec.port));
  }
  if (!simulated && CountRdmaDevices() == 0) {
    return absl::NotFoundError(
        "no InfiniBand device found (/sys/class/infiniband is empty); try --fabric=sim");
  }
  std::unique_ptr<mad::Transport> t;
  absl::Status status;
  const bool roce = !simulated && IsEthernetPort(spec.device, spec.port);
  if (spec.kind == FabricSpec::Kind::kUmad) {
    mad::UmadOptions o;
    o.register_sa = !roce;  // RoCE has no SA
    o.ca_name = spec.device;
    o.port_num = spec.port;
    o.receive_cm = options.receive_cm;
    o.sim_claim_issm = simulated && options.receive_cm;
    // Another process (uscmd, or another uscm program) owns the CM class:
    // use the host's router for that port when it runs.
    auto opened = router::OpenOwnerOrRouter(
        [&]() -> absl::StatusOr<std::unique_ptr<mad::Transport>> {
          auto u = mad::UmadTransport::Open(o);
          if (!u.ok()) return u.status();
          return std::unique_ptr<mad::Transport>(std::move(*u));
        },
        router::DefaultRouterSocket(spec.device, spec.port));
    if (opened.ok()) t = std::move(*opened);
    status = opened.status();
  } else {
    verbs::UdOptions o;
    o.device = spec.device;
    o.port_num = spec.port;
    if (roce) o.qkey = kRoceUdQkey;
    auto opened = verbs::UdTransport::Open(o);
    if (opened.ok()) t = std::move(*opened);
    status = opened.status();
  }
  if (!status.ok()) {
    std::string hint;
    if (absl::StrContains(status.message(), "ermission denied") ||
        status.code() == absl::StatusCode::kPermissionDenied) {
      hint = spec.kind == FabricSpec::Kind::kUmad
                 ? "; no permission on /dev/infiniband/umad* (run as root, or grant the "
                   "'rdma' group access with a udev rule)"
                 : "; no permission on /dev/infiniband/uverbs* (run as root, or check the "
                   "locked-memory limit: ulimit -l)";
    }
    return absl::Status(status.code(), absl::StrCat("--fabric=", spec.ToString(), ": ",
                                                    status.message(), hint));
  }
  return t;
}

}  // namespace uscm::tools
