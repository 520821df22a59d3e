#include "mad/wire/rmpp.h"

#include <algorithm>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/sa_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;
using testing::Hex;

// The RMPP header of the first DATA segment of a 3-segment GetTableResp.
const std::vector<uint8_t> kGolden = Hex(R"(
  01 03 02 92   | MAD header: SA GetTableResp (not looked at by RmppHeader)
  00 00 00 00 00 00 00 00 00 00 00 00 00 35 00 00 00 00 00 00
  01            | +24 RMPPVersion 1
  01            | +25 RMPPType DATA
  a3            | +26 RRespTime 20 (10100), flags Active|First (011)
  00            | +27 RMPPStatus normal
  00 00 00 01   | +28 SegmentNumber 1
  00 00 02 8c   | +32 PayloadLength 652 = 3 * 220 - 8
)");

RmppHeader GoldenHeader() {
  RmppHeader h;
  h.version = 1;
  h.type = RmppType::kData;
  h.resp_time = 20;
  h.active = true;
  h.first = true;
  h.segment_number = 1;
  h.payload_length = 652;
  return h;
}

TEST(RmppTest, ParseGolden) {
  auto h = RmppHeader::Parse(kGolden);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(*h, GoldenHeader());
}

TEST(RmppTest, EmitWritesExactlyBytes24To35) {
  auto buf = testing::Poisoned();
  ASSERT_TRUE(GoldenHeader().Emit(buf).ok());
  EXPECT_TRUE(std::equal(buf.begin() + 24, buf.begin() + 36, kGolden.begin() + 24))
      << testing::DiffBytes(std::span(buf).subspan(24, 12), std::span(kGolden).subspan(24, 12));
  EXPECT_TRUE(std::all_of(buf.begin(), buf.begin() + 24,
                          [](uint8_t b) { return b == testing::kPoison; }));
  EXPECT_TRUE(std::all_of(buf.begin() + 36, buf.end(),
                          [](uint8_t b) { return b == testing::kPoison; }));
}

TEST(RmppTest, TruncationErrorAtEveryPrefix) {
  for (size_t n = 0; n < 36; ++n) {
    auto h = RmppHeader::Parse(std::span(kGolden).first(n));
    ASSERT_FALSE(h.ok()) << n;
    std::string want = testing::ExpectedCut(testing::SaHeaderCuts(), std::max<size_t>(n, 24),
                                            0, "MAD");
    EXPECT_THAT(h.status().message(), HasSubstr(want)) << n;
    EXPECT_THAT(h.status().message(),
                HasSubstr(absl::StrCat("RMPP header truncated: ", n, " of 256 bytes")));
  }
  EXPECT_TRUE(RmppHeader::Parse(std::span(kGolden).first(36)).ok());
}

TEST(RmppTest, FlagsAndAckWindow) {
  auto mad = kGolden;
  mad[25] = 2;     // ACK
  mad[26] = 0x05;  // RRespTime 0, Last|Active
  mad[34] = 0;
  mad[35] = 9;     // NewWindowLast 9
  auto h = RmppHeader::Parse(mad);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->type, RmppType::kAck);
  EXPECT_TRUE(h->active);
  EXPECT_FALSE(h->first);
  EXPECT_TRUE(h->last);
  EXPECT_EQ(h->new_window_last(), 9u);
}

TEST(RmppTest, UnknownTypeStatusAndVersionSurvive) {
  auto mad = kGolden;
  mad[24] = 2;    // RMPPVersion 2: the RMPP layer answers ABORT 125, so keep it
  mad[25] = 9;    // no such RMPPType
  mad[27] = 200;  // no such status
  auto h = RmppHeader::Parse(mad);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->version, 2);
  EXPECT_EQ(static_cast<uint8_t>(h->type), 9);
  EXPECT_EQ(RmppTypeName(h->type), nullptr);
  EXPECT_EQ(static_cast<uint8_t>(h->status), 200);
  EXPECT_EQ(RmppStatusName(h->status), nullptr);
  auto out = testing::Poisoned();
  ASSERT_TRUE(h->Emit(out).ok());
  EXPECT_TRUE(std::equal(out.begin() + 24, out.begin() + 36, mad.begin() + 24));
  EXPECT_STREQ(RmppStatusName(RmppStatus::kUnsupportedVersion), "unsupported version");
  EXPECT_EQ(static_cast<uint8_t>(RmppStatus::kTotalTimeTooLong), 118);
  EXPECT_EQ(static_cast<uint8_t>(RmppStatus::kUnspecified), 127);
  EXPECT_STREQ(RmppTypeName(RmppType::kAbort), "ABORT");
}

TEST(RmppTest, RangeErrorsNameTheField) {
  RmppHeader h = GoldenHeader();
  h.resp_time = 32;
  std::array<uint8_t, 256> buf;
  EXPECT_THAT(h.Emit(buf).message(), HasSubstr("RMPP.RRespTime = 32 does not fit in 5 bits"));
  std::array<uint8_t, 35> small;
  EXPECT_THAT(GoldenHeader().Emit(small).message(), HasSubstr("needs MAD bytes 24..35"));
}

TEST(RmppTest, RandomRoundTrip) {
  std::mt19937_64 rng(24);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    const RmppHeader h = testing::RandomRmpp(rng);
    ASSERT_TRUE(h.Emit(buf).ok());
    auto back = RmppHeader::Parse(buf);
    ASSERT_TRUE(back.ok());
    ASSERT_EQ(*back, h);
  }
}

}  // namespace
}  // namespace uscm::mad::wire
