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
  // RoCE: the entry's netdev (ibv_gid_entry.ndev_ifindex; sysfs
  // gid_attrs/ndevs/<i>), 0 when not known. One address can have an entry per
  // netdev: rxe and mlx5 list a VLAN's addresses (eth0.100 on eth0) beside the
  // base netdev's, and the link-local fe80:: of one MAC is the same on both.
  int ifindex = 0;
};

// ibv_query_gid_table(verbs, entries, max_entries, 0) or a test's stand-in.
using GidTableQuery = ssize_t (*)(ibv_context* verbs, ibv_gid_entry* entries, size_t max_entries);

// Port `port`'s table in index order (unused indexes zero), from one
// ibv_query_gid_table call for the device; `max_entries` bounds the answer
// (the device's port count times the longest gid_tbl_len). When the call
// fails (libibverbs v44 already reads sysfs itself when the kernel has no
// ioctl for it, ENOTTY or EPROTONOSUPPORT; what is left is an error such as
// EOPNOTSUPP or EINVAL), the table comes from sysfs as before:
// <sysfs>/class/infiniband/<ca>/ports/<port>/gids/<i>, gid_attrs/types/<i>
// (a type that cannot be read leaves the entry's not_v2 false: older
// kernels) and gid_attrs/ndevs/<i> (the netdev's name, looked up in this
// network namespace; ifindex 0 when it cannot be read). `query` nullptr: ibv_query_gid_table.
absl::StatusOr<std::vector<GidTableEntry>> ReadPortGidTable(
    ibv_context* verbs, const std::string& ca, int port, size_t max_entries,
    const std::string& sysfs = "/sys", GidTableQuery query = nullptr);

}  // namespace uscm::verbs

#endif  // USCM_VERBS_GID_TABLE_H_
