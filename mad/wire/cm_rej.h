// CM REJ "Reject" (IBTA Vol 1 Table 108 in the kernel's numbering; digest
// §2.2, §3.1): refuses a REQ, a REP, or (on timeout) anything else.
#ifndef USCM_MAD_WIRE_CM_REJ_H_
#define USCM_MAD_WIRE_CM_REJ_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/gid.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace rej {
// REJ Message Contents (offsets from MAD byte 24; bit 0 = MSB).
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kRemoteCommId{"RemoteCommID", 4, 0, 32};
inline constexpr Field kMessageRejected{"MessageRejected", 8, 0, 2};
inline constexpr Field kReserved8 = Reserved(8, 2, 6);
inline constexpr Field kRejectInfoLength{"RejectInfoLength", 9, 0, 7};
inline constexpr Field kReserved9 = Reserved(9, 7, 1);
inline constexpr Field kReason{"Reason", 10, 0, 16};
inline constexpr Field kAri{"ARI", 12, 0, 72 * 8};
inline constexpr Field kPrivateData{"PrivateData", 84, 0, 148 * 8};

inline constexpr Field kRows[] = {kLocalCommId, kRemoteCommId, kMessageRejected,
                                  kReserved8,   kRejectInfoLength, kReserved9,
                                  kReason,      kAri,           kPrivateData};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 148;
}  // namespace rej

// Message Rejected (2 bits). 3 is reserved and survives as its number.
enum class RejMessage : uint8_t { kReq = 0, kRep = 1, kOther = 2 };
const char* RejMessageName(RejMessage m);  // "REQ", "REP", "other"; nullptr when unknown

// REJ reason codes (IBTA Table "Rejection Reason"; Linux enum ib_cm_rej_reason).
// Code 34 is not defined by Linux or by the sources the digest was written
// from; like every other unknown code it survives as its number.
enum class RejReason : uint16_t {
  kNoQp = 1,
  kNoEec = 2,
  kNoResources = 3,
  kTimeout = 4,
  kUnsupportedRequest = 5,
  kInvalidCommId = 6,
  kInvalidCommInstance = 7,
  kInvalidServiceId = 8,
  kInvalidTransportType = 9,
  kStaleConnection = 10,
  kRdcNotExist = 11,
  kInvalidPrimaryGid = 12,
  kInvalidPrimaryLid = 13,
  kInvalidPrimarySl = 14,
  kInvalidPrimaryTrafficClass = 15,
  kInvalidPrimaryHopLimit = 16,
  kInvalidPrimaryPacketRate = 17,
  kInvalidAlternateGid = 18,
  kInvalidAlternateLid = 19,
  kInvalidAlternateSl = 20,
  kInvalidAlternateTrafficClass = 21,
  kInvalidAlternateHopLimit = 22,
  kInvalidAlternatePacketRate = 23,
  kPortCmRedirect = 24,
  kPortRedirect = 25,
  kInvalidMtu = 26,
  kInsufficientResponderResources = 27,
  kConsumerReject = 28,
  kInvalidRnrRetry = 29,
  kDuplicateLocalCommId = 30,
  kInvalidClassVersion = 31,
  kInvalidPrimaryFlowLabel = 32,
  kInvalidAlternateFlowLabel = 33,
  kVendorOptionNotSupported = 35,
};
// "Timeout", "Invalid primary SL", ...; nullptr for an unknown code.
const char* RejReasonName(RejReason r);

// What the ARI of each reason holds (digest §3.1). Only kCaGuid (Timeout) and
// kGid (12, 18) are confirmed by Linux; the other layouts follow the IBTA
// table as the digest recalls it [unverified]: the value sits at ARI byte 0,
// bit-aligned as the same field is in REQ (SL in the top nibble, packet rate
// in the low six bits, flow label in the top 20 bits of bytes 0..2, ...).
enum class AriKind : uint8_t {
  kNone,             // no defined content (the length is usually 0)
  kCaGuid,           // 4 Timeout: 8-byte CA GUID of the rejecting node
  kGid,              // 12, 18 GID rejected; 25 port redirection: a 16-byte GID
  kLid,              // 13, 19: 16-bit LID
  kSl,               // 14, 20: 4-bit SL
  kTrafficClass,     // 15, 21: 8 bits
  kHopLimit,         // 16, 22: 8 bits
  kPacketRate,       // 17, 23: 6-bit rate
  kClassPortInfo,    // 24 Port and CM redirection: 72-byte ClassPortInfo
  kMtu,              // 26: 4-bit MTU
  kResponderResources,  // 27: 8 bits
  kConsumer,         // 28: consumer-defined bytes
  kRnrRetryCount,    // 29: 3 bits
  kClassVersion,     // 31: highest supported class version, 8 bits
  kFlowLabel,        // 32, 33: 20 bits
};
AriKind AriKindFor(RejReason r);
const char* AriKindName(AriKind k);  // "CA GUID", "GID", "SL", ...

namespace rej_ari {
// ARI layouts, offsets inside the 72-byte ARI (see AriKind for provenance).
inline constexpr Field kCaGuid{"ARI.CAGUID", 0, 0, 64};
inline constexpr Field kGid{"ARI.GID", 0, 0, 128};
inline constexpr Field kLid{"ARI.LID", 0, 0, 16};
inline constexpr Field kSl{"ARI.SL", 0, 0, 4};
inline constexpr Field kTrafficClass{"ARI.TrafficClass", 0, 0, 8};
inline constexpr Field kHopLimit{"ARI.HopLimit", 0, 0, 8};
inline constexpr Field kPacketRate{"ARI.PacketRate", 0, 2, 6};
inline constexpr Field kMtu{"ARI.MTU", 0, 0, 4};
inline constexpr Field kResponderResources{"ARI.ResponderResources", 0, 0, 8};
inline constexpr Field kRnrRetryCount{"ARI.RNRRetryCount", 0, 5, 3};
inline constexpr Field kClassVersion{"ARI.ClassVersion", 0, 0, 8};
inline constexpr Field kFlowLabel{"ARI.FlowLabel", 0, 0, 20};
// The row for a scalar kind, or nullptr (kNone, kGid, kClassPortInfo, kConsumer).
const Field* ScalarField(AriKind k);
}  // namespace rej_ari

struct RejRepr {
  CmEnvelope envelope;
  uint32_t local_comm_id = 0;  // 0 when rejecting a REQ we never gave an ID
  uint32_t remote_comm_id = 0;
  RejMessage message_rejected = RejMessage::kReq;
  RejReason reason = RejReason::kConsumerReject;
  InfoBlock ari;  // RejectInfoLength + the 72 ARI bytes
  PrivateData private_data;

  // Typed ARI accessors: empty unless the reason carries that kind and the
  // ARI length covers it.
  absl::optional<uint64_t> AriValue() const;  // CA GUID, LID, SL, rate, MTU, ...
  absl::optional<Gid> AriGid() const;
  absl::optional<std::span<const uint8_t>> AriClassPortInfo() const;
  // Typed ARI builders: set `ari` (length and bytes) for this->reason, or fail
  // with an error naming the reason when it carries another kind or the value
  // does not fit ("REJ ARI.SL = 17 does not fit in 4 bits").
  absl::Status SetAriValue(uint64_t value);
  absl::Status SetAriGid(const Gid& gid);

  // Checks: RejectInfoLength <= 72.
  static absl::StatusOr<RejRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const RejRepr&, const RejRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_REJ_H_
