// Field tables: one row per field of an IBTA attribute layout, written exactly as
// the spec tables print them — byte offset, bit offset (bit 0 = the MOST
// significant bit of that byte), width in bits — reserved bits included.
//
//   inline constexpr Field kRtuFields[] = {
//       {"LocalCommID", 0, 0, 32},
//       {"RemoteCommID", 4, 0, 32},
//       {"PrivateData", 8, 0, 224 * 8},
//   };
//   static_assert(CoversExactly(kRtuFields, 232));
//
// CoversExactly proves at compile time that the rows tile the message: no gap, no
// overlap, nothing past the end. All multi-byte values are big-endian.
#ifndef USCM_MAD_WIRE_FIELD_H_
#define USCM_MAD_WIRE_FIELD_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <span>

namespace uscm::mad::wire {

struct Field {
  const char* name;
  uint16_t byte;   // byte offset from the start of the table's structure
  uint8_t bit;     // bit offset inside that byte; 0 = MSB
  uint16_t width;  // bits

  constexpr uint32_t begin_bit() const { return byte * 8u + bit; }
  constexpr uint32_t end_bit() const { return begin_bit() + width; }
  // Bytes [first_byte, end_byte) hold at least one bit of the field.
  constexpr uint32_t end_byte() const { return (end_bit() + 7) / 8; }
  constexpr bool is_bytes() const { return bit == 0 && width % 8 == 0 && width > 64; }
  constexpr uint64_t max_value() const {
    return width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
  }
};

// A reserved row. Every table lists its reserved bits so the coverage check
// can prove the layout; emitters write zeros there. All reserved rows share
// one name object, so "is this row reserved" is a pointer comparison.
inline constexpr char kReservedName[] = "reserved";
constexpr Field Reserved(uint16_t byte, uint8_t bit, uint16_t width) {
  return Field{kReservedName, byte, bit, width};
}
// clang does not constant-fold a comparison of pointers to distinct string
// literals, so compile-time callers (kReservedWords) compare the text instead.
constexpr bool IsReserved(const Field& f) {
  if (std::is_constant_evaluated()) {
    for (size_t i = 0;; ++i) {
      if (f.name[i] != kReservedName[i]) return false;
      if (f.name[i] == '\0') return true;
    }
  }
  return f.name == kReservedName;
}

// Index of the first row that breaks the tiling (or N when the rows tile
// exactly `length_bytes`). Used by CoversExactly and by its unit test.
template <size_t N>
constexpr size_t FirstCoverageError(const Field (&rows)[N], size_t length_bytes) {
  uint64_t total = 0;
  for (size_t i = 0; i < N; ++i) {
    const Field& f = rows[i];
    if (f.width == 0 || f.bit > 7 || f.end_bit() > length_bytes * 8) return i;
    if (f.width > 64 && !f.is_bytes()) return i;  // wide fields must be byte strings
    for (size_t j = 0; j < i; ++j) {
      if (f.begin_bit() < rows[j].end_bit() && rows[j].begin_bit() < f.end_bit()) return i;
    }
    total += f.width;
  }
  return total == length_bytes * 8 ? N : N + 1;  // N + 1: a gap somewhere
}

template <size_t N>
constexpr bool CoversExactly(const Field (&rows)[N], size_t length_bytes) {
  return FirstCoverageError(rows, length_bytes) == N;
}

// The reserved bits of a table as a few 8-byte words, built at compile time
// from the reserved rows, so an emitter clears them with one load / and /
// store per word instead of walking every row:
//
//   ClearReserved(body, kReservedWords<req::kRows>);  // 4 words for REQ
//
// Each word's `keep` mask has a 1 for every bit that is NOT reserved, so the
// other fields in the word are left exactly as they are (an emitter still
// writes every field itself; nothing here zeroes a field).
struct ReservedWord {
  uint16_t byte;  // offset of the word inside the table
  uint64_t keep;  // in host byte order, as memcpy loads the word
};

inline constexpr size_t kMaxTableBytes = 256;

// The table's length: the end of its last row.
template <size_t N>
constexpr size_t TableBytes(const Field (&rows)[N]) {
  size_t end = 0;
  for (const Field& f : rows) end = end > f.end_byte() ? end : f.end_byte();
  return end;
}

// Per byte of the table, which bits are reserved (bit 0 = MSB as in the rows).
template <size_t N>
constexpr std::array<uint8_t, kMaxTableBytes> ReservedBits(const Field (&rows)[N]) {
  std::array<uint8_t, kMaxTableBytes> bits{};
  for (const Field& f : rows) {
    if (!IsReserved(f)) continue;
    for (uint32_t b = f.begin_bit(); b < f.end_bit(); ++b) {
      bits[b / 8] = static_cast<uint8_t>(bits[b / 8] | (0x80u >> (b % 8)));
    }
  }
  return bits;
}

// Walks the reserved bytes left to right; each uncovered one starts a word
// (moved back so it ends inside the table). Calls visit(word_start) per word.
template <size_t N, typename Visit>
constexpr void ForEachReservedWord(const Field (&rows)[N], Visit visit) {
  const size_t length = TableBytes(rows);
  const auto bits = ReservedBits(rows);
  for (size_t i = 0; i < length;) {
    if (bits[i] == 0) {
      ++i;
      continue;
    }
    const size_t start = i + 8 <= length ? i : length - 8;
    visit(start, bits);
    i = start + 8;
  }
}

template <size_t N>
constexpr size_t ReservedWordCount(const Field (&rows)[N]) {
  size_t count = 0;
  ForEachReservedWord(rows, [&count](size_t, const auto&) { ++count; });
  return count;
}

template <size_t K, size_t N>
constexpr std::array<ReservedWord, K> MakeReservedWords(const Field (&rows)[N]) {
  static_assert(N > 0);
  std::array<ReservedWord, K> words{};
  size_t k = 0;
  ForEachReservedWord(rows, [&words, &k](size_t start, const auto& bits) {
    std::array<uint8_t, 8> keep{};
    for (size_t j = 0; j < 8; ++j) keep[j] = static_cast<uint8_t>(~bits[start + j]);
    words[k++] = ReservedWord{static_cast<uint16_t>(start), std::bit_cast<uint64_t>(keep)};
  });
  return words;
}

// kReservedWords<req::kRows>: the words of one table, computed once at compile time.
template <const auto& kRows>
inline constexpr auto kReservedWords = [] {
  static_assert(TableBytes(kRows) >= 8 && TableBytes(kRows) <= kMaxTableBytes);
  return MakeReservedWords<ReservedWordCount(kRows)>(kRows);
}();

// Clears the reserved bits of a table starting at `base`.
template <size_t K>
[[gnu::always_inline]] inline void ClearReserved(uint8_t* base,
                                                 const std::array<ReservedWord, K>& words) {
  for (const ReservedWord& w : words) {
    uint64_t v;
    std::memcpy(&v, base + w.byte, 8);
    v &= w.keep;
    std::memcpy(base + w.byte, &v, 8);
  }
}

// Reads a field of at most 64 bits. `base` must hold field.end_byte() bytes.
[[gnu::always_inline]] constexpr uint64_t ReadField(const uint8_t* base, const Field& f) {
  const uint32_t first = f.begin_bit() / 8;
  if (f.bit == 0 && f.width % 8 == 0) {  // whole bytes: most fields
    if (!std::is_constant_evaluated()) {
      switch (f.width) {
        case 16: { uint16_t v; std::memcpy(&v, base + first, 2); return __builtin_bswap16(v); }
        case 32: { uint32_t v; std::memcpy(&v, base + first, 4); return __builtin_bswap32(v); }
        case 64: { uint64_t v; std::memcpy(&v, base + first, 8); return __builtin_bswap64(v); }
        default: break;
      }
    }
    uint64_t v = 0;
    for (uint32_t i = 0; i < f.width / 8u; ++i) v = v << 8 | base[first + i];
    return v;
  }
  if (f.bit + f.width <= 8) {  // inside one byte
    return static_cast<uint64_t>(base[first] >> (8 - f.bit - f.width)) & f.max_value();
  }
  const uint32_t last = f.end_byte();
  unsigned __int128 acc = 0;
  for (uint32_t i = first; i < last; ++i) acc = (acc << 8) | base[i];
  acc >>= last * 8 - f.end_bit();
  return static_cast<uint64_t>(acc) & f.max_value();
}

// Writes a field of at most 64 bits, leaving the neighbouring bits untouched.
// The caller has checked value <= f.max_value() (see FieldWriter in view.h).
[[gnu::always_inline]] constexpr void WriteField(uint8_t* base, const Field& f, uint64_t value) {
  const uint32_t first = f.begin_bit() / 8;
  if (f.bit == 0 && f.width % 8 == 0) {  // whole bytes: most fields
    if (!std::is_constant_evaluated()) {
      switch (f.width) {
        case 16: { const uint16_t v = __builtin_bswap16(static_cast<uint16_t>(value)); std::memcpy(base + first, &v, 2); return; }
        case 32: { const uint32_t v = __builtin_bswap32(static_cast<uint32_t>(value)); std::memcpy(base + first, &v, 4); return; }
        case 64: { const uint64_t v = __builtin_bswap64(value); std::memcpy(base + first, &v, 8); return; }
        default: break;
      }
    }
    for (uint32_t i = f.width / 8u; i-- > 0; value >>= 8) base[first + i] = static_cast<uint8_t>(value);
    return;
  }
  if (f.bit + f.width <= 8) {  // inside one byte
    const uint32_t shift = 8 - f.bit - f.width;
    const uint8_t mask = static_cast<uint8_t>(f.max_value() << shift);
    base[first] = static_cast<uint8_t>((base[first] & ~mask) | ((value << shift) & mask));
    return;
  }
  const uint32_t last = f.end_byte();
  const uint32_t shift = last * 8 - f.end_bit();
  const unsigned __int128 mask = static_cast<unsigned __int128>(f.max_value()) << shift;
  const unsigned __int128 bits = static_cast<unsigned __int128>(value & f.max_value()) << shift;
  for (uint32_t i = last; i-- > first;) {
    const uint32_t s = (last - 1 - i) * 8;
    const uint8_t m = static_cast<uint8_t>(mask >> s);
    base[i] = static_cast<uint8_t>((base[i] & ~m) | (static_cast<uint8_t>(bits >> s) & m));
  }
}

// One logical field that the spec prints as several rows (the ECE VendorID is
// three separate bytes in REP and a 16-bit "H" plus an 8-bit "L" in SIDR_REP).
// Parts are listed most significant first; the value is their concatenation.
// Each part also appears in the message's row table, so coverage still holds.
template <size_t K>
struct SplitField {
  const char* name;
  Field parts[K];

  constexpr uint32_t width() const {
    uint32_t w = 0;
    for (const Field& p : parts) w += p.width;
    return w;
  }
  constexpr uint64_t max_value() const {
    return width() >= 64 ? ~uint64_t{0} : (uint64_t{1} << width()) - 1;
  }
};

template <size_t K>
constexpr uint64_t ReadSplit(const uint8_t* base, const SplitField<K>& f) {
  uint64_t v = 0;
  for (const Field& p : f.parts) v = (v << p.width) | ReadField(base, p);
  return v;
}

// The caller has checked value <= f.max_value().
template <size_t K>
constexpr void WriteSplit(uint8_t* base, const SplitField<K>& f, uint64_t value) {
  uint32_t shift = f.width();
  for (const Field& p : f.parts) {
    shift -= p.width;
    WriteField(base, p, (value >> shift) & p.max_value());
  }
}

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_FIELD_H_
