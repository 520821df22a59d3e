#include "mad/capture/capture_transport.h"

#include "absl/strings/str_cat.h"
#include "mad/capture/ib_packet.h"

namespace uscm::mad::capture {

void CaptureTransport::Record(const UdHeaders& headers, std::span<const uint8_t> mad) {
  absl::StatusOr<std::vector<uint8_t>> packet = WrapMad(headers, mad);
  absl::Status status =
      packet.ok() ? writer_.WritePacket(clock_.Now(), *packet) : packet.status();
  if (status.ok()) {
    ++recorded_;
    return;
  }
  ++record_failures_;
  last_record_error_ = absl::Status(
      status.code(), absl::StrCat("capture of a ", mad.size(), "-byte MAD: ", status.message()));
}

absl::Status CaptureTransport::Send(const MadAddress& to, std::span<const uint8_t> mad) {
  absl::Status status = inner_.Send(to, mad);
  if (status.ok()) Record(OutgoingHeaders(inner_.port(), to), mad);
  return status;
}

size_t CaptureTransport::Drain(absl::FunctionRef<void(const ReceivedMad&)> sink, size_t max) {
  return inner_.Drain(
      [&](const ReceivedMad& received) {
        Record(IncomingHeaders(inner_.port(), received.from), received.data);
        sink(received);
      },
      max);
}

}  // namespace uscm::mad::capture
