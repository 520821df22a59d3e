// CM LAP "Load Alternate Path" and APR "Alternate Path Response" (IBTA Vol 1
// Tables 115 / 116 in the kernel's numbering; digest §2.2, §3.4). Linux still
// handles received LAP/APR on IB but no longer sends them.
#ifndef USCM_MAD_WIRE_CM_LAP_APR_H_
#define USCM_MAD_WIRE_CM_LAP_APR_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_path.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace lap {
// LAP Message Contents (offsets from MAD byte 24). Note the packing differs
// from REQ's alternate path: traffic class before hop limit before rate.
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 4, 0, 32};
inline constexpr Field kReserved8 = Reserved(8, 0, 32);
inline constexpr Field kRemoteQpn{"RemoteQPN/EECN", 12, 0, 24};
inline constexpr Field kRemoteCmResponseTimeout{"RemoteCMResponseTimeout", 15, 0, 5};
inline constexpr Field kReserved15 = Reserved(15, 5, 3);
inline constexpr Field kReserved16 = Reserved(16, 0, 32);
inline constexpr Field kAlternateLocalLid{"AlternateLocalPortLID", 20, 0, 16};
inline constexpr Field kAlternateRemoteLid{"AlternateRemotePortLID", 22, 0, 16};
inline constexpr Field kAlternateLocalGid{"AlternateLocalPortGID", 24, 0, 128};
inline constexpr Field kAlternateRemoteGid{"AlternateRemotePortGID", 40, 0, 128};
inline constexpr Field kAlternateFlowLabel{"AlternateFlowLabel", 56, 0, 20};
inline constexpr Field kReserved58 = Reserved(58, 4, 4);
inline constexpr Field kAlternateTrafficClass{"AlternateTrafficClass", 59, 0, 8};
inline constexpr Field kAlternateHopLimit{"AlternateHopLimit", 60, 0, 8};
inline constexpr Field kReserved61 = Reserved(61, 0, 2);
inline constexpr Field kAlternatePacketRate{"AlternatePacketRate", 61, 2, 6};
inline constexpr Field kAlternateSl{"AlternateSL", 62, 0, 4};
inline constexpr Field kAlternateSubnetLocal{"AlternateSubnetLocal", 62, 4, 1};
inline constexpr Field kReserved62 = Reserved(62, 5, 3);
inline constexpr Field kAlternateLocalAckTimeout{"AlternateLocalACKTimeout", 63, 0, 5};
inline constexpr Field kReserved63 = Reserved(63, 5, 3);
inline constexpr Field kPrivateData{"PrivateData", 64, 0, 168 * 8};

inline constexpr Field kRows[] = {
    kLocalCommId,          kRemoteCommId,        kReserved8,          kRemoteQpn,
    kRemoteCmResponseTimeout, kReserved15,       kReserved16,         kAlternateLocalLid,
    kAlternateRemoteLid,   kAlternateLocalGid,   kAlternateRemoteGid, kAlternateFlowLabel,
    kReserved58,           kAlternateTrafficClass, kAlternateHopLimit, kReserved61,
    kAlternatePacketRate,  kAlternateSl,         kAlternateSubnetLocal, kReserved62,
    kAlternateLocalAckTimeout, kReserved63,      kPrivateData,
};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 168;

inline constexpr PathFields kAlternatePath{
    kAlternateLocalLid,  kAlternateRemoteLid,   kAlternateLocalGid, kAlternateRemoteGid,
    kAlternateFlowLabel, kAlternatePacketRate,  kAlternateTrafficClass, kAlternateHopLimit,
    kAlternateSl,        kAlternateSubnetLocal, kAlternateLocalAckTimeout};
}  // namespace lap

struct LapRepr {
  CmEnvelope envelope;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;                  // 24 bits
  uint8_t remote_cm_response_timeout = 0;   // 5 bits
  CmPath alternate;                         // the path to load
  PrivateData private_data;

  static absl::StatusOr<LapRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const LapRepr&, const LapRepr&) = default;
};

namespace apr {
// APR Message Contents (offsets from MAD byte 24).
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 4, 0, 32};
inline constexpr Field kAdditionalInfoLength{"AdditionalInformationLength", 8, 0, 8};
inline constexpr Field kApStatus{"APStatus", 9, 0, 8};
inline constexpr Field kReserved10 = Reserved(10, 0, 16);
inline constexpr Field kAdditionalInfo{"AdditionalInformation", 12, 0, 72 * 8};
inline constexpr Field kPrivateData{"PrivateData", 84, 0, 148 * 8};

inline constexpr Field kRows[] = {kLocalCommId,    kRemoteCommId, kAdditionalInfoLength,
                                  kApStatus,       kReserved10,   kAdditionalInfo,
                                  kPrivateData};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 148;
}  // namespace apr

// AP Status (digest §3.4). Unknown values survive as their number.
enum class ApStatus : uint8_t {
  kSuccess = 0,
  kInvalidCommId = 1,
  kUnsupported = 2,
  kRejected = 3,
  kRedirect = 4,
  kPathIsCurrent = 5,
  kInvalidQpn = 6,
  kInvalidLid = 7,
  kInvalidGid = 8,
  kInvalidFlowLabel = 9,
  kInvalidTrafficClass = 10,
  kInvalidHopLimit = 11,
  kInvalidPacketRate = 12,
  kInvalidSl = 13,
};
const char* ApStatusName(ApStatus s);  // nullptr when unknown

struct AprRepr {
  CmEnvelope envelope;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  ApStatus status = ApStatus::kSuccess;
  InfoBlock additional_info;  // length + the raw 72 bytes
  PrivateData private_data;

  // Checks: AdditionalInformationLength <= 72.
  static absl::StatusOr<AprRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const AprRepr&, const AprRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_LAP_APR_H_
