#include "mad/wire/cm_message.h"

#include "absl/strings/str_format.h"

namespace uscm::mad::wire {
namespace {

template <typename Repr>
absl::StatusOr<CmMessage> ParseAs(std::span<const uint8_t> mad) {
  auto r = Repr::Parse(mad);
  if (!r.ok()) return r.status();
  return CmMessage(std::move(*r));
}

template <typename T>
struct AttrFor;
template <> struct AttrFor<ReqRepr> { static constexpr CmAttr kValue = CmAttr::kReq; };
template <> struct AttrFor<MraRepr> { static constexpr CmAttr kValue = CmAttr::kMra; };
template <> struct AttrFor<RejRepr> { static constexpr CmAttr kValue = CmAttr::kRej; };
template <> struct AttrFor<RepRepr> { static constexpr CmAttr kValue = CmAttr::kRep; };
template <> struct AttrFor<RtuRepr> { static constexpr CmAttr kValue = CmAttr::kRtu; };
template <> struct AttrFor<DreqRepr> { static constexpr CmAttr kValue = CmAttr::kDreq; };
template <> struct AttrFor<DrepRepr> { static constexpr CmAttr kValue = CmAttr::kDrep; };
template <> struct AttrFor<SidrReqRepr> { static constexpr CmAttr kValue = CmAttr::kSidrReq; };
template <> struct AttrFor<SidrRepRepr> { static constexpr CmAttr kValue = CmAttr::kSidrRep; };
template <> struct AttrFor<LapRepr> { static constexpr CmAttr kValue = CmAttr::kLap; };
template <> struct AttrFor<AprRepr> { static constexpr CmAttr kValue = CmAttr::kApr; };

}  // namespace

absl::StatusOr<CmMessage> ParseAnyCm(std::span<const uint8_t> mad) {
  auto header = MadHeader::Parse(mad);
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrFormat("CM: %s", header.status().message()));
  }
  if (header->mgmt_class != static_cast<uint8_t>(MgmtClass::kCommMgt)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CM: MAD class 0x%02x is not CM (0x07)", header->mgmt_class));
  }
  switch (static_cast<CmAttr>(header->attribute_id)) {
    case CmAttr::kReq: return ParseAs<ReqRepr>(mad);
    case CmAttr::kMra: return ParseAs<MraRepr>(mad);
    case CmAttr::kRej: return ParseAs<RejRepr>(mad);
    case CmAttr::kRep: return ParseAs<RepRepr>(mad);
    case CmAttr::kRtu: return ParseAs<RtuRepr>(mad);
    case CmAttr::kDreq: return ParseAs<DreqRepr>(mad);
    case CmAttr::kDrep: return ParseAs<DrepRepr>(mad);
    case CmAttr::kSidrReq: return ParseAs<SidrReqRepr>(mad);
    case CmAttr::kSidrRep: return ParseAs<SidrRepRepr>(mad);
    case CmAttr::kLap: return ParseAs<LapRepr>(mad);
    case CmAttr::kApr: return ParseAs<AprRepr>(mad);
    case CmAttr::kClassPortInfo:
      return absl::InvalidArgumentError(
          "CM: AttributeID 0x0001 is ClassPortInfo (Get/GetResp), not a CM message; see "
          "mad/wire/class_port_info.h");
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "CM: AttributeID 0x%04x is not a CM message", header->attribute_id));
}

absl::Status EmitCm(const CmMessage& message, std::span<uint8_t> mad) {
  return std::visit([mad](const auto& m) { return m.Emit(mad); }, message);
}

CmAttr AttrOf(const CmMessage& message) {
  return std::visit(
      [](const auto& m) { return AttrFor<std::decay_t<decltype(m)>>::kValue; }, message);
}

const CmEnvelope& EnvelopeOf(const CmMessage& message) {
  return std::visit([](const auto& m) -> const CmEnvelope& { return m.envelope; }, message);
}

}  // namespace uscm::mad::wire
