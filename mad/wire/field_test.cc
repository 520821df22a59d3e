#include "mad/wire/field.h"

#include <array>

#include "gtest/gtest.h"

namespace uscm::mad::wire {
namespace {

constexpr Field kGood[] = {{"A", 0, 0, 4}, {"B", 0, 4, 12}, {"C", 2, 0, 16}};
constexpr Field kOverlap[] = {{"A", 0, 0, 8}, {"B", 0, 7, 9}};
constexpr Field kGap[] = {{"A", 0, 0, 8}, {"B", 2, 0, 8}};
constexpr Field kPastEnd[] = {{"A", 0, 0, 8}, {"B", 1, 0, 16}};
constexpr Field kOddWide[] = {{"A", 0, 4, 68}, {"B", 0, 0, 4}, Reserved(9, 0, 8)};

static_assert(CoversExactly(kGood, 4));
static_assert(!CoversExactly(kGood, 5));  // one byte uncovered

TEST(FieldTableTest, CoverageErrorsNameTheRow) {
  EXPECT_EQ(FirstCoverageError(kGood, 4), 3u);
  EXPECT_EQ(FirstCoverageError(kOverlap, 2), 1u);  // B overlaps A's last bit
  EXPECT_EQ(FirstCoverageError(kGap, 3), 2u + 1);  // N + 1 = a gap
  EXPECT_EQ(FirstCoverageError(kPastEnd, 2), 1u);
  EXPECT_EQ(FirstCoverageError(kOddWide, 10), 0u);  // > 64 bits must be bytes
}

TEST(FieldTest, ReadsBigEndianMsbFirst) {
  // 0xAB 0xCD 0xEF 0x01
  const std::array<uint8_t, 4> b = {0xAB, 0xCD, 0xEF, 0x01};
  EXPECT_EQ(ReadField(b.data(), {"x", 0, 0, 4}), 0xAu);
  EXPECT_EQ(ReadField(b.data(), {"x", 0, 4, 12}), 0xBCDu);
  EXPECT_EQ(ReadField(b.data(), {"x", 1, 0, 24}), 0xCDEF01u);
  EXPECT_EQ(ReadField(b.data(), {"x", 0, 0, 32}), 0xABCDEF01u);
  EXPECT_EQ(ReadField(b.data(), {"x", 3, 7, 1}), 1u);
  EXPECT_EQ(ReadField(b.data(), {"x", 0, 3, 6}), 0b010111u);  // 1011 1100 -> bits 3..8
}

TEST(FieldTest, WriteTouchesOnlyTheField) {
  std::array<uint8_t, 10> b;
  b.fill(0xFF);
  WriteField(b.data(), {"x", 0, 4, 12}, 0x123);
  EXPECT_EQ(b[0], 0xF1);
  EXPECT_EQ(b[1], 0x23);
  EXPECT_EQ(b[2], 0xFF);
  b.fill(0);
  WriteField(b.data(), {"x", 1, 4, 64}, 0x0123456789ABCDEFull);  // unaligned 64-bit
  EXPECT_EQ(ReadField(b.data(), {"x", 1, 4, 64}), 0x0123456789ABCDEFull);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x00);
  EXPECT_EQ(b[9] & 0x0F, 0x00);
  EXPECT_EQ(b[9] >> 4, 0xF);
}

TEST(FieldTest, RandomWriteReadRoundTrip) {
  uint64_t seed = 1;
  for (int i = 0; i < 20000; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const uint8_t bit = seed >> 61;
    const uint16_t width = 1 + (seed >> 20) % 64;
    const Field f{"x", 2, bit, width};
    std::array<uint8_t, 16> b;
    b.fill(static_cast<uint8_t>(seed >> 8));
    const std::array<uint8_t, 16> before = b;
    const uint64_t v = (seed * 0x9E3779B97F4A7C15ull) & f.max_value();
    WriteField(b.data(), f, v);
    ASSERT_EQ(ReadField(b.data(), f), v) << "bit " << int(bit) << " width " << width;
    // Bits outside the field are unchanged.
    WriteField(b.data(), f, ReadField(before.data(), f));
    ASSERT_EQ(b, before);
  }
}

}  // namespace
}  // namespace uscm::mad::wire
