// CM REP "Reply to Request for Communication" (IBTA Vol 1 Table 110 in the
// kernel's numbering; digest §2.2): the passive side accepts a REQ.
#ifndef USCM_MAD_WIRE_CM_REP_H_
#define USCM_MAD_WIRE_CM_REP_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace rep {
// REP Message Contents (offsets from MAD byte 24; bit 0 = MSB).
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 4, 0, 32};
inline constexpr Field kLocalQKey{"LocalQKey", 8, 0, 32};
inline constexpr Field kLocalQpn{"LocalQPN", 12, 0, 24};
inline constexpr Field kVendorIdH{"VendorID[23:16]", 15, 0, 8};  // ECE
inline constexpr Field kLocalEecn{"LocalEECN", 16, 0, 24};
inline constexpr Field kVendorIdM{"VendorID[15:8]", 19, 0, 8};   // ECE
inline constexpr Field kStartingPsn{"StartingPSN", 20, 0, 24};
inline constexpr Field kVendorIdL{"VendorID[7:0]", 23, 0, 8};    // ECE
inline constexpr Field kResponderResources{"ResponderResources", 24, 0, 8};
inline constexpr Field kInitiatorDepth{"InitiatorDepth", 25, 0, 8};
inline constexpr Field kTargetAckDelay{"TargetACKDelay", 26, 0, 5};
inline constexpr Field kFailoverAccepted{"FailoverAccepted", 26, 5, 2};
inline constexpr Field kEndToEndFlowControl{"EndToEndFlowControl", 26, 7, 1};
inline constexpr Field kRnrRetryCount{"RNRRetryCount", 27, 0, 3};
inline constexpr Field kSrq{"SRQ", 27, 3, 1};
inline constexpr Field kReserved27 = Reserved(27, 4, 4);
inline constexpr Field kLocalCaGuid{"LocalCAGUID", 28, 0, 64};
inline constexpr Field kPrivateData{"PrivateData", 36, 0, 196 * 8};

inline constexpr Field kRows[] = {
    kLocalCommId, kRemoteCommId, kLocalQKey, kLocalQpn, kVendorIdH, kLocalEecn, kVendorIdM,
    kStartingPsn, kVendorIdL, kResponderResources, kInitiatorDepth, kTargetAckDelay,
    kFailoverAccepted, kEndToEndFlowControl, kRnrRetryCount, kSrq, kReserved27, kLocalCaGuid,
    kPrivateData,
};
static_assert(CoversExactly(kRows, kMadDataBytes));
// The three VendorID bytes as one 24-bit value (kernel: H << 16 | M << 8 | L).
inline constexpr SplitField<3> kVendorId{"VendorID", {kVendorIdH, kVendorIdM, kVendorIdL}};
inline constexpr size_t kPrivateDataBytes = 196;
}  // namespace rep

// Failover Accepted (2 bits). Unknown values survive as their number.
enum class FailoverAccepted : uint8_t { kAccepted = 0, kNotSupported = 1, kRejected = 2 };
const char* FailoverAcceptedName(FailoverAccepted f);  // nullptr when unknown

struct RepRepr {
  CmEnvelope envelope;  // attribute_modifier stays 0: the ECE options are in `ece`
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;   // 24 bits
  Ece ece;
  uint32_t local_eecn = 0;  // 24 bits
  uint32_t starting_psn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;  // 5 bits
  FailoverAccepted failover_accepted = FailoverAccepted::kAccepted;
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  PrivateData private_data;

  static absl::StatusOr<RepRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const RepRepr&, const RepRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_REP_H_
