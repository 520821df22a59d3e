// A REQ-shaped CM MAD (class 0x07 v2, method Send, attribute REQ) whose body
// is a seeded pseudo-random pattern: the sender builds it, the test rebuilds
// it from the same seed and compares what the receiver printed.
#ifndef USCM_TESTS_IBSIM_CM_PATTERN_H_
#define USCM_TESTS_IBSIM_CM_PATTERN_H_

#include <array>
#include <cstdint>

namespace uscm::mad {

inline std::array<uint8_t, 256> CmPatternMad(uint32_t seed) {
  std::array<uint8_t, 256> m{};
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 24; i < m.size(); ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    m[i] = static_cast<uint8_t>(x);
  }
  m[0] = 1;     // BaseVersion
  m[1] = 0x07;  // MgmtClass CM
  m[2] = 2;     // ClassVersion
  m[3] = 0x03;  // Method Send
  // TID: upper half 0 (umad owns it), lower half from the seed.
  for (int i = 0; i < 4; ++i) m[12 + i] = static_cast<uint8_t>((seed ^ 0xc0de0000u) >> (24 - 8 * i));
  m[16] = 0x00;  // AttributeID REQ (0x0010)
  m[17] = 0x10;
  return m;
}

}  // namespace uscm::mad

#endif  // USCM_TESTS_IBSIM_CM_PATTERN_H_
