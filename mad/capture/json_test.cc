#include "mad/capture/json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::mad::capture {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ErrorOf(absl::string_view text) {
  absl::StatusOr<JsonValue> v = ParseJson(text);
  return v.ok() ? "ok" : std::string(v.status().message());
}

TEST(JsonTest, ParsesScalars) {
  EXPECT_TRUE(ParseJson("null")->is_null());
  EXPECT_TRUE(ParseJson(" true ")->boolean());
  EXPECT_FALSE(ParseJson("false")->boolean());
  EXPECT_EQ(ParseJson("\"0x0010\"")->text(), "0x0010");
  absl::StatusOr<JsonValue> n = ParseJson("-12");
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->is_number());
  EXPECT_EQ(n->AsInt64(), -12);
  EXPECT_EQ(ParseJson("1.5e-3")->text(), "1.5e-3");
  EXPECT_EQ(ParseJson("1.5e-3")->AsInt64(), absl::nullopt);
  EXPECT_EQ(ParseJson("18446744073709551616")->AsInt64(), absl::nullopt);
  EXPECT_EQ(ParseJson("0")->AsInt64(), 0);
}

TEST(JsonTest, ParsesTsharkShapedDocument) {
  // The shape of `tshark -T json -x --no-duplicate-keys` output.
  absl::StatusOr<JsonValue> v = ParseJson(R"([
    {"_source": {"layers": {
      "infiniband": {
        "infiniband.lrh.dlid_raw": ["0022", 2, 2, 0, 5],
        "infiniband.lrh.dlid": "34",
        "infiniband.reserved": ["00", "00:00"],
        "infiniband.reserved_raw": [["00", 30, 1, 0, 30], ["0000", 64, 2, 0, 30]],
        "empty": {}, "none": []
      }}}}
  ])");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->is_array());
  ASSERT_EQ(v->size(), 1u);
  const JsonValue* ib = v->items()[0].Find("_source")->Find("layers")->Find("infiniband");
  ASSERT_NE(ib, nullptr);
  EXPECT_THAT(ib->keys(), ElementsAre("infiniband.lrh.dlid_raw", "infiniband.lrh.dlid",
                                      "infiniband.reserved", "infiniband.reserved_raw",
                                      "empty", "none"));
  const JsonValue* raw = ib->Find("infiniband.lrh.dlid_raw");
  ASSERT_EQ(raw->size(), 5u);
  EXPECT_EQ(raw->items()[0].text(), "0022");
  EXPECT_EQ(raw->items()[1].AsInt64(), 2);
  EXPECT_EQ(ib->Find("infiniband.reserved_raw")->items()[1].items()[1].AsInt64(), 64);
  EXPECT_TRUE(ib->Find("empty")->is_object());
  EXPECT_EQ(ib->Find("none")->size(), 0u);
  EXPECT_EQ(ib->Find("missing"), nullptr);
  EXPECT_EQ(raw->Find("x"), nullptr);  // not an object
}

TEST(JsonTest, KeepsDuplicateKeysInOrder) {
  absl::StatusOr<JsonValue> v = ParseJson(R"({"a": 1, "a": 2})");
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(v->keys(), ElementsAre("a", "a"));
  EXPECT_EQ(v->Find("a")->AsInt64(), 1);
}

TEST(JsonTest, DecodesEscapes) {
  EXPECT_EQ(ParseJson(R"("a\"b\\c\/d\b\f\n\r\t")")->text(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(ParseJson(R"("\u0041\u00e9\u20ac")")->text(), "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(ParseJson(R"("\ud83d\ude00")")->text(), "\xF0\x9F\x98\x80");
}

TEST(JsonTest, ErrorsSayWhatAndWhere) {
  EXPECT_EQ(ErrorOf(""), "JSON: expected a value, found the end at byte 0 (line 1)");
  EXPECT_EQ(ErrorOf("[1,\n 2 3]"), "JSON: expected ',' or ']' at byte 7 (line 2)");
  EXPECT_EQ(ErrorOf("{\"a\" 1}"), "JSON: expected ':' at byte 5 (line 1)");
  EXPECT_EQ(ErrorOf("{1: 2}"), "JSON: expected a member name at byte 1 (line 1)");
  EXPECT_EQ(ErrorOf("{\"a\": 1,}"), "JSON: expected a member name at byte 8 (line 1)");
  EXPECT_EQ(ErrorOf("[1] x"), "JSON: unexpected data after the JSON value at byte 4 (line 1)");
  EXPECT_THAT(ErrorOf("tru"), HasSubstr("expected 'true'"));
  EXPECT_THAT(ErrorOf("01"), HasSubstr("unexpected data"));
  EXPECT_THAT(ErrorOf("-"), HasSubstr("expected a value"));
  EXPECT_THAT(ErrorOf("1."), HasSubstr("digits after '.'"));
  EXPECT_THAT(ErrorOf("1e+"), HasSubstr("exponent digits"));
  EXPECT_THAT(ErrorOf("\"a\nb\""), HasSubstr("control character"));
  EXPECT_THAT(ErrorOf(R"("\x")"), HasSubstr("bad escape '\\x'"));
  EXPECT_THAT(ErrorOf(R"("\u12G4")"), HasSubstr("bad hex digit"));
  EXPECT_THAT(ErrorOf(R"("\ud83d")"), HasSubstr("high surrogate without a pair"));
  EXPECT_THAT(ErrorOf(R"("\ude00")"), HasSubstr("lone low surrogate"));
  EXPECT_THAT(ErrorOf(R"("\ud83d\u0041")"), HasSubstr("bad low surrogate"));
}

TEST(JsonTest, RejectsDeepNestingWithoutCrashing) {
  std::string deep(kMaxJsonDepth + 10, '[');
  EXPECT_THAT(ErrorOf(deep), HasSubstr("nesting deeper than 256"));
  std::string ok(kMaxJsonDepth - 1, '[');
  ok += std::string(kMaxJsonDepth - 1, ']');
  EXPECT_EQ(ErrorOf(ok), "ok");
}

TEST(JsonTest, EveryTruncationIsAnError) {
  const std::string doc = R"({"k": ["x\u00e9", 12.5e1, {"t": true, "n": null}], "z": false})";
  ASSERT_EQ(ErrorOf(doc), "ok");
  for (size_t n = 0; n < doc.size(); ++n) {
    EXPECT_NE(ErrorOf(doc.substr(0, n)), "ok") << n;
  }
}

}  // namespace
}  // namespace uscm::mad::capture
