#include "api/librdmacm/ud_ah.h"

#include <netinet/in.h>
#include <string.h>

#include <map>
#include <mutex>
#include <utility>

#include "api/librdmacm/devices.h"
#include "absl/status/statusor.h"
#include "api/librdmacm/fork_locks.h"
#include "api/librdmacm/gid_watch.h"
#include "verbs/gid_table.h"

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

int GidIndexIn(const std::vector<GidEntry>& table, const ibv_gid& gid, int ifindex) {
  // Best first: the netdev's v2 entry, its other entry, any v2 entry, any entry.
  int found[4] = {-1, -1, -1, -1};
  for (size_t i = 0; i < table.size(); ++i) {
    if (memcmp(table[i].gid.raw, gid.raw, 16) != 0) continue;
    const int rank = (ifindex != 0 && table[i].ifindex == ifindex ? 0 : 2) + (table[i].roce_v2 ? 0 : 1);
    if (found[rank] < 0) found[rank] = static_cast<int>(i);
  }
  for (int i : found) {
    if (i >= 0) return i;
  }
  return -1;
}

namespace {

// An IPv6 address's interface (sin6_scope_id: a link-local one's); 0 for IPv4.
int ScopeOf(const sockaddr* addr) {
  if (addr == nullptr || addr->sa_family != AF_INET6) return 0;
  return static_cast<int>(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_scope_id);
}

}  // namespace

namespace {

// The whole table in one call (verbs/gid_table.h ReadPortGidTable: one
// ibv_query_gid_table ioctl, sysfs when it fails), not two calls per entry:
// rxe's table has 1,024 entries and cmtime calls rdma_init_qp_attr(RTR) once
// per connection on each side, so a per-entry loop (~2,000 calls each) burned
// the CPU the progress threads needed (cmtime -c 1000 under TCG).
PortGids ReadPortGids(ibv_context* verbs, uint8_t port_num) {
  PortGids out;
  ibv_port_attr pa;
  if (verbs == nullptr || ibv_query_port(verbs, port_num, &pa) != 0) {
    out.read = false;
    return out;
  }
  out.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  out.active_mtu = pa.active_mtu;
  if (!out.ethernet) return out;
  ibv_device_attr da;
  size_t max_entries = 0;
  if (pa.gid_tbl_len > 0 && QueryDeviceOnce(verbs, &da) == 0) {
    max_entries = static_cast<size_t>(pa.gid_tbl_len) * da.phys_port_cnt;
  }
  absl::StatusOr<std::vector<verbs::GidTableEntry>> table =
      verbs::ReadPortGidTable(verbs, ibv_get_device_name(verbs->device), port_num, max_entries);
  if (!table.ok()) return out;
  out.table.resize(table->size());
  for (size_t i = 0; i < table->size(); ++i) {
    memcpy(out.table[i].gid.raw, (*table)[i].gid.raw.data(), 16);
    out.table[i].roce_v2 = !(*table)[i].not_v2;
    out.table[i].ifindex = (*table)[i].ifindex;
  }
  return out;
}

// Each port's table as last read, per (context, port), with the generation
// of the device's tables taken before the read: the drop-in's contexts stay
// open for the process (devices.h), a removed device's until ForgetPortGids
// dropped its tables, so a key is never reused. librdmacm
// reads nothing here (the kernel's rdma_init_qp_attr answers from the id's
// own sgid_attr, taken at address resolution); reading the port, the device
// and the table per call cost 3 ioctls per end and connection.
struct KeptPort {
  PortGids gids;
  uint64_t generation = 0;
};

struct GidCache {
  std::mutex mu;
  PortGidsReader reader = ReadPortGids;
  GidGenerationSource generation = GidTableGeneration;
  std::map<std::pair<ibv_context*, uint8_t>, KeptPort> ports;
  uint64_t reads = 0;
};

GidCache& TheGidCache() {
  static auto* cache = new GidCache;
  return *cache;
}

// The index of `gid` (NULL: none, the link layer alone) in the port's table,
// or -1; *ethernet: the port's link layer. The table is read at the port's
// first lookup, again when the device's GID tables changed since it was read
// (the generation, gid_watch.h: a GID the kernel removed and added back at
// another index, whose kept index may now hold another address's GID), and
// again when `gid` is not in it (an address added since, before the thread
// counted its event). The generation is taken before the read, so a change
// the read did not see is seen at the next lookup. Not followed (no context
// of our own, kGidsNotFollowed): read at every lookup. A port's link layer
// never changes.
int LookupGidIndex(ibv_context* verbs, uint8_t port_num, const ibv_gid* gid, int ifindex,
                   bool* ethernet, int* active_mtu = nullptr) {
  GidCache& c = TheGidCache();
  std::lock_guard<std::mutex> lock(c.mu);
  const auto key = std::make_pair(verbs, port_num);
  const uint64_t generation = c.generation(verbs);
  auto it = c.ports.find(key);
  if (it == c.ports.end() || generation == kGidsNotFollowed ||
      it->second.generation != generation ||
      (gid != nullptr && it->second.gids.ethernet && GidIndexIn(it->second.gids.table, *gid) < 0)) {
    ++c.reads;
    it = c.ports.insert_or_assign(key, KeptPort{c.reader(verbs, port_num), generation}).first;
  }
  const PortGids& port = it->second.gids;
  *ethernet = port.ethernet;
  if (active_mtu != nullptr) *active_mtu = port.active_mtu;
  const int index = gid == nullptr ? -1 : GidIndexIn(port.table, *gid, ifindex);
  if (!port.read) c.ports.erase(it);  // a failed query is asked again next time
  return index;
}

}  // namespace

std::mutex& GidCacheLock() { return TheGidCache().mu; }

void SetPortGidsReaderForTesting(PortGidsReader reader) {
  GidCache& c = TheGidCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.reader = reader != nullptr ? reader : ReadPortGids;
  c.ports.clear();
}

void SetGidGenerationForTesting(GidGenerationSource source) {
  GidCache& c = TheGidCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.generation = source != nullptr ? source : GidTableGeneration;
  c.ports.clear();
}

void ForgetPortGids(ibv_context* verbs) {
  GidCache& c = TheGidCache();
  std::lock_guard<std::mutex> lock(c.mu);
  std::erase_if(c.ports, [&](const auto& kept) { return kept.first.first == verbs; });
}

uint64_t PortGidReads() {
  GidCache& c = TheGidCache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.reads;
}

bool KeptSourceGid(ibv_context* verbs, uint8_t port_num, const sockaddr* src, uint8_t* sgid_index,
                   int* active_mtu, int own_index) {
  ibv_gid wanted;
  if (!GidOfAddress(src, &wanted)) return false;
  bool ethernet = false;
  int mtu = 0;
  const int index = LookupGidIndex(verbs, port_num, &wanted, ScopeOf(src), &ethernet, &mtu);
  if (!ethernet || index < 0 || index > 255 || mtu < IBV_MTU_256 || mtu > IBV_MTU_4096) {
    return false;
  }
  *sgid_index = static_cast<uint8_t>(own_index >= 0 && own_index <= 255 ? own_index : index);
  *active_mtu = mtu;
  return true;
}

void CompleteAh(ibv_context* verbs, uint8_t port_num, const sockaddr* src, ibv_ah_attr* ah,
                int own_index) {
  ah->port_num = port_num;
  ibv_gid wanted;
  const bool has_gid = GidOfAddress(src, &wanted);
  bool ethernet = false;
  const int index =
      LookupGidIndex(verbs, port_num, has_gid ? &wanted : nullptr, ScopeOf(src), &ethernet);
  if (!ethernet) return;
  ah->is_global = 1;
  if (own_index >= 0 && own_index <= 255) {
    ah->grh.sgid_index = static_cast<uint8_t>(own_index);
  } else if (index >= 0) {
    ah->grh.sgid_index = static_cast<uint8_t>(index);
  }
}

}  // namespace uscm::librdmacm
