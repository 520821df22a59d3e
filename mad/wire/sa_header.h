// An SA MAD (class 0x03 version 2; digest §1.5): the 24-byte MAD header, the
// RMPP header (MAD bytes 24..35), the SA header (SM_Key, AttributeOffset,
// ComponentMask; MAD bytes 36..55) and 200 bytes of SA data (MAD bytes
// 56..255). A single-record MAD carries its record at MAD byte 56;
// SaRecordMad<Record> parses and emits such a MAD for any record type.
#ifndef USCM_MAD_WIRE_SA_HEADER_H_
#define USCM_MAD_WIRE_SA_HEADER_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "mad/wire/class_port_info.h"
#include "mad/wire/field.h"
#include "mad/wire/view.h"
#include "mad/wire/mad_header.h"
#include "mad/wire/rmpp.h"
#include "mad/wire/sa_record.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {

inline constexpr uint8_t kSaClassVersion = 2;
inline constexpr size_t kSaHeaderOffset = 36;
inline constexpr size_t kSaHeaderBytes = 20;
inline constexpr size_t kSaDataOffset = 56;

namespace sa_header {
// IBTA Vol 1 Table 193, SA Header (offsets from MAD byte 36).
inline constexpr Field kSmKey{"SM_Key", 0, 0, 64};
inline constexpr Field kAttributeOffset{"AttributeOffset", 8, 0, 16};
inline constexpr Field kReserved10 = Reserved(10, 0, 16);
inline constexpr Field kComponentMask{"ComponentMask", 12, 0, 64};

inline constexpr Field kRows[] = {kSmKey, kAttributeOffset, kReserved10, kComponentMask};
static_assert(CoversExactly(kRows, kSaHeaderBytes));
}  // namespace sa_header

// SA attribute IDs (IBTA Vol 1 Table 186; OpenSM ib_types.h). Unknown IDs survive.
enum class SaAttr : uint16_t {
  kClassPortInfo = 0x0001,
  kNotice = 0x0002,
  kInformInfo = 0x0003,
  kNodeRecord = 0x0011,
  kPortInfoRecord = 0x0012,
  kSlToVlTableRecord = 0x0013,
  kSwitchInfoRecord = 0x0014,
  kLinearFdbRecord = 0x0015,
  kRandomFdbRecord = 0x0016,
  kMulticastFdbRecord = 0x0017,
  kSmInfoRecord = 0x0018,
  kLinkRecord = 0x0020,
  kGuidInfoRecord = 0x0030,
  kServiceRecord = 0x0031,
  kPKeyTableRecord = 0x0033,
  kPathRecord = 0x0035,
  kVlArbitrationTableRecord = 0x0036,
  kMcMemberRecord = 0x0038,
  kTraceRecord = 0x0039,
  kMultiPathRecord = 0x003A,
  kServiceAssociationRecord = 0x003B,
  kInformInfoRecord = 0x00F3,
};
const char* SaAttrName(SaAttr a);  // "PathRecord", or nullptr when unknown

// Everything an SA MAD carries besides its ComponentMask and its data.
struct SaEnvelope {
  uint8_t method = static_cast<uint8_t>(Method::kGet);  // any value; response bit included
  uint16_t status = 0;
  uint64_t transaction_id = 0;
  uint32_t attribute_modifier = 0;
  RmppHeader rmpp;
  uint64_t sm_key = 0;
  uint16_t attribute_offset = 0;  // record size in 8-byte words (responses); 0 in requests
  friend bool operator==(const SaEnvelope&, const SaEnvelope&) = default;
};

// Parses the MAD, RMPP and SA headers of an SA MAD and checks class, version
// and attribute; then checks that the data area (`data_rows`, which tile the
// 200 bytes from MAD byte 56) is all there. Any method is accepted. Errors
// name the attribute ("PathRecord: MAD.AttributeID = 0x0038, expected 0x0035").
// Buffers longer than 256 bytes (RMPP-coalesced) are accepted; the view
// covers MAD byte 56 onwards.
absl::StatusOr<FieldView> ParseSaMad(std::span<const uint8_t> mad, SaAttr attr,
                                     std::span<const Field> data_rows, SaEnvelope* envelope,
                                     uint64_t* component_mask);

// Writes the MAD, RMPP and SA headers into `mad` (>= 256 bytes, checked),
// zeroes the 200 data bytes and returns a writer for the data at MAD byte 56.
absl::StatusOr<FieldWriter> EmitSaMad(std::span<uint8_t> mad, SaAttr attr,
                                      const SaEnvelope& envelope, uint64_t component_mask);

// A whole SA MAD carrying one record (Get / Set / Delete and their responses,
// or a GetTable template). `Record` provides kName, kAttributeId, kBytes,
// kMadRows (its rows padded to 200 bytes), Mask, Read(FieldView) and
// Write(FieldWriter&). Parse and Emit reject an AttributeOffset that is
// neither 0 nor the record's size in words.
template <typename Record>
struct SaRecordMad {
  SaEnvelope envelope;
  typename Record::Mask component_mask;
  Record record;

  static absl::StatusOr<SaRecordMad> Parse(std::span<const uint8_t> mad) {
    SaRecordMad m;
    uint64_t mask = 0;
    auto v = ParseSaMad(mad, static_cast<SaAttr>(Record::kAttributeId), Record::kMadRows.rows,
                        &m.envelope, &mask);
    if (!v.ok()) return v.status();
    if (absl::Status s = CheckOffset(m.envelope.attribute_offset); !s.ok()) return s;
    m.component_mask = typename Record::Mask(mask);
    m.record = Record::Read(*v);
    return m;
  }

  absl::Status Emit(std::span<uint8_t> mad) const {
    if (absl::Status s = CheckOffset(envelope.attribute_offset); !s.ok()) return s;
    auto w = EmitSaMad(mad, static_cast<SaAttr>(Record::kAttributeId), envelope,
                       component_mask.bits());
    if (!w.ok()) return w.status();
    record.Write(*w);
    return w->status();
  }

  friend bool operator==(const SaRecordMad&, const SaRecordMad&) = default;

 private:
  static absl::Status CheckOffset(uint16_t offset) {
    constexpr uint16_t kWords = AttributeOffsetFor(Record::kBytes);
    if (offset == 0 || offset == kWords) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: SA.AttributeOffset = %d words; a %d-byte %s takes %d", Record::kName, offset,
        Record::kBytes, Record::kName, kWords));
  }
};

// SA ClassPortInfo (Get, ComponentMask 0). CM carries ClassPortInfo at MAD
// byte 24 instead: use ClassPortInfo::Parse on the CM data area.
using ClassPortInfoMad = SaRecordMad<ClassPortInfo>;

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_SA_HEADER_H_
