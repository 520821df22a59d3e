// What every CM message shares: class 0x07 version 2, method Send, an
// attribute ID per message (digest §2.1), and the body in the MAD data area.
#ifndef USCM_MAD_WIRE_CM_COMMON_H_
#define USCM_MAD_WIRE_CM_COMMON_H_

#include <algorithm>
#include <array>
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

// ECE, Enhanced Connection Establishment (IBTA 1.4; digest §2.4). One logical
// pair: the 24-bit vendor ID sits in the body of REQ / REP / SIDR_REP (split
// across bytes in REP and SIDR_REP, joined again by the table's SplitField);
// the options travel in the MAD AttributeModifier. In those three reprs the
// options live here and `envelope.attribute_modifier` stays 0 (Emit rejects a
// non-zero one, so the two can never disagree).
struct Ece {
  uint32_t vendor_id = 0;  // 24 bits; 0 = the peer does not speak ECE
  uint32_t options = 0;
  friend bool operator==(const Ece&, const Ece&) = default;
};

// Moves the attribute modifier of a parsed ECE message into `ece->options`.
void TakeEceOptions(CmEnvelope* envelope, Ece* ece);
// The envelope to emit for an ECE message, or an error naming `what` when the
// caller also set envelope.attribute_modifier.
absl::StatusOr<CmEnvelope> EceEnvelope(const char* what, const CmEnvelope& envelope,
                                       const Ece& ece);

// A 72-byte "additional information" field with its length byte: REJ ARI,
// APR Additional Information, SIDR_REP Additional Information. All 72 bytes are
// kept, so Parse and Emit are lossless; `length` says how many are meaningful
// and may not exceed 72 (checked by Parse and Emit).
struct InfoBlock {
  static constexpr size_t kBytes = 72;
  uint8_t length = 0;
  std::array<uint8_t, kBytes> bytes{};

  // The first `length` bytes (all 72 if length is out of range).
  std::span<const uint8_t> used() const {
    return {bytes.data(), std::min<size_t>(length, kBytes)};
  }
  // length = bytes.size(); more than 72 bytes are clipped.
  static InfoBlock Of(std::span<const uint8_t> bytes);
  friend bool operator==(const InfoBlock&, const InfoBlock&) = default;
};

// Reads an InfoBlock from its length row and 72-byte row, rejecting a length
// over 72 with "REJ.RejectInfoLength = 80; the ARI field holds at most 72 bytes".
absl::StatusOr<InfoBlock> ReadInfoBlock(const char* what, const FieldView& v,
                                        const Field& length, const Field& data);
void WriteInfoBlock(FieldWriter& w, const char* what, const Field& length, const Field& data,
                    const InfoBlock& info);

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
