// One captured frame, whatever link it was captured on, to the MAD it
// carries (if any): what `uscm dump` prints for a record of a pcap / pcapng
// file or of a live libpcap capture.
//
// Link types (pcap LINKTYPE_*):
//   1   Ethernet: RoCE v2 (IPv4 or IPv6, UDP port 4791) and RoCE v1
//       (EtherType 0x8915: GRH, BTH, DETH), behind any number of 802.1Q /
//       802.1ad VLAN tags;
//   113 Linux cooked capture (`tcpdump -i any`), same protocols;
//   197 ERF (ibdump) and 252 exported PDU (ours): native IB packets, LRH first.
// A MAD is a UD SEND (opcode 0x64/0x65) whose payload is 256 bytes of
// management-class base version 1. Every other well-formed frame (RC data,
// ACKs, ARP, TCP, IPoIB) is "not a MAD" with a short kind for the summary
// ("RoCE v2 RC", "ARP", "IPv4 TCP"); a frame that should carry a MAD but is
// cut short or malformed is an error naming what is wrong.
#ifndef USCM_MAD_CAPTURE_FRAME_DECODE_H_
#define USCM_MAD_CAPTURE_FRAME_DECODE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"

namespace uscm::mad::capture {

inline constexpr uint32_t kLinkTypeEthernet = 1;
inline constexpr uint32_t kLinkTypeLinuxSll = 113;
inline constexpr uint32_t kLinkTypeErf = 197;
inline constexpr uint32_t kLinkTypeExportedPdu = 252;

struct DecodedFrame {
  bool is_mad = false;
  // Not a MAD: what it is, for the summary ("RoCE v2 RC", "ARP", ...), and a
  // longer description for --verbose ("RoCE v2 RC opcode 0x04 to QP 0x000011").
  std::string kind;
  std::string detail;
  // A MAD: the endpoints as the framing names them (LIDs for native IB, IP
  // addresses for RoCE v2, GIDs for RoCE v1), the destination QP and the MAD.
  std::string src, dst;
  uint32_t dest_qp = 0;
  std::string framing;            // "IB", "RoCE v2", "RoCE v1"
  std::vector<uint8_t> mad;       // 256 bytes
  absl::optional<bool> icrc_ok;   // native IB only (RoCE's ICRC is not checked)
};

absl::StatusOr<DecodedFrame> DecodeFrame(uint32_t link_type, std::span<const uint8_t> data);

// Whether DecodeFrame knows `link_type`.
bool IsSupportedLinkType(uint32_t link_type);

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_FRAME_DECODE_H_
