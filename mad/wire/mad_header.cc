#include "mad/wire/mad_header.h"

#include "absl/strings/str_format.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {

const char* MethodName(Method m) {
  switch (m) {
    case Method::kGet: return "Get";
    case Method::kSet: return "Set";
    case Method::kSend: return "Send";
    case Method::kTrap: return "Trap";
    case Method::kReport: return "Report";
    case Method::kTrapRepress: return "TrapRepress";
    case Method::kGetTable: return "GetTable";
    case Method::kGetTraceTable: return "GetTraceTable";
    case Method::kGetMulti: return "GetMulti";
    case Method::kDelete: return "Delete";
    case Method::kGetResp: return "GetResp";
    case Method::kReportResp: return "ReportResp";
    case Method::kGetTableResp: return "GetTableResp";
    case Method::kGetMultiResp: return "GetMultiResp";
    case Method::kDeleteResp: return "DeleteResp";
  }
  return nullptr;
}

std::string StatusText(uint16_t status) {
  if (status == 0) return "ok";
  static const char* const kSaCodes[] = {
      nullptr,           "ERR_NO_RESOURCES",    "ERR_REQ_INVALID",
      "ERR_NO_RECORDS",  "ERR_TOO_MANY_RECORDS", "ERR_REQ_INVALID_GID",
      "ERR_REQ_INSUFFICIENT_COMPONENTS", "ERR_REQ_DENIED", "ERR_PRIORITY_SUGGESTED"};
  static const char* const kInvalidField[] = {
      nullptr, "bad base/class version", "method not supported",
      "method/attribute not supported", nullptr, nullptr, nullptr,
      "invalid attribute or modifier value"};
  std::string out;
  auto add = [&out](const std::string& s) { out += out.empty() ? s : ", " + s; };
  if (status & kStatusBusy) add("busy");
  if (status & kStatusRedirect) add("redirect required");
  const unsigned field = (status & kStatusInvalidFieldMask) >> 2;
  if (field != 0) {
    add(kInvalidField[field] ? kInvalidField[field]
                             : absl::StrFormat("invalid field code %d", field));
  }
  const unsigned cls = status >> 8;
  if (cls != 0) {
    add(cls < 9 ? absl::StrFormat("SA: %s", kSaCodes[cls])
                : absl::StrFormat("class-specific code %d", cls));
  }
  if (out.empty()) out = absl::StrFormat("reserved status bits 0x%04x", status);
  return out;
}

absl::StatusOr<MadHeader> MadHeader::Parse(std::span<const uint8_t> mad) {
  auto view = FieldView::Create(mad, 0, kMadHeaderBytes, mad_header::kRows, "MAD header",
                                kMadBytes);
  if (!view.ok()) return view.status();
  MadHeader h;
  h.base_version = view->Get(mad_header::kBaseVersion);
  if (h.base_version != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MAD.BaseVersion = %d; only InfiniBand (1) is supported", h.base_version));
  }
  h.mgmt_class = view->Get(mad_header::kMgmtClass);
  h.class_version = view->Get(mad_header::kClassVersion);
  h.method = static_cast<uint8_t>(view->Get(mad_header::kR) << 7 | view->Get(mad_header::kMethod));
  h.status = view->Get(mad_header::kStatus);
  h.class_specific = view->Get(mad_header::kClassSpecific);
  h.transaction_id = view->Get(mad_header::kTransactionId);
  h.attribute_id = view->Get(mad_header::kAttributeId);
  h.attribute_modifier = view->Get(mad_header::kAttributeModifier);
  return h;
}

absl::Status MadHeader::Emit(std::span<uint8_t> mad) const {
  if (mad.size() < kMadHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MAD header needs %d bytes; the buffer has %d", kMadHeaderBytes, mad.size()));
  }
  FieldWriter w("MAD", mad.data());
  w.ZeroReserved<mad_header::kRows>();
  w.Set(mad_header::kBaseVersion, base_version);
  w.Set(mad_header::kMgmtClass, mgmt_class);
  w.Set(mad_header::kClassVersion, class_version);
  w.Set(mad_header::kR, method >> 7);
  w.Set(mad_header::kMethod, method & 0x7F);
  w.Set(mad_header::kStatus, status);
  w.Set(mad_header::kClassSpecific, class_specific);
  w.Set(mad_header::kTransactionId, transaction_id);
  w.Set(mad_header::kAttributeId, attribute_id);
  w.Set(mad_header::kAttributeModifier, attribute_modifier);
  return w.status();
}

}  // namespace uscm::mad::wire
