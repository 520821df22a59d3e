#include "mad/wire/sa_header.h"

#include <cstring>

namespace uscm::mad::wire {

const char* SaAttrName(SaAttr a) {
  switch (a) {
    case SaAttr::kClassPortInfo: return "ClassPortInfo";
    case SaAttr::kNotice: return "Notice";
    case SaAttr::kInformInfo: return "InformInfo";
    case SaAttr::kNodeRecord: return "NodeRecord";
    case SaAttr::kPortInfoRecord: return "PortInfoRecord";
    case SaAttr::kSlToVlTableRecord: return "SLtoVLMappingTableRecord";
    case SaAttr::kSwitchInfoRecord: return "SwitchInfoRecord";
    case SaAttr::kLinearFdbRecord: return "LinearForwardingTableRecord";
    case SaAttr::kRandomFdbRecord: return "RandomForwardingTableRecord";
    case SaAttr::kMulticastFdbRecord: return "MulticastForwardingTableRecord";
    case SaAttr::kSmInfoRecord: return "SMInfoRecord";
    case SaAttr::kLinkRecord: return "LinkRecord";
    case SaAttr::kGuidInfoRecord: return "GuidInfoRecord";
    case SaAttr::kServiceRecord: return "ServiceRecord";
    case SaAttr::kPKeyTableRecord: return "P_KeyTableRecord";
    case SaAttr::kPathRecord: return "PathRecord";
    case SaAttr::kVlArbitrationTableRecord: return "VLArbitrationTableRecord";
    case SaAttr::kMcMemberRecord: return "MCMemberRecord";
    case SaAttr::kTraceRecord: return "TraceRecord";
    case SaAttr::kMultiPathRecord: return "MultiPathRecord";
    case SaAttr::kServiceAssociationRecord: return "ServiceAssociationRecord";
    case SaAttr::kInformInfoRecord: return "InformInfoRecord";
  }
  return nullptr;
}

namespace {

std::string AttrLabel(SaAttr attr) {
  const char* name = SaAttrName(attr);
  return name ? std::string(name)
              : absl::StrFormat("SA attribute 0x%04x", static_cast<uint16_t>(attr));
}

}  // namespace

absl::StatusOr<FieldView> ParseSaMad(std::span<const uint8_t> mad, SaAttr attr,
                                     std::span<const Field> data_rows, SaEnvelope* envelope,
                                     uint64_t* component_mask) {
  const std::string name = AttrLabel(attr);
  auto header = MadHeader::Parse(mad);
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrFormat("%s: %s", name, header.status().message()));
  }
  if (header->mgmt_class != static_cast<uint8_t>(MgmtClass::kSubnAdm) ||
      header->class_version != kSaClassVersion) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: MAD class 0x%02x version %d is not SA (class 0x03 version 2)", name,
        header->mgmt_class, header->class_version));
  }
  if (header->attribute_id != static_cast<uint16_t>(attr)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: MAD.AttributeID = 0x%04x, expected 0x%04x", name, header->attribute_id,
        static_cast<uint16_t>(attr)));
  }
  auto rmpp_view =
      FieldView::Create(mad, kRmppHeaderOffset, kRmppHeaderBytes, rmpp::kRows, name, kMadBytes);
  if (!rmpp_view.ok()) return rmpp_view.status();
  auto sa_view =
      FieldView::Create(mad, kSaHeaderOffset, kSaHeaderBytes, sa_header::kRows, name, kMadBytes);
  if (!sa_view.ok()) return sa_view.status();
  auto data = FieldView::Create(mad, kSaDataOffset, kSaDataBytes, data_rows, name, kMadBytes);
  if (!data.ok()) return data.status();

  envelope->method = header->method;
  envelope->status = header->status;
  envelope->transaction_id = header->transaction_id;
  envelope->attribute_modifier = header->attribute_modifier;
  envelope->rmpp = RmppHeader::Read(*rmpp_view);
  envelope->sm_key = sa_view->Get(sa_header::kSmKey);
  envelope->attribute_offset = sa_view->Get(sa_header::kAttributeOffset);
  *component_mask = sa_view->Get(sa_header::kComponentMask);
  return data;
}

absl::StatusOr<FieldWriter> EmitSaMad(std::span<uint8_t> mad, SaAttr attr,
                                      const SaEnvelope& envelope, uint64_t component_mask) {
  const char* name = SaAttrName(attr);
  if (name == nullptr) name = "SA MAD";
  if (mad.size() < kMadBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: output buffer is %d bytes; a MAD needs %d", name, mad.size(), kMadBytes));
  }
  // Every header field of an SaEnvelope fits its row, so only the RMPP
  // RRespTime (5 bits in a uint8_t) can fail.
  FieldWriter w(name, mad.data());
  w.Set(mad_header::kBaseVersion, 1);
  w.Set(mad_header::kMgmtClass, static_cast<uint8_t>(MgmtClass::kSubnAdm));
  w.Set(mad_header::kClassVersion, kSaClassVersion);
  w.Set(mad_header::kR, envelope.method >> 7);
  w.Set(mad_header::kMethod, envelope.method & 0x7F);
  w.Set(mad_header::kStatus, envelope.status);
  w.Set(mad_header::kClassSpecific, 0);
  w.Set(mad_header::kTransactionId, envelope.transaction_id);
  w.Set(mad_header::kAttributeId, static_cast<uint16_t>(attr));
  w.Zero(mad_header::kReserved18);
  w.Set(mad_header::kAttributeModifier, envelope.attribute_modifier);

  FieldWriter rmpp_writer(name, mad.data() + kRmppHeaderOffset);
  envelope.rmpp.Write(rmpp_writer);
  if (!rmpp_writer.status().ok()) return rmpp_writer.status();

  FieldWriter sa(name, mad.data() + kSaHeaderOffset);
  sa.Set(sa_header::kSmKey, envelope.sm_key);
  sa.Set(sa_header::kAttributeOffset, envelope.attribute_offset);
  sa.Zero(sa_header::kReserved10);
  sa.Set(sa_header::kComponentMask, component_mask);

  std::memset(mad.data() + kSaDataOffset, 0, kSaDataBytes);
  return FieldWriter(name, mad.data() + kSaDataOffset);
}

}  // namespace uscm::mad::wire
