// A port's GID table with each entry's RoCE type, in one ibv_query_gid_table
// call (one ioctl for the whole device) instead of two sysfs files per index.
#ifndef USCM_VERBS_GID_TABLE_H_
#define USCM_VERBS_GID_TABLE_H_

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "mad/gid.h"

namespace uscm::verbs {

struct GidTableEntry {
  mad::Gid gid;          // zero: an unused index
  bool not_v2 = false;   // the entry is known to be IB / RoCE v1 (not RoCE v2)
};

// ibv_query_gid_table(verbs, entries, max_entries, 0) or a test's stand-in.
using GidTableQuery = ssize_t (*)(ibv_context* verbs, ibv_gid_entry* entries, size_t max_entries);

// Port `port`'s table in index order (unused indexes zero), from one
// ibv_query_gid_table call for the device; `max_entries` bounds the answer
// (the device's port count times the longest gid_tbl_len). When the call
// fails (libibverbs v44 already reads sysfs itself when the kernel has no
// ioctl for it, ENOTTY or EPROTONOSUPPORT; what is left is an error such as
// EOPNOTSUPP or EINVAL), the table comes from sysfs as before:
// <sysfs>/class/infiniband/<ca>/ports/<port>/gids/<i> and gid_attrs/types/<i>
// (a type that cannot be read leaves the entry's not_v2 false: older
// kernels). `query` nullptr: ibv_query_gid_table.
absl::StatusOr<std::vector<GidTableEntry>> ReadPortGidTable(
    ibv_context* verbs, const std::string& ca, int port, size_t max_entries,
    const std::string& sysfs = "/sys", GidTableQuery query = nullptr);

}  // namespace uscm::verbs

#endif  // USCM_VERBS_GID_TABLE_H_
