// The errors every rdma_cm-style call returns in the same words (internal to
// api/rdma_cm).
#ifndef USCM_API_RDMA_CM_CALL_ERRORS_H_
#define USCM_API_RDMA_CM_CALL_ERRORS_H_

#include <cerrno>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/status_errno.h"

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

// An AF_IB address on an id of port space `ps`: RDMA_PS_IB ids take any
// ServiceID (the kernel's cma_select_ib_ps wants one of the rdma_cm ranges;
// uscm's own API keeps any), and RDMA_PS_TCP / RDMA_PS_UDP ids, as in the
// kernel, one whose port space (bits 16..63 under the mask; an unmasked SID
// fits any) is theirs. Otherwise the kernel's EPROTONOSUPPORT.
inline absl::Status IbAddressFits(const char* call, PortSpace ps, const Address& a) {
  constexpr uint64_t kPsMask = 0xFFFFFFFFFFFF0000ULL;  // RDMA_IB_IP_PS_MASK
  const uint64_t mask = a.service_mask & kPsMask;
  const uint64_t sid_ps = a.service_id & mask;
  const bool own = sid_ps == ((uint64_t{static_cast<uint16_t>(ps)} << 16) & mask);
  if (ps == PortSpace::kIb || ((ps == PortSpace::kTcp || ps == PortSpace::kUdp) && own)) {
    return absl::OkStatus();
  }
  return mad::WithErrno(
      absl::InvalidArgumentError(absl::StrCat(
          call, ": an AF_IB address needs an RDMA_PS_IB id, or an RDMA_PS_TCP / RDMA_PS_UDP "
          "one whose port space is the ServiceID's (service ID 0x", absl::Hex(a.service_id),
          ")")),
      EPROTONOSUPPORT);
}

}  // namespace uscm::internal

#endif  // USCM_API_RDMA_CM_CALL_ERRORS_H_
