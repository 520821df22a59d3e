// Test-only: captured frames built byte by byte (RoCE v2 over IPv4 / IPv6
// with VLAN tags, RoCE v1, ARP, native IB in exported-PDU and ERF records)
// and minimal pcap / pcapng files holding them, for frame_decode_test and
// the `uscm dump` tests.
#ifndef USCM_MAD_CAPTURE_TEST_FRAMES_H_
#define USCM_MAD_CAPTURE_TEST_FRAMES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace uscm::mad::capture::testing {

using Bytes = std::vector<uint8_t>;

// A RoCE v2 frame: Ethernet [VLAN tags] IPv4|IPv6 UDP 4791 BTH [DETH] payload ICRC.
// opcode 0x64 adds a DETH (Q_Key 0x80010000, source QP 1).
Bytes RoceV2(std::span<const uint8_t> payload, bool ipv6 = false, int vlan_tags = 0,
             uint8_t opcode = 0x64, uint32_t dest_qp = 1);
// A RoCE v1 frame: Ethernet, EtherType 0x8915, GRH BTH DETH payload ICRC.
Bytes RoceV1(std::span<const uint8_t> payload, uint8_t opcode = 0x64, uint32_t dest_qp = 1);
Bytes Arp();
// An IPv4 TCP segment.
Bytes Tcp();
// A native IB UD packet (LRH BTH DETH MAD ICRC VCRC) in an exported-PDU record
// (link type 252) or an ERF record (197).
Bytes ExportedPduRecord(std::span<const uint8_t> mad, uint16_t slid, uint16_t dlid);
Bytes ErfRecord(std::span<const uint8_t> mad, uint16_t slid, uint16_t dlid);

struct Frame {
  uint32_t link_type = 1;  // pcapng: the interface's link type
  int64_t time_ns = 0;
  Bytes data;
  int interface = 0;  // pcapng: frames of one (interface, link type) share an IDB
};
// A classic pcap file (microsecond or nanosecond magic); every frame has
// `link_type`.
Bytes PcapFile(uint32_t link_type, const std::vector<Frame>& frames, bool nanos);
// A pcapng file: one section, one interface per distinct (interface, link
// type) in order of first use (if_tsresol 9 = nanoseconds when `nanos`, else the default
// microseconds), one Enhanced Packet Block per frame.
Bytes PcapngFile(const std::vector<Frame>& frames, bool nanos);
// Writes `bytes` to `path`; false on error.
bool WriteFile(const std::string& path, const Bytes& bytes);

}  // namespace uscm::mad::capture::testing

#endif  // USCM_MAD_CAPTURE_TEST_FRAMES_H_
