// RoCE v2 framing as a capture on the Ethernet link shows it (pcap link type
// 1: a NIC capture, or qemu's filter-dump of a VM's NIC):
//   Ethernet II -> IPv4 or IPv6 -> UDP, destination port 4791 -> BTH (12)
//   -> [DETH (8) on UD opcodes] -> payload -> ICRC (4).
// For QP1 traffic the payload is the 256-byte MAD. Frames that are not
// RoCE v2 (ARP, other UDP ports) are NotFound; a RoCE v2 frame cut short is
// InvalidArgument naming the header and the sizes.
#ifndef USCM_MAD_CAPTURE_ROCE_FRAME_H_
#define USCM_MAD_CAPTURE_ROCE_FRAME_H_

#include <array>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"

namespace uscm::mad::capture {

inline constexpr uint16_t kRoceV2UdpPort = 4791;
inline constexpr uint8_t kBthOpcodeUdSendOnly = 0x64;
inline constexpr uint8_t kBthOpcodeUdSendOnlyImm = 0x65;

struct RoceV2Frame {
  std::array<uint8_t, 6> dst_mac{};
  std::array<uint8_t, 6> src_mac{};
  bool ipv6 = false;
  std::array<uint8_t, 16> src_ip{};  // IPv4 in the last 4 bytes, as ::ffff:a.b.c.d
  std::array<uint8_t, 16> dst_ip{};
  uint8_t traffic_class = 0;  // IPv4 DSCP/ECN byte or IPv6 traffic class
  uint8_t hop_limit = 0;      // TTL
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  // BTH
  uint8_t opcode = 0;
  bool solicited_event = false;
  uint16_t pkey = 0;
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_request = false;
  uint32_t psn = 0;  // 24 bits
  // DETH, UD opcodes only
  bool has_deth = false;
  uint32_t qkey = 0;
  uint32_t src_qp = 0;
  uint32_t icrc = 0;
  std::span<const uint8_t> payload;  // views into the frame passed to Parse
};

absl::StatusOr<RoceV2Frame> ParseRoceV2Frame(std::span<const uint8_t> frame);

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_ROCE_FRAME_H_
