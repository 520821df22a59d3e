// The address handle a UD id's ESTABLISHED event carries (param.ud.ah_attr,
// the SIDR reply) and the AV of rdma_init_qp_attr(RTR), completed as the
// kernel fills them (ib_init_ah_attr_from_path
// then ib_copy_ah_attr_to_user): port_num is the id's port and, on RoCE, the
// AH is global (a GRH on every packet) with the source GID index of the id's
// own address. uscm's event has neither: without them udaddy's ibv_create_ah
// fails on RoCE ("udaddy: failure creating address handle"), and UCX, which
// reads the RTR AV's sgid_index for the GID type and family of the device
// address, moved its QP to RTR with the fe80:: GID (EINVAL).
#ifndef USCM_API_LIBRDMACM_UD_AH_H_
#define USCM_API_LIBRDMACM_UD_AH_H_

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstdint>
#include <vector>

namespace uscm::librdmacm {

// One entry of a port's GID table.
struct GidEntry {
  ibv_gid gid;
  bool roce_v2 = false;
  int ifindex = 0;  // the entry's netdev (verbs::GidTableEntry); 0: not known
};

// The GID of an IP address as the kernel puts it in a RoCE GID table:
// ::ffff:a.b.c.d for IPv4, the address itself for IPv6. False for other
// families (AF_IB, NULL).
bool GidOfAddress(const sockaddr* addr, ibv_gid* out);

// Index of `gid` in `table`, its RoCE v2 entry when the port lists it twice
// (v1 and v2, as the kernel's rdma_cm uses v2); -1 when absent. `ifindex`
// not 0 (a link-local address's sin6_scope_id): the entry of that netdev
// when the port has one, as the kernel's rdma_find_gid_by_port with the id's
// bound netdev, since one fe80:: address is on a netdev and its VLANs alike;
// else the first as without it.
int GidIndexIn(const std::vector<GidEntry>& table, const ibv_gid& gid, int ifindex = 0);

// Completes `ah` for an id on (verbs, port_num) whose source address is
// `src`: port_num always; on an Ethernet port is_global = 1 and
// grh.sgid_index = `own_index` when not negative (uscm's entry of the id,
// uscm_source_gid_index: the address on the id's netdev, which the address
// alone does not name when it is on two), else GidIndexIn(the port's table,
// GidOfAddress(src)) (left as it is when the address has no GID there).
void CompleteAh(ibv_context* verbs, uint8_t port_num, const sockaddr* src, ibv_ah_attr* ah,
                int own_index = -1);

// A port's link layer and GID table, as CompleteAh reads them: once per
// (context, port), and again when the device reported a GID change since
// (gid_watch.h: IBV_EVENT_GID_CHANGE on a context of the library's own) or
// the address's GID is not in the table read last.
struct PortGids {
  bool ethernet = false;
  int active_mtu = 0;  // enum ibv_mtu; 0: not known
  std::vector<GidEntry> table;
  bool read = true;  // false: the port could not be queried (not kept)
};
// Tests give a port without a device (verbs NULL) a table; nullptr restores
// ibv_query_port / ibv_query_gid(_ex). Either way the kept tables are dropped.
using PortGidsReader = PortGids (*)(ibv_context* verbs, uint8_t port_num);
void SetPortGidsReaderForTesting(PortGidsReader reader);
// Tests: the generation a kept table is compared with (gid_watch.h's
// GidTableGeneration; nullptr restores it). The kept tables are dropped.
using GidGenerationSource = uint64_t (*)(ibv_context* verbs);
void SetGidGenerationForTesting(GidGenerationSource source);
// The source GID index of an id on (verbs, port_num) whose address is `src`
// (its RoCE v2 entry, as CompleteAh's) and the port's active MTU, from the
// kept table: what uscm_set_qp queries the port and its GID entries for on
// every QP; `own_index`, when not negative, instead of the table's index
// (as CompleteAh). False on InfiniBand, for an address not in the table
// (after a re-read) or an MTU not known.
bool KeptSourceGid(ibv_context* verbs, uint8_t port_num, const sockaddr* src, uint8_t* sgid_index,
                   int* active_mtu, int own_index = -1);
// Drops the kept tables of `verbs`'s ports (its device is removed and about
// to be closed: devices.h CloseIfUnused; the pointer may come back for
// another device).
void ForgetPortGids(ibv_context* verbs);
// How many times a port's table was read (the reader called), for tests.
uint64_t PortGidReads();

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_UD_AH_H_
