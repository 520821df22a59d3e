// What `--fabric=ibsim` does for the uscm subcommands: start a private ibsim +
// OpenSM (tools/ibsim_launcher.h) on the built-in subnet, then re-execute this
// very binary on the nodes hostA / hostB with --fabric=umad:ibsim0:1.
#ifndef USCM_TOOLS_IBSIM_TOOL_H_
#define USCM_TOOLS_IBSIM_TOOL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tools/ibsim_launcher.h"

namespace uscm::tools {

// This executable (/proc/self/exe).
absl::StatusOr<std::string> SelfExecutable();

// Starts ibsim + OpenSM and waits until hostA and hostB are ACTIVE; the
// port probe is `<this binary> ibsim-port`. Says what it does on stderr.
absl::StatusOr<std::unique_ptr<IbsimFabric>> StartToolFabric(const char* command);

// Copies a child's stderr to ours without umad2sim's "ERR: received data
// size 320 larger than requested buf size 288" lines: its own notice that it
// cut a MAD to 224 bytes (mad/umad_transport.h), printed for every MAD.
void ForwardStderr(const std::string& text);

// `uscm ibsim-port`: run on an ibsim node, prints "state=N" and "lid=N" of
// ibsim0 port 1 (the probe above). Returns the exit code.
int RunIbsimPortProbe();

}  // namespace uscm::tools

#endif  // USCM_TOOLS_IBSIM_TOOL_H_
