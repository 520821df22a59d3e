// An errno carried by an absl::Status, for the layers that must end in the
// errno a C caller expects (the kernel's rdma_cm reports ENETUNREACH where no
// status code says exactly that). The C API (api/c) prefers it to its mapping
// of status codes.
#ifndef USCM_MAD_STATUS_ERRNO_H_
#define USCM_MAD_STATUS_ERRNO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace uscm::mad {

inline constexpr char kErrnoPayload[] = "uscm/errno";

inline absl::Status WithErrno(absl::Status s, int err) {
  s.SetPayload(kErrnoPayload, absl::Cord(std::to_string(err)));
  return s;
}

// The errno `s` carries; 0 when none.
inline int ErrnoOf(const absl::Status& s) {
  absl::optional<absl::Cord> p = s.GetPayload(kErrnoPayload);
  int err = 0;
  if (!p.has_value() || !absl::SimpleAtoi(std::string(*p), &err)) return 0;
  return err;
}

}  // namespace uscm::mad

#endif  // USCM_MAD_STATUS_ERRNO_H_
