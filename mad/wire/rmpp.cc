#include "mad/wire/rmpp.h"

#include "absl/strings/str_format.h"
#include "mad/wire/mad_header.h"

namespace uscm::mad::wire {

const char* RmppTypeName(RmppType t) {
  switch (t) {
    case RmppType::kNone: return "none";
    case RmppType::kData: return "DATA";
    case RmppType::kAck: return "ACK";
    case RmppType::kStop: return "STOP";
    case RmppType::kAbort: return "ABORT";
  }
  return nullptr;
}

const char* RmppStatusName(RmppStatus s) {
  switch (s) {
    case RmppStatus::kNormal: return "normal";
    case RmppStatus::kResourcesExhausted: return "resources exhausted";
    case RmppStatus::kTotalTimeTooLong: return "total time too long";
    case RmppStatus::kInconsistentLastAndPayloadLength:
      return "inconsistent Last and PayloadLength";
    case RmppStatus::kInconsistentFirstAndSegmentNumber:
      return "inconsistent First and SegmentNumber";
    case RmppStatus::kBadRmppType: return "bad RMPPType";
    case RmppStatus::kNewWindowLastTooSmall: return "NewWindowLast too small";
    case RmppStatus::kSegmentNumberTooBig: return "SegmentNumber too big";
    case RmppStatus::kIllegalStatus: return "illegal status";
    case RmppStatus::kUnsupportedVersion: return "unsupported version";
    case RmppStatus::kTooManyRetries: return "too many retries";
    case RmppStatus::kUnspecified: return "unspecified";
  }
  return nullptr;
}

RmppHeader RmppHeader::Read(const FieldView& v) {
  RmppHeader h;
  h.version = v.Get(rmpp::kVersion);
  h.type = static_cast<RmppType>(v.Get(rmpp::kType));
  h.resp_time = v.Get(rmpp::kRRespTime);
  h.active = v.Get(rmpp::kFlagActive);
  h.first = v.Get(rmpp::kFlagFirst);
  h.last = v.Get(rmpp::kFlagLast);
  h.status = static_cast<RmppStatus>(v.Get(rmpp::kStatus));
  h.segment_number = v.Get(rmpp::kData1);
  h.payload_length = v.Get(rmpp::kData2);
  return h;
}

void RmppHeader::Write(FieldWriter& w) const {
  w.Set(rmpp::kVersion, version);
  w.Set(rmpp::kType, static_cast<uint8_t>(type));
  w.Set(rmpp::kRRespTime, resp_time);
  w.Set(rmpp::kFlagActive, active);
  w.Set(rmpp::kFlagFirst, first);
  w.Set(rmpp::kFlagLast, last);
  w.Set(rmpp::kStatus, static_cast<uint8_t>(status));
  w.Set(rmpp::kData1, segment_number);
  w.Set(rmpp::kData2, payload_length);
}

absl::StatusOr<RmppHeader> RmppHeader::Parse(std::span<const uint8_t> mad) {
  auto v = FieldView::Create(mad, kRmppHeaderOffset, kRmppHeaderBytes, rmpp::kRows,
                             "RMPP header", kMadBytes);
  if (!v.ok()) return v.status();
  return Read(*v);
}

absl::Status RmppHeader::Emit(std::span<uint8_t> mad) const {
  if (mad.size() < kRmppHeaderOffset + kRmppHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RMPP header needs MAD bytes 24..35; the buffer has %d bytes",
                        mad.size()));
  }
  FieldWriter w("RMPP", mad.data() + kRmppHeaderOffset);
  Write(w);
  return w.status();
}

}  // namespace uscm::mad::wire
