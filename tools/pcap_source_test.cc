// PcapSource reads with libpcap what tcpdump / dumpcap / Wireshark write:
// pcap (micro- and nanosecond) and pcapng (several interfaces, if_tsresol).
#include "tools/pcap_source.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/frame_decode.h"
#include "mad/capture/test_frames.h"
#include "mad/wire/cm_samples.h"

namespace uscm::tools {
namespace {

namespace t = mad::capture::testing;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1700000000LL * 1000000000 + 123456789;  // ns

std::vector<uint8_t> Req() {
  const auto mad = mad::wire::SampleCmMads()[0];
  return {mad.begin(), mad.end()};
}

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

struct Read {
  std::vector<int64_t> times;
  std::vector<uint32_t> link_types;
  int mads = 0, others = 0;
};

Read ReadAll(const std::string& path) {
  Read r;
  auto s = PcapSource::OpenFile(path);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return r;
  for (;;) {
    auto pk = (*s)->Next();
    EXPECT_TRUE(pk.ok()) << pk.status();
    if (!pk.ok() || !pk->has_value()) break;
    r.times.push_back((*pk)->time.nanos());
    r.link_types.push_back((*pk)->link_type);
    auto d = mad::capture::DecodeFrame((*pk)->link_type, (*pk)->data);
    EXPECT_TRUE(d.ok()) << d.status();
    if (d.ok()) (d->is_mad ? r.mads : r.others)++;
  }
  return r;
}

std::vector<t::Frame> EthernetFrames() {
  return {{1, kT0, t::RoceV2(Req())},
          {1, kT0 + 1000, t::Arp()},
          {1, kT0 + 2000, t::RoceV2(Req(), true, 1)},
          {1, kT0 + 3000, t::RoceV1(Req())}};
}

TEST(PcapSourceTest, PcapMicroAndNanoseconds) {
  for (bool nanos : {false, true}) {
    const std::string path = TempPath(nanos ? "ns.pcap" : "us.pcap");
    ASSERT_TRUE(t::WriteFile(path, t::PcapFile(1, EthernetFrames(), nanos)));
    const Read r = ReadAll(path);
    EXPECT_EQ(r.mads, 3);
    EXPECT_EQ(r.others, 1);
    ASSERT_EQ(r.times.size(), 4u);
    // Microsecond files lose the sub-microsecond digits.
    EXPECT_EQ(r.times[0], nanos ? kT0 : kT0 / 1000 * 1000);
    EXPECT_EQ(r.times[3] - r.times[0], 3000);
  }
}

TEST(PcapSourceTest, PcapngMicroAndNanoseconds) {
  for (bool nanos : {false, true}) {
    const std::string path = TempPath(nanos ? "ns.pcapng" : "us.pcapng");
    ASSERT_TRUE(t::WriteFile(path, t::PcapngFile(EthernetFrames(), nanos)));
    const Read r = ReadAll(path);
    EXPECT_EQ(r.mads, 3);
    EXPECT_EQ(r.others, 1);
    ASSERT_EQ(r.times.size(), 4u);
    EXPECT_EQ(r.times[0], nanos ? kT0 : kT0 / 1000 * 1000);
  }
}

// Two capture interfaces of one link type (dumpcap -i eth0 -i eth1).
TEST(PcapSourceTest, PcapngWithTwoInterfaces) {
  std::vector<t::Frame> frames = EthernetFrames();
  frames[1].interface = 1;
  frames[3].interface = 1;
  const std::string path = TempPath("two-if.pcapng");
  ASSERT_TRUE(t::WriteFile(path, t::PcapngFile(frames, true)));
  const Read r = ReadAll(path);
  EXPECT_EQ(r.mads, 3);
  EXPECT_EQ(r.others, 1);
  EXPECT_EQ(r.times.size(), 4u);
}

// Our own link types, in pcapng too.
TEST(PcapSourceTest, ExportedPduAndErfInPcapng) {
  const std::vector<t::Frame> pdu = {{252, kT0, t::ExportedPduRecord(Req(), 3, 4)}};
  const std::vector<t::Frame> erf = {{197, kT0, t::ErfRecord(Req(), 3, 4)}};
  for (const auto& frames : {pdu, erf}) {
    const std::string path = TempPath("native.pcapng");
    ASSERT_TRUE(t::WriteFile(path, t::PcapngFile(frames, true)));
    const Read r = ReadAll(path);
    EXPECT_EQ(r.mads, 1);
    ASSERT_EQ(r.link_types.size(), 1u);
    EXPECT_EQ(r.link_types[0], frames[0].link_type);
  }
}

// libpcap 1.10 refuses a pcapng file whose interfaces differ in link type;
// PcapSource reads it with mad/capture/pcapng_reader.h instead.
TEST(PcapSourceTest, PcapngWithTwoLinkTypes) {
  const std::vector<t::Frame> frames = {{1, kT0, t::RoceV2(Req())},
                                        {252, kT0 + 1, t::ExportedPduRecord(Req(), 3, 4)}};
  const std::string path = TempPath("mixed.pcapng");
  ASSERT_TRUE(t::WriteFile(path, t::PcapngFile(frames, true)));
  const Read r = ReadAll(path);
  EXPECT_EQ(r.mads, 2);
  EXPECT_THAT(r.link_types, ::testing::ElementsAre(1u, 252u));
  EXPECT_EQ(r.times, (std::vector<int64_t>{kT0, kT0 + 1}));
}

TEST(PcapSourceTest, NotACapture) {
  const std::string path = TempPath("garbage.pcap");
  ASSERT_TRUE(t::WriteFile(path, std::vector<uint8_t>(64, 0x42)));
  EXPECT_FALSE(PcapSource::OpenFile(path).ok());
  EXPECT_FALSE(PcapSource::OpenFile(TempPath("nonexistent.pcap")).ok());
}

TEST(PcapSourceTest, LiveOnAMissingNetdevSaysSo) {
  auto s = PcapSource::OpenLive("uscm-no-such-if0");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("uscm-no-such-if0"));
}

}  // namespace
}  // namespace uscm::tools
