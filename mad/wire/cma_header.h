// The rdma_cm "IP CM" header (IBA Annex A11; digest §7.3) at the start of REQ
// and SIDR_REQ private data, and the port-space ServiceIDs (digest §7.4).
#ifndef USCM_MAD_WIRE_CMA_HEADER_H_
#define USCM_MAD_WIRE_CMA_HEADER_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace cma {
// IP CM header (offsets from the first private-data byte).
inline constexpr Field kVersion{"CMAVersion", 0, 0, 8};  // A11: major / minor nibbles, both 0
inline constexpr Field kIpVersion{"IPVersion", 1, 0, 4};
inline constexpr Field kReserved1 = Reserved(1, 4, 4);
inline constexpr Field kSrcPort{"SrcPort", 2, 0, 16};
inline constexpr Field kSrcAddr{"SrcAddr", 4, 0, 128};
inline constexpr Field kDstAddr{"DstAddr", 20, 0, 128};

inline constexpr size_t kHeaderBytes = 36;
inline constexpr Field kRows[] = {kVersion, kIpVersion, kReserved1, kSrcPort, kSrcAddr, kDstAddr};
static_assert(CoversExactly(kRows, kHeaderBytes));
}  // namespace cma

// rdma_cm port spaces (enum rdma_ucm_port_space). Unknown values survive.
enum class PortSpace : uint16_t { kIpoib = 0x0002, kTcp = 0x0106, kUdp = 0x0111, kIb = 0x013F };
const char* PortSpaceName(PortSpace ps);  // "RDMA_PS_TCP", ...; nullptr when unknown

// ServiceID = (port space << 16) | port, what Linux rdma_cm sends.
constexpr uint64_t ServiceIdFor(PortSpace ps, uint16_t port) {
  return uint64_t{static_cast<uint16_t>(ps)} << 16 | port;
}
struct ServiceIdParts {
  PortSpace port_space;
  uint16_t port;
  friend bool operator==(const ServiceIdParts&, const ServiceIdParts&) = default;
};
// The inverse of ServiceIdFor; empty when bits 63..32 are set (not an rdma_cm
// port-space ServiceID).
absl::optional<ServiceIdParts> SplitServiceId(uint64_t service_id);

struct CmaHeader {
  // The version byte must be 0 (the passive kernel rejects anything else);
  // the IP version nibble is 4 or 6.
  uint8_t ip_version = 4;
  uint16_t src_port = 0;  // the active side's port; the destination port is in the ServiceID
  // 16-byte slots in network order. IPv4 sits in the last 4 bytes with 12 zero
  // bytes in front (Linux does not use the ::ffff: mapped form).
  std::array<uint8_t, 16> src_addr{};
  std::array<uint8_t, 16> dst_addr{};

  // `src` / `dst` are host-order IPv4 addresses (0x0a000001 = 10.0.0.1).
  static CmaHeader Ipv4(uint32_t src, uint16_t src_port, uint32_t dst);
  static CmaHeader Ipv6(const std::array<uint8_t, 16>& src, uint16_t src_port,
                        const std::array<uint8_t, 16>& dst);
  uint32_t src_ipv4() const;  // the last 4 bytes of the slot, host order
  uint32_t dst_ipv4() const;
  std::string ToString() const;  // "10.0.0.1:5000 -> 10.0.0.2", "[fe80::1]:5000 -> [fe80::2]"

  // Parses the first 36 bytes of REQ / SIDR_REQ private data. Errors:
  // "CMA header truncated: 20 of 36 bytes; DstAddr (bytes 20..35) is incomplete",
  // "CMA header: CMAVersion = 0x10; only version 0 is defined",
  // "CMA header: IPVersion = 5; expected 4 or 6".
  static absl::StatusOr<CmaHeader> Parse(std::span<const uint8_t> private_data);
  // Writes 36 bytes into `out` (which must hold them).
  absl::Status Emit(std::span<uint8_t> out) const;

  friend bool operator==(const CmaHeader&, const CmaHeader&) = default;
};

// Private data = the 36-byte header followed by the user's bytes, for a
// message that carries `capacity` bytes ("REQ user private data is 57 bytes;
// with the 36-byte CMA header REQ carries at most 56").
absl::StatusOr<PrivateData> CmaPrivateData(const char* what, size_t capacity,
                                           const CmaHeader& header,
                                           std::span<const uint8_t> user);
// The user's bytes after the header (empty if the private data is shorter).
std::span<const uint8_t> CmaUserData(std::span<const uint8_t> private_data);

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CMA_HEADER_H_
