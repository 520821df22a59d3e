#include "api/librdmacm/ud_ah.h"

#include <netinet/in.h>
#include <string.h>

namespace uscm::librdmacm {

bool GidOfAddress(const sockaddr* addr, ibv_gid* out) {
  if (addr == nullptr) return false;
  memset(out, 0, sizeof(*out));
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    out->raw[10] = out->raw[11] = 0xFF;
    memcpy(&out->raw[12], &in->sin_addr, 4);
    return true;
  }
  if (addr->sa_family == AF_INET6) {
    memcpy(out->raw, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, 16);
    return true;
  }
  return false;
}

int GidIndexIn(const std::vector<GidEntry>& table, const ibv_gid& gid) {
  int found = -1;
  for (size_t i = 0; i < table.size(); ++i) {
    if (memcmp(table[i].gid.raw, gid.raw, 16) != 0) continue;
    if (table[i].roce_v2) return static_cast<int>(i);
    if (found < 0) found = static_cast<int>(i);
  }
  return found;
}

namespace {

// The whole table in one call (ibv_query_gid_table: one ioctl), not two
// calls per entry: rxe's table has 1,024 entries and cmtime calls
// rdma_init_qp_attr(RTR) once per connection on each side, so the per-entry
// loop (~2,000 calls each, kept for a kernel without the ioctl) burned the
// CPU the progress threads needed (cmtime -c 1000 under TCG).
PortGids ReadPortGids(ibv_context* verbs, uint8_t port_num) {
  PortGids out;
  ibv_port_attr pa;
  if (verbs == nullptr || ibv_query_port(verbs, port_num, &pa) != 0) return out;
  out.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (!out.ethernet) return out;
  ibv_device_attr da;
  if (ibv_query_device(verbs, &da) == 0 && pa.gid_tbl_len > 0) {
    std::vector<ibv_gid_entry> all(static_cast<size_t>(pa.gid_tbl_len) * da.phys_port_cnt);
    const ssize_t n = ibv_query_gid_table(verbs, all.data(), all.size(), 0);
    if (n >= 0) {
      for (ssize_t i = 0; i < n; ++i) {
        const ibv_gid_entry& e = all[i];
        if (e.port_num != port_num) continue;
        if (e.gid_index >= out.table.size()) out.table.resize(e.gid_index + 1);
        out.table[e.gid_index] = GidEntry{e.gid, e.gid_type == IBV_GID_TYPE_ROCE_V2};
      }
      return out;
    }
  }
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    GidEntry e{};
    if (ibv_query_gid(verbs, port_num, i, &e.gid) != 0) break;
    ibv_gid_entry ex{};
    e.roce_v2 = ibv_query_gid_ex(verbs, port_num, i, &ex, 0) == 0 &&
                ex.gid_type == IBV_GID_TYPE_ROCE_V2;
    out.table.push_back(e);
  }
  return out;
}

PortGidsReader g_reader = ReadPortGids;

}  // namespace

void SetPortGidsReaderForTesting(PortGidsReader reader) {
  g_reader = reader != nullptr ? reader : ReadPortGids;
}

void CompleteAh(ibv_context* verbs, uint8_t port_num, const sockaddr* src, ibv_ah_attr* ah) {
  ah->port_num = port_num;
  const PortGids port = g_reader(verbs, port_num);
  if (!port.ethernet) return;
  ah->is_global = 1;
  ibv_gid wanted;
  if (!GidOfAddress(src, &wanted)) return;
  const int index = GidIndexIn(port.table, wanted);
  if (index >= 0) ah->grh.sgid_index = static_cast<uint8_t>(index);
}

}  // namespace uscm::librdmacm
