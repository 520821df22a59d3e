#include "mad/wire/cm_common.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace uscm::mad::wire {

namespace cm_internal {

// The full checks, in the order the errors are reported; reached only when the
// inline fast path in the header did not accept the MAD.
absl::StatusOr<FieldView> ParseCmMadChecked(std::span<const uint8_t> mad, CmAttr attr,
                                            std::span<const Field> rows,
                                            CmEnvelope* envelope) {
  const char* name = CmAttrName(attr);
  auto header = MadHeader::Parse(mad);
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrFormat("%s: %s", name, header.status().message()));
  }
  if (header->mgmt_class != static_cast<uint8_t>(MgmtClass::kCommMgt) ||
      header->class_version != kCmClassVersion) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: MAD class 0x%02x version %d is not CM (class 0x07 version 2)", name,
        header->mgmt_class, header->class_version));
  }
  if (header->method != static_cast<uint8_t>(Method::kSend)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: MAD.Method = 0x%02x; CM messages use Send (0x03)", name, header->method));
  }
  if (header->attribute_id != static_cast<uint16_t>(attr)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: MAD.AttributeID = 0x%04x, expected 0x%04x", name, header->attribute_id,
        static_cast<uint16_t>(attr)));
  }
  envelope->transaction_id = header->transaction_id;
  envelope->attribute_modifier = header->attribute_modifier;
  return FieldView::Create(mad, kMadHeaderBytes, kMadDataBytes, rows, name, kMadBytes);
}

absl::Status ShortBufferError(CmAttr attr, size_t size) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: output buffer is %d bytes; a MAD needs %d", CmAttrName(attr), size, kMadBytes));
}

absl::Status EceModifierError(const char* what, uint32_t attribute_modifier) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: envelope.attribute_modifier = 0x%08x; the %s attribute modifier carries the "
      "ECE options, set ece.options instead",
      what, attribute_modifier, what));
}

}  // namespace cm_internal

InfoBlock InfoBlock::Of(std::span<const uint8_t> bytes) {
  InfoBlock b;
  const size_t n = std::min(bytes.size(), kBytes);
  b.length = static_cast<uint8_t>(n);
  if (n != 0) std::memcpy(b.bytes.data(), bytes.data(), n);
  return b;
}

static absl::Status InfoLengthError(const char* what, const Field& length, uint64_t value,
                                    const Field& data) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s.%s = %d; the %s field holds at most %d bytes", what, length.name,
                      value, data.name, InfoBlock::kBytes));
}

absl::StatusOr<InfoBlock> ReadInfoBlock(const char* what, const FieldView& v,
                                        const Field& length, const Field& data) {
  const uint64_t n = v.Get(length);
  if (n > InfoBlock::kBytes) return InfoLengthError(what, length, n, data);
  InfoBlock b;
  b.length = static_cast<uint8_t>(n);
  const auto src = v.Bytes(data);
  std::copy(src.begin(), src.end(), b.bytes.begin());
  return b;
}

void WriteInfoBlock(FieldWriter& w, const char* what, const Field& length, const Field& data,
                    const InfoBlock& info) {
  if (info.length > InfoBlock::kBytes) {
    w.Fail(InfoLengthError(what, length, info.length, data));
    return;
  }
  w.Set(length, info.length);
  w.SetBytes(data, info.bytes, data.name);
}

}  // namespace uscm::mad::wire
