// One MAD as a native InfiniBand UD packet, the way a link-level capture
// (ibdump, an ERF InfiniBand record) shows it:
//
//   LRH(8) | [GRH(40)] | BTH(12) | DETH(8) | MAD | pad(0..3) | ICRC(4) | VCRC(2)
//
// BTH opcode is always 0x64 (UD SEND_ONLY). LRH PktLen counts 4-byte words
// from the LRH through the ICRC (the VCRC is not counted). Both CRCs are
// computed (see ib_crc.h for what is and is not checked by other tools).
#ifndef USCM_MAD_CAPTURE_IB_PACKET_H_
#define USCM_MAD_CAPTURE_IB_PACKET_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/gid.h"
#include "mad/transport.h"

namespace uscm::mad::capture {

inline constexpr size_t kLrhSize = 8;
inline constexpr size_t kGrhSize = 40;
inline constexpr size_t kBthSize = 12;
inline constexpr size_t kDethSize = 8;
inline constexpr size_t kIcrcSize = 4;
inline constexpr size_t kVcrcSize = 2;
inline constexpr uint8_t kOpcodeUdSendOnly = 0x64;
inline constexpr uint8_t kGrhNextHeaderIba = 0x1B;
inline constexpr uint8_t kLnhIba = 2;        // LRH LNH: BTH follows
inline constexpr uint8_t kLnhIbaGrh = 3;     // LRH LNH: GRH, then BTH
inline constexpr size_t kMaxPktLenWords = 0x7FF;  // 11-bit LRH PktLen

struct GrhFields {
  Gid sgid;
  Gid dgid;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;  // 20 bits
  uint8_t hop_limit = 64;

  friend bool operator==(const GrhFields&, const GrhFields&) = default;
};

// Every header field of a UD packet that we let the caller choose. Fields
// not listed are written as zero (LVer, TVer, SE, M, A, reserved bits).
struct UdHeaders {
  uint8_t vl = 0;              // 4 bits
  uint8_t sl = 0;              // 4 bits
  uint16_t dlid = 0;
  uint16_t slid = 0;
  uint16_t pkey = 0xFFFF;
  uint32_t dest_qpn = kQp1;    // 24 bits
  uint32_t psn = 0;            // 24 bits
  uint32_t qkey = kQp1Qkey;
  uint32_t src_qpn = kQp1;     // 24 bits
  absl::optional<GrhFields> grh;

  friend bool operator==(const UdHeaders&, const UdHeaders&) = default;
};

// Bytes before the MAD: LRH, GRH if present, BTH, DETH.
size_t HeadersSize(const UdHeaders& headers);

// Largest payload one packet can carry (PktLen is 11 bits of words).
size_t MaxPayloadSize(const UdHeaders& headers);

// Wraps `mad` (normally 256 bytes; any non-empty length that fits PktLen,
// padded to 4 bytes with PadCnt). Errors name the field that is out of range.
absl::StatusOr<std::vector<uint8_t>> WrapMad(const UdHeaders& headers,
                                             std::span<const uint8_t> mad);

// ICRC over a packet laid out as above, computed over bytes
// [0, icrc_offset): LRH as eight 0xFF bytes, GRH TClass/FlowLabel/HopLmt and
// BTH Resv8a masked to 1s. `packet` must hold at least the headers named by
// its own LRH LNH; the caller checks that.
uint32_t ComputeIcrc(std::span<const uint8_t> packet, size_t icrc_offset);

struct ParsedUdPacket {
  UdHeaders headers;
  std::span<const uint8_t> mad;  // points into the parsed buffer
  size_t mad_offset = 0;         // == HeadersSize(headers)
  uint8_t pad_count = 0;
  uint32_t icrc = 0;             // as found in the packet
  bool icrc_ok = false;          // equals ComputeIcrc
  bool has_vcrc = false;         // some captures end at the ICRC
  uint16_t vcrc = 0;
  bool vcrc_ok = false;
};

// The inverse of WrapMad. Rejects anything that is not a well-formed UD
// SEND_ONLY packet, naming the field and offending value. CRC mismatches are
// reported in icrc_ok / vcrc_ok, not as errors: a capture tool may zero them.
absl::StatusOr<ParsedUdPacket> ParseUdPacket(std::span<const uint8_t> packet);

// Headers for a MAD `local` sends to `to` from local QP `local_qpn`. The SGID
// is the port's GID index 0 (LocalPort knows no other), the SLID is the port
// LID plus `to.path_bits`, the P_Key is pkeys[to.pkey_index] (0xFFFF when
// the table does not have that index, e.g. in simulation).
UdHeaders OutgoingHeaders(const LocalPort& local, const MadAddress& to,
                          uint32_t local_qpn = kQp1);

// Headers for a MAD `local` received from `from` on local QP `local_qpn`.
UdHeaders IncomingHeaders(const LocalPort& local, const MadAddress& from,
                          uint32_t local_qpn = kQp1);

// The sender's address as a receiver would report it (lid = SLID, gid = SGID).
MadAddress SourceAddress(const UdHeaders& headers);

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_IB_PACKET_H_
