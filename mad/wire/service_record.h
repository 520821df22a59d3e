// SA ServiceRecord (IBTA Vol 1 Table 221; digest §6.3): attribute 0x0031, 176
// bytes, AttributeOffset 22. Set registers, Delete deregisters, Get/GetTable query.
#ifndef USCM_MAD_WIRE_SERVICE_RECORD_H_
#define USCM_MAD_WIRE_SERVICE_RECORD_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mad/gid.h"
#include "mad/wire/field.h"
#include "mad/wire/view.h"
#include "mad/wire/sa_header.h"
#include "mad/wire/sa_record.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {

namespace service_record {
// IBTA Vol 1 Table 221, ServiceRecord (offsets from the record's byte 0). The
// ServiceData arrays are one row each (16 x 8, 8 x 16, 4 x 32, 2 x 64 bits).
inline constexpr Field kServiceId{"ServiceID", 0, 0, 64};
inline constexpr Field kServiceGid{"ServiceGID", 8, 0, 128};
inline constexpr Field kServicePKey{"ServiceP_Key", 24, 0, 16};
inline constexpr Field kReserved26 = Reserved(26, 0, 16);
inline constexpr Field kServiceLease{"ServiceLease", 28, 0, 32};
inline constexpr Field kServiceKey{"ServiceKey", 32, 0, 128};
inline constexpr Field kServiceName{"ServiceName", 48, 0, 64 * 8};
inline constexpr Field kServiceData8{"ServiceData8", 112, 0, 16 * 8};
inline constexpr Field kServiceData16{"ServiceData16", 128, 0, 8 * 16};
inline constexpr Field kServiceData32{"ServiceData32", 144, 0, 4 * 32};
inline constexpr Field kServiceData64{"ServiceData64", 160, 0, 2 * 64};

inline constexpr Field kRows[] = {
    kServiceId,  kServiceGid,   kServicePKey,  kReserved26,   kServiceLease, kServiceKey,
    kServiceName, kServiceData8, kServiceData16, kServiceData32, kServiceData64,
};
static_assert(CoversExactly(kRows, 176));
}  // namespace service_record

// ServiceRecord ComponentMask bits (OpenSM IB_SR_COMPMASK_*): one bit per
// field and one per ServiceData array element.
class ServiceRecordMask : public ComponentMaskBase<ServiceRecordMask> {
 public:
  using ComponentMaskBase::ComponentMaskBase;
  static const ServiceRecordMask kServiceId, kServiceGid, kServicePKey, kReserved3,
      kServiceLease, kServiceKey, kServiceName;
  // Element i of ServiceData8 (bits 7..22), 16 (23..30), 32 (31..34), 64 (35..36).
  static constexpr ServiceRecordMask ServiceData8(int i) { return Bit(7, i, 16); }
  static constexpr ServiceRecordMask ServiceData16(int i) { return Bit(23, i, 8); }
  static constexpr ServiceRecordMask ServiceData32(int i) { return Bit(31, i, 4); }
  static constexpr ServiceRecordMask ServiceData64(int i) { return Bit(35, i, 2); }
  std::vector<std::string> Names() const;  // "ServiceID", "ServiceData8[3]", ...

 private:
  static constexpr ServiceRecordMask Bit(int first, int i, int count) {
    return ServiceRecordMask(i >= 0 && i < count ? uint64_t{1} << (first + i) : 0);
  }
};
inline constexpr ServiceRecordMask ServiceRecordMask::kServiceId{uint64_t{1} << 0};
inline constexpr ServiceRecordMask ServiceRecordMask::kServiceGid{uint64_t{1} << 1};
inline constexpr ServiceRecordMask ServiceRecordMask::kServicePKey{uint64_t{1} << 2};
inline constexpr ServiceRecordMask ServiceRecordMask::kReserved3{uint64_t{1} << 3};
inline constexpr ServiceRecordMask ServiceRecordMask::kServiceLease{uint64_t{1} << 4};
inline constexpr ServiceRecordMask ServiceRecordMask::kServiceKey{uint64_t{1} << 5};
inline constexpr ServiceRecordMask ServiceRecordMask::kServiceName{uint64_t{1} << 6};

inline constexpr uint32_t kServiceLeaseInfinite = 0xFFFFFFFF;

struct ServiceRecord {
  static constexpr char kName[] = "ServiceRecord";
  static constexpr uint16_t kAttributeId = static_cast<uint16_t>(SaAttr::kServiceRecord);
  static constexpr size_t kBytes = 176;
  static constexpr size_t kNameBytes = 64;
  using Mask = ServiceRecordMask;
  static constexpr auto kMadRows = PadToSaData(service_record::kRows, kBytes);

  uint64_t service_id = 0;
  Gid service_gid;
  uint16_t service_pkey = 0;
  uint32_t service_lease = 0;  // seconds; kServiceLeaseInfinite = never expires
  std::array<uint8_t, 16> service_key{};
  std::array<uint8_t, kNameBytes> service_name{};  // NUL-padded UTF-8, kept as sent
  std::array<uint8_t, 16> service_data8{};
  std::array<uint16_t, 8> service_data16{};
  std::array<uint32_t, 4> service_data32{};
  std::array<uint64_t, 2> service_data64{};

  // The name up to its first NUL.
  std::string name() const;
  // Stores `name` NUL-padded; more than 64 bytes is an error.
  absl::Status set_name(absl::string_view name);

  static absl::StatusOr<ServiceRecord> Parse(std::span<const uint8_t> record);
  absl::Status Emit(std::span<uint8_t> record) const;  // writes 176 bytes

  static ServiceRecord Read(const FieldView& v);
  void Write(FieldWriter& w) const;

  friend bool operator==(const ServiceRecord&, const ServiceRecord&) = default;
};
static_assert(CoversExactly(ServiceRecord::kMadRows.rows, kSaDataBytes));

using ServiceRecordMad = SaRecordMad<ServiceRecord>;

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_SERVICE_RECORD_H_
