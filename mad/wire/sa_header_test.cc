#include "mad/wire/sa_header.h"

#include <algorithm>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/path_record.h"
#include "mad/wire/sa_testing.h"
#include "mad/wire/wire_testing.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;
using testing::Hex;

// An SA NodeRecord GetTable request: headers only, the data area is opaque here.
const std::vector<uint8_t> kGolden = Hex(R"(
  01 03 02 12   | BaseVersion 1, class SA, version 2, GetTable
  00 00 00 00   | Status, ClassSpecific
  00 00 00 00 12 34 56 78 | TransactionID
  00 11 00 00   | AttributeID NodeRecord, reserved
  00 00 00 00   | AttributeModifier
  01 01 f7 00   | +24 RMPP: version 1, DATA, RRespTime 30 + Active|First|Last, status 0
  00 00 00 01   | +28 SegmentNumber 1
  00 00 00 dc   | +32 PayloadLength 220
  01 02 03 04 05 06 07 08 | +36 SM_Key
  00 00 00 00   | +44 AttributeOffset 0, reserved
  80 00 00 00 00 00 00 01 | +48 ComponentMask bits 63 and 0
  de ad be ef   | +56 data
)");

constexpr Field kOpaque[] = {{"SAData", 0, 0, 200 * 8}};

TEST(SaHeaderTest, ParseGolden) {
  SaEnvelope e;
  uint64_t mask = 0;
  auto v = ParseSaMad(kGolden, SaAttr::kNodeRecord, kOpaque, &e, &mask);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(e.method, static_cast<uint8_t>(Method::kGetTable));
  EXPECT_EQ(e.transaction_id, 0x12345678u);
  EXPECT_EQ(e.rmpp.version, 1);
  EXPECT_EQ(e.rmpp.type, RmppType::kData);
  EXPECT_EQ(e.rmpp.resp_time, 30);
  EXPECT_TRUE(e.rmpp.active && e.rmpp.first && e.rmpp.last);
  EXPECT_EQ(e.rmpp.payload_length, 220u);
  EXPECT_EQ(e.sm_key, 0x0102030405060708u);
  EXPECT_EQ(mask, 0x8000000000000001u);
  EXPECT_EQ(v->base()[0], 0xde);
}

TEST(SaHeaderTest, EmitGoldenHeadersAndZeroedData) {
  SaEnvelope e;
  e.method = static_cast<uint8_t>(Method::kGetTable);
  e.transaction_id = 0x12345678;
  e.rmpp = {1, RmppType::kData, 30, true, true, true, RmppStatus::kNormal, 1, 220};
  e.sm_key = 0x0102030405060708;
  auto buf = testing::Poisoned();
  auto w = EmitSaMad(buf, SaAttr::kNodeRecord, e, 0x8000000000000001);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + 56, kGolden.begin()))
      << testing::DiffBytes(std::span(buf).first(56), std::span(kGolden).first(56));
  EXPECT_TRUE(std::all_of(buf.begin() + 56, buf.end(), [](uint8_t b) { return b == 0; }));
}

TEST(SaHeaderTest, HeaderErrorsNameTheAttribute) {
  SaEnvelope e;
  uint64_t mask;
  auto bad = kGolden;
  bad[17] = 0x35;
  EXPECT_THAT(ParseSaMad(bad, SaAttr::kNodeRecord, kOpaque, &e, &mask).status().message(),
              HasSubstr("NodeRecord: MAD.AttributeID = 0x0035, expected 0x0011"));
  EXPECT_THAT(
      ParseSaMad(kGolden, static_cast<SaAttr>(0x7777), kOpaque, &e, &mask).status().message(),
      HasSubstr("SA attribute 0x7777: MAD.AttributeID = 0x0011"));
  bad = kGolden;
  bad[0] = 2;
  EXPECT_THAT(ParseSaMad(bad, SaAttr::kNodeRecord, kOpaque, &e, &mask).status().message(),
              HasSubstr("NodeRecord: MAD.BaseVersion = 2"));
  std::array<uint8_t, 255> small;
  EXPECT_THAT(EmitSaMad(small, SaAttr::kPathRecord, e, 0).status().message(),
              HasSubstr("PathRecord: output buffer is 255 bytes; a MAD needs 256"));
  e.rmpp.resp_time = 40;
  std::array<uint8_t, 256> buf;
  EXPECT_THAT(EmitSaMad(buf, SaAttr::kPathRecord, e, 0).status().message(),
              HasSubstr("PathRecord.RRespTime = 40 does not fit in 5 bits"));
}

TEST(SaHeaderTest, UnknownMethodAndAttributeSurvive) {
  auto mad = kGolden;
  mad[3] = 0x7e;  // no such method
  mad[17] = 0x99;
  SaEnvelope e;
  uint64_t mask;
  ASSERT_TRUE(ParseSaMad(mad, static_cast<SaAttr>(0x0099), kOpaque, &e, &mask).ok());
  EXPECT_EQ(e.method, 0x7e);
  EXPECT_EQ(SaAttrName(static_cast<SaAttr>(0x0099)), nullptr);
  EXPECT_STREQ(SaAttrName(SaAttr::kMultiPathRecord), "MultiPathRecord");
  EXPECT_EQ(static_cast<uint16_t>(SaAttr::kInformInfoRecord), 0x00F3);
}

TEST(SaHeaderTest, CoalescedRmppBufferIsAccepted) {
  // umad hands back the first segment's headers followed by all the data.
  std::vector<uint8_t> big(56 + 4 * 64, 0);  // 312 bytes: four records
  PathRecordMad m;
  m.envelope.method = static_cast<uint8_t>(Method::kGetTableResp);
  m.envelope.attribute_offset = 8;
  m.envelope.rmpp = {1, RmppType::kData, 0x1f, true, true, true, RmppStatus::kNormal, 1, 212};
  m.record.dlid = 1;
  ASSERT_TRUE(m.Emit(std::span(big).first(256)).ok());
  PathRecord second;
  second.dlid = 2;
  ASSERT_TRUE(second.Emit(std::span(big).subspan(56 + 64)).ok());
  auto first = PathRecordMad::Parse(big);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->record.dlid, 1);
  const size_t stride = first->envelope.attribute_offset * 8;
  auto r2 = PathRecord::Parse(std::span(big).subspan(56 + stride));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->dlid, 2);
}

// Every field of an SA MAD in wire order up to the data, stated by hand from
// IBTA Vol 1 Tables 145 (MAD header), 178 (RMPP header) and 193 (SA header),
// not from the field tables; then the opaque data area of this test.
struct Span {
  const char* name;
  int first;
  int last;
};
constexpr Span kSaMadSpans[] = {
    {"BaseVersion", 0, 0},
    {"MgmtClass", 1, 1},
    {"ClassVersion", 2, 2},
    {"R", 3, 3},
    {"Status", 4, 5},
    {"ClassSpecific", 6, 7},
    {"TransactionID", 8, 15},
    {"AttributeID", 16, 17},
    {"reserved", 18, 19},
    {"AttributeModifier", 20, 23},
    {"RMPPVersion", 24, 24},
    {"RMPPType", 25, 25},
    {"RRespTime", 26, 26},
    {"RMPPStatus", 27, 27},
    {"SegmentNumber", 28, 31},
    {"PayloadLength/NewWindowLast", 32, 35},
    {"SM_Key", 36, 43},
    {"AttributeOffset", 44, 45},
    {"reserved", 46, 47},
    {"ComponentMask", 48, 55},
    {"SAData", 56, 255},
};

TEST(SaHeaderTest, ExactTruncationErrorAtEveryPrefix) {
  int next = 0;  // the spans must tile the MAD, or the sweep proves less
  for (const Span& s : kSaMadSpans) {
    ASSERT_EQ(s.first, next) << s.name;
    next = s.last + 1;
  }
  ASSERT_EQ(next, 256);

  for (int n = 0; n < 256; ++n) {
    const Span* cut = nullptr;
    for (const Span& s : kSaMadSpans) {
      if (s.last >= n) {
        cut = &s;
        break;
      }
    }
    ASSERT_NE(cut, nullptr) << n;
    // Inside the MAD header the header's own error, prefixed with the
    // attribute; after it, "<attribute> truncated".
    const std::string want =
        n < 24 ? absl::StrFormat("NodeRecord: MAD header truncated: %d of 256 bytes; %s (MAD "
                                 "bytes %d..%d) is incomplete",
                                 n, cut->name, cut->first, cut->last)
               : absl::StrFormat(
                     "NodeRecord truncated: %d of 256 bytes; %s (MAD bytes %d..%d) is incomplete",
                     n, cut->name, cut->first, cut->last);
    SaEnvelope e;
    uint64_t mask = 0;
    auto v = ParseSaMad(std::span(kGolden).first(n), SaAttr::kNodeRecord, kOpaque, &e, &mask);
    ASSERT_FALSE(v.ok()) << n;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_EQ(v.status().message(), want) << "prefix " << n;
  }
  SaEnvelope e;
  uint64_t mask = 0;
  EXPECT_TRUE(ParseSaMad(kGolden, SaAttr::kNodeRecord, kOpaque, &e, &mask).ok());
}

TEST(SaHeaderTest, RandomRoundTrip) {
  std::mt19937_64 rng(193);
  std::array<uint8_t, 256> buf;
  for (int i = 0; i < 10000; ++i) {
    SaEnvelope e = testing::RandomEnvelope(rng, 0);
    e.attribute_offset = static_cast<uint16_t>(rng());  // the SA header takes any value
    const uint64_t mask = rng();
    const auto attr = static_cast<SaAttr>(rng());  // known or not: both survive
    buf.fill(testing::kPoison);
    auto w = EmitSaMad(buf, attr, e, mask);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_EQ(buf[18] | buf[19], 0) << i;  // MAD header reserved
    ASSERT_EQ(buf[46] | buf[47], 0) << i;  // SA header reserved
    ASSERT_TRUE(std::all_of(buf.begin() + 56, buf.end(), [](uint8_t b) { return b == 0; }))
        << i;
    SaEnvelope back;
    uint64_t back_mask = 0;
    auto v = ParseSaMad(buf, attr, kOpaque, &back, &back_mask);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(back, e) << i;
    ASSERT_EQ(back_mask, mask) << i;
    ASSERT_EQ(v->base(), buf.data() + 56) << i;
  }
}

}  // namespace
}  // namespace uscm::mad::wire
