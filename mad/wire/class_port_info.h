// ClassPortInfo (IBTA Vol 1 Table 126; digest §6.4): attribute 0x0001, 72
// bytes, the same layout for every GSI class. SA carries it at MAD byte 56
// (ClassPortInfoMad in sa_header.h), CM at MAD byte 24; Parse / Emit work on
// the record's own bytes so both can use it.
#ifndef USCM_MAD_WIRE_CLASS_PORT_INFO_H_
#define USCM_MAD_WIRE_CLASS_PORT_INFO_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/gid.h"
#include "mad/wire/field.h"
#include "mad/wire/view.h"
#include "mad/wire/sa_record.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {

namespace class_port_info {
// IBTA Vol 1 Table 126, ClassPortInfo (offsets from the attribute's byte 0).
inline constexpr Field kBaseVersion{"BaseVersion", 0, 0, 8};
inline constexpr Field kClassVersion{"ClassVersion", 1, 0, 8};
inline constexpr Field kCapabilityMask{"CapabilityMask", 2, 0, 16};
inline constexpr Field kCapabilityMask2{"CapabilityMask2", 4, 0, 27};
inline constexpr Field kRespTimeValue{"RespTimeValue", 7, 3, 5};
inline constexpr Field kRedirectGid{"RedirectGID", 8, 0, 128};
inline constexpr Field kRedirectTc{"RedirectTC", 24, 0, 8};
inline constexpr Field kRedirectSl{"RedirectSL", 25, 0, 4};
inline constexpr Field kRedirectFl{"RedirectFL", 25, 4, 20};
inline constexpr Field kRedirectLid{"RedirectLID", 28, 0, 16};
inline constexpr Field kRedirectPKey{"RedirectP_Key", 30, 0, 16};
inline constexpr Field kReserved32 = Reserved(32, 0, 8);
inline constexpr Field kRedirectQp{"RedirectQP", 33, 0, 24};
inline constexpr Field kRedirectQKey{"RedirectQ_Key", 36, 0, 32};
inline constexpr Field kTrapGid{"TrapGID", 40, 0, 128};
inline constexpr Field kTrapTc{"TrapTC", 56, 0, 8};
inline constexpr Field kTrapSl{"TrapSL", 57, 0, 4};
inline constexpr Field kTrapFl{"TrapFL", 57, 4, 20};
inline constexpr Field kTrapLid{"TrapLID", 60, 0, 16};
inline constexpr Field kTrapPKey{"TrapP_Key", 62, 0, 16};
inline constexpr Field kTrapHl{"TrapHL", 64, 0, 8};
inline constexpr Field kTrapQp{"TrapQP", 65, 0, 24};
inline constexpr Field kTrapQKey{"TrapQ_Key", 68, 0, 32};

inline constexpr Field kRows[] = {
    kBaseVersion, kClassVersion, kCapabilityMask, kCapabilityMask2, kRespTimeValue,
    kRedirectGid, kRedirectTc,   kRedirectSl,     kRedirectFl,      kRedirectLid,
    kRedirectPKey, kReserved32,  kRedirectQp,     kRedirectQKey,    kTrapGid,
    kTrapTc,      kTrapSl,       kTrapFl,         kTrapLid,         kTrapPKey,
    kTrapHl,      kTrapQp,       kTrapQKey,
};
static_assert(CoversExactly(kRows, 72));
}  // namespace class_port_info

// CapabilityMask bits common to all classes (IBTA Vol 1 Table 127).
inline constexpr uint16_t kCapIsTrapSupported = 0x0001;
inline constexpr uint16_t kCapIsGetSetSupported = 0x0002;
inline constexpr uint16_t kCapIsCapabilityMask2Supported = 0x0004;
// SA CapabilityMask2 bit 12: send-only full-member joins (Linux
// IB_SA_CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT).
inline constexpr uint32_t kSaCap2SendOnlyFullMemberSupported = 1u << 12;

// ClassPortInfo queries carry ComponentMask 0; the type exists for SaRecordMad.
class ClassPortInfoMask : public ComponentMaskBase<ClassPortInfoMask> {
 public:
  using ComponentMaskBase::ComponentMaskBase;
  std::vector<std::string> Names() const { return MaskBitNames(bits(), {}); }
};

struct ClassPortInfo {
  static constexpr char kName[] = "ClassPortInfo";
  static constexpr uint16_t kAttributeId = 0x0001;
  static constexpr size_t kBytes = 72;
  using Mask = ClassPortInfoMask;
  static constexpr auto kMadRows = PadToSaData(class_port_info::kRows, kBytes);

  uint8_t base_version = 1;
  uint8_t class_version = 0;
  uint16_t capability_mask = 0;
  uint32_t capability_mask2 = 0;  // 27 bits
  uint8_t resp_time_value = 0;    // 5 bits: 4.096 us * 2^value
  Gid redirect_gid;
  uint8_t redirect_tc = 0;
  uint8_t redirect_sl = 0;   // 4 bits
  uint32_t redirect_fl = 0;  // 20 bits
  uint16_t redirect_lid = 0;
  uint16_t redirect_pkey = 0;
  uint32_t redirect_qp = 0;  // 24 bits
  uint32_t redirect_qkey = 0;
  Gid trap_gid;
  uint8_t trap_tc = 0;
  uint8_t trap_sl = 0;   // 4 bits
  uint32_t trap_fl = 0;  // 20 bits
  uint16_t trap_lid = 0;
  uint16_t trap_pkey = 0;
  uint8_t trap_hl = 0;
  uint32_t trap_qp = 0;  // 24 bits
  uint32_t trap_qkey = 0;

  static absl::StatusOr<ClassPortInfo> Parse(std::span<const uint8_t> attribute);
  absl::Status Emit(std::span<uint8_t> attribute) const;  // writes 72 bytes

  static ClassPortInfo Read(const FieldView& v);
  void Write(FieldWriter& w) const;

  friend bool operator==(const ClassPortInfo&, const ClassPortInfo&) = default;
};
static_assert(CoversExactly(ClassPortInfo::kMadRows.rows, kSaDataBytes));

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_CLASS_PORT_INFO_H_
