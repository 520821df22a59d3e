// Reads pcap files of native IB packets back: ours (both link types) and
// ibdump's (ERF). Accepts micro- and nanosecond pcap in either byte order.
// Truncated or garbage input is an error naming the record and the field.
#ifndef USCM_MAD_CAPTURE_PCAP_READER_H_
#define USCM_MAD_CAPTURE_PCAP_READER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "mad/capture/pcap_format.h"
#include "mad/time.h"

namespace uscm::mad::capture {

struct PcapRecord {
  TimePoint time;               // the pcap record timestamp
  std::vector<uint8_t> packet;  // the IB packet, LRH first
  size_t original_length = 0;   // record orig_len; > frame size if snaplen cut it
  // Where `packet` starts inside the record data, i.e. the framing size
  // (exported-PDU tags, or the ERF header and its extension headers).
  size_t packet_offset = 0;
};

struct PcapContents {
  CaptureLinkType link_type = CaptureLinkType::kExportedPdu;
  std::vector<PcapRecord> records;
};

absl::StatusOr<PcapContents> ReadPcap(std::span<const uint8_t> file);

// Where the packet sits in one record of `link`: (offset, length) after the
// exported-PDU tags or the ERF header and its extensions; an Ethernet record
// is the whole frame. `index` (from 0) names the record in errors
// (kNoRecordIndex: none). Also used on records libpcap reads (frame_decode.h).
inline constexpr size_t kNoRecordIndex = SIZE_MAX;
absl::StatusOr<std::pair<size_t, size_t>> LocateIbPacket(CaptureLinkType link,
                                                         std::span<const uint8_t> record,
                                                         size_t index);
absl::StatusOr<PcapContents> ReadPcapFile(const std::string& path);

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_PCAP_READER_H_
