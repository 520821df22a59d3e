#include "mad/wire/mad_header.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using testing::Hex;

// A CM REQ's common header with every field non-zero (the reserved bytes
// 18..19 included: Parse must ignore them).
const std::vector<uint8_t> kGolden = Hex(R"(
  01            | BaseVersion 1
  07            | MgmtClass CM
  02            | ClassVersion 2
  83            | R 1, Method 0x03 (the full byte 0x83)
  12 34         | Status 0x1234
  56 78         | ClassSpecific 0x5678
  01 02 03 04 05 06 07 08 | TransactionID
  00 10         | AttributeID REQ
  ff ff         | reserved (ignored by Parse)
  9a bc de f0   | AttributeModifier
)");

MadHeader GoldenHeader() {
  MadHeader h;
  h.base_version = 1;
  h.mgmt_class = 0x07;
  h.class_version = 2;
  h.method = 0x83;
  h.status = 0x1234;
  h.class_specific = 0x5678;
  h.transaction_id = 0x0102030405060708;
  h.attribute_id = 0x0010;
  h.attribute_modifier = 0x9abcdef0;
  return h;
}

TEST(MadHeaderTest, ParseGolden) {
  auto h = MadHeader::Parse(kGolden);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(*h, GoldenHeader());
  EXPECT_TRUE(h->is_response());
}

TEST(MadHeaderTest, EmitWritesExactlyBytes0To23WithReservedZeroed) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenHeader().Emit(buf).ok());
  std::vector<uint8_t> want(kGolden.begin(), kGolden.begin() + 24);
  want[18] = 0;
  want[19] = 0;
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + 24, want.begin()))
      << testing::DiffBytes(std::span(buf).first(24), want);
  EXPECT_TRUE(std::all_of(buf.begin() + 24, buf.end(),
                          [](uint8_t b) { return b == testing::kPoison; }));
}

// IBTA Vol 1 Table 145, stated by hand (not from mad_header::kRows): the
// name and the first / last byte of each field, in wire order.
struct Span {
  const char* name;
  int first;
  int last;
};
constexpr Span kSpans[] = {
    {"BaseVersion", 0, 0},    {"MgmtClass", 1, 1},      {"ClassVersion", 2, 2},
    {"R", 3, 3},              {"Status", 4, 5},         {"ClassSpecific", 6, 7},
    {"TransactionID", 8, 15}, {"AttributeID", 16, 17},  {"reserved", 18, 19},
    {"AttributeModifier", 20, 23},
};

TEST(MadHeaderTest, ExactTruncationErrorAtEveryPrefix) {
  for (int n = 0; n < 24; ++n) {
    const Span* cut = nullptr;
    for (const Span& s : kSpans) {
      if (s.last >= n) {
        cut = &s;
        break;
      }
    }
    ASSERT_NE(cut, nullptr) << n;
    const std::string want = absl::StrFormat(
        "MAD header truncated: %d of 256 bytes; %s (MAD bytes %d..%d) is incomplete", n,
        cut->name, cut->first, cut->last);
    auto h = MadHeader::Parse(std::span(kGolden).first(n));
    ASSERT_FALSE(h.ok()) << n;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_EQ(h.status().message(), want) << "prefix " << n;
  }
  // 24 bytes are enough: the header does not look at the data.
  auto h = MadHeader::Parse(std::span(kGolden).first(24));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(*h, GoldenHeader());
}

TEST(MadHeaderTest, ExactErrorsForBaseVersionAndShortOutput) {
  auto mad = kGolden;
  mad[0] = 0x80;
  EXPECT_EQ(MadHeader::Parse(mad).status().message(),
            "MAD.BaseVersion = 128; only InfiniBand (1) is supported");
  std::array<uint8_t, 23> small;
  EXPECT_EQ(GoldenHeader().Emit(small).message(),
            "MAD header needs 24 bytes; the buffer has 23");
}

TEST(MadHeaderTest, RandomRoundTrip) {
  std::mt19937_64 rng(145);
  std::array<uint8_t, 24> buf;
  for (int i = 0; i < 10000; ++i) {
    MadHeader h;  // base_version stays 1: Parse rejects anything else
    h.mgmt_class = static_cast<uint8_t>(rng());
    h.class_version = static_cast<uint8_t>(rng());
    h.method = static_cast<uint8_t>(rng());
    h.status = static_cast<uint16_t>(rng());
    h.class_specific = static_cast<uint16_t>(rng());
    h.transaction_id = rng();
    h.attribute_id = static_cast<uint16_t>(rng());
    h.attribute_modifier = static_cast<uint32_t>(rng());
    buf.fill(testing::kPoison);
    ASSERT_TRUE(h.Emit(buf).ok()) << i;
    ASSERT_EQ(buf[18], 0) << i;
    ASSERT_EQ(buf[19], 0) << i;
    auto back = MadHeader::Parse(buf);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, h) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
