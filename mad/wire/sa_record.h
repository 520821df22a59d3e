// What every SA record shares (digest §1.5, §6): a strongly typed
// ComponentMask per record, the record-sized length check used when records
// are cut out of an RMPP-reassembled buffer, and the padding row that makes a
// record's table tile the 200-byte SA data area of a single MAD.
#ifndef USCM_MAD_WIRE_SA_RECORD_H_
#define USCM_MAD_WIRE_SA_RECORD_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "mad/wire/field.h"

namespace uscm::mad::wire {

inline constexpr size_t kSaDataBytes = 200;  // MAD bytes 56..255

// The 2-bit selector in front of MTU, Rate and PacketLifeTime in PathRecord and
// MCMemberRecord (IBTA Vol 1 §15.2.5.16). All four values are defined.
enum class Selector : uint8_t {
  kGreaterThan = 0,
  kLessThan = 1,
  kExactly = 2,
  kBest = 3,  // the largest available (MTU, Rate) or smallest (PacketLifeTime)
};
const char* SelectorName(Selector s);  // ">", "<", "=", "best"

// The 6-bit MTU code (IBTA Vol 1 Table 216 "MTU"). Unknown codes survive.
enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
// Bytes for a known code, 0 otherwise.
constexpr uint32_t MtuBytes(Mtu m) {
  const uint8_t c = static_cast<uint8_t>(m);
  return c >= 1 && c <= 5 ? 128u << c : 0;
}

// ComponentMask: bit n is 1 << n of the big-endian 64-bit value at MAD+48.
// Each record derives its own mask type (CRTP) so a PathRecord bit cannot be
// or'ed into an MCMemberRecord query; bits() is the raw wire value.
template <typename Derived>
class ComponentMaskBase {
 public:
  constexpr ComponentMaskBase() = default;
  constexpr explicit ComponentMaskBase(uint64_t bits) : bits_(bits) {}

  constexpr uint64_t bits() const { return bits_; }
  constexpr bool empty() const { return bits_ == 0; }
  // True when every bit of `m` is set (so Has(kServiceId) needs both halves).
  constexpr bool Has(Derived m) const { return m.bits() != 0 && (bits_ & m.bits()) == m.bits(); }

  friend constexpr Derived operator|(Derived a, Derived b) { return Derived(a.bits() | b.bits()); }
  friend constexpr Derived operator&(Derived a, Derived b) { return Derived(a.bits() & b.bits()); }
  friend constexpr bool operator==(Derived a, Derived b) { return a.bits() == b.bits(); }
  constexpr Derived& operator|=(Derived b) {
    bits_ |= b.bits();
    return static_cast<Derived&>(*this);
  }

 private:
  uint64_t bits_ = 0;
};

// Names of the set bits, lowest first: `names[n]` for bit n, or "bit<n>" when
// the bit has no name (reserved, or beyond the record's last field).
std::vector<std::string> MaskBitNames(uint64_t bits, std::span<const char* const> names);

// A record's rows followed by one reserved row that pads it to the 200-byte SA
// data area, so that a truncated single-record MAD names the record field that
// is cut (and emitters zero the padding).
template <size_t N>
struct PaddedRows {
  Field rows[N + 1];
};
template <size_t N>
constexpr PaddedRows<N> PadToSaData(const Field (&rows)[N], uint16_t record_bytes) {
  PaddedRows<N> out{};
  for (size_t i = 0; i < N; ++i) out.rows[i] = rows[i];
  out.rows[N] = Reserved(record_bytes, 0, static_cast<uint16_t>((kSaDataBytes - record_bytes) * 8));
  return out;
}

// "PathRecord truncated: 40 of 64 bytes; DLID (record bytes 40..41) is
// incomplete", or OkStatus when `available` >= `record_bytes`.
absl::Status CheckRecordLength(absl::string_view what, std::span<const Field> rows,
                               size_t available, size_t record_bytes);
// "PathRecord output buffer is 10 bytes; the record needs 64".
absl::Status CheckRecordOutput(absl::string_view what, size_t available, size_t record_bytes);

// The record size in 8-byte words, as AttributeOffset carries it
// (MCMemberRecord: 52 bytes -> 7 words = a 56-byte stride).
constexpr uint16_t AttributeOffsetFor(size_t record_bytes) {
  return static_cast<uint16_t>((record_bytes + 7) / 8);
}

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_SA_RECORD_H_
