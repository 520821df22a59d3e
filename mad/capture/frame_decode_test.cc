#include "mad/capture/frame_decode.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/test_frames.h"
#include "mad/wire/cm_samples.h"

namespace uscm::mad::capture {
namespace {

using ::testing::HasSubstr;
namespace t = testing;

std::vector<uint8_t> Req() {
  const auto mad = wire::SampleCmMads()[0];
  return {mad.begin(), mad.end()};
}

DecodedFrame MustDecode(uint32_t link, const std::vector<uint8_t>& data) {
  absl::StatusOr<DecodedFrame> d = DecodeFrame(link, data);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : DecodedFrame{};
}

TEST(FrameDecodeTest, RoceV2OverIpv4) {
  const DecodedFrame d = MustDecode(kLinkTypeEthernet, t::RoceV2(Req()));
  ASSERT_TRUE(d.is_mad);
  EXPECT_EQ(d.framing, "RoCE v2");
  EXPECT_EQ(d.src, "192.168.77.1");
  EXPECT_EQ(d.dst, "192.168.77.2");
  EXPECT_EQ(d.dest_qp, 1u);
  EXPECT_EQ(d.mad, Req());
  EXPECT_FALSE(d.icrc_ok.has_value());
}

TEST(FrameDecodeTest, RoceV2OverIpv6BehindVlanTags) {
  for (int tags : {0, 1, 2}) {
    const DecodedFrame d = MustDecode(kLinkTypeEthernet, t::RoceV2(Req(), true, tags));
    ASSERT_TRUE(d.is_mad) << tags << " tags: " << d.detail;
    EXPECT_EQ(d.src, "fd00::1");
    EXPECT_EQ(d.dst, "fd00::2");
    EXPECT_EQ(d.mad, Req());
  }
  const DecodedFrame v4 = MustDecode(kLinkTypeEthernet, t::RoceV2(Req(), false, 1));
  EXPECT_TRUE(v4.is_mad) << v4.detail;
}

TEST(FrameDecodeTest, RoceV1) {
  const DecodedFrame d = MustDecode(kLinkTypeEthernet, t::RoceV1(Req()));
  ASSERT_TRUE(d.is_mad) << d.detail;
  EXPECT_EQ(d.framing, "RoCE v1");
  EXPECT_EQ(d.src, "fe80::1");
  EXPECT_EQ(d.dst, "fe80::2");
  EXPECT_EQ(d.mad, Req());
}

TEST(FrameDecodeTest, NativeIbInOurRecordsAndErf) {
  for (uint32_t link : {kLinkTypeExportedPdu, kLinkTypeErf}) {
    const auto record = link == kLinkTypeErf ? t::ErfRecord(Req(), 3, 4)
                                             : t::ExportedPduRecord(Req(), 3, 4);
    const DecodedFrame d = MustDecode(link, record);
    ASSERT_TRUE(d.is_mad) << link;
    EXPECT_EQ(d.framing, "IB");
    EXPECT_EQ(d.src, "3");
    EXPECT_EQ(d.dst, "4");
    EXPECT_EQ(d.mad, Req());
    EXPECT_TRUE(d.icrc_ok.has_value());
  }
}

TEST(FrameDecodeTest, OtherFramesAreNotMadsWithAKind) {
  const std::vector<uint8_t> data(64, 0xab);
  struct Case {
    std::vector<uint8_t> frame;
    const char* kind;
  } cases[] = {
      {t::Arp(), "ARP"},
      {t::Tcp(), "IPv4 TCP"},
      {t::RoceV2(data, false, 0, 0x04, 0x11), "RoCE v2 RC"},  // RC SEND ONLY
      {t::RoceV2({}, false, 0, 0x11, 0x11), "RoCE v2 RC"},    // RC ACK
      {t::RoceV2(data, false, 0, 0x64, 0x22), "RoCE v2 UD"},  // UD, not a MAD
      {t::RoceV1(data, 0x04, 0x11), "RoCE v1 RC"},
  };
  for (const Case& c : cases) {
    const DecodedFrame d = MustDecode(kLinkTypeEthernet, c.frame);
    EXPECT_FALSE(d.is_mad) << c.kind;
    EXPECT_EQ(d.kind, c.kind);
  }
  EXPECT_THAT(MustDecode(kLinkTypeEthernet, t::RoceV2(data, false, 0, 0x04, 0x11)).detail,
              HasSubstr("opcode 0x04 to QP 0x000011"));
}

// A frame that should carry a MAD but is cut short is an error, not "other".
TEST(FrameDecodeTest, TruncatedMadFramesAreErrors) {
  std::vector<uint8_t> v2 = t::RoceV2(Req());
  v2.resize(14 + 20 + 8 + 12 + 2);  // inside the DETH
  EXPECT_FALSE(DecodeFrame(kLinkTypeEthernet, v2).ok());
  std::vector<uint8_t> v1 = t::RoceV1(Req());
  v1.resize(14 + 40 + 12 + 4);
  EXPECT_FALSE(DecodeFrame(kLinkTypeEthernet, v1).ok());
  std::vector<uint8_t> ib = t::ExportedPduRecord(Req(), 3, 4);
  ib.resize(ib.size() - 200);
  EXPECT_FALSE(DecodeFrame(kLinkTypeExportedPdu, ib).ok());
}

// Garbage is an error or "not a MAD", never a crash (run under ASan): every
// byte of each framing set to 0x00, 0xFF and its complement, and every prefix.
TEST(FrameDecodeTest, MutatedFramesNeverCrash) {
  const std::vector<std::pair<uint32_t, std::vector<uint8_t>>> frames = {
      {kLinkTypeEthernet, t::RoceV2(Req(), true, 2)},
      {kLinkTypeEthernet, t::RoceV1(Req())},
      {kLinkTypeLinuxSll, std::vector<uint8_t>(t::RoceV2(Req()))},
      {kLinkTypeErf, t::ErfRecord(Req(), 3, 4)},
      {kLinkTypeExportedPdu, t::ExportedPduRecord(Req(), 3, 4)}};
  int decoded = 0;
  for (const auto& [link, frame] : frames) {
    for (size_t i = 0; i < frame.size(); ++i) {
      for (int v : {0x00, 0xFF, frame[i] ^ 0xFF}) {
        std::vector<uint8_t> m = frame;
        m[i] = static_cast<uint8_t>(v);
        decoded += DecodeFrame(link, m).ok();
      }
      const std::vector<uint8_t> prefix(frame.begin(), frame.begin() + static_cast<long>(i));
      decoded += DecodeFrame(link, prefix).ok();
    }
  }
  EXPECT_GT(decoded, 0);
}

TEST(FrameDecodeTest, UnknownLinkTypeSaysWhichAreKnown) {
  absl::StatusOr<DecodedFrame> d = DecodeFrame(147, t::Arp());
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("link type 147 is not supported"));
  EXPECT_FALSE(IsSupportedLinkType(147));
  EXPECT_TRUE(IsSupportedLinkType(kLinkTypeLinuxSll));
}

}  // namespace
}  // namespace uscm::mad::capture
