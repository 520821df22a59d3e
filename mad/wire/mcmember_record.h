// SA MCMemberRecord (IBTA Vol 1 Table 224; digest §6.2): attribute 0x0038, 52
// bytes on the wire but AttributeOffset 7 (a 56-byte stride in GetTable
// responses). Join = Set, leave = Delete, both with JoinState in the mask.
#ifndef USCM_MAD_WIRE_MCMEMBER_RECORD_H_
#define USCM_MAD_WIRE_MCMEMBER_RECORD_H_

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

namespace mcmember_record {
// IBTA Vol 1 Table 224, MCMemberRecord (offsets from the record's byte 0).
inline constexpr Field kMgid{"MGID", 0, 0, 128};
inline constexpr Field kPortGid{"PortGID", 16, 0, 128};
inline constexpr Field kQKey{"Q_Key", 32, 0, 32};
inline constexpr Field kMlid{"MLID", 36, 0, 16};
inline constexpr Field kMtuSelector{"MTUSelector", 38, 0, 2};
inline constexpr Field kMtu{"MTU", 38, 2, 6};
inline constexpr Field kTClass{"TClass", 39, 0, 8};
inline constexpr Field kPKey{"P_Key", 40, 0, 16};
inline constexpr Field kRateSelector{"RateSelector", 42, 0, 2};
inline constexpr Field kRate{"Rate", 42, 2, 6};
inline constexpr Field kPacketLifeTimeSelector{"PacketLifeTimeSelector", 43, 0, 2};
inline constexpr Field kPacketLifeTime{"PacketLifeTime", 43, 2, 6};
inline constexpr Field kSl{"SL", 44, 0, 4};
inline constexpr Field kFlowLabel{"FlowLabel", 44, 4, 20};
inline constexpr Field kHopLimit{"HopLimit", 47, 0, 8};
inline constexpr Field kScope{"Scope", 48, 0, 4};
inline constexpr Field kJoinState{"JoinState", 48, 4, 4};
inline constexpr Field kProxyJoin{"ProxyJoin", 49, 0, 1};
inline constexpr Field kReserved49 = Reserved(49, 1, 23);

inline constexpr Field kRows[] = {
    kMgid,     kPortGid, kQKey,         kMlid, kMtuSelector, kMtu,
    kTClass,   kPKey,    kRateSelector, kRate, kPacketLifeTimeSelector,
    kPacketLifeTime, kSl, kFlowLabel,   kHopLimit, kScope,   kJoinState,
    kProxyJoin, kReserved49,
};
static_assert(CoversExactly(kRows, 52));
}  // namespace mcmember_record

// MCMemberRecord ComponentMask bits (OpenSM IB_MCR_COMPMASK_*).
class McMemberRecordMask : public ComponentMaskBase<McMemberRecordMask> {
 public:
  using ComponentMaskBase::ComponentMaskBase;
  static const McMemberRecordMask kMgid, kPortGid, kQKey, kMlid, kMtuSelector, kMtu, kTClass,
      kPKey, kRateSelector, kRate, kPacketLifeTimeSelector, kPacketLifeTime, kSl, kFlowLabel,
      kHopLimit, kScope, kJoinState, kProxyJoin;
  std::vector<std::string> Names() const;  // "MGID", "PortGID", ...
};
inline constexpr McMemberRecordMask McMemberRecordMask::kMgid{uint64_t{1} << 0};
inline constexpr McMemberRecordMask McMemberRecordMask::kPortGid{uint64_t{1} << 1};
inline constexpr McMemberRecordMask McMemberRecordMask::kQKey{uint64_t{1} << 2};
inline constexpr McMemberRecordMask McMemberRecordMask::kMlid{uint64_t{1} << 3};
inline constexpr McMemberRecordMask McMemberRecordMask::kMtuSelector{uint64_t{1} << 4};
inline constexpr McMemberRecordMask McMemberRecordMask::kMtu{uint64_t{1} << 5};
inline constexpr McMemberRecordMask McMemberRecordMask::kTClass{uint64_t{1} << 6};
inline constexpr McMemberRecordMask McMemberRecordMask::kPKey{uint64_t{1} << 7};
inline constexpr McMemberRecordMask McMemberRecordMask::kRateSelector{uint64_t{1} << 8};
inline constexpr McMemberRecordMask McMemberRecordMask::kRate{uint64_t{1} << 9};
inline constexpr McMemberRecordMask McMemberRecordMask::kPacketLifeTimeSelector{uint64_t{1} << 10};
inline constexpr McMemberRecordMask McMemberRecordMask::kPacketLifeTime{uint64_t{1} << 11};
inline constexpr McMemberRecordMask McMemberRecordMask::kSl{uint64_t{1} << 12};
inline constexpr McMemberRecordMask McMemberRecordMask::kFlowLabel{uint64_t{1} << 13};
inline constexpr McMemberRecordMask McMemberRecordMask::kHopLimit{uint64_t{1} << 14};
inline constexpr McMemberRecordMask McMemberRecordMask::kScope{uint64_t{1} << 15};
inline constexpr McMemberRecordMask McMemberRecordMask::kJoinState{uint64_t{1} << 16};
inline constexpr McMemberRecordMask McMemberRecordMask::kProxyJoin{uint64_t{1} << 17};

// JoinState: the low nibble of record byte 48. A plain bit set; all four bits
// are named, so every wire value is representable.
class JoinState {
 public:
  static constexpr uint8_t kFullMember = 0x1;
  static constexpr uint8_t kNonMember = 0x2;
  static constexpr uint8_t kSendOnlyNonMember = 0x4;
  // Needs SA ClassPortInfo CapabilityMask2 bit 12 (Linux checks it).
  static constexpr uint8_t kSendOnlyFullMember = 0x8;

  constexpr JoinState() = default;
  constexpr explicit JoinState(uint8_t bits) : bits_(bits) {}
  constexpr uint8_t bits() const { return bits_; }
  constexpr bool full_member() const { return bits_ & kFullMember; }
  constexpr bool non_member() const { return bits_ & kNonMember; }
  constexpr bool send_only_non_member() const { return bits_ & kSendOnlyNonMember; }
  constexpr bool send_only_full_member() const { return bits_ & kSendOnlyFullMember; }
  std::string ToString() const;  // "FullMember|SendOnlyNonMember", "none"
  friend constexpr bool operator==(JoinState, JoinState) = default;

 private:
  uint8_t bits_ = 0;
};

// Multicast scope (the MGID's scope nibble; IBTA Vol 1 §4.1.1). Unknown values survive.
enum class McScope : uint8_t {
  kLinkLocal = 0x2,
  kSiteLocal = 0x5,
  kOrganizationLocal = 0x8,
  kGlobal = 0xE,
};

struct McMemberRecord {
  static constexpr char kName[] = "MCMemberRecord";
  static constexpr uint16_t kAttributeId = static_cast<uint16_t>(SaAttr::kMcMemberRecord);
  static constexpr size_t kBytes = 52;  // AttributeOffset 7: records sit 56 bytes apart
  using Mask = McMemberRecordMask;
  static constexpr auto kMadRows = PadToSaData(mcmember_record::kRows, kBytes);

  Gid mgid;
  Gid port_gid;
  uint32_t qkey = 0;
  uint16_t mlid = 0;
  Selector mtu_selector = Selector::kGreaterThan;
  Mtu mtu{};
  uint8_t tclass = 0;
  uint16_t pkey = 0;
  Selector rate_selector = Selector::kGreaterThan;
  uint8_t rate = 0;  // 6 bits
  Selector packet_life_time_selector = Selector::kGreaterThan;
  uint8_t packet_life_time = 0;  // 6 bits
  uint8_t sl = 0;                // 4 bits
  uint32_t flow_label = 0;       // 20 bits
  uint8_t hop_limit = 0;
  McScope scope{};  // 4 bits
  JoinState join_state;
  bool proxy_join = false;

  static absl::StatusOr<McMemberRecord> Parse(std::span<const uint8_t> record);
  absl::Status Emit(std::span<uint8_t> record) const;  // writes 52 bytes

  static McMemberRecord Read(const FieldView& v);
  void Write(FieldWriter& w) const;

  friend bool operator==(const McMemberRecord&, const McMemberRecord&) = default;
};
static_assert(CoversExactly(McMemberRecord::kMadRows.rows, kSaDataBytes));

using McMemberRecordMad = SaRecordMad<McMemberRecord>;

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_MCMEMBER_RECORD_H_
