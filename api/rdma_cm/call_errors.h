// The errors every rdma_cm-style call returns in the same words (internal to
// api/rdma_cm).
#ifndef USCM_API_RDMA_CM_CALL_ERRORS_H_
#define USCM_API_RDMA_CM_CALL_ERRORS_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"

namespace uscm::internal {

inline absl::Status WrongState(const char* call, IdState s, const char* expected) {
  return absl::FailedPreconditionError(
      absl::StrCat(call, ": id is in state ", IdStateName(s), "; expected ", expected));
}

// `s` with the call's name in front; payloads (an errno: mad/status_errno.h) kept.
inline absl::Status Prefix(const char* call, const absl::Status& s) {
  if (s.ok()) return s;
  absl::Status out(s.code(), absl::StrCat(call, ": ", s.message()));
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& p) { out.SetPayload(url, p); });
  return out;
}

}  // namespace uscm::internal

#endif  // USCM_API_RDMA_CM_CALL_ERRORS_H_
