// The RMPP header (IBTA Vol 1 Table 170 "RMPP Header Fields"; digest §1.5,
// §6.5): MAD bytes 24..35 of every class that may use RMPP (SA among them).
// When RMPP is not in use all twelve bytes are zero.
#ifndef USCM_MAD_WIRE_RMPP_H_
#define USCM_MAD_WIRE_RMPP_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/field.h"
#include "mad/wire/view.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {

inline constexpr size_t kRmppHeaderOffset = 24;
inline constexpr size_t kRmppHeaderBytes = 12;

namespace rmpp {
// IBTA Vol 1 Table 170, RMPP Header Fields (offsets from MAD byte 24).
inline constexpr Field kVersion{"RMPPVersion", 0, 0, 8};
inline constexpr Field kType{"RMPPType", 1, 0, 8};
inline constexpr Field kRRespTime{"RRespTime", 2, 0, 5};
inline constexpr Field kFlagLast{"RMPPFlags.Last", 2, 5, 1};
inline constexpr Field kFlagFirst{"RMPPFlags.First", 2, 6, 1};
inline constexpr Field kFlagActive{"RMPPFlags.Active", 2, 7, 1};
inline constexpr Field kStatus{"RMPPStatus", 3, 0, 8};
inline constexpr Field kData1{"SegmentNumber", 4, 0, 32};
inline constexpr Field kData2{"PayloadLength/NewWindowLast", 8, 0, 32};

inline constexpr Field kRows[] = {kVersion,  kType,   kRRespTime, kFlagLast, kFlagFirst,
                                  kFlagActive, kStatus, kData1,     kData2};
static_assert(CoversExactly(kRows, kRmppHeaderBytes));
}  // namespace rmpp

inline constexpr uint8_t kRmppVersion = 1;
inline constexpr uint8_t kRmppNoRespTime = 0x1F;  // RRespTime: no time limit

// RMPPType. 0 appears when RMPP is not in use; unknown values survive.
enum class RmppType : uint8_t {
  kNone = 0,
  kData = 1,
  kAck = 2,
  kStop = 3,
  kAbort = 4,
};
const char* RmppTypeName(RmppType t);  // "DATA", or nullptr when unknown

// RMPPStatus: 0 normal, 1 STOP "resources exhausted", 118..127 ABORT codes.
// Unknown values survive.
enum class RmppStatus : uint8_t {
  kNormal = 0,
  kResourcesExhausted = 1,
  kTotalTimeTooLong = 118,
  kInconsistentLastAndPayloadLength = 119,
  kInconsistentFirstAndSegmentNumber = 120,
  kBadRmppType = 121,
  kNewWindowLastTooSmall = 122,
  kSegmentNumberTooBig = 123,
  kIllegalStatus = 124,
  kUnsupportedVersion = 125,
  kTooManyRetries = 126,
  kUnspecified = 127,
};
const char* RmppStatusName(RmppStatus s);  // "total time too long", or nullptr when unknown

struct RmppHeader {
  uint8_t version = 0;  // 1 when RMPP is in use; other values are kept
  RmppType type = RmppType::kNone;
  uint8_t resp_time = 0;  // RRespTime, 5 bits
  bool active = false;
  bool first = false;
  bool last = false;
  RmppStatus status = RmppStatus::kNormal;
  uint32_t segment_number = 0;
  // DATA: PayloadLength; ACK: NewWindowLast. One wire field, two meanings.
  uint32_t payload_length = 0;
  uint32_t new_window_last() const { return payload_length; }

  // Reads MAD bytes 24..35 of `mad`.
  static absl::StatusOr<RmppHeader> Parse(std::span<const uint8_t> mad);
  // Writes MAD bytes 24..35 of `mad` (which must hold at least 36).
  absl::Status Emit(std::span<uint8_t> mad) const;

  // For callers that already checked the length: `v` starts at MAD byte 24.
  static RmppHeader Read(const FieldView& v);
  void Write(FieldWriter& w) const;  // `w` starts at MAD byte 24

  friend bool operator==(const RmppHeader&, const RmppHeader&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_RMPP_H_
