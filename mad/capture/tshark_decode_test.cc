// ParseTsharkJson on canned tshark output (no tshark needed): how fields are
// flattened and positioned. capture_test runs the real tshark.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/tshark_decode.h"

namespace uscm::mad::capture {
namespace {

using ::testing::HasSubstr;

// Trimmed from `tshark -T json -x --no-duplicate-keys` on an exported-PDU
// capture: 20 bytes of tags, then the LRH; the MAD starts 28 bytes later.
constexpr char kTwoFrames[] = R"([
 {"_source": {"layers": {
   "frame_raw": ["00", 0, 318, 0, 1],
   "frame": {"frame.number": "1", "frame.protocols": "exported_pdu:infiniband"},
   "exported_pdu": {
     "exported_pdu.tag_raw": [["000c", 0, 16, 0, 5], ["0000", 16, 4, 0, 5]],
     "exported_pdu.tag": ["Dissector name", "End-of-options"],
     "exported_pdu.tag_tree": [{"exported_pdu.prot_name": "infiniband"}, {}]
   },
   "infiniband_raw": ["00", 20, 290, 0, 1],
   "infiniband": {
     "infiniband.lrh_raw": ["0052002200480011", 20, 8, 0, 30],
     "infiniband.lrh": "00:52:00:22:00:48:00:11",
     "infiniband.lrh_tree": {
       "infiniband.lrh.sl_raw": ["5", 21, 1, 240, 4],
       "infiniband.lrh.sl": "5",
       "infiniband.lrh.dlid_raw": ["0022", 22, 2, 0, 5],
       "infiniband.lrh.dlid": "34"
     },
     "infiniband.bth_tree": {
       "infiniband.reserved_raw": ["00", 32, 1, 0, 30],
       "infiniband.reserved": "00"
     },
     "infiniband.mad_tree": {
       "infiniband.mad.mgmtclass_raw": ["07", 49, 1, 0, 4],
       "infiniband.mad.mgmtclass": "0x07",
       "infiniband.reserved_raw": [["0000", 66, 2, 0, 30], ["00", 70, 1, 0, 30]],
       "infiniband.reserved": ["00:00", "00"],
       "text without position": "x"
     }
   }}}},
 {"_source": {"layers": {"frame": {"frame.number": "2"}}}}
])";

TEST(ParseTsharkJsonTest, FlattensFieldsWithPositions) {
  const int64_t packet_starts[] = {20, 0};
  const int64_t mad_starts[] = {48, -1};
  absl::StatusOr<std::vector<TsharkFrame>> frames =
      ParseTsharkJson(kTwoFrames, packet_starts, mad_starts);
  ASSERT_TRUE(frames.ok()) << frames.status();
  ASSERT_EQ(frames->size(), 2u);
  const TsharkFrame& f = (*frames)[0];
  EXPECT_EQ(f.number, 1);
  EXPECT_EQ(f.protocols, "exported_pdu:infiniband");

  absl::StatusOr<TsharkField> sl = f.Get("infiniband.lrh.sl");
  ASSERT_TRUE(sl.ok()) << sl.status();
  EXPECT_EQ(sl->show, "5");
  EXPECT_EQ(sl->AsUint(), 5u);
  EXPECT_EQ(sl->frame_offset, 21);
  EXPECT_EQ(sl->packet_offset, 1);
  EXPECT_EQ(sl->mad_offset, -27);
  EXPECT_EQ(sl->length, 1);
  EXPECT_EQ(sl->mask, 0xF0u);
  EXPECT_EQ(f.Get("infiniband.mad.mgmtclass")->mad_offset, 1);
  EXPECT_EQ(f.Get("infiniband.mad.mgmtclass")->AsUint(), 7u);
  EXPECT_EQ(f.Get("infiniband.lrh")->AsUint(), absl::nullopt);  // a byte string
  EXPECT_EQ(f.Get("exported_pdu.prot_name")->show, "infiniband");

  // Repeated names, across subtrees and within one, in tree order.
  const std::vector<TsharkField>& reserved = f.GetAll("infiniband.reserved");
  ASSERT_EQ(reserved.size(), 3u);
  EXPECT_EQ(reserved[0].mad_offset, -16);
  EXPECT_EQ(reserved[1].mad_offset, 18);
  EXPECT_EQ(reserved[2].show, "00");
  EXPECT_EQ(reserved[2].mad_offset, 22);
  EXPECT_THAT(std::string(f.Get("infiniband.reserved").status().message()),
              HasSubstr("frame 1 has 3 occurrences of infiniband.reserved"));
  EXPECT_EQ(f.GetAll("exported_pdu.tag").size(), 2u);

  const TsharkField text = *f.Get("text without position");
  EXPECT_EQ(text.frame_offset, absl::nullopt);
  EXPECT_EQ(text.mad_offset, absl::nullopt);

  EXPECT_FALSE(f.Has("infiniband.cm.req"));
  EXPECT_TRUE(f.GetAll("infiniband.cm.req").empty());
  EXPECT_EQ((*frames)[1].number, 2);
}

TEST(ParseTsharkJsonTest, UnknownStartsLeaveRelativeOffsetsUnset) {
  absl::StatusOr<std::vector<TsharkFrame>> frames = ParseTsharkJson(kTwoFrames, {}, {});
  ASSERT_TRUE(frames.ok()) << frames.status();
  const TsharkField sl = *(*frames)[0].Get("infiniband.lrh.sl");
  EXPECT_EQ(sl.frame_offset, 21);
  EXPECT_EQ(sl.packet_offset, absl::nullopt);
  EXPECT_EQ(sl.mad_offset, absl::nullopt);
}

std::string ErrorOf(const std::string& json) {
  absl::StatusOr<std::vector<TsharkFrame>> frames = ParseTsharkJson(json, {}, {});
  return frames.ok() ? "ok" : std::string(frames.status().message());
}

TEST(ParseTsharkJsonTest, MalformedOutputIsAnError) {
  EXPECT_THAT(ErrorOf("[{"), HasSubstr("JSON:"));
  EXPECT_THAT(ErrorOf("{}"), HasSubstr("not an array of frames"));
  EXPECT_THAT(ErrorOf(R"([{"_source": {}}])"), HasSubstr("no _source.layers"));
  EXPECT_THAT(ErrorOf(R"([{"_source": {"layers": {}}}])"), HasSubstr("no valid frame.number"));
  EXPECT_THAT(ErrorOf(R"([{"_source": {"layers": {"frame.number": "1",
      "a": ["1", "2"], "a_raw": ["01", 0, 1, 0, 4]}}}])"),
              HasSubstr("a has 2 values but 1 _raw entries"));
  EXPECT_THAT(ErrorOf(R"([{"_source": {"layers": {"frame.number": "1",
      "a": "1", "a_raw": ["01", -3, 1, 0, 4]}}}])"),
              HasSubstr("a_raw has a bad offset"));
  EXPECT_EQ(ErrorOf("[]"), "ok");
}

TEST(TsharkFieldTest, AsUintParsesHexAndDecimalOnly) {
  TsharkField f;
  for (auto [show, want] : std::vector<std::pair<std::string, absl::optional<uint64_t>>>{
           {"0x0000000080010000", 0x80010000u}, {"34", 34u}, {"0x", absl::nullopt},
           {"fe80::1", absl::nullopt}, {"00:11", absl::nullopt}, {"True", absl::nullopt},
           {"-1", absl::nullopt}}) {
    f.show = show;
    EXPECT_EQ(f.AsUint(), want) << show;
  }
}

}  // namespace
}  // namespace uscm::mad::capture
