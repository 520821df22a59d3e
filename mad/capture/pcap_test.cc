#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/pcap_reader.h"
#include "mad/capture/pcap_writer.h"

namespace uscm::mad::capture {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<uint8_t> Packet(size_t n, uint8_t first) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(first + i);
  return p;
}

std::vector<uint8_t> Slice(const std::vector<uint8_t>& v, size_t at, size_t n) {
  return {v.begin() + at, v.begin() + at + n};
}

const TimePoint kT1 = TimePoint::FromNanos(1'700'000'000'123'456'789);
const TimePoint kT2 = TimePoint::FromNanos(1'500'000'000);  // 1.5 s

TEST(PcapWriterTest, FileHeaderIsNanosecondPcap) {
  PcapWriter w(CaptureLinkType::kErf);
  EXPECT_THAT(w.bytes(), ElementsAre(0x4d, 0x3c, 0xb2, 0xa1,  // magic (ns), LE
                                     2, 0, 4, 0,              // version 2.4
                                     0, 0, 0, 0, 0, 0, 0, 0,  // thiszone, sigfigs
                                     0xff, 0xff, 0, 0,        // snaplen 65535
                                     197, 0, 0, 0));          // LINKTYPE_ERF
  EXPECT_EQ(PcapWriter().bytes()[20], 252);  // default: exported PDU
}

TEST(PcapWriterTest, ExportedPduRecordLayout) {
  PcapWriter w;
  ASSERT_TRUE(w.WritePacket(kT2, Packet(6, 0xA0)).ok());
  const std::vector<uint8_t>& b = w.bytes();
  ASSERT_EQ(b.size(), 24u + 16 + 20 + 6);
  EXPECT_THAT(Slice(b, 24, 16), ElementsAre(1, 0, 0, 0,                // seconds
                                            0x00, 0x65, 0xcd, 0x1d,   // 500000000 ns
                                            26, 0, 0, 0, 26, 0, 0, 0));  // lengths
  EXPECT_THAT(Slice(b, 40, 20),
              ElementsAre(0, 12, 0, 12,  // tag 12 (dissector name), 12 bytes
                          'i', 'n', 'f', 'i', 'n', 'i', 'b', 'a', 'n', 'd', 0, 0,
                          0, 0, 0, 0));  // end of tags
  EXPECT_THAT(Slice(b, 60, 6), ElementsAreArray(Packet(6, 0xA0)));
  EXPECT_EQ(w.packets_written(), 1u);
}

TEST(PcapWriterTest, ErfRecordLayout) {
  PcapWriter w(CaptureLinkType::kErf);
  ASSERT_TRUE(w.WritePacket(kT2, Packet(6, 0xA0)).ok());
  const std::vector<uint8_t>& b = w.bytes();
  ASSERT_EQ(b.size(), 24u + 16 + 16 + 6);
  EXPECT_THAT(Slice(b, 40, 16),
              ElementsAre(0, 0, 0, 0x80, 1, 0, 0, 0,  // 1.5 s as LE 32.32
                          21,                         // ERF type InfiniBand
                          0x04,                       // flags: varying length
                          0, 22,                      // rlen
                          0, 0,                       // lctr
                          0, 6));                     // wlen
}

TEST(PcapWriterTest, RejectsTimesPcapCannotStore) {
  PcapWriter w;
  EXPECT_THAT(w.WritePacket(TimePoint::FromNanos(-1), Packet(4, 0)).message(),
              HasSubstr("before the epoch"));
  EXPECT_THAT(w.WritePacket(TimePoint::FromNanos(int64_t{1} << 62), Packet(4, 0)).message(),
              HasSubstr("32-bit seconds"));
  EXPECT_THAT(w.WritePacket(kT1, Packet(70000, 0)).message(), HasSubstr("at most 65515"));
  EXPECT_EQ(w.bytes().size(), kPcapFileHeaderSize);  // nothing written
  EXPECT_EQ(w.packets_written(), 0u);
}

TEST(PcapRoundTripTest, BothLinkTypes) {
  for (CaptureLinkType t : {CaptureLinkType::kExportedPdu, CaptureLinkType::kErf}) {
    PcapWriter w(t);
    ASSERT_TRUE(w.WritePacket(kT1, Packet(290, 1)).ok());
    ASSERT_TRUE(w.WritePacket(kT2, Packet(330, 7)).ok());
    ASSERT_TRUE(w.WritePacket(TimePoint::Epoch(), Packet(2, 9)).ok());
    absl::StatusOr<PcapContents> c = ReadPcap(w.bytes());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->link_type, t);
    ASSERT_EQ(c->records.size(), 3u);
    EXPECT_EQ(c->records[0].time, kT1);
    EXPECT_EQ(c->records[1].time, kT2);
    EXPECT_EQ(c->records[2].time, TimePoint::Epoch());
    EXPECT_THAT(c->records[0].packet, ElementsAreArray(Packet(290, 1)));
    EXPECT_THAT(c->records[1].packet, ElementsAreArray(Packet(330, 7)));
    EXPECT_THAT(c->records[2].packet, ElementsAreArray(Packet(2, 9)));
    EXPECT_EQ(c->records[0].packet_offset, t == CaptureLinkType::kErf ? 16u : 20u);
  }
}

TEST(PcapRoundTripTest, FileWriterMatchesMemoryWriter) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/pcap_test.pcap";
  PcapWriter mem(CaptureLinkType::kErf);
  absl::StatusOr<std::unique_ptr<PcapWriter>> file = PcapWriter::Create(path, CaptureLinkType::kErf);
  ASSERT_TRUE(file.ok()) << file.status();
  for (PcapWriter* w : {&mem, file->get()}) {
    ASSERT_TRUE(w->WritePacket(kT1, Packet(100, 3)).ok());
  }
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_THAT((*file)->WritePacket(kT1, Packet(4, 0)).message(), HasSubstr("closed"));
  absl::StatusOr<PcapContents> from_file = ReadPcapFile(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_EQ(from_file->records.size(), 1u);
  EXPECT_THAT(from_file->records[0].packet, ElementsAreArray(Packet(100, 3)));

  EXPECT_EQ(PcapWriter::Create("/nonexistent-dir/x.pcap").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReadPcapFile("/nonexistent-dir/x.pcap").status().code(),
            absl::StatusCode::kNotFound);
}

// A big-endian, microsecond pcap of one ERF record (2 s + 250 us) whose
// header announces one extension header; `tail` follows the ERF header.
std::vector<uint8_t> BigEndianErfFile(uint8_t incl_len, std::vector<uint8_t> tail) {
  std::vector<uint8_t> f = {0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
                            0, 0, 0xff, 0xff, 0, 0, 0, 197,
                            0, 0, 0, 2, 0, 0, 0, 250, 0, 0, 0, incl_len, 0, 0, 0, incl_len,
                            0, 0, 0, 0, 2, 0, 0, 0, 21 | 0x80, 4, 0, 28, 0, 0, 0, 4};
  for (uint8_t b : tail) f.push_back(b);  // (insert() trips gcc 12 -Warray-bounds)
  return f;
}

TEST(PcapReaderTest, ReadsBigEndianMicrosecondFiles) {
  // 4 bytes where the 8-byte extension header should be.
  absl::StatusOr<PcapContents> c = ReadPcap(BigEndianErfFile(20, {1, 2, 3, 4}));
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("record 1: ERF extension header runs past"));
  // Well-formed: incl_len 28 = ERF header 16 + extension header 8 + packet 4;
  // the extension header's bit 7 is clear: it is the last one.
  const std::vector<uint8_t> f = BigEndianErfFile(28, {0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4});
  c = ReadPcap(f);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->records.size(), 1u);
  EXPECT_EQ(c->records[0].time, TimePoint::FromNanos(2'000'250'000));
  EXPECT_THAT(c->records[0].packet, ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(c->records[0].packet_offset, 24u);
}

TEST(PcapReaderTest, EveryTruncationInsideARecordIsAnError) {
  for (CaptureLinkType t : {CaptureLinkType::kExportedPdu, CaptureLinkType::kErf}) {
    PcapWriter w(t);
    ASSERT_TRUE(w.WritePacket(kT1, Packet(40, 1)).ok());
    const std::vector<uint8_t>& b = w.bytes();
    for (size_t n = 0; n < b.size(); ++n) {
      absl::StatusOr<PcapContents> c = ReadPcap(std::span<const uint8_t>(b).first(n));
      if (n == kPcapFileHeaderSize) {
        EXPECT_TRUE(c.ok() && c->records.empty()) << n;  // a valid empty capture
      } else {
        EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << n;
      }
    }
  }
}

std::string ErrorAfter(CaptureLinkType t, void (*corrupt)(std::vector<uint8_t>&)) {
  PcapWriter w(t);
  EXPECT_TRUE(w.WritePacket(kT1, Packet(40, 1)).ok());
  std::vector<uint8_t> b = w.bytes();
  corrupt(b);
  absl::StatusOr<PcapContents> c = ReadPcap(b);
  return c.ok() ? "ok" : std::string(c.status().message());
}

TEST(PcapReaderTest, NamesWhatIsWrong) {
  const auto pdu = CaptureLinkType::kExportedPdu;
  const auto erf = CaptureLinkType::kErf;
  EXPECT_EQ(ErrorAfter(pdu, [](auto& b) { b[0] = 0; }), "not a pcap file (magic 0xa1b23c00)");
  EXPECT_THAT(ErrorAfter(pdu, [](auto& b) { b[0] = 0x0a; b[1] = 0x0d; b[2] = 0x0d; b[3] = 0x0a; }),
              HasSubstr("pcapng"));
  EXPECT_THAT(ErrorAfter(pdu, [](auto& b) { b[20] = 105; }),
              HasSubstr("link type is 105; only 252"));
  EXPECT_THAT(ErrorAfter(pdu, [](auto& b) { b[24 + 4] = 0xff; b[24 + 7] = 0xff; }),
              HasSubstr("record 1: timestamp fraction"));
  EXPECT_THAT(ErrorAfter(pdu, [](auto& b) { b[24 + 10] = 0x10; }),
              HasSubstr("record 1: record length 1048636 exceeds 262144"));
  EXPECT_THAT(ErrorAfter(pdu, [](auto& b) { b[40 + 4] = 'X'; }),
              HasSubstr("dissector is 'Xnfiniband'"));
  EXPECT_THAT(ErrorAfter(pdu, [](auto& b) { b[40 + 1] = 13; }),
              HasSubstr("names no dissector"));
  EXPECT_THAT(ErrorAfter(pdu, [](auto& b) { b[40 + 2] = 0x7f; }),
              HasSubstr("tag 12 claims 32524 bytes"));
  EXPECT_THAT(ErrorAfter(erf, [](auto& b) { b[40 + 8] = 2; }),
              HasSubstr("ERF type is 2; only 21"));
  EXPECT_THAT(ErrorAfter(erf, [](auto& b) { b[40 + 10] = 1; }),
              HasSubstr("ERF rlen is 312"));
}

TEST(PcapReaderTest, ErfPaddingAfterThePacketIsDropped) {
  PcapWriter w(CaptureLinkType::kErf);
  ASSERT_TRUE(w.WritePacket(kT1, Packet(6, 1)).ok());
  std::vector<uint8_t> b = w.bytes();
  b.insert(b.end(), 2, 0xEE);  // pad the record to 8 bytes, as DAG cards do
  b[24 + 8] += 2;              // incl_len
  b[40 + 11] += 2;             // rlen; wlen stays 6
  absl::StatusOr<PcapContents> c = ReadPcap(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->records[0].packet, ElementsAreArray(Packet(6, 1)));
}

}  // namespace
}  // namespace uscm::mad::capture
