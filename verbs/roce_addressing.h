// RoCE addressing for CM MADs: how uscm builds the path on RoCE, where there
// is no SA and no LID.
//
// On RoCE every address is a GID from the port's GID table, and the kernel
// fills that table from the netdev's IP addresses: GID 0 is the fe80:: link-
// local GID from the MAC, and an IPv4 address a.b.c.d appears as the
// IPv4-mapped GID ::ffff:a.b.c.d (RoCE v2). So the path is built from IPs:
//   local GID  = ::ffff:<own IPv4>   (PathFromIps; its table index = the
//                                     source GID index of MADs and the QP AV)
//   remote GID = ::ffff:<peer IPv4>  (no ARP in uscm: the kernel resolves the
//                                     MAC when it builds the address handle)
//   LIDs       = 0xFFFF (permissive, as the kernel's rdma_cm), GRH always.
//
// RoceAddressing wraps any Transport (umad, verbs UD) and fixes what the CM
// core cannot know, on every Send:
//  * the source GID index. The CM fills MadAddress from the path, with
//    sgid_index 0 (the fe80 GID). An IPv4-mapped destination needs an
//    IPv4-mapped source GID, or the kernel refuses the address handle (umad:
//    EIO/EINVAL; libibumad's umad_set_grh does not copy gid_index either). So
//    when the GID at sgid_index is of the other family than the destination,
//    the first GID of the destination's family is used. Replies to a received
//    MAD keep the index the kernel reported (the GID it was addressed to).
//  * optionally, QP1 of a peer redirected to the peer's UD QP (Q_Key): two
//    uscm peers on verbs UD transports address each other's QPs, since the CM
//    core addresses requests to QP1.
#ifndef USCM_VERBS_ROCE_ADDRESSING_H_
#define USCM_VERBS_ROCE_ADDRESSING_H_

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cm/types.h"
#include "mad/gid.h"
#include "mad/transport.h"

namespace uscm::verbs {

// ::ffff:a.b.c.d for an IPv4 address in host order.
mad::Gid Ipv4MappedGid(uint32_t ipv4);
bool IsIpv4Mapped(const mad::Gid& gid);

// The port's GID table from sysfs (<sysfs>/class/infiniband/<device>/ports/
// <port>/gids/<i>), index order; unused entries are zero GIDs. NotFound names
// the device and the fix when the directory is missing.
absl::StatusOr<std::vector<mad::Gid>> ReadGidTable(const std::string& device, int port,
                                                   const std::string& sysfs = "/sys");

// Index of `gid` in `table`; NotFound names the GID and the table's entries.
absl::StatusOr<uint8_t> GidIndex(const std::vector<mad::Gid>& table, const mad::Gid& gid);

// The CM path between two IPv4 addresses on a RoCE port (no SA): IPv4-mapped
// GIDs, permissive LIDs, hop limit 64, the kernel's local ACK timeout (19)
// and packet lifetime (18).
cm::PathInfo RocePathFromIps(uint32_t local_ipv4, uint32_t remote_ipv4);

struct RoceCounters {
  uint64_t sgid_fixed = 0;   // sends whose source GID index was changed
  uint64_t redirected = 0;   // QP1 sends redirected to a peer UD QP
  uint64_t no_sgid = 0;      // no GID of the destination's family: sent unchanged
};

class RoceAddressing final : public mad::ForwardingTransport {
 public:
  // `inner` must outlive this object; `gids` is the port's GID table.
  RoceAddressing(mad::Transport& inner, std::vector<mad::Gid> gids)
      : ForwardingTransport(inner), gids_(std::move(gids)) {}

  // The port's GID table as the kernel has it now (an address added to or
  // removed from the netdev, read again by the owner: api/c's
  // uscm_device_reread_addresses). Safe against a Send on another thread.
  void SetGids(std::vector<mad::Gid> gids);

  // Sends to QP1 at `gid` go to `qpn` with `qkey` instead.
  void RedirectQp1(const mad::Gid& gid, uint32_t qpn, uint32_t qkey);

  // The address `to` becomes (pure; Send uses it).
  mad::MadAddress Rewrite(const mad::MadAddress& to);

  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override;

  const RoceCounters& counters() const { return counters_; }

 private:
  struct Target {
    uint32_t qpn;
    uint32_t qkey;
  };
  std::mutex mu_;  // gids_: SetGids and Rewrite may run on two threads
  std::vector<mad::Gid> gids_;
  absl::flat_hash_map<mad::Gid, Target> redirects_;
  RoceCounters counters_;
};

}  // namespace uscm::verbs

#endif  // USCM_VERBS_ROCE_ADDRESSING_H_
