// Cross-checks our capture files against tshark: the IB headers and MAD
// common header we wrap must decode, at the right offsets, to what we wrote.
// Requires /usr/bin/tshark (tools/setup.sh); fails, not skips, without it.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_reader.h"
#include "mad/capture/pcap_writer.h"
#include "mad/capture/tshark_decode.h"
#include "mad/gid.h"
#include "mad/time.h"

namespace uscm::mad::capture {
namespace {

using ::testing::ElementsAreArray;

// Hand-made MADs (raw bytes: the message encoders live in mad/wire).
std::vector<uint8_t> CommonHeader(uint8_t mgmt_class, uint8_t class_version, uint8_t method,
                                  uint64_t tid, uint16_t attr_id, uint32_t attr_mod) {
  std::vector<uint8_t> m(kMadSize, 0);
  m[0] = 1;  // BaseVersion
  m[1] = mgmt_class;
  m[2] = class_version;
  m[3] = method;
  m[4] = 0x00;  // Status
  m[5] = 0x1C;
  m[6] = 0x00;  // ClassSpecific
  m[7] = 0x00;
  for (int i = 0; i < 8; ++i) m[8 + i] = static_cast<uint8_t>(tid >> (56 - 8 * i));
  m[16] = static_cast<uint8_t>(attr_id >> 8);
  m[17] = static_cast<uint8_t>(attr_id);
  for (int i = 0; i < 4; ++i) m[20 + i] = static_cast<uint8_t>(attr_mod >> (24 - 8 * i));
  return m;
}

std::vector<uint8_t> CmRtu() {
  std::vector<uint8_t> m = CommonHeader(0x07, 2, 0x03, 0x0000000100000001, 0x0014, 0);
  const uint8_t ids[] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  std::copy(std::begin(ids), std::end(ids), m.begin() + 24);  // Local, Remote Comm ID
  return m;
}

std::vector<uint8_t> SaPathRecordGetResp() {
  return CommonHeader(0x03, 2, 0x81, 0x00000002ABCDEF01, 0x0035, 0);
}

std::vector<uint8_t> PerfMgtGet() {  // a class tshark knows only by header
  return CommonHeader(0x04, 1, 0x01, 0xFEDCBA9876543210, 0x0012, 0x12345678);
}

UdHeaders Headers(bool grh) {
  UdHeaders h;
  h.vl = 0;
  h.sl = 5;
  h.dlid = 0x0022;
  h.slid = 0x0011;
  h.pkey = 0x8001;
  h.dest_qpn = kQp1;
  h.psn = 0x000ABC;
  h.qkey = kQp1Qkey;
  h.src_qpn = kQp1;
  if (grh) {
    h.grh = GrhFields{.sgid = *Gid::Parse("fe80::2:c903:a1:b2c3"),
                      .dgid = *Gid::Parse("fe80::2:c903:d4:e5f6"),
                      .traffic_class = 0x2A,
                      .flow_label = 0x12345,
                      .hop_limit = 0x40};
  }
  return h;
}

// Asserts that `name` occurs once, shows `value`, and sits at `mad_offset`
// (negative: inside the IB headers) with `length` bytes.
void ExpectField(const TsharkFrame& frame, const std::string& name, uint64_t value,
                 int64_t mad_offset, int64_t length) {
  SCOPED_TRACE(absl::StrCat("frame ", frame.number, " field ", name));
  absl::StatusOr<TsharkField> f = frame.Get(name);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->AsUint(), value) << "shown as " << f->show;
  EXPECT_EQ(f->mad_offset, mad_offset);
  EXPECT_EQ(f->length, length);
}

void ExpectShow(const TsharkFrame& frame, const std::string& name, const std::string& show,
                int64_t mad_offset) {
  SCOPED_TRACE(absl::StrCat("frame ", frame.number, " field ", name));
  absl::StatusOr<TsharkField> f = frame.Get(name);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->show, show);
  EXPECT_EQ(f->mad_offset, mad_offset);
}

struct Case {
  CaptureLinkType link_type;
  bool grh;
};

class CaptureTsharkTest : public ::testing::TestWithParam<Case> {};

TEST_P(CaptureTsharkTest, TsharkDecodesWhatWeWrote) {
  const Case c = GetParam();
  const UdHeaders h = Headers(c.grh);
  const std::vector<std::vector<uint8_t>> mads = {CmRtu(), SaPathRecordGetResp(), PerfMgtGet()};
  absl::StatusOr<std::vector<TsharkFrame>> frames = DecodeMadsWithTshark(mads, h, c.link_type);
  ASSERT_TRUE(frames.ok()) << frames.status();
  ASSERT_EQ(frames->size(), mads.size());

  const int64_t hdrs = static_cast<int64_t>(HeadersSize(h));
  const int64_t lrh = -hdrs;                       // MAD offset of LRH byte 0
  const int64_t bth = -hdrs + 8 + (c.grh ? 40 : 0);
  const int64_t deth = bth + 12;
  for (size_t i = 0; i < mads.size(); ++i) {
    const TsharkFrame& f = (*frames)[i];
    const std::vector<uint8_t>& m = mads[i];
    EXPECT_EQ(f.number, static_cast<int64_t>(i + 1));
    EXPECT_EQ(f.protocols, c.link_type == CaptureLinkType::kErf ? "erf:infiniband"
                                                                : "exported_pdu:infiniband");
    // LRH
    ExpectField(f, "infiniband.lrh.vl", h.vl, lrh, 1);
    ExpectField(f, "infiniband.lrh.lver", 0, lrh, 1);
    ExpectField(f, "infiniband.lrh.sl", h.sl, lrh + 1, 1);
    ExpectField(f, "infiniband.lrh.lnh", c.grh ? 3 : 2, lrh + 1, 1);
    ExpectField(f, "infiniband.lrh.dlid", h.dlid, lrh + 2, 2);
    ExpectField(f, "infiniband.lrh.pktlen", (hdrs + 256 + 4) / 4, lrh + 4, 2);
    ExpectField(f, "infiniband.lrh.slid", h.slid, lrh + 6, 2);
    // GRH
    if (c.grh) {
      ExpectField(f, "infiniband.grh.ipver", 6, lrh + 8, 1);
      ExpectField(f, "infiniband.grh.tclass", h.grh->traffic_class, lrh + 8, 2);
      ExpectField(f, "infiniband.grh.flowlabel", h.grh->flow_label, lrh + 8, 4);
      ExpectField(f, "infiniband.grh.paylen", 12 + 8 + 256 + 4, lrh + 12, 2);
      ExpectField(f, "infiniband.grh.nxthdr", 0x1B, lrh + 14, 1);
      ExpectField(f, "infiniband.grh.hoplmt", h.grh->hop_limit, lrh + 15, 1);
      ExpectShow(f, "infiniband.grh.sgid", "fe80::2:c903:a1:b2c3", lrh + 16);
      ExpectShow(f, "infiniband.grh.dgid", "fe80::2:c903:d4:e5f6", lrh + 32);
    } else {
      EXPECT_FALSE(f.Has("infiniband.grh.sgid"));
    }
    // BTH, DETH
    ExpectField(f, "infiniband.bth.opcode", kOpcodeUdSendOnly, bth, 1);
    ExpectField(f, "infiniband.bth.padcnt", 0, bth + 1, 1);
    ExpectField(f, "infiniband.bth.tver", 0, bth + 1, 1);
    ExpectField(f, "infiniband.bth.p_key", h.pkey, bth + 2, 2);
    ExpectField(f, "infiniband.bth.destqp", h.dest_qpn, bth + 5, 3);
    ExpectField(f, "infiniband.bth.psn", h.psn, bth + 9, 3);
    ExpectField(f, "infiniband.deth.q_key", h.qkey, deth, 4);  // shown as 64-bit (Q6)
    ExpectField(f, "infiniband.deth.srcqp", h.src_qpn, deth + 5, 3);
    // MAD common header
    auto be = [&m](size_t at, size_t n) {
      uint64_t v = 0;
      for (size_t k = 0; k < n; ++k) v = (v << 8) | m[at + k];
      return v;
    };
    ExpectField(f, "infiniband.mad.baseversion", m[0], 0, 1);
    ExpectField(f, "infiniband.mad.mgmtclass", m[1], 1, 1);
    ExpectField(f, "infiniband.mad.classversion", m[2], 2, 1);
    ExpectField(f, "infiniband.mad.method", m[3], 3, 1);
    ExpectField(f, "infiniband.mad.status", be(4, 2), 4, 2);
    ExpectField(f, "infiniband.mad.classspecific", be(6, 2), 6, 2);
    ExpectField(f, "infiniband.mad.transactionid", be(8, 8), 8, 8);
    ExpectField(f, "infiniband.mad.attributeid", be(16, 2), 16, 2);
    ExpectField(f, "infiniband.mad.attributemodifier", be(20, 4), 20, 4);
    // CRCs: tshark only displays them; they must be the values we computed.
    // Quirk: after PerfMgt PortCounters the dissector does not return to the
    // CRCs (as after an SA MCMemberRecord, wire notes Q10), so none shown.
    if (m[1] == 0x04) {
      EXPECT_FALSE(f.Has("infiniband.invariant.crc"));
      EXPECT_FALSE(f.Has("infiniband.variant.crc"));
      continue;
    }
    absl::StatusOr<std::vector<uint8_t>> packet = WrapMad(h, m);
    ASSERT_TRUE(packet.ok());
    absl::StatusOr<ParsedUdPacket> parsed = ParseUdPacket(*packet);
    ASSERT_TRUE(parsed.ok());
    absl::StatusOr<TsharkField> icrc = f.Get("infiniband.invariant.crc");
    ASSERT_TRUE(icrc.ok()) << icrc.status();
    EXPECT_EQ(icrc->mad_offset, 256);
    EXPECT_EQ(icrc->raw_hex, absl::StrFormat("%02x%02x%02x%02x", parsed->icrc & 0xFF,
                                             (parsed->icrc >> 8) & 0xFF,
                                             (parsed->icrc >> 16) & 0xFF, parsed->icrc >> 24));
    absl::StatusOr<TsharkField> vcrc = f.Get("infiniband.variant.crc");
    ASSERT_TRUE(vcrc.ok()) << vcrc.status();
    EXPECT_EQ(vcrc->mad_offset, 260);
    EXPECT_EQ(vcrc->length, 2);
  }
  // Class-specific decoding happened too: the RTU's communication IDs.
  ExpectField((*frames)[0], "infiniband.cm.rtu.localcommid", 0x11223344, 24, 4);
  ExpectField((*frames)[0], "infiniband.cm.rtu.remotecommid", 0x55667788, 28, 4);
}

TEST_P(CaptureTsharkTest, ReaderRoundTripsTheFileTsharkRead) {
  const Case c = GetParam();
  const UdHeaders h = Headers(c.grh);
  const std::string path = absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp",
                                        "/roundtrip-", static_cast<int>(c.link_type), "-",
                                        c.grh, ".pcap");
  const std::vector<std::vector<uint8_t>> mads = {CmRtu(), SaPathRecordGetResp()};
  const TimePoint t0 = TimePoint::FromNanos(1'700'000'000'000'000'123);
  {
    absl::StatusOr<std::unique_ptr<PcapWriter>> w = PcapWriter::Create(path, c.link_type);
    ASSERT_TRUE(w.ok()) << w.status();
    for (size_t i = 0; i < mads.size(); ++i) {
      ASSERT_TRUE((*w)->WritePacket(t0 + Duration::Micros(static_cast<int64_t>(i)),
                                    *WrapMad(h, mads[i]))
                      .ok());
    }
  }
  absl::StatusOr<PcapContents> contents = ReadPcapFile(path);
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->records.size(), mads.size());
  for (size_t i = 0; i < mads.size(); ++i) {
    EXPECT_EQ(contents->records[i].time, t0 + Duration::Micros(static_cast<int64_t>(i)));
    absl::StatusOr<ParsedUdPacket> p = ParseUdPacket(contents->records[i].packet);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->headers, h);
    EXPECT_THAT(std::vector<uint8_t>(p->mad.begin(), p->mad.end()), ElementsAreArray(mads[i]));
    EXPECT_TRUE(p->icrc_ok);
    EXPECT_TRUE(p->vcrc_ok);
  }
  // tshark sees the same frames, with the same nanosecond timestamps.
  absl::StatusOr<std::vector<TsharkFrame>> frames = DecodeWithTshark(path);
  ASSERT_TRUE(frames.ok()) << frames.status();
  ASSERT_EQ(frames->size(), mads.size());
  absl::StatusOr<TsharkField> epoch = (*frames)[1].Get("frame.time_epoch");
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(epoch->show, "1700000000.000001123");
}

INSTANTIATE_TEST_SUITE_P(
    LinkTypes, CaptureTsharkTest,
    ::testing::Values(Case{CaptureLinkType::kExportedPdu, false},
                      Case{CaptureLinkType::kExportedPdu, true},
                      Case{CaptureLinkType::kErf, false}, Case{CaptureLinkType::kErf, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return absl::StrCat(info.param.link_type == CaptureLinkType::kErf ? "Erf" : "ExportedPdu",
                          info.param.grh ? "Grh" : "NoGrh");
    });

TEST(TsharkDecodeTest, MissingTsharkIsAnErrorThatSaysWhatToDo) {
  TsharkOptions options;
  options.binary = "/nonexistent/tshark";
  absl::StatusOr<std::vector<TsharkFrame>> frames =
      DecodeMadsWithTshark({CmRtu()}, Headers(false), CaptureLinkType::kExportedPdu, options);
  EXPECT_EQ(frames.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(frames.status().message()), ::testing::HasSubstr("tools/setup.sh"));
}

TEST(TsharkDecodeTest, ArgumentsDisableTheHeuristicsOneFlagEach) {
  const std::vector<std::string> args = TsharkArguments();
  EXPECT_THAT(args, ElementsAreArray<std::string>(
                        {"/usr/bin/tshark", "-n", "-T", "json", "-x", "--no-duplicate-keys",
                         "--disable-protocol", "infiniband_sdp", "--disable-protocol", "iser",
                         "--disable-protocol", "nvme-rdma", "--disable-protocol", "lnet"}));
}

}  // namespace
}  // namespace uscm::mad::capture
