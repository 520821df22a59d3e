// What every CM message shares: class 0x07 version 2, method Send, an
// attribute ID per message (digest §2.1), and the body in the MAD data area.
#ifndef USCM_MAD_WIRE_CM_COMMON_H_
#define USCM_MAD_WIRE_CM_COMMON_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mad/wire/field.h"
#include "mad/wire/mad_header.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {

inline constexpr uint8_t kCmClassVersion = 2;

// CM attribute IDs (IBTA Vol 1 Table 100; digest §2.1). Unknown IDs survive.
enum class CmAttr : uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001A,
};
const char* CmAttrName(CmAttr a);  // "REQ", or nullptr when unknown

// The header fields a CM message carries besides its body.
struct CmEnvelope {
  uint64_t transaction_id = 0;
  uint32_t attribute_modifier = 0;  // ECE options in REQ / REP / SIDR_REP, else 0
  friend bool operator==(const CmEnvelope&, const CmEnvelope&) = default;
};

// Parses the MAD header of a CM message and checks class, version, method and
// attribute; then checks that the body (`rows`, `body_bytes` from MAD byte 24)
// is all there. Errors name the message ("REJ: ...").
absl::StatusOr<FieldView> ParseCmMad(std::span<const uint8_t> mad, CmAttr attr,
                                     std::span<const Field> rows, CmEnvelope* envelope);

// Writes the CM MAD header for `attr` into `mad` (>= 256 bytes, checked) and
// returns a writer for the body at MAD byte 24.
absl::StatusOr<FieldWriter> EmitCmMad(std::span<uint8_t> mad, CmAttr attr,
                                      const CmEnvelope& envelope);

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_COMMON_H_
