// CM REQ "Request for Communication" (IBTA Vol 1 Table 106 in the kernel's
// numbering; digest §2.2): the active side's connection request.
#ifndef USCM_MAD_WIRE_CM_REQ_H_
#define USCM_MAD_WIRE_CM_REQ_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_path.h"
#include "mad/wire/field.h"
#include "mad/wire/private_data.h"

namespace uscm::mad::wire {

namespace req {
// REQ Message Contents (offsets from MAD byte 24; bit 0 = MSB).
inline constexpr Field kLocalCommId{"LocalCommID", 0, 0, 32};
inline constexpr Field kReserved4 = Reserved(4, 0, 8);
inline constexpr Field kVendorId{"VendorID", 5, 0, 24};  // ECE
inline constexpr Field kServiceId{"ServiceID", 8, 0, 64};
inline constexpr Field kLocalCaGuid{"LocalCAGUID", 16, 0, 64};
inline constexpr Field kReserved24 = Reserved(24, 0, 32);
inline constexpr Field kLocalQKey{"LocalQKey", 28, 0, 32};
inline constexpr Field kLocalQpn{"LocalQPN", 32, 0, 24};
inline constexpr Field kResponderResources{"ResponderResources", 35, 0, 8};
inline constexpr Field kLocalEecn{"LocalEECN", 36, 0, 24};
inline constexpr Field kInitiatorDepth{"InitiatorDepth", 39, 0, 8};
inline constexpr Field kRemoteEecn{"RemoteEECN", 40, 0, 24};
inline constexpr Field kRemoteCmResponseTimeout{"RemoteCMResponseTimeout", 43, 0, 5};
inline constexpr Field kTransportServiceType{"TransportServiceType", 43, 5, 2};
inline constexpr Field kEndToEndFlowControl{"EndToEndFlowControl", 43, 7, 1};
inline constexpr Field kStartingPsn{"StartingPSN", 44, 0, 24};
inline constexpr Field kLocalCmResponseTimeout{"LocalCMResponseTimeout", 47, 0, 5};
inline constexpr Field kRetryCount{"RetryCount", 47, 5, 3};
inline constexpr Field kPartitionKey{"PartitionKey", 48, 0, 16};
inline constexpr Field kPathMtu{"PathPacketPayloadMTU", 50, 0, 4};
inline constexpr Field kRdcExists{"RDCExists", 50, 4, 1};
inline constexpr Field kRnrRetryCount{"RNRRetryCount", 50, 5, 3};
inline constexpr Field kMaxCmRetries{"MaxCMRetries", 51, 0, 4};
inline constexpr Field kSrq{"SRQ", 51, 4, 1};
inline constexpr Field kExtendedTransportType{"ExtendedTransportType", 51, 5, 3};
inline constexpr Field kPrimaryLocalLid{"PrimaryLocalPortLID", 52, 0, 16};
inline constexpr Field kPrimaryRemoteLid{"PrimaryRemotePortLID", 54, 0, 16};
inline constexpr Field kPrimaryLocalGid{"PrimaryLocalPortGID", 56, 0, 128};
inline constexpr Field kPrimaryRemoteGid{"PrimaryRemotePortGID", 72, 0, 128};
inline constexpr Field kPrimaryFlowLabel{"PrimaryFlowLabel", 88, 0, 20};
inline constexpr Field kReserved90 = Reserved(90, 4, 6);
inline constexpr Field kPrimaryPacketRate{"PrimaryPacketRate", 91, 2, 6};
inline constexpr Field kPrimaryTrafficClass{"PrimaryTrafficClass", 92, 0, 8};
inline constexpr Field kPrimaryHopLimit{"PrimaryHopLimit", 93, 0, 8};
inline constexpr Field kPrimarySl{"PrimarySL", 94, 0, 4};
inline constexpr Field kPrimarySubnetLocal{"PrimarySubnetLocal", 94, 4, 1};
inline constexpr Field kReserved94 = Reserved(94, 5, 3);
inline constexpr Field kPrimaryLocalAckTimeout{"PrimaryLocalACKTimeout", 95, 0, 5};
inline constexpr Field kReserved95 = Reserved(95, 5, 3);
inline constexpr Field kAlternateLocalLid{"AlternateLocalPortLID", 96, 0, 16};
inline constexpr Field kAlternateRemoteLid{"AlternateRemotePortLID", 98, 0, 16};
inline constexpr Field kAlternateLocalGid{"AlternateLocalPortGID", 100, 0, 128};
inline constexpr Field kAlternateRemoteGid{"AlternateRemotePortGID", 116, 0, 128};
inline constexpr Field kAlternateFlowLabel{"AlternateFlowLabel", 132, 0, 20};
inline constexpr Field kReserved134 = Reserved(134, 4, 6);
inline constexpr Field kAlternatePacketRate{"AlternatePacketRate", 135, 2, 6};
inline constexpr Field kAlternateTrafficClass{"AlternateTrafficClass", 136, 0, 8};
inline constexpr Field kAlternateHopLimit{"AlternateHopLimit", 137, 0, 8};
inline constexpr Field kAlternateSl{"AlternateSL", 138, 0, 4};
inline constexpr Field kAlternateSubnetLocal{"AlternateSubnetLocal", 138, 4, 1};
inline constexpr Field kReserved138 = Reserved(138, 5, 3);
inline constexpr Field kAlternateLocalAckTimeout{"AlternateLocalACKTimeout", 139, 0, 5};
inline constexpr Field kSapSupported{"SAPSupported", 139, 5, 1};
inline constexpr Field kReserved139 = Reserved(139, 6, 2);
inline constexpr Field kPrivateData{"PrivateData", 140, 0, 92 * 8};

inline constexpr Field kRows[] = {
    kLocalCommId, kReserved4, kVendorId, kServiceId, kLocalCaGuid, kReserved24, kLocalQKey,
    kLocalQpn, kResponderResources, kLocalEecn, kInitiatorDepth, kRemoteEecn,
    kRemoteCmResponseTimeout, kTransportServiceType, kEndToEndFlowControl, kStartingPsn,
    kLocalCmResponseTimeout, kRetryCount, kPartitionKey, kPathMtu, kRdcExists, kRnrRetryCount,
    kMaxCmRetries, kSrq, kExtendedTransportType,
    kPrimaryLocalLid, kPrimaryRemoteLid, kPrimaryLocalGid, kPrimaryRemoteGid, kPrimaryFlowLabel,
    kReserved90, kPrimaryPacketRate, kPrimaryTrafficClass, kPrimaryHopLimit, kPrimarySl,
    kPrimarySubnetLocal, kReserved94, kPrimaryLocalAckTimeout, kReserved95,
    kAlternateLocalLid, kAlternateRemoteLid, kAlternateLocalGid, kAlternateRemoteGid,
    kAlternateFlowLabel, kReserved134, kAlternatePacketRate, kAlternateTrafficClass,
    kAlternateHopLimit, kAlternateSl, kAlternateSubnetLocal, kReserved138,
    kAlternateLocalAckTimeout, kSapSupported, kReserved139, kPrivateData,
};
static_assert(CoversExactly(kRows, kMadDataBytes));
inline constexpr size_t kPrivateDataBytes = 92;

inline constexpr PathFields kPrimaryPath{
    kPrimaryLocalLid,    kPrimaryRemoteLid,     kPrimaryLocalGid, kPrimaryRemoteGid,
    kPrimaryFlowLabel,   kPrimaryPacketRate,    kPrimaryTrafficClass, kPrimaryHopLimit,
    kPrimarySl,          kPrimarySubnetLocal,   kPrimaryLocalAckTimeout};
inline constexpr PathFields kAlternatePath{
    kAlternateLocalLid,  kAlternateRemoteLid,   kAlternateLocalGid, kAlternateRemoteGid,
    kAlternateFlowLabel, kAlternatePacketRate,  kAlternateTrafficClass, kAlternateHopLimit,
    kAlternateSl,        kAlternateSubnetLocal, kAlternateLocalAckTimeout};
}  // namespace req

// Transport Service Type (2 bits). 3 means "see Extended Transport Type".
enum class TransportService : uint8_t { kRc = 0, kUc = 1, kRd = 2, kExtended = 3 };
// Extended Transport Type (3 bits), meaningful when TransportService is
// kExtended. Unknown values survive as their number.
enum class ExtendedTransport : uint8_t { kNone = 0, kXrc = 1 };
const char* TransportServiceName(TransportService t);  // "RC", "UC", "RD", "extended"

// Path Packet Payload MTU, IBA enum. Parse rejects the reserved values 0 and 6..15.
enum class PathMtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
int PathMtuBytes(PathMtu m);  // 256 .. 4096, 0 for a value outside the enum

struct ReqRepr {
  // User-provided (every member has its initializer below) so that building
  // the repr in place inside Parse's StatusOr does not first zero all ~470
  // bytes, as value-initializing an implicit constructor would.
  ReqRepr() {}

  CmEnvelope envelope;  // attribute_modifier stays 0: the ECE options are in `ece`
  uint32_t local_comm_id = 0;
  Ece ece;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;   // 24 bits
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;  // 24 bits
  uint8_t remote_cm_response_timeout = 0;  // 5 bits
  TransportService transport_service = TransportService::kRc;
  bool end_to_end_flow_control = false;
  uint32_t starting_psn = 0;  // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;                // 3 bits
  uint16_t partition_key = 0;
  PathMtu path_mtu = PathMtu::k1024;
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  ExtendedTransport extended_transport = ExtendedTransport::kNone;
  CmPath primary;
  // No alternate path is encoded as every alternate-path bit zero (LIDs 0,
  // GIDs 0, ...). Parse reports an alternate as soon as any of its bits is
  // set — more liberal than Linux, which looks only at AlternateLocalPortLID
  // (and OPA GIDs) — so nothing the peer sent is lost. Emit rejects a present
  // alternate that is all zero, since it would read back as absent.
  absl::optional<CmPath> alternate;
  bool sap_supported = false;
  PrivateData private_data;

  // Checks: PathPacketPayloadMTU is 1..5 ("REQ.PathPacketPayloadMTU = 7 is
  // reserved (valid: 1=256 .. 5=4096)"). Reserved bits are ignored.
  static absl::StatusOr<ReqRepr> Parse(std::span<const uint8_t> mad);
  absl::Status Emit(std::span<uint8_t> mad) const;
  friend bool operator==(const ReqRepr&, const ReqRepr&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CM_REQ_H_
