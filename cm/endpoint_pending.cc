// SIDR and LAP/APR are waiting for their wire reprs (mad/wire/cm_sidr.h,
// mad/wire/cm_lap_apr.h). Until then the endpoint counts these messages as
// received and drops them, and the user calls say why they are unavailable.
#include "cm/endpoint.h"
#include "absl/strings/str_cat.h"
#include "cm/endpoint_internal.h"

namespace uscm::cm {

using mad::TimePoint;
using mad::wire::CmAttr;

namespace {
absl::Status NotYet(const char* what) {
  return absl::UnimplementedError(
      absl::StrCat(what, " is not available yet: its wire repr has not landed"));
}
}  // namespace

void CmEndpoint::HandleSidrReq(TimePoint, const mad::MadAddress&,
                               std::span<const uint8_t>) {
  CountReceived(CmAttr::kSidrReq);
  ++counters_.unexpected_state;
}
void CmEndpoint::HandleSidrRep(TimePoint, std::span<const uint8_t>) {
  CountReceived(CmAttr::kSidrRep);
  ++counters_.unexpected_state;
}
void CmEndpoint::HandleLap(TimePoint, std::span<const uint8_t>) {
  CountReceived(CmAttr::kLap);
  ++counters_.unexpected_state;
}
void CmEndpoint::HandleApr(TimePoint, std::span<const uint8_t>) {
  CountReceived(CmAttr::kApr);
  ++counters_.unexpected_state;
}
absl::StatusOr<ConnId> CmEndpoint::SidrRequest(TimePoint, const SidrRequestParams&) {
  return NotYet("SidrRequest");
}
absl::Status CmEndpoint::SidrReply(TimePoint, ConnId, const SidrReplyParams&) {
  return NotYet("SidrReply");
}
absl::Status CmEndpoint::LoadAlternatePath(TimePoint, ConnId, const PathInfo&,
                                           std::span<const uint8_t>) {
  return NotYet("LoadAlternatePath");
}
absl::Status CmEndpoint::AprReply(TimePoint, ConnId, uint8_t, std::span<const uint8_t>,
                                  std::span<const uint8_t>) {
  return NotYet("AprReply");
}

}  // namespace uscm::cm
