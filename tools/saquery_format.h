// The text infiniband-diags' saquery prints for a PathRecord and an
// MCMemberRecord, character for character (rdma-core 44,
// infiniband-diags/saquery.c: dump_path_record for `saquery PR` / `-p`,
// dump_one_mcmember_record for `saquery MCMR`). Tested against the real
// saquery over ibsim + OpenSM in //tools:uscm_ibsim_test.
#ifndef USCM_TOOLS_SAQUERY_FORMAT_H_
#define USCM_TOOLS_SAQUERY_FORMAT_H_

#include <string>

#include "mad/wire/mcmember_record.h"
#include "mad/wire/path_record.h"

namespace uscm::tools {

// "PathRecord dump:\n" and 16 dotted rows. MTU, rate and packet lifetime are
// the record's whole byte, selector in the top two bits (0x84 = exactly MTU
// 2048), as saquery prints them. resv2 is printed as zeros: the parser does
// not keep the reserved bytes 58..63 (a conforming SA sends zeros).
std::string FormatPathRecord(const mad::wire::PathRecord& p);

// "MCMember Record dump:\n" and 15 dotted rows, lower-case hex as saquery.
std::string FormatMcMemberRecord(const mad::wire::McMemberRecord& m);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_SAQUERY_FORMAT_H_
