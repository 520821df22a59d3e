// uscm::Address: an IP or AF_IB address of the rdma_cm-style API
// (api/rdma_cm/rdma_cm.h, which includes this), as sockaddr_in, sockaddr_in6
// and sockaddr_ib are for librdmacm. Defined in rdma_cm.cc.
#ifndef USCM_API_RDMA_CM_ADDRESS_H_
#define USCM_API_RDMA_CM_ADDRESS_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mad/gid.h"

namespace uscm {

// sockaddr_in / sockaddr_in6 / sockaddr_ib in one value.
struct Address {
  enum class Family : uint8_t { kUnspec, kIpv4, kIpv6, kIb };
  Family family = Family::kUnspec;
  // IP: 16 bytes in network order; IPv4 in the last 4 (as the CMA header).
  std::array<uint8_t, 16> ip{};
  uint16_t port = 0;  // IP port (host order)
  // IPv6: the interface index of a link-local address (sin6_scope_id), as
  // the kernel's rdma_cm needs it to bind one (cma_check_linklocal).
  uint32_t scope_id = 0;
  // IPv6: sin6_flowinfo (host order). A source's low 20 bits, when not 0,
  // are the RoCE flow label (RoceFlowLabel).
  uint32_t flowinfo = 0;
  // AF_IB: the port's GID (and LID, since the simulated and real SA accept
  // both), the ServiceID (+ mask, for listen) and the P_Key.
  mad::Gid gid;
  uint16_t lid = 0;
  uint64_t service_id = 0;
  uint64_t service_mask = ~uint64_t{0};
  uint16_t pkey = 0xFFFF;

  static Address Ipv4(uint32_t host_order, uint16_t port = 0);
  static Address Ipv6(const std::array<uint8_t, 16>& ip, uint16_t port = 0);
  static Address Ib(const mad::Gid& gid, uint16_t lid, uint64_t service_id,
                    uint16_t pkey = 0xFFFF);
  // "10.0.0.1", "10.0.0.1:7471", "[fe80::1]:7471", "fe80::1".
  static absl::StatusOr<Address> Parse(absl::string_view text);

  bool is_ip() const { return family == Family::kIpv4 || family == Family::kIpv6; }
  // INADDR_ANY / in6addr_any (IP), or an all-zero GID (IB).
  bool is_any() const;
  // 127.0.0.0/8 or ::1.
  bool is_loopback() const;
  // IPv6 fe80::/10.
  bool is_link_local() const;
  bool is_multicast() const;
  uint32_t ipv4() const;  // host order
  std::string ToString() const;
  // Same address, ignoring the port / ServiceID.
  bool SameHost(const Address& o) const;
};

}  // namespace uscm

#endif  // USCM_API_RDMA_CM_ADDRESS_H_
