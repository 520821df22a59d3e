// The tests' names for the ibsim launcher, tools/ibsim_launcher.h (one
// implementation for the tests and `uscm --fabric=ibsim`): a private ibsim +
// OpenSM subnet and helpers that run programs on its nodes under umad2sim.
// Tests set IbsimOptions::net_file, sm_node, nodes and port_probe
// (tests/ibsim/umad_client, run as `umad_client port`).
#ifndef USCM_TESTS_IBSIM_IBSIM_FABRIC_H_
#define USCM_TESTS_IBSIM_IBSIM_FABRIC_H_

#include "tools/ibsim_launcher.h"

namespace uscm::tests {

using ::uscm::tools::Child;
using ::uscm::tools::IbsimFabric;
using ::uscm::tools::IbsimOptions;
using ::uscm::tools::kUmad2simLibrary;
using ::uscm::tools::ParseKeyValues;
using ::uscm::tools::ProcessResult;

}  // namespace uscm::tests

#endif  // USCM_TESTS_IBSIM_IBSIM_FABRIC_H_
