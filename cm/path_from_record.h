// The CM's view of a path an SA PathRecord describes (SGID = this side), with
// rdma_cm's choices: routed when the hop limit is above 1, LocalAckTimeout =
// PacketLifeTime + 1. Used for the SA's answer to a route query (the
// rdma_cm-style API, the tools) and for the C API's IB_PATH option.
#ifndef USCM_CM_PATH_FROM_RECORD_H_
#define USCM_CM_PATH_FROM_RECORD_H_

#include "cm/types.h"
#include "mad/wire/path_record.h"

namespace uscm::cm {

PathInfo PathFromRecord(const mad::wire::PathRecord& r);

}  // namespace uscm::cm

#endif  // USCM_CM_PATH_FROM_RECORD_H_
