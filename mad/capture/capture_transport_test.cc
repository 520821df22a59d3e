#include "mad/capture/capture_transport.h"

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_reader.h"

namespace uscm::mad::capture {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Records sends; delivers queued MADs on Drain; can be told to refuse sends.
class FakeTransport final : public Transport {
 public:
  FakeTransport() {
    port_.ca_name = "fake0";
    port_.lid = 0x40;
    port_.gid = Gid::FromParts(0xfe80000000000000, 0x0002c90300000040);
    port_.pkeys = {0xFFFF};
    caps_.name = "fake";
  }
  absl::Status Send(const MadAddress& to, std::span<const uint8_t> mad) override {
    if (!send_status.ok()) return send_status;
    sent.emplace_back(to, std::vector<uint8_t>(mad.begin(), mad.end()));
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const ReceivedMad&)> sink, size_t max) override {
    size_t n = 0;
    while (n < max && !inbox.empty()) {
      sink(ReceivedMad{inbox.front().first, inbox.front().second});
      inbox.pop_front();
      ++n;
    }
    return n;
  }
  int fd() const override { return 42; }
  const TransportCaps& caps() const override { return caps_; }
  const LocalPort& port() const override { return port_; }

  absl::Status send_status;
  std::vector<std::pair<MadAddress, std::vector<uint8_t>>> sent;
  std::deque<std::pair<MadAddress, std::vector<uint8_t>>> inbox;

 private:
  LocalPort port_;
  TransportCaps caps_;
};

std::vector<uint8_t> Mad(uint8_t tag, size_t n = kMadSize) {
  std::vector<uint8_t> m(n, tag);
  m[0] = 1;
  m[1] = 0x07;
  return m;
}

MadAddress Peer() {
  MadAddress a;
  a.lid = 0x22;
  a.qpn = kQp1;
  a.sl = 2;
  return a;
}

class CaptureTransportTest : public ::testing::Test {
 protected:
  FakeTransport inner_;
  PcapWriter writer_;
  VirtualClock clock_{TimePoint::FromNanos(5'000'000'000)};
  CaptureTransport capture_{inner_, writer_, clock_};

  std::vector<PcapRecord> Records() {
    absl::StatusOr<PcapContents> c = ReadPcap(writer_.bytes());
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->records : std::vector<PcapRecord>{};
  }
};

TEST_F(CaptureTransportTest, RecordsSentMadsFromOurPort) {
  ASSERT_TRUE(capture_.Send(Peer(), Mad(0xA1)).ok());
  ASSERT_EQ(inner_.sent.size(), 1u);  // forwarded unchanged
  EXPECT_EQ(inner_.sent[0].first, Peer());
  EXPECT_THAT(inner_.sent[0].second, ElementsAreArray(Mad(0xA1)));

  const std::vector<PcapRecord> records = Records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].time, TimePoint::FromNanos(5'000'000'000));
  absl::StatusOr<ParsedUdPacket> p = ParseUdPacket(records[0].packet);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->headers.slid, 0x40);
  EXPECT_EQ(p->headers.dlid, 0x22);
  EXPECT_EQ(p->headers.sl, 2);
  EXPECT_EQ(p->headers.src_qpn, kQp1);
  EXPECT_EQ(p->headers.dest_qpn, kQp1);
  EXPECT_EQ(p->headers.qkey, kQp1Qkey);
  EXPECT_FALSE(p->headers.grh.has_value());
  EXPECT_THAT(std::vector<uint8_t>(p->mad.begin(), p->mad.end()), ElementsAreArray(Mad(0xA1)));
  EXPECT_EQ(capture_.recorded(), 1u);
}

TEST_F(CaptureTransportTest, RecordsReceivedMadsBeforeTheSinkSeesThem) {
  MadAddress from = Peer();
  from.has_grh = true;
  from.gid = Gid::FromParts(0xfe80000000000000, 0x22);
  inner_.inbox.emplace_back(from, Mad(0xB1));
  inner_.inbox.emplace_back(Peer(), Mad(0xB2));
  inner_.inbox.emplace_back(Peer(), Mad(0xB3));
  std::vector<std::vector<uint8_t>> delivered;
  clock_.AdvanceBy(Duration::Millis(3));
  const size_t n = capture_.Drain(
      [&](const ReceivedMad& r) {
        EXPECT_EQ(writer_.packets_written(), delivered.size() + 1);
        delivered.emplace_back(r.data.begin(), r.data.end());
      },
      2);
  EXPECT_EQ(n, 2u);  // `max` is passed through
  ASSERT_EQ(delivered.size(), 2u);
  EXPECT_THAT(delivered[0], ElementsAreArray(Mad(0xB1)));

  const std::vector<PcapRecord> records = Records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].time, TimePoint::FromNanos(5'003'000'000));
  absl::StatusOr<ParsedUdPacket> p = ParseUdPacket(records[0].packet);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->headers.slid, 0x22);  // the peer
  EXPECT_EQ(p->headers.dlid, 0x40);  // us
  ASSERT_TRUE(p->headers.grh.has_value());
  EXPECT_EQ(p->headers.grh->sgid, from.gid);
  EXPECT_EQ(p->headers.grh->dgid, inner_.port().gid);
  EXPECT_EQ(SourceAddress(p->headers), from);
}

TEST_F(CaptureTransportTest, RefusedSendIsNotRecorded) {
  inner_.send_status = absl::ResourceExhaustedError("send queue full");
  EXPECT_EQ(capture_.Send(Peer(), Mad(1)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Records().empty());
  EXPECT_EQ(capture_.recorded(), 0u);
}

TEST_F(CaptureTransportTest, CaptureFailureIsCountedAndDoesNotStopTraffic) {
  ASSERT_TRUE(writer_.Close().ok());  // every write now fails
  EXPECT_TRUE(capture_.Send(Peer(), Mad(1)).ok());
  EXPECT_EQ(inner_.sent.size(), 1u);
  EXPECT_EQ(capture_.record_failures(), 1u);
  EXPECT_THAT(std::string(capture_.last_record_error().message()), HasSubstr("closed"));
}

TEST_F(CaptureTransportTest, OversizedMadIsCountedNotRecorded) {
  inner_.inbox.emplace_back(Peer(), Mad(1, 9000));  // a coalesced RMPP response
  size_t delivered = 0;
  capture_.Drain([&](const ReceivedMad&) { ++delivered; });
  EXPECT_EQ(delivered, 1u);
  EXPECT_EQ(capture_.record_failures(), 1u);
  EXPECT_THAT(std::string(capture_.last_record_error().message()),
              HasSubstr("capture of a 9000-byte MAD"));
}

TEST_F(CaptureTransportTest, PassesThroughPortCapsAndFd) {
  EXPECT_EQ(capture_.fd(), 42);
  EXPECT_EQ(capture_.caps().name, "fake");
  EXPECT_EQ(capture_.port().ca_name, "fake0");
}

}  // namespace
}  // namespace uscm::mad::capture
