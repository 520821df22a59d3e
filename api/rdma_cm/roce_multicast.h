// Multicast on a RoCE port, where there is no SA: what the kernel's rdma_cm
// does in cma_iboe_join_multicast (drivers/infiniband/core/cma.c), as values.
//
//   MGID     IPv4 a.b.c.d: RoCE v2 ::ffff:a.b.c.d, RoCE v1 ff0e::ffff:a.b.c.d
//            (cma_iboe_set_mgid); IPv6: the address (v1 only: the kernel
//            refuses IPv6 groups on a RoCE v2 port with ENOTSUPP); 0.0.0.0 /
//            :: are refused (EINVAL).
//   IP group a full member of an IPv4 group on RoCE v2 joins it on the netdev
//            (cma_igmp_send: IGMP); a send-only member does not.
//   AH       (cma_make_mc_event / ib_init_ah_from_mcmember) GRH to the MGID,
//            DLID 0, SL 0, flow label 0, traffic class 0, hop limit 64 for
//            IPv4 on RoCE v2 (else 1), static rate IB_RATE_PORT_CURRENT (0, as
//            Debian 12's 6.1), the source GID index of the id's own IP.
//   QPN / Q_Key  0xFFFFFF and the id's Q_Key, given at the join
//            (cma_set_default_qkey): RDMA_UDP_QKEY for RDMA_PS_UDP and a UD
//            RDMA_PS_IB id.
#ifndef USCM_API_RDMA_CM_ROCE_MULTICAST_H_
#define USCM_API_RDMA_CM_ROCE_MULTICAST_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/gid.h"

namespace uscm::cm {

// The multicast GID of an IP group (16 bytes of the address in network
// order; IPv4 in the last 4), or InvalidArgument (0.0.0.0, ::) /
// Unimplemented (IPv6 on RoCE v2: the kernel's ENOTSUPP).
absl::StatusOr<mad::Gid> RoceMgid(bool ipv4, const std::array<uint8_t, 16>& ip, bool roce_v2);

// The GRH hop limit of a RoCE group's AH: 64 (IPV6_DEFAULT_HOPLIMIT) for
// IPv4 on RoCE v2, 1 otherwise.
inline uint8_t RoceMcHopLimit(bool ipv4, bool roce_v2) { return ipv4 && roce_v2 ? 64 : 1; }

// A membership of the host in an IP multicast group on a netdev; dropped
// when destroyed.
class IpMembership {
 public:
  virtual ~IpMembership() = default;
};

// Joins IP groups on the port's netdev (IGMP / MLD are then the kernel's).
class IpMulticast {
 public:
  virtual ~IpMulticast() = default;
  // `group` and `local` are 16-byte addresses (IPv4 in the last 4).
  virtual absl::StatusOr<std::unique_ptr<IpMembership>> Join(
      bool ipv4, const std::array<uint8_t, 16>& group, const std::array<uint8_t, 16>& local) = 0;
};

// The real one: a UDP socket per membership with IP_ADD_MEMBERSHIP on the
// interface that holds `local` (ip_mreqn), kept open while joined; closing
// it leaves the group (the kernel sends the IGMP leave).
class NetdevIpMulticast final : public IpMulticast {
 public:
  absl::StatusOr<std::unique_ptr<IpMembership>> Join(
      bool ipv4, const std::array<uint8_t, 16>& group,
      const std::array<uint8_t, 16>& local) override;
};

}  // namespace uscm::cm

#endif  // USCM_API_RDMA_CM_ROCE_MULTICAST_H_
