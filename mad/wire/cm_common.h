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
#include "mad/wire/private_data.h"
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
// "REQ", or nullptr when unknown. Inline so a constant attribute folds to its
// literal (and its length) on the emit path.
constexpr const char* CmAttrName(CmAttr a) {
  switch (a) {
    case CmAttr::kClassPortInfo: return "ClassPortInfo";
    case CmAttr::kReq: return "REQ";
    case CmAttr::kMra: return "MRA";
    case CmAttr::kRej: return "REJ";
    case CmAttr::kRep: return "REP";
    case CmAttr::kRtu: return "RTU";
    case CmAttr::kDreq: return "DREQ";
    case CmAttr::kDrep: return "DREP";
    case CmAttr::kSidrReq: return "SIDR_REQ";
    case CmAttr::kSidrRep: return "SIDR_REP";
    case CmAttr::kLap: return "LAP";
    case CmAttr::kApr: return "APR";
  }
  return nullptr;
}

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

namespace cm_internal {
// The cold halves of the inline functions below: out of line, so the success
// path carries no Status construction and no formatting code.
[[gnu::cold]] absl::Status EceModifierError(const char* what, uint32_t attribute_modifier);
[[gnu::cold]] absl::StatusOr<FieldView> ParseCmMadChecked(std::span<const uint8_t> mad,
                                                          CmAttr attr,
                                                          std::span<const Field> rows,
                                                          CmEnvelope* envelope);
[[gnu::cold]] absl::Status ShortBufferError(CmAttr attr, size_t size);
}  // namespace cm_internal

// Moves the attribute modifier of a parsed ECE message into `ece->options`.
inline void TakeEceOptions(CmEnvelope* envelope, Ece* ece) {
  ece->options = envelope->attribute_modifier;
  envelope->attribute_modifier = 0;
}
// The envelope to emit for an ECE message, or an error naming `what` when the
// caller also set envelope.attribute_modifier.
[[gnu::always_inline]] inline absl::StatusOr<CmEnvelope> EceEnvelope(const char* what,
                                                                     const CmEnvelope& envelope,
                                                                     const Ece& ece) {
  if (envelope.attribute_modifier != 0) [[unlikely]] {
    return cm_internal::EceModifierError(what, envelope.attribute_modifier);
  }
  CmEnvelope out = envelope;
  out.attribute_modifier = ece.options;
  return out;
}

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
//
// Inline fast path: a whole MAD whose first four bytes and AttributeID are what
// a CM `attr` message carries is read straight from the header rows. Anything
// else goes to the out-of-line checked parse, which produces the exact error.
[[gnu::always_inline]] inline absl::StatusOr<FieldView> ParseCmMad(
    std::span<const uint8_t> mad, CmAttr attr, std::span<const Field> rows,
    CmEnvelope* envelope) {
  namespace h = mad_header;
  const uint8_t* p = mad.data();
  if (mad.size() >= kMadBytes && ReadField(p, h::kBaseVersion) == 1 &&
      ReadField(p, h::kMgmtClass) == static_cast<uint8_t>(MgmtClass::kCommMgt) &&
      ReadField(p, h::kClassVersion) == kCmClassVersion && ReadField(p, h::kR) == 0 &&
      ReadField(p, h::kMethod) == static_cast<uint8_t>(Method::kSend) &&
      ReadField(p, h::kAttributeId) == static_cast<uint16_t>(attr)) [[likely]] {
    envelope->transaction_id = ReadField(p, h::kTransactionId);
    envelope->attribute_modifier = static_cast<uint32_t>(ReadField(p, h::kAttributeModifier));
    return FieldView::Unchecked(p + kMadHeaderBytes);
  }
  return cm_internal::ParseCmMadChecked(mad, attr, rows, envelope);
}

// Writes the CM MAD header for `attr` into `mad` (>= 256 bytes, checked) and
// returns a writer for the body at MAD byte 24. Every header row is written
// (Status and ClassSpecific 0, the reserved row cleared).
[[gnu::always_inline]] inline absl::StatusOr<FieldWriter> EmitCmMad(std::span<uint8_t> mad,
                                                                    CmAttr attr,
                                                                    const CmEnvelope& envelope) {
  namespace h = mad_header;
  if (mad.size() < kMadBytes) [[unlikely]] {
    return cm_internal::ShortBufferError(attr, mad.size());
  }
  uint8_t* p = mad.data();
  WriteField(p, h::kBaseVersion, 1);
  WriteField(p, h::kMgmtClass, static_cast<uint8_t>(MgmtClass::kCommMgt));
  WriteField(p, h::kClassVersion, kCmClassVersion);
  WriteField(p, h::kR, 0);
  WriteField(p, h::kMethod, static_cast<uint8_t>(Method::kSend));
  WriteField(p, h::kStatus, 0);
  WriteField(p, h::kClassSpecific, 0);
  WriteField(p, h::kTransactionId, envelope.transaction_id);
  WriteField(p, h::kAttributeId, static_cast<uint16_t>(attr));
  WriteField(p, h::kReserved18, 0);
  WriteField(p, h::kAttributeModifier, envelope.attribute_modifier);
  return FieldWriter(CmAttrName(attr), p + kMadHeaderBytes);
}

// Writes `data` into the private data row `f`: the bytes and the zero padding
// in one fixed-size copy. More than the row holds records "REQ private data is
// 100 bytes; REQ carries at most 92".
[[gnu::always_inline]] inline void WritePrivateData(FieldWriter& w, const Field& f,
                                                    const PrivateData& data) {
  if (data.size() > f.width / 8u) [[unlikely]] {
    w.SetBytes(f, data.bytes(), "private data");
    return;
  }
  w.SetBytes(f, data.padded());
}

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_COMMON_H_
