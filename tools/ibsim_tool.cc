#include "tools/ibsim_tool.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_format.h"
#include "mad/umad_transport.h"

namespace uscm::tools {

absl::StatusOr<std::string> SelfExecutable() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) {
    return absl::InternalError(absl::StrCat("readlink /proc/self/exe: ", strerror(errno)));
  }
  return std::string(buf, static_cast<size_t>(n));
}

absl::StatusOr<std::unique_ptr<IbsimFabric>> StartToolFabric(const char* command) {
  auto self = SelfExecutable();
  if (!self.ok()) return self.status();
  IbsimOptions o;
  o.port_probe = *self;
  o.port_probe_args = {"ibsim-port"};
  o.start_timeout_ms = 60000;  // OpenSM's first sweep; generous on a loaded box
  absl::FPrintF(stderr, "uscm %s: starting ibsim + OpenSM (nodes sm, hostA, hostB, switch sw1)\n",
                command);
  auto f = IbsimFabric::Start(o);
  if (!f.ok()) {
    return absl::Status(f.status().code(),
                        absl::StrCat("--fabric=ibsim: ", f.status().message()));
  }
  absl::FPrintF(stderr, "uscm %s: subnet up (hostA LID %d, hostB LID %d); files in %s\n", command,
                (*f)->lids().at("hostA"), (*f)->lids().at("hostB"), (*f)->dir());
  return f;
}

void ForwardStderr(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "ERR: received data size ") &&
        absl::StrContains(line, "larger than requested buf size")) {
      continue;
    }
    absl::FPrintF(stderr, "%s\n", line);
  }
}

int RunIbsimPortProbe() {
  auto p = mad::QueryUmadPort("ibsim0", 1);
  if (!p.ok()) {
    absl::FPrintF(stderr, "uscm ibsim-port: %s\n", p.status().message());
    return 1;
  }
  absl::PrintF("state=%d\nlid=%d\nca_type=%s\n", p->state, p->port.lid, p->ca_type);
  return 0;
}

}  // namespace uscm::tools
