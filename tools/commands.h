// The uscm subcommands. Each takes the arguments after its name and returns
// the process exit code (tools/cli.h: 0 ok, 1 failure, 2 usage error).
#ifndef USCM_TOOLS_COMMANDS_H_
#define USCM_TOOLS_COMMANDS_H_

namespace uscm::tools {

int RunDemo(int argc, char** argv);
int RunPing(int argc, char** argv);
int RunSaquery(int argc, char** argv);
int RunSim(int argc, char** argv);
int RunDump(int argc, char** argv);
int RunExec(int argc, char** argv);
int RunTopo(int argc, char** argv);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_COMMANDS_H_
