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

// Reserved bits at a table's start, middle (sub-byte) and end, with a whole
// reserved word: the masks must clear exactly these bits.
constexpr Field kMixed[] = {
    Reserved(0, 0, 3), {"A", 0, 3, 13}, {"B", 2, 0, 64}, Reserved(10, 0, 72),
    {"C", 19, 0, 5},   Reserved(19, 5, 2), {"D", 19, 7, 9}, Reserved(21, 0, 8),
};
static_assert(CoversExactly(kMixed, 22));
static_assert(kReservedWords<kMixed>.size() == 3);

TEST(ReservedWordsTest, ClearExactlyTheReservedBits) {
  std::array<uint8_t, 22> got;
  got.fill(0xFF);
  ClearReserved(got.data(), kReservedWords<kMixed>);
  std::array<uint8_t, 22> want;
  want.fill(0xFF);
  for (const Field& f : kMixed) {
    if (!IsReserved(f)) continue;
    for (uint32_t b = f.begin_bit(); b < f.end_bit(); ++b) want[b / 8] &= ~(0x80u >> (b % 8));
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(want[0], 0x1F);   // top 3 bits reserved
  EXPECT_EQ(want[19], 0xF9);  // bits 5..6 reserved
  EXPECT_EQ(want[21], 0x00);  // last byte, reached by a word moved back to end at 22
}

}  // namespace
}  // namespace uscm::mad::wire
