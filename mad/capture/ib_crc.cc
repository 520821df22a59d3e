#include "mad/capture/ib_crc.h"

#include <array>

namespace uscm::mad::capture {
namespace {

// Reflected polynomials: 0x04C11DB7 -> 0xEDB88320, 0x100B -> 0xD008.
constexpr uint32_t kCrc32Reflected = 0xEDB88320u;
constexpr uint16_t kVcrcReflected = 0xD008u;

template <typename T, T kPoly>
constexpr std::array<T, 256> MakeTable() {
  std::array<T, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    T c = static_cast<T>(n);
    for (int k = 0; k < 8; ++k) {
      c = (c & 1) ? static_cast<T>(kPoly ^ (c >> 1)) : static_cast<T>(c >> 1);
    }
    table[n] = c;
  }
  return table;
}

constexpr auto kCrc32Table = MakeTable<uint32_t, kCrc32Reflected>();
constexpr auto kVcrcTable = MakeTable<uint16_t, kVcrcReflected>();

}  // namespace

uint32_t Crc32(std::span<const uint8_t> data, uint32_t crc) {
  uint32_t c = ~crc;
  for (uint8_t b : data) c = kCrc32Table[(c ^ b) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint16_t Vcrc16(std::span<const uint8_t> data, uint16_t crc) {
  uint16_t c = static_cast<uint16_t>(~crc);
  for (uint8_t b : data) {
    c = static_cast<uint16_t>(kVcrcTable[(c ^ b) & 0xFF] ^ (c >> 8));
  }
  return static_cast<uint16_t>(~c);
}

}  // namespace uscm::mad::capture
