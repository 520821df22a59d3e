#include "tools/cli.h"
#include "tools/commands.h"

namespace uscm::tools {
int RunSaquery(int argc, char** argv) { return Failure("saquery", "not written yet"); }
}  // namespace uscm::tools
