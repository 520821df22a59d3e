#include "api/c/set_qp_gid.h"

#include <vector>

namespace uscm::c_api {

int SetQpSourceGidIndex(const CmId& id, int table_len,
                        absl::FunctionRef<absl::optional<LiveGid>(int)> read) {
  if (const int kept = id.SourceGidIndex(); kept >= 0) return kept;
  // The id's IP as a GID (RoCE: ::ffff:a.b.c.d, or the IPv6 address), else
  // the port's GID. Of equal GIDs the RoCE v2 entry (a dual-mode port lists
  // each address as v1 and v2; the kernel's rdma_cm uses v2 by default).
  std::vector<mad::Gid> wanted;
  const Address local = id.GetLocalAddr();
  if (local.is_ip()) wanted.push_back(RoceGidOf(local));
  wanted.push_back(id.device()->port().gid);
  for (const mad::Gid& w : wanted) {
    int found = -1;
    for (int i = 0; i < table_len; ++i) {
      absl::optional<LiveGid> g = read(i);
      if (!g.has_value() || g->gid != w) continue;
      if (g->roce_v2) return i;
      if (found < 0) found = i;
    }
    if (found >= 0) return found;
  }
  return 0;
}

}  // namespace uscm::c_api
