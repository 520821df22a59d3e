// CM SIDR_REQ / SIDR_REP, Service ID Resolution for UD (IBTA Vol 1 Tables
// 119 / 120 in the kernel's numbering; digest §2.2, §3.3, §4.9).
#ifndef USCM_MAD_WIRE_CM_SIDR_H_
#define USCM_MAD_WIRE_CM_SIDR_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace sidr_req {
// SIDR_REQ Message Contents (offsets from MAD byte 24).
inline constexpr Field kRequestId{"RequestID", 0, 0, 32};
inline constexpr Field kPartitionKey{"PartitionKey", 4, 0, 16};
inline constexpr Field kReserved6 = Reserved(6, 0, 16);
inline constexpr Field kServiceId{"ServiceID", 8, 0, 64};
inline constexpr Field kPrivateData{"PrivateData", 16, 0, 216 * 8};

inline constexpr Field kRows[] = {kRequestId, kPartitionKey, kReserved6, kServiceId,
                                  kPrivateData};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 216;
}  // namespace sidr_req

namespace sidr_rep {
// SIDR_REP Message Contents (offsets from MAD byte 24).
inline constexpr Field kRequestId{"RequestID", 0, 0, 32};
inline constexpr Field kStatus{"Status", 4, 0, 8};
inline constexpr Field kAdditionalInfoLength{"AdditionalInformationLength", 5, 0, 8};
inline constexpr Field kVendorIdH{"VendorID[23:8]", 6, 0, 16};  // ECE "H"
inline constexpr Field kQpn{"QPN", 8, 0, 24};
inline constexpr Field kVendorIdL{"VendorID[7:0]", 11, 0, 8};   // ECE "L"
inline constexpr Field kServiceId{"ServiceID", 12, 0, 64};      // only 4-byte aligned
inline constexpr Field kQKey{"QKey", 20, 0, 32};
inline constexpr Field kAdditionalInfo{"AdditionalInformation", 24, 0, 72 * 8};
inline constexpr Field kPrivateData{"PrivateData", 96, 0, 136 * 8};

inline constexpr Field kRows[] = {kRequestId, kStatus,    kAdditionalInfoLength,
                                  kVendorIdH, kQpn,       kVendorIdL,
                                  kServiceId, kQKey,      kAdditionalInfo,
                                  kPrivateData};
static_assert(CoversExactly(kRows, kMadDataBytes));
// The ECE vendor ID as one 24-bit value: H holds bits 23..8, L bits 7..0.
//
// Linux quirk (cm_format_sidr_rep, since 5.8): it writes
// `(vendor_id >> 8) & 0xff` into the 16-bit H and `vendor_id & 0xff` into L,
// so bits 23..16 never leave the kernel, and it does not read ECE out of a
// received SIDR_REP at all. We emit the full 24 bits as the spec splits them
// (H = vendor_id >> 8, L = vendor_id & 0xff); for vendor IDs below 0x10000 the
// bytes are identical to Linux's. A Linux SIDR_REP for vendor 0x02c903 reads
// back here as 0x00c903.
inline constexpr SplitField<2> kVendorId{"VendorID", {kVendorIdH, kVendorIdL}};
inline constexpr size_t kPrivateDataBytes = 136;
}  // namespace sidr_rep

struct SidrReqRepr {
  CmEnvelope envelope;
  uint32_t request_id = 0;
  uint16_t partition_key = 0;
  uint64_t service_id = 0;
  PrivateData private_data;  // rdma_cm puts its 36-byte CMA header first

  static absl::StatusOr<SidrReqRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const SidrReqRepr&, const SidrReqRepr&) = default;
};

// SIDR_REP Status (Linux enum ib_cm_sidr_status). Unknown values survive.
enum class SidrStatus : uint8_t {
  kSuccess = 0,
  kServiceIdNotSupported = 1,  // Linux: no listener
  kRejected = 2,               // by the service provider (rdma_reject on UD)
  kNoQp = 3,
  kRedirect = 4,               // ClassPortInfo in the additional information
  kUnsupportedVersion = 5,
};
const char* SidrStatusName(SidrStatus s);  // nullptr when unknown

struct SidrRepRepr {
  CmEnvelope envelope;  // attribute_modifier stays 0: the ECE options are in `ece`
  uint32_t request_id = 0;
  SidrStatus status = SidrStatus::kSuccess;
  InfoBlock additional_info;  // length + the raw 72 bytes
  Ece ece;
  uint32_t qpn = 0;  // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  PrivateData private_data;

  // The 72-byte ClassPortInfo of the redirect target, kept raw (the SA work
  // owns the ClassPortInfo layout): present when status is kRedirect and the
  // length says all 72 bytes are meaningful.
  absl::optional<std::span<const uint8_t>> RedirectClassPortInfo() const;

  // Checks: AdditionalInformationLength <= 72.
  static absl::StatusOr<SidrRepRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const SidrRepRepr&, const SidrRepRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_SIDR_H_
