// A pcapng reader for what libpcap 1.10 refuses: files whose interfaces have
// different link types (an Ethernet NIC and an InfiniBand port in one
// dumpcap run). `uscm dump` reads every other capture with libpcap
// (tools/pcap_source.h) and this only when PcapngLinkTypes finds more than
// one link type. Blocks: SHB (any byte order, several sections), IDB
// (if_tsresol, if_tsoffset), EPB, SPB and the obsolete PB; others are
// skipped. Errors name the block and its file offset.
#ifndef USCM_MAD_CAPTURE_PCAPNG_READER_H_
#define USCM_MAD_CAPTURE_PCAPNG_READER_H_

#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace uscm::mad::capture {

struct PcapngPacket {
  int64_t time_ns = 0;  // since the epoch (SPB: 0, it carries no time)
  uint32_t link_type = 0;
  uint32_t interface = 0;  // index in its section
  uint32_t original_length = 0;
  std::vector<uint8_t> data;
};

struct PcapngContents {
  std::set<uint32_t> link_types;  // of every interface in the file
  std::vector<PcapngPacket> packets;
};

bool IsPcapng(std::span<const uint8_t> file);
absl::StatusOr<PcapngContents> ReadPcapng(std::span<const uint8_t> file);

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_PCAPNG_READER_H_
