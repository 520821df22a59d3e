// The 24-byte common MAD header (IBTA Vol 1, Table 145 "MAD Common Header";
// digest §1.1) and the constants shared by every management class.
#ifndef USCM_MAD_WIRE_MAD_HEADER_H_
#define USCM_MAD_WIRE_MAD_HEADER_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/wire/field.h"

namespace uscm::mad::wire {

inline constexpr size_t kMadBytes = 256;
inline constexpr size_t kMadHeaderBytes = 24;
inline constexpr size_t kMadDataBytes = 232;

enum class MgmtClass : uint8_t { kSubnAdm = 0x03, kCommMgt = 0x07 };

// Method values; the response bit (0x80) is part of the value (0x81 = GetResp).
// Unknown methods survive as their numeric value.
enum class Method : uint8_t {
  kGet = 0x01,
  kSet = 0x02,
  kSend = 0x03,
  kTrap = 0x05,
  kReport = 0x06,
  kTrapRepress = 0x07,
  kGetTable = 0x12,
  kGetTraceTable = 0x13,
  kGetMulti = 0x14,
  kDelete = 0x15,
  kGetResp = 0x81,
  kReportResp = 0x86,
  kGetTableResp = 0x92,
  kGetMultiResp = 0x94,
  kDeleteResp = 0x95,
};
inline constexpr uint8_t kMethodResponseBit = 0x80;
const char* MethodName(Method m);  // "GetResp", or nullptr when unknown

// MAD status bits (digest §1.3; bit 0 = LSB here, as the spec's status table).
inline constexpr uint16_t kStatusBusy = 0x0001;
inline constexpr uint16_t kStatusRedirect = 0x0002;
inline constexpr uint16_t kStatusInvalidFieldMask = 0x001C;
std::string StatusText(uint16_t status);  // "ok", "busy", "SA: ERR_NO_RECORDS", ...

namespace mad_header {
// IBTA Vol 1 Table 145, MAD Common Header.
inline constexpr Field kBaseVersion{"BaseVersion", 0, 0, 8};
inline constexpr Field kMgmtClass{"MgmtClass", 1, 0, 8};
inline constexpr Field kClassVersion{"ClassVersion", 2, 0, 8};
inline constexpr Field kR{"R", 3, 0, 1};
inline constexpr Field kMethod{"Method", 3, 1, 7};
inline constexpr Field kStatus{"Status", 4, 0, 16};
inline constexpr Field kClassSpecific{"ClassSpecific", 6, 0, 16};
inline constexpr Field kTransactionId{"TransactionID", 8, 0, 64};
inline constexpr Field kAttributeId{"AttributeID", 16, 0, 16};
inline constexpr Field kReserved18 = Reserved(18, 0, 16);
inline constexpr Field kAttributeModifier{"AttributeModifier", 20, 0, 32};

inline constexpr Field kRows[] = {
    kBaseVersion, kMgmtClass,      kClassVersion, kR,           kMethod, kStatus,
    kClassSpecific, kTransactionId, kAttributeId, kReserved18, kAttributeModifier,
};
static_assert(CoversExactly(kRows, kMadHeaderBytes));
}  // namespace mad_header

struct MadHeader {
  uint8_t base_version = 1;
  uint8_t mgmt_class = 0;
  uint8_t class_version = 0;
  uint8_t method = 0;  // full byte, response bit included
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t transaction_id = 0;
  uint16_t attribute_id = 0;
  uint32_t attribute_modifier = 0;

  bool is_response() const { return (method & kMethodResponseBit) != 0; }

  // Needs 24 bytes; rejects BaseVersion != 1 ("MAD.BaseVersion = 128; only
  // InfiniBand (1) is supported").
  static absl::StatusOr<MadHeader> Parse(std::span<const uint8_t> mad);
  // Writes the 24 header bytes of `mad` (which must hold at least 24).
  absl::Status Emit(std::span<uint8_t> mad) const;

  friend bool operator==(const MadHeader&, const MadHeader&) = default;
};

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_MAD_HEADER_H_
