// CM RTU "Ready To Use" (IBTA Vol 1 Table 106; digest §2.2): the active side's
// answer to REP. The model for every CM message: table, repr, Parse, Emit.
#ifndef USCM_MAD_WIRE_CM_RTU_H_
#define USCM_MAD_WIRE_CM_RTU_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace rtu {
// IBTA Vol 1 Table 106, RTU Message Contents (offsets from MAD byte 24).
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 4, 0, 32};
inline constexpr Field kPrivateData{"PrivateData", 8, 0, 224 * 8};

inline constexpr Field kRows[] = {kLocalCommId, kRemoteCommId, kPrivateData};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 224;
}  // namespace rtu

struct RtuRepr {
  CmEnvelope envelope;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  PrivateData private_data;

  static absl::StatusOr<RtuRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const RtuRepr&, const RtuRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_RTU_H_
