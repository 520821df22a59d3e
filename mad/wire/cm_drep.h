// CM DREP "Reply to Request for Communication Release" (IBTA Vol 1 Table 113
// in the kernel's numbering; digest §2.2, §3.5).
#ifndef USCM_MAD_WIRE_CM_DREP_H_
#define USCM_MAD_WIRE_CM_DREP_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace drep {
// DREP Message Contents (offsets from MAD byte 24).
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 4, 0, 32};
inline constexpr Field kPrivateData{"PrivateData", 8, 0, 224 * 8};

inline constexpr Field kRows[] = {kLocalCommId, kRemoteCommId, kPrivateData};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 224;
}  // namespace drep

struct DrepRepr {
  CmEnvelope envelope;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  PrivateData private_data;

  static absl::StatusOr<DrepRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const DrepRepr&, const DrepRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_DREP_H_
