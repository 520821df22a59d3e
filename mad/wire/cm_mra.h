// CM MRA "Message Receipt Acknowledgement" (IBTA Vol 1 Table 107 in the
// kernel's numbering; digest §2.2, §3.2): "I got your message, give me
// longer to answer".
#ifndef USCM_MAD_WIRE_CM_MRA_H_
#define USCM_MAD_WIRE_CM_MRA_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace mra {
// MRA Message Contents (offsets from MAD byte 24; bit 0 = MSB).
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 4, 0, 32};
inline constexpr Field kMessageMraed{"MessageMRAed", 8, 0, 2};
inline constexpr Field kReserved8 = Reserved(8, 2, 6);
inline constexpr Field kServiceTimeout{"ServiceTimeout", 9, 0, 5};
inline constexpr Field kReserved9 = Reserved(9, 5, 3);
inline constexpr Field kPrivateData{"PrivateData", 10, 0, 222 * 8};

inline constexpr Field kRows[] = {kLocalCommId,   kRemoteCommId, kMessageMraed, kReserved8,
                                  kServiceTimeout, kReserved9,   kPrivateData};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 222;
}  // namespace mra

// Message MRAed (2 bits). 3 is reserved; Linux drops it, we keep it and leave
// the decision to the state machine.
enum class MraMessage : uint8_t { kReq = 0, kRep = 1, kLap = 2 };
const char* MraMessageName(MraMessage m);  // "REQ", "REP", "LAP"; nullptr when unknown

struct MraRepr {
  CmEnvelope envelope;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  MraMessage message_mraed = MraMessage::kReq;
  uint8_t service_timeout = 0;  // 5 bits: 4.096 us * 2^t
  PrivateData private_data;

  static absl::StatusOr<MraRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const MraRepr&, const MraRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_MRA_H_
