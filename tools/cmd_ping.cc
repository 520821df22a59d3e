#include "tools/cli.h"
#include "tools/commands.h"

namespace uscm::tools {
int RunPing(int argc, char** argv) { return Failure("ping", "not written yet"); }
}  // namespace uscm::tools
