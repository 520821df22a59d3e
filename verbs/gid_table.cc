// See gid_table.h.
#include "verbs/gid_table.h"

#include <net/if.h>
#include <string.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "verbs/roce_addressing.h"

namespace uscm::verbs {
namespace {

ssize_t QueryWholeTable(ibv_context* verbs, ibv_gid_entry* entries, size_t max_entries) {
  return ibv_query_gid_table(verbs, entries, max_entries, 0);
}

// The fallback: every index's gids/<i>, then its gid_attrs/types/<i> and
// gid_attrs/ndevs/<i>.
absl::StatusOr<std::vector<GidTableEntry>> ReadFromSysfs(const std::string& ca, int port,
                                                         const std::string& sysfs) {
  absl::StatusOr<std::vector<mad::Gid>> gids = ReadGidTable(ca, port, sysfs);
  if (!gids.ok()) return gids.status();
  std::vector<GidTableEntry> table(gids->size());
  for (size_t i = 0; i < gids->size(); ++i) {
    table[i].gid = (*gids)[i];
    const std::string attrs =
        absl::StrCat(sysfs, "/class/infiniband/", ca, "/ports/", port, "/gid_attrs/");
    std::ifstream f(absl::StrCat(attrs, "types/", i));
    std::string type;
    table[i].not_v2 = f && std::getline(f, type) && type.find("v2") == std::string::npos;
    std::ifstream n(absl::StrCat(attrs, "ndevs/", i));
    std::string ndev;
    if (n && std::getline(n, ndev)) table[i].ifindex = static_cast<int>(if_nametoindex(ndev.c_str()));
  }
  return table;
}

}  // namespace

absl::StatusOr<std::vector<GidTableEntry>> ReadPortGidTable(ibv_context* verbs,
                                                            const std::string& ca, int port,
                                                            size_t max_entries,
                                                            const std::string& sysfs,
                                                            GidTableQuery query) {
  if (query == nullptr) query = QueryWholeTable;
  if (verbs != nullptr && max_entries > 0) {
    std::vector<ibv_gid_entry> all(max_entries);
    const ssize_t n = query(verbs, all.data(), all.size());
    if (n >= 0) {
      std::vector<GidTableEntry> table;
      for (ssize_t i = 0; i < n && static_cast<size_t>(i) < all.size(); ++i) {
        const ibv_gid_entry& e = all[i];
        if (e.port_num != static_cast<uint32_t>(port)) continue;
        if (e.gid_index >= table.size()) table.resize(e.gid_index + 1);
        memcpy(table[e.gid_index].gid.raw.data(), e.gid.raw, 16);
        table[e.gid_index].not_v2 = e.gid_type != IBV_GID_TYPE_ROCE_V2;
        table[e.gid_index].ifindex = static_cast<int>(e.ndev_ifindex);
      }
      return table;
    }
  }
  return ReadFromSysfs(ca, port, sysfs);
}

}  // namespace uscm::verbs
