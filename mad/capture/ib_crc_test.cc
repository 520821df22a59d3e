#include "mad/capture/ib_crc.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace uscm::mad::capture {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Textbook bit-serial CRC from the polynomial as the spec writes it (MSB
// first, non-reflected), applied to bit-reversed input: an independent
// formulation of the table-driven, reflected code under test.
uint32_t Reverse(uint32_t v, int bits) {
  uint32_t r = 0;
  for (int i = 0; i < bits; ++i) r |= ((v >> i) & 1u) << (bits - 1 - i);
  return r;
}
uint32_t SerialCrc(std::span<const uint8_t> data, uint32_t poly, int width) {
  const uint32_t top = 1u << (width - 1);
  const uint32_t mask = width == 32 ? 0xFFFFFFFFu : (1u << width) - 1;
  uint32_t c = mask;  // seed all ones
  for (uint8_t byte : data) {
    const uint32_t b = Reverse(byte, 8);
    for (int i = 7; i >= 0; --i) {
      const bool in = ((c & top) != 0) != (((b >> i) & 1u) != 0);
      c = (c << 1) & mask;
      if (in) c ^= poly;
    }
  }
  return Reverse(c ^ mask, width);
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    v[i] = static_cast<uint8_t>(seed >> 16);
  }
  return v;
}

TEST(IbCrcTest, Crc32CheckValue) {
  // The catalogued CRC-32 check value (zlib.crc32(b"123456789")).
  EXPECT_EQ(Crc32(Bytes("123456789")), 0xCBF43926u);
  EXPECT_EQ(Crc32({}), 0u);
}

TEST(IbCrcTest, VcrcCheckValue) {
  // Python bit-serial x^16+x^12+x^3+x+1, seed/xorout 0xFFFF, reflected.
  EXPECT_EQ(Vcrc16(Bytes("123456789")), 0x0A3D);
}

TEST(IbCrcTest, TablesMatchBitSerialPolynomials) {
  for (size_t n : {1u, 7u, 64u, 290u}) {
    const std::vector<uint8_t> d = Pattern(n, static_cast<uint32_t>(n));
    EXPECT_EQ(Crc32(d), SerialCrc(d, 0x04C11DB7u, 32)) << n;
    EXPECT_EQ(Vcrc16(d), SerialCrc(d, 0x100Bu, 16)) << n;
  }
}

TEST(IbCrcTest, IncrementalEqualsOneShot) {
  const std::vector<uint8_t> d = Pattern(300, 7);
  const std::span<const uint8_t> s(d);
  EXPECT_EQ(Crc32(s.subspan(100), Crc32(s.first(100))), Crc32(s));
  EXPECT_EQ(Vcrc16(s.subspan(33), Vcrc16(s.first(33))), Vcrc16(s));
}

TEST(IbCrcTest, AppendingCrcLeastSignificantByteFirstGivesConstantResidue) {
  // The property a receiver relies on: CRC(data | crc_le) is one constant.
  uint32_t crc32_residue = 0;
  uint16_t vcrc_residue = 0;
  for (uint32_t seed = 1; seed < 6; ++seed) {
    std::vector<uint8_t> d = Pattern(20 + seed * 13, seed);
    const uint32_t c = Crc32(d);
    std::vector<uint8_t> d32 = d;
    for (int i = 0; i < 4; ++i) d32.push_back(static_cast<uint8_t>(c >> (8 * i)));
    const uint16_t v = Vcrc16(d);
    d.push_back(static_cast<uint8_t>(v));
    d.push_back(static_cast<uint8_t>(v >> 8));
    if (seed == 1) {
      crc32_residue = Crc32(d32);
      vcrc_residue = Vcrc16(d);
    }
    EXPECT_EQ(Crc32(d32), crc32_residue);
    EXPECT_EQ(Vcrc16(d), vcrc_residue);
  }
  EXPECT_EQ(crc32_residue, 0x2144DF1Cu);  // the well-known CRC-32 residue
}

}  // namespace
}  // namespace uscm::mad::capture
