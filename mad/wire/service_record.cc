#include "mad/wire/service_record.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace uscm::mad::wire {

namespace {

// Big-endian array elements inside a byte-string row.
template <typename T, size_t N>
void ReadArray(std::span<const uint8_t> bytes, std::array<T, N>* out) {
  for (size_t i = 0; i < N; ++i) {
    T v = 0;
    for (size_t b = 0; b < sizeof(T); ++b) v = static_cast<T>(v << 8 | bytes[i * sizeof(T) + b]);
    (*out)[i] = v;
  }
}

template <typename T, size_t N>
std::array<uint8_t, N * sizeof(T)> ArrayBytes(const std::array<T, N>& in) {
  std::array<uint8_t, N * sizeof(T)> out;
  for (size_t i = 0; i < N; ++i) {
    for (size_t b = 0; b < sizeof(T); ++b) {
      out[i * sizeof(T) + b] = static_cast<uint8_t>(in[i] >> (8 * (sizeof(T) - 1 - b)));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> ServiceRecordMask::Names() const {
  static constexpr const char* kFixed[] = {"ServiceID",    "ServiceGID", "ServiceP_Key",
                                           nullptr,        "ServiceLease", "ServiceKey",
                                           "ServiceName"};
  struct Array {
    const char* name;
    int first, count;
  };
  static constexpr Array kArrays[] = {{"ServiceData8", 7, 16},
                                      {"ServiceData16", 23, 8},
                                      {"ServiceData32", 31, 4},
                                      {"ServiceData64", 35, 2}};
  std::vector<std::string> out = MaskBitNames(bits() & 0x7F, kFixed);
  for (const Array& a : kArrays) {
    for (int i = 0; i < a.count; ++i) {
      if (bits() >> (a.first + i) & 1) out.push_back(absl::StrFormat("%s[%d]", a.name, i));
    }
  }
  for (const std::string& n : MaskBitNames(bits() & ~((uint64_t{1} << 37) - 1), {})) {
    out.push_back(n);
  }
  return out;
}

std::string ServiceRecord::name() const {
  const auto end = std::find(service_name.begin(), service_name.end(), 0);
  return std::string(service_name.begin(), end);
}

absl::Status ServiceRecord::set_name(absl::string_view name) {
  if (name.size() > kNameBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ServiceRecord.ServiceName is %d bytes; the field holds %d", name.size(), kNameBytes));
  }
  service_name.fill(0);
  std::memcpy(service_name.data(), name.data(), name.size());
  return absl::OkStatus();
}

ServiceRecord ServiceRecord::Read(const FieldView& v) {
  using namespace service_record;  // NOLINT: the table's row names
  ServiceRecord r;
  r.service_id = v.Get(kServiceId);
  std::copy_n(v.Bytes(kServiceGid).begin(), 16, r.service_gid.raw.begin());
  r.service_pkey = v.Get(kServicePKey);
  r.service_lease = v.Get(kServiceLease);
  std::copy_n(v.Bytes(kServiceKey).begin(), 16, r.service_key.begin());
  std::copy_n(v.Bytes(kServiceName).begin(), kNameBytes, r.service_name.begin());
  std::copy_n(v.Bytes(kServiceData8).begin(), 16, r.service_data8.begin());
  ReadArray(v.Bytes(kServiceData16), &r.service_data16);
  ReadArray(v.Bytes(kServiceData32), &r.service_data32);
  ReadArray(v.Bytes(kServiceData64), &r.service_data64);
  return r;
}

void ServiceRecord::Write(FieldWriter& w) const {
  using namespace service_record;  // NOLINT: the table's row names
  w.Zero(kReserved26);
  w.Set(kServiceId, service_id);
  w.SetBytes(kServiceGid, service_gid.raw);
  w.Set(kServicePKey, service_pkey);
  w.Set(kServiceLease, service_lease);
  w.SetBytes(kServiceKey, service_key);
  w.SetBytes(kServiceName, service_name);
  w.SetBytes(kServiceData8, service_data8);
  w.SetBytes(kServiceData16, ArrayBytes(service_data16));
  w.SetBytes(kServiceData32, ArrayBytes(service_data32));
  w.SetBytes(kServiceData64, ArrayBytes(service_data64));
}

absl::StatusOr<ServiceRecord> ServiceRecord::Parse(std::span<const uint8_t> record) {
  if (absl::Status s =
          CheckRecordLength(kName, service_record::kRows, record.size(), kBytes);
      !s.ok()) {
    return s;
  }
  return Read(FieldView::Unchecked(record.data()));
}

absl::Status ServiceRecord::Emit(std::span<uint8_t> record) const {
  if (absl::Status s = CheckRecordOutput(kName, record.size(), kBytes); !s.ok()) return s;
  FieldWriter w(kName, record.data());
  Write(w);
  return w.status();
}

}  // namespace uscm::mad::wire
