#include "mad/wire/cm_rej.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace uscm::mad::wire {

const char* RejMessageName(RejMessage m) {
  switch (m) {
    case RejMessage::kReq: return "REQ";
    case RejMessage::kRep: return "REP";
    case RejMessage::kOther: return "other";
  }
  return nullptr;
}

const char* RejReasonName(RejReason r) {
  switch (r) {
    case RejReason::kNoQp: return "No QP available";
    case RejReason::kNoEec: return "No EEC available";
    case RejReason::kNoResources: return "No resources available";
    case RejReason::kTimeout: return "Timeout";
    case RejReason::kUnsupportedRequest: return "Unsupported request";
    case RejReason::kInvalidCommId: return "Invalid Communication ID";
    case RejReason::kInvalidCommInstance: return "Invalid Communication Instance";
    case RejReason::kInvalidServiceId: return "Invalid Service ID";
    case RejReason::kInvalidTransportType: return "Invalid Transport Service Type";
    case RejReason::kStaleConnection: return "Stale connection";
    case RejReason::kRdcNotExist: return "RDC does not exist";
    case RejReason::kInvalidPrimaryGid: return "Primary remote port GID rejected";
    case RejReason::kInvalidPrimaryLid: return "Primary remote port LID rejected";
    case RejReason::kInvalidPrimarySl: return "Invalid primary SL";
    case RejReason::kInvalidPrimaryTrafficClass: return "Invalid primary traffic class";
    case RejReason::kInvalidPrimaryHopLimit: return "Invalid primary hop limit";
    case RejReason::kInvalidPrimaryPacketRate: return "Invalid primary packet rate";
    case RejReason::kInvalidAlternateGid: return "Alternate remote port GID rejected";
    case RejReason::kInvalidAlternateLid: return "Alternate remote port LID rejected";
    case RejReason::kInvalidAlternateSl: return "Invalid alternate SL";
    case RejReason::kInvalidAlternateTrafficClass: return "Invalid alternate traffic class";
    case RejReason::kInvalidAlternateHopLimit: return "Invalid alternate hop limit";
    case RejReason::kInvalidAlternatePacketRate: return "Invalid alternate packet rate";
    case RejReason::kPortCmRedirect: return "Port and CM redirection";
    case RejReason::kPortRedirect: return "Port redirection";
    case RejReason::kInvalidMtu: return "Invalid path MTU";
    case RejReason::kInsufficientResponderResources:
      return "Insufficient responder resources";
    case RejReason::kConsumerReject: return "Consumer reject";
    case RejReason::kInvalidRnrRetry: return "RNR NAK retry count rejected";
    case RejReason::kDuplicateLocalCommId: return "Duplicate local Communication ID";
    case RejReason::kInvalidClassVersion: return "Unsupported class version";
    case RejReason::kInvalidPrimaryFlowLabel: return "Invalid primary flow label";
    case RejReason::kInvalidAlternateFlowLabel: return "Invalid alternate flow label";
    case RejReason::kVendorOptionNotSupported: return "Vendor option not supported";
  }
  return nullptr;
}

AriKind AriKindFor(RejReason r) {
  switch (r) {
    case RejReason::kTimeout: return AriKind::kCaGuid;
    case RejReason::kInvalidPrimaryGid:
    case RejReason::kInvalidAlternateGid:
    case RejReason::kPortRedirect: return AriKind::kGid;
    case RejReason::kInvalidPrimaryLid:
    case RejReason::kInvalidAlternateLid: return AriKind::kLid;
    case RejReason::kInvalidPrimarySl:
    case RejReason::kInvalidAlternateSl: return AriKind::kSl;
    case RejReason::kInvalidPrimaryTrafficClass:
    case RejReason::kInvalidAlternateTrafficClass: return AriKind::kTrafficClass;
    case RejReason::kInvalidPrimaryHopLimit:
    case RejReason::kInvalidAlternateHopLimit: return AriKind::kHopLimit;
    case RejReason::kInvalidPrimaryPacketRate:
    case RejReason::kInvalidAlternatePacketRate: return AriKind::kPacketRate;
    case RejReason::kPortCmRedirect: return AriKind::kClassPortInfo;
    case RejReason::kInvalidMtu: return AriKind::kMtu;
    case RejReason::kInsufficientResponderResources: return AriKind::kResponderResources;
    case RejReason::kConsumerReject: return AriKind::kConsumer;
    case RejReason::kInvalidRnrRetry: return AriKind::kRnrRetryCount;
    case RejReason::kInvalidClassVersion: return AriKind::kClassVersion;
    case RejReason::kInvalidPrimaryFlowLabel:
    case RejReason::kInvalidAlternateFlowLabel: return AriKind::kFlowLabel;
    default: return AriKind::kNone;
  }
}

const char* AriKindName(AriKind k) {
  switch (k) {
    case AriKind::kNone: return "none";
    case AriKind::kCaGuid: return "CA GUID";
    case AriKind::kGid: return "GID";
    case AriKind::kLid: return "LID";
    case AriKind::kSl: return "SL";
    case AriKind::kTrafficClass: return "traffic class";
    case AriKind::kHopLimit: return "hop limit";
    case AriKind::kPacketRate: return "packet rate";
    case AriKind::kClassPortInfo: return "ClassPortInfo";
    case AriKind::kMtu: return "MTU";
    case AriKind::kResponderResources: return "responder resources";
    case AriKind::kConsumer: return "consumer-defined";
    case AriKind::kRnrRetryCount: return "RNR retry count";
    case AriKind::kClassVersion: return "class version";
    case AriKind::kFlowLabel: return "flow label";
  }
  return "?";
}

namespace rej_ari {
const Field* ScalarField(AriKind k) {
  switch (k) {
    case AriKind::kCaGuid: return &kCaGuid;
    case AriKind::kLid: return &kLid;
    case AriKind::kSl: return &kSl;
    case AriKind::kTrafficClass: return &kTrafficClass;
    case AriKind::kHopLimit: return &kHopLimit;
    case AriKind::kPacketRate: return &kPacketRate;
    case AriKind::kMtu: return &kMtu;
    case AriKind::kResponderResources: return &kResponderResources;
    case AriKind::kRnrRetryCount: return &kRnrRetryCount;
    case AriKind::kClassVersion: return &kClassVersion;
    case AriKind::kFlowLabel: return &kFlowLabel;
    default: return nullptr;
  }
}
}  // namespace rej_ari

namespace {

absl::Status WrongKind(RejReason reason, AriKind want) {
  const char* name = RejReasonName(reason);
  return absl::FailedPreconditionError(absl::StrFormat(
      "REJ reason %d (%s) carries ARI kind \"%s\", not \"%s\"", static_cast<int>(reason),
      name ? name : "unknown", AriKindName(AriKindFor(reason)), AriKindName(want)));
}

}  // namespace

absl::optional<uint64_t> RejRepr::AriValue() const {
  const Field* f = rej_ari::ScalarField(AriKindFor(reason));
  if (f == nullptr || ari.length < f->end_byte()) return absl::nullopt;
  return ReadField(ari.bytes.data(), *f);
}

absl::optional<Gid> RejRepr::AriGid() const {
  if (AriKindFor(reason) != AriKind::kGid || ari.length < rej_ari::kGid.end_byte()) {
    return absl::nullopt;
  }
  Gid g;
  std::copy_n(ari.bytes.begin(), g.raw.size(), g.raw.begin());
  return g;
}

absl::optional<std::span<const uint8_t>> RejRepr::AriClassPortInfo() const {
  if (AriKindFor(reason) != AriKind::kClassPortInfo || ari.length < InfoBlock::kBytes) {
    return absl::nullopt;
  }
  return std::span<const uint8_t>(ari.bytes);
}

absl::Status RejRepr::SetAriValue(uint64_t value) {
  const AriKind kind = AriKindFor(reason);
  const Field* f = rej_ari::ScalarField(kind);
  if (f == nullptr) return WrongKind(reason, AriKind::kLid);
  if (value > f->max_value()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "REJ %s = %d does not fit in %d bits (max %d)", f->name, value, f->width,
        f->max_value()));
  }
  ari = InfoBlock{};
  ari.length = static_cast<uint8_t>(f->end_byte());
  WriteField(ari.bytes.data(), *f, value);
  return absl::OkStatus();
}

absl::Status RejRepr::SetAriGid(const Gid& gid) {
  if (AriKindFor(reason) != AriKind::kGid) return WrongKind(reason, AriKind::kGid);
  ari = InfoBlock::Of(gid.raw);
  return absl::OkStatus();
}

absl::StatusOr<RejRepr> RejRepr::Parse(std::span<const uint8_t> mad) {
  RejRepr r;
  auto v = ParseCmMad(mad, CmAttr::kRej, rej::kRows, &r.envelope);
  if (!v.ok()) return v.status();
  auto ari = ReadInfoBlock("REJ", *v, rej::kRejectInfoLength, rej::kAri);
  if (!ari.ok()) return ari.status();
  r.ari = *ari;
  r.local_comm_id = v->Get(rej::kLocalCommId);
  r.remote_comm_id = v->Get(rej::kRemoteCommId);
  r.message_rejected = static_cast<RejMessage>(v->Get(rej::kMessageRejected));
  r.reason = static_cast<RejReason>(v->Get(rej::kReason));
  r.private_data.Assign(v->Bytes(rej::kPrivateData));
  return r;
}

absl::Status RejRepr::Emit(std::span<uint8_t> mad) const {
  auto w = EmitCmMad(mad, CmAttr::kRej, envelope);
  if (!w.ok()) return w.status();
  w->ZeroReserved<rej::kRows>();
  w->Set(rej::kLocalCommId, local_comm_id);
  w->Set(rej::kRemoteCommId, remote_comm_id);
  w->Set(rej::kMessageRejected, static_cast<uint8_t>(message_rejected));
  w->Set(rej::kReason, static_cast<uint16_t>(reason));
  WriteInfoBlock(*w, "REJ", rej::kRejectInfoLength, rej::kAri, ari);
  WritePrivateData(*w, rej::kPrivateData, private_data);
  return w->status();
}

}  // namespace uscm::mad::wire
