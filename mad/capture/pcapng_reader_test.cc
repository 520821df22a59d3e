#include "mad/capture/pcapng_reader.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/test_frames.h"

namespace uscm::mad::capture {
namespace {

namespace t = testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1700000000LL * 1000000000 + 123456789;

std::vector<t::Frame> Mixed() {
  return {{1, kT0, t::Arp()},
          {252, kT0 + 1000, t::Bytes(40, 0x11)},
          {1, kT0 + 2000, t::Tcp(), 1},
          {197, kT0 + 3000, t::Bytes(20, 0x22)}};
}

TEST(PcapngReaderTest, MixedLinkTypesNanoAndMicroseconds) {
  for (bool nanos : {true, false}) {
    const t::Bytes file = t::PcapngFile(Mixed(), nanos);
    ASSERT_TRUE(IsPcapng(file));
    auto c = ReadPcapng(file);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_THAT(c->link_types, ElementsAre(1u, 197u, 252u));
    ASSERT_EQ(c->packets.size(), 4u);
    EXPECT_EQ(c->packets[0].link_type, 1u);
    EXPECT_EQ(c->packets[1].link_type, 252u);
    EXPECT_EQ(c->packets[2].interface, 2u);  // (1, interface 1) is the third IDB
    EXPECT_EQ(c->packets[3].link_type, 197u);
    EXPECT_EQ(c->packets[1].data, t::Bytes(40, 0x11));
    EXPECT_EQ(c->packets[0].data, t::Arp());
    EXPECT_EQ(c->packets[0].time_ns, nanos ? kT0 : kT0 / 1000 * 1000);
    EXPECT_EQ(c->packets[3].time_ns - c->packets[0].time_ns, 3000);
  }
}

TEST(PcapngReaderTest, EveryTruncationIsAnErrorOrAShorterFile) {
  const t::Bytes file = t::PcapngFile(Mixed(), true);
  for (size_t n = 1; n < file.size(); ++n) {
    const t::Bytes cut(file.begin(), file.begin() + static_cast<long>(n));
    auto c = ReadPcapng(cut);
    if (c.ok()) {
      EXPECT_LT(c->packets.size(), 4u) << n;  // ends on a block boundary
    }
  }
}

// Every byte set to 0x00, 0xFF and its complement: an error or packets,
// never a crash (run under ASan).
TEST(PcapngReaderTest, MutatedFilesNeverCrash) {
  const t::Bytes file = t::PcapngFile(Mixed(), true);
  int ok = 0;
  for (size_t i = 0; i < file.size(); ++i) {
    for (int v : {0x00, 0xFF, file[i] ^ 0xFF}) {
      t::Bytes m = file;
      m[i] = static_cast<uint8_t>(v);
      ok += ReadPcapng(m).ok();
    }
  }
  EXPECT_GT(ok, 0);
}

TEST(PcapngReaderTest, NotPcapng) {
  const t::Bytes pcap = t::PcapFile(1, {{1, 0, t::Arp()}}, true);
  EXPECT_FALSE(IsPcapng(pcap));
  auto c = ReadPcapng(pcap);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("not a pcapng file"));
}

}  // namespace
}  // namespace uscm::mad::capture
