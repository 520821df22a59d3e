// Byte layouts shared by PcapWriter and PcapReader.
//
// A classic pcap file (nanosecond variant, magic 0xA1B23C4D) whose records
// carry one native IB packet each, framed in one of two ways tshark 4.0
// decodes without preferences:
//  - kExportedPdu (LINKTYPE_WIRESHARK_UPPER_PDU 252): exported-PDU tags
//    (big-endian type, length), tag 12 "dissector name" = "infiniband" padded
//    with NULs to 4 bytes, the end tag 0, then the packet.
//  - kErf (LINKTYPE_ERF 197): a 16-byte ERF record header, type 21
//    (InfiniBand), then the packet. This is what ibdump writes. Timestamp:
//    little-endian 32.32 fixed-point seconds; rlen, lctr, wlen big-endian.
#ifndef USCM_MAD_CAPTURE_PCAP_FORMAT_H_
#define USCM_MAD_CAPTURE_PCAP_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace uscm::mad::capture {

enum class CaptureLinkType : uint32_t {
  kExportedPdu = 252,  // the default
  kErf = 197,
  // Read only: LINKTYPE_ETHERNET, e.g. a RoCE NIC or qemu filter-dump capture.
  // Records hold whole Ethernet frames; roce_frame.h finds the IB packet.
  kEthernet = 1,
};

inline constexpr uint32_t kPcapMagicMicros = 0xA1B2C3D4;
inline constexpr uint32_t kPcapMagicNanos = 0xA1B23C4D;
inline constexpr size_t kPcapFileHeaderSize = 24;
inline constexpr size_t kPcapRecordHeaderSize = 16;
inline constexpr uint32_t kPcapSnapLen = 65535;
// A record longer than this is garbage, not a packet (tcpdump uses 256 KiB).
inline constexpr uint32_t kPcapMaxRecord = 262144;

inline constexpr uint16_t kExpPduTagEnd = 0;
inline constexpr uint16_t kExpPduTagDissectorName = 12;
inline constexpr char kExpPduDissector[] = "infiniband";

inline constexpr size_t kErfHeaderSize = 16;
inline constexpr uint8_t kErfTypeInfiniBand = 21;
inline constexpr uint8_t kErfTypeMask = 0x7F;       // bit 7: extension headers follow
inline constexpr uint8_t kErfFlagVaryingLength = 0x04;

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_PCAP_FORMAT_H_
