// CM DREQ "Request for Communication Release" (IBTA Vol 1 Table 112 in the
// kernel's numbering; digest §2.2, §3.5).
#ifndef USCM_MAD_WIRE_CM_DREQ_H_
#define USCM_MAD_WIRE_CM_DREQ_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace dreq {
// DREQ Message Contents (offsets from MAD byte 24).
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 4, 0, 32};
inline constexpr Field kRemoteQpn{"RemoteQPN/EECN", 8, 0, 24};
inline constexpr Field kReserved11 = Reserved(11, 0, 8);
inline constexpr Field kPrivateData{"PrivateData", 12, 0, 220 * 8};

inline constexpr Field kRows[] = {kLocalCommId, kRemoteCommId, kRemoteQpn, kReserved11,
                                  kPrivateData};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 220;
}  // namespace dreq

struct DreqRepr {
  CmEnvelope envelope;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // 24 bits: the *receiver's* QPN (or EECN)
  PrivateData private_data;

  static absl::StatusOr<DreqRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const DreqRepr&, const DreqRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_DREQ_H_
