// SA PathRecord (IBTA Vol 1 Table 219; digest §6.1): attribute 0x0035, 64
// bytes, AttributeOffset 8. Parse / Emit work on the record's own bytes (a
// single-record MAD at MAD byte 56, or one 64-byte stride of an
// RMPP-reassembled GetTable response); PathRecordMad is the whole MAD.
#ifndef USCM_MAD_WIRE_PATH_RECORD_H_
#define USCM_MAD_WIRE_PATH_RECORD_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/gid.h"
#include "mad/wire/field.h"
#include "mad/wire/view.h"
#include "mad/wire/sa_header.h"
#include "mad/wire/sa_record.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {

namespace path_record {
// IBTA Vol 1 Table 219, PathRecord (offsets from the record's byte 0).
inline constexpr Field kServiceId{"ServiceID", 0, 0, 64};
inline constexpr Field kDgid{"DGID", 8, 0, 128};
inline constexpr Field kSgid{"SGID", 24, 0, 128};
inline constexpr Field kDlid{"DLID", 40, 0, 16};
inline constexpr Field kSlid{"SLID", 42, 0, 16};
inline constexpr Field kRawTraffic{"RawTraffic", 44, 0, 1};
inline constexpr Field kReserved44 = Reserved(44, 1, 3);
inline constexpr Field kFlowLabel{"FlowLabel", 44, 4, 20};
inline constexpr Field kHopLimit{"HopLimit", 47, 0, 8};
inline constexpr Field kTClass{"TClass", 48, 0, 8};
inline constexpr Field kReversible{"Reversible", 49, 0, 1};
inline constexpr Field kNumbPath{"NumbPath", 49, 1, 7};
inline constexpr Field kPKey{"P_Key", 50, 0, 16};
inline constexpr Field kQosClass{"QoSClass", 52, 0, 12};
inline constexpr Field kSl{"SL", 53, 4, 4};
inline constexpr Field kMtuSelector{"MTUSelector", 54, 0, 2};
inline constexpr Field kMtu{"MTU", 54, 2, 6};
inline constexpr Field kRateSelector{"RateSelector", 55, 0, 2};
inline constexpr Field kRate{"Rate", 55, 2, 6};
inline constexpr Field kPacketLifeTimeSelector{"PacketLifeTimeSelector", 56, 0, 2};
inline constexpr Field kPacketLifeTime{"PacketLifeTime", 56, 2, 6};
inline constexpr Field kPreference{"Preference", 57, 0, 8};
inline constexpr Field kReserved58 = Reserved(58, 0, 48);

inline constexpr Field kRows[] = {
    kServiceId, kDgid,     kSgid,          kDlid,       kSlid,
    kRawTraffic, kReserved44, kFlowLabel,  kHopLimit,   kTClass,
    kReversible, kNumbPath, kPKey,         kQosClass,   kSl,
    kMtuSelector, kMtu,     kRateSelector, kRate,       kPacketLifeTimeSelector,
    kPacketLifeTime, kPreference, kReserved58,
};
static_assert(CoversExactly(kRows, 64));
}  // namespace path_record

// PathRecord ComponentMask bits (IBTA Vol 1 Table 219; OpenSM IB_PR_COMPMASK_*,
// Linux IB_SA_PATH_REC_*). ServiceID has two bits that must be set together.
class PathRecordMask : public ComponentMaskBase<PathRecordMask> {
 public:
  using ComponentMaskBase::ComponentMaskBase;
  static const PathRecordMask kServiceIdMsb, kServiceIdLsb, kServiceId, kDgid, kSgid, kDlid,
      kSlid, kRawTraffic, kReserved7, kFlowLabel, kHopLimit, kTClass, kReversible, kNumbPath,
      kPKey, kQosClass, kSl, kMtuSelector, kMtu, kRateSelector, kRate, kPacketLifeTimeSelector,
      kPacketLifeTime, kPreference;
  // "ServiceID", "DGID", ...; one half of ServiceID alone prints as "ServiceID(MSB)".
  std::vector<std::string> Names() const;
};
inline constexpr PathRecordMask PathRecordMask::kServiceIdMsb{uint64_t{1} << 0};
inline constexpr PathRecordMask PathRecordMask::kServiceIdLsb{uint64_t{1} << 1};
inline constexpr PathRecordMask PathRecordMask::kServiceId{uint64_t{3}};
inline constexpr PathRecordMask PathRecordMask::kDgid{uint64_t{1} << 2};
inline constexpr PathRecordMask PathRecordMask::kSgid{uint64_t{1} << 3};
inline constexpr PathRecordMask PathRecordMask::kDlid{uint64_t{1} << 4};
inline constexpr PathRecordMask PathRecordMask::kSlid{uint64_t{1} << 5};
inline constexpr PathRecordMask PathRecordMask::kRawTraffic{uint64_t{1} << 6};
inline constexpr PathRecordMask PathRecordMask::kReserved7{uint64_t{1} << 7};
inline constexpr PathRecordMask PathRecordMask::kFlowLabel{uint64_t{1} << 8};
inline constexpr PathRecordMask PathRecordMask::kHopLimit{uint64_t{1} << 9};
inline constexpr PathRecordMask PathRecordMask::kTClass{uint64_t{1} << 10};
inline constexpr PathRecordMask PathRecordMask::kReversible{uint64_t{1} << 11};
inline constexpr PathRecordMask PathRecordMask::kNumbPath{uint64_t{1} << 12};
inline constexpr PathRecordMask PathRecordMask::kPKey{uint64_t{1} << 13};
inline constexpr PathRecordMask PathRecordMask::kQosClass{uint64_t{1} << 14};
inline constexpr PathRecordMask PathRecordMask::kSl{uint64_t{1} << 15};
inline constexpr PathRecordMask PathRecordMask::kMtuSelector{uint64_t{1} << 16};
inline constexpr PathRecordMask PathRecordMask::kMtu{uint64_t{1} << 17};
inline constexpr PathRecordMask PathRecordMask::kRateSelector{uint64_t{1} << 18};
inline constexpr PathRecordMask PathRecordMask::kRate{uint64_t{1} << 19};
inline constexpr PathRecordMask PathRecordMask::kPacketLifeTimeSelector{uint64_t{1} << 20};
inline constexpr PathRecordMask PathRecordMask::kPacketLifeTime{uint64_t{1} << 21};
inline constexpr PathRecordMask PathRecordMask::kPreference{uint64_t{1} << 22};

struct PathRecord {
  static constexpr char kName[] = "PathRecord";
  static constexpr uint16_t kAttributeId = static_cast<uint16_t>(SaAttr::kPathRecord);
  static constexpr size_t kBytes = 64;
  using Mask = PathRecordMask;
  static constexpr auto kMadRows = PadToSaData(path_record::kRows, kBytes);

  uint64_t service_id = 0;
  Gid dgid;
  Gid sgid;
  uint16_t dlid = 0;
  uint16_t slid = 0;
  bool raw_traffic = false;
  uint32_t flow_label = 0;  // 20 bits
  uint8_t hop_limit = 0;
  uint8_t tclass = 0;
  bool reversible = false;
  uint8_t numb_path = 0;  // 7 bits
  uint16_t pkey = 0;
  uint16_t qos_class = 0;  // 12 bits
  uint8_t sl = 0;          // 4 bits
  Selector mtu_selector = Selector::kGreaterThan;
  Mtu mtu{};  // 6 bits
  Selector rate_selector = Selector::kGreaterThan;
  uint8_t rate = 0;  // 6-bit IBTA rate code (2 = 2.5 Gb/s, 3 = 10, 6 = 30, ...)
  Selector packet_life_time_selector = Selector::kGreaterThan;
  uint8_t packet_life_time = 0;  // 6 bits, 4.096 us * 2^value
  uint8_t preference = 0;

  // `record` holds at least 64 bytes ("PathRecord truncated: 40 of 64 bytes;
  // DLID (record bytes 40..41) is incomplete").
  static absl::StatusOr<PathRecord> Parse(std::span<const uint8_t> record);
  // Writes 64 bytes; a value too wide for its field is an error naming it.
  absl::Status Emit(std::span<uint8_t> record) const;

  static PathRecord Read(const FieldView& v);
  void Write(FieldWriter& w) const;

  friend bool operator==(const PathRecord&, const PathRecord&) = default;
};
static_assert(CoversExactly(PathRecord::kMadRows.rows, kSaDataBytes));

using PathRecordMad = SaRecordMad<PathRecord>;

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_PATH_RECORD_H_
