// The source GID index uscm_set_qp gives the QP of an id (api/c/uscm_qp.cc),
// apart from libibverbs so a test can hand it a GID table.
#ifndef USCM_API_C_SET_QP_GID_H_
#define USCM_API_C_SET_QP_GID_H_

#include "absl/functional/function_ref.h"
#include "absl/types/optional.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/gid.h"

namespace uscm::c_api {

// One entry of the port's GID table as libibverbs reads it now.
struct LiveGid {
  mad::Gid gid;
  bool roce_v2 = false;  // ibv_query_gid_ex's gid_type is IBV_GID_TYPE_ROCE_V2
};

// On RoCE, the entry the id's REQ and MADs leave from (CmId::SourceGidIndex:
// its address's entry on its netdev, the one its scope_id names, the route's
// or the request's, as the drop-in's QP takes (uscm_source_gid_index), so a
// VLAN's link-local address gets the VLAN's entry); else, or when
// the device's kept table lacks the address, the first of `table_len` live
// entries (`read(i)`; nullopt: none at i) holding the id's IP as a GID, the
// RoCE v2 one of equal GIDs, then the port's GID; 0 when none has either.
int SetQpSourceGidIndex(const CmId& id, int table_len,
                        absl::FunctionRef<absl::optional<LiveGid>(int)> read);

}  // namespace uscm::c_api

#endif  // USCM_API_C_SET_QP_GID_H_
