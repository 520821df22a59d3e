// Writes native IB packets (see ib_packet.h) to a pcap file that tshark and
// Wireshark 4.0 open without preferences. Timestamps come from the caller, on
// any clock: a virtual clock starting at the epoch shows as 1970-01-01.
#ifndef USCM_MAD_CAPTURE_PCAP_WRITER_H_
#define USCM_MAD_CAPTURE_PCAP_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/capture/pcap_format.h"
#include "mad/time.h"

namespace uscm::mad::capture {

class PcapWriter {
 public:
  // Writes into memory; see bytes().
  explicit PcapWriter(CaptureLinkType link_type = CaptureLinkType::kExportedPdu);
  // Creates (truncates) `path` and writes the file header.
  static absl::StatusOr<std::unique_ptr<PcapWriter>> Create(
      const std::string& path,
      CaptureLinkType link_type = CaptureLinkType::kExportedPdu);
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Appends one record. `time` must not be before the epoch (pcap stores
  // unsigned seconds) and the packet must fit a record; both are checked
  // before anything is written. An I/O error may leave a partial record.
  absl::Status WritePacket(TimePoint time, std::span<const uint8_t> ib_packet);

  // Pushes buffered records to the file (no-op in memory).
  absl::Status Flush();
  // Flushes and closes the file; later writes fail. Called by the destructor.
  absl::Status Close();

  CaptureLinkType link_type() const { return link_type_; }
  uint64_t packets_written() const { return packets_; }
  // The whole file so far (in-memory writers only; empty for files).
  const std::vector<uint8_t>& bytes() const { return memory_; }

 private:
  PcapWriter(CaptureLinkType link_type, std::FILE* file, std::string path);
  absl::Status Emit(std::span<const uint8_t> data);

  CaptureLinkType link_type_;
  std::FILE* file_ = nullptr;
  std::string path_;
  bool closed_ = false;
  uint64_t packets_ = 0;
  std::vector<uint8_t> memory_;
  std::vector<uint8_t> record_;  // scratch, reused per packet
};

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_PCAP_WRITER_H_
