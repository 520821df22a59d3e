// Middleware: a Transport that forwards to another one and records every MAD
// it sends and receives to a PcapWriter, as native IB UD packets (see
// ib_packet.h). Our side is the inner transport's LocalPort (LID, GID index
// 0) on QP1; timestamps come from `clock` (virtual in simulation).
//
// A capture failure never fails the protocol: the MAD still goes through,
// the failure is counted and the last error kept for the owner to report.
#ifndef USCM_MAD_CAPTURE_CAPTURE_TRANSPORT_H_
#define USCM_MAD_CAPTURE_CAPTURE_TRANSPORT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_writer.h"
#include "mad/time.h"
#include "mad/transport.h"

namespace uscm::mad::capture {

class CaptureTransport final : public ForwardingTransport {
 public:
  // `inner`, `writer` and `clock` must outlive this object.
  CaptureTransport(Transport& inner, PcapWriter& writer, const Clock& clock)
      : ForwardingTransport(inner), writer_(writer), clock_(clock) {}

  // Records the MAD only if the inner transport accepted it.
  absl::Status Send(const MadAddress& to, std::span<const uint8_t> mad) override;
  // Records each MAD before handing it to `sink`.
  size_t Drain(absl::FunctionRef<void(const ReceivedMad&)> sink,
               size_t max = SIZE_MAX) override;

  uint64_t recorded() const { return recorded_; }
  uint64_t record_failures() const { return record_failures_; }
  const absl::Status& last_record_error() const { return last_record_error_; }

 private:
  void Record(const UdHeaders& headers, std::span<const uint8_t> mad);

  PcapWriter& writer_;
  const Clock& clock_;
  uint64_t recorded_ = 0;
  uint64_t record_failures_ = 0;
  absl::Status last_record_error_;
};

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_CAPTURE_TRANSPORT_H_
