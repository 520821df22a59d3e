#include "mad/wire/cm_common.h"

#include "absl/strings/str_format.h"

namespace uscm::mad::wire {

const char* CmAttrName(CmAttr a) {
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

absl::StatusOr<FieldView> ParseCmMad(std::span<const uint8_t> mad, CmAttr attr,
                                     std::span<const Field> rows, CmEnvelope* envelope) {
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

absl::StatusOr<FieldWriter> EmitCmMad(std::span<uint8_t> mad, CmAttr attr,
                                      const CmEnvelope& envelope) {
  if (mad.size() < kMadBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: output buffer is %d bytes; a MAD needs %d", CmAttrName(attr), mad.size(),
        kMadBytes));
  }
  MadHeader h;
  h.mgmt_class = static_cast<uint8_t>(MgmtClass::kCommMgt);
  h.class_version = kCmClassVersion;
  h.method = static_cast<uint8_t>(Method::kSend);
  h.transaction_id = envelope.transaction_id;
  h.attribute_id = static_cast<uint16_t>(attr);
  h.attribute_modifier = envelope.attribute_modifier;
  if (absl::Status s = h.Emit(mad); !s.ok()) return s;
  return FieldWriter(CmAttrName(attr), mad.data() + kMadHeaderBytes);
}

}  // namespace uscm::mad::wire
