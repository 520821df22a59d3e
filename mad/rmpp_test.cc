// RMPP between two agents in virtual time: a requester reassembling a
// GetTable response from a responder that segments it, over a seeded lossy,
// reordering link; plus the receiver's and sender's error paths.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/agent.h"
#include "mad/rmpp_receiver.h"
#include "mad/wire/rmpp.h"

namespace uscm::mad {
namespace {

using wire::RmppHeader;
using wire::RmppStatus;
using wire::RmppType;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint16_t kClientLid = 5;
constexpr uint16_t kSaLid = 1;

TimePoint At(int64_t ms) { return TimePoint::Epoch() + Duration::Millis(ms); }

MadAddress Lid(uint16_t lid) {
  MadAddress a;
  a.lid = lid;
  return a;
}

Mad GetTable() {
  Mad m{};
  m[0] = 1;
  m[1] = 0x03;
  m[2] = 2;
  m[3] = 0x12;
  m[16] = 0x00;
  m[17] = 0x35;
  return m;
}

std::vector<uint8_t> Records(size_t n) {
  std::vector<uint8_t> v(n * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 7 + i / 256);
  return v;
}

RmppHeader Rmpp(std::span<const uint8_t> m) {
  return RmppHeader::Read(wire::FieldView::Unchecked(m.data() + 24));
}

// Answers every GetTable with an RMPP transfer of `payload`.
class Responder : public MadHandler {
 public:
  Responder(Agent* agent, std::vector<uint8_t> payload)
      : agent_(agent), payload_(std::move(payload)) {}
  void OnMad(TimePoint now, const ReceivedMad& mad) override {
    std::array<uint8_t, kSaHeadersBytes> header{};
    std::memcpy(header.data(), mad.data.data(), kSaHeadersBytes);
    header[3] = 0x92;
    header[44] = 0;
    header[45] = 8;  // AttributeOffset: 64-byte records
    ++requests;
    last_status = agent_->SendRmpp(now, mad.from, header, payload_);
  }
  int requests = 0;
  absl::Status last_status;

 private:
  Agent* agent_;
  std::vector<uint8_t> payload_;
};

// Two agents joined by a link that drops and reorders with a seeded RNG.
struct Pair {
  Pair(AgentConfig cfg, uint64_t seed) : client(cfg, At(0)), sa(cfg, At(0)), rng(seed) {}

  // Moves MADs both ways until nothing is in flight and no timer is pending,
  // or `max_steps` rounds ran. Returns the rounds used.
  int Drive(int max_steps = 100000) {
    int steps = 0;
    for (; steps < max_steps; ++steps) {
      std::vector<std::pair<bool, OutgoingMad>> flight;  // true: to the SA
      while (auto o = client.PollTransmit()) flight.push_back({true, *o});
      while (auto o = sa.PollTransmit()) flight.push_back({false, *o});
      if (flight.empty()) {
        absl::optional<TimePoint> a = client.NextDeadline(), b = sa.NextDeadline();
        if (!a && !b) return steps;
        now = std::max(now, std::min(a.value_or(TimePoint::Infinite()),
                                     b.value_or(TimePoint::Infinite())));
        client.OnTimeout(now);
        sa.OnTimeout(now);
        continue;
      }
      if (reorder) std::shuffle(flight.begin(), flight.end(), rng);
      now += Duration::Micros(10);
      for (auto& [to_sa, o] : flight) {
        if (std::bernoulli_distribution(drop)(rng)) {
          ++dropped;
          continue;
        }
        ReceivedMad r;
        r.from = Lid(to_sa ? kClientLid : kSaLid);
        r.data = o.data;
        (to_sa ? sa : client).OnReceive(now, r);
      }
    }
    return steps;
  }

  Agent client;
  Agent sa;
  std::mt19937_64 rng;
  double drop = 0;
  bool reorder = false;
  int dropped = 0;
  TimePoint now = At(0);
};

AgentConfig Cfg() {
  AgentConfig c;
  c.base_timeout = Duration::Millis(500);
  c.max_retries = 8;
  c.rmpp.ack_timeout = Duration::Millis(200);
  c.rmpp.max_send_retries = 20;
  c.rmpp.receive_window = 4;
  c.rmpp.total_timeout = Duration::Seconds(30);
  return c;
}

absl::optional<Completion> Fetch(Pair& p, size_t records) {
  Responder responder(&p.sa, Records(records));
  p.sa.RegisterHandler(0x03, kAnyAttribute, &responder);
  EXPECT_TRUE(p.client.SendRequest(p.now, Lid(kSaLid), GetTable()).ok());
  p.Drive();
  EXPECT_TRUE(responder.last_status.ok()) << responder.last_status;
  return p.client.PollCompletion();
}

void ExpectRecords(const Completion& c, size_t records) {
  ASSERT_TRUE(c.status.ok()) << c.status;
  ASSERT_EQ(c.response.size(), kSaHeadersBytes + records * 64);
  std::vector<uint8_t> data(c.response.begin() + kSaHeadersBytes, c.response.end());
  EXPECT_EQ(data, Records(records));
  EXPECT_EQ(c.response[3], 0x92);
}

TEST(RmppTest, OneSegmentTransfer) {
  Pair p(Cfg(), 1);
  auto c = Fetch(p, 2);
  ASSERT_TRUE(c.has_value());
  ExpectRecords(*c, 2);
  EXPECT_EQ(p.sa.counters().rmpp.segments_sent, 1u);
  EXPECT_EQ(p.client.counters().rmpp.acks_sent, 1u);
  EXPECT_EQ(p.sa.counters().rmpp.transfers_completed, 1u);
  EXPECT_TRUE(p.client.idle());
  EXPECT_TRUE(p.sa.idle());
  EXPECT_EQ(p.client.lingering(), 0u);
}

TEST(RmppTest, ZeroRecordsIsOneEmptySegment) {
  Pair p(Cfg(), 1);
  auto c = Fetch(p, 0);
  ASSERT_TRUE(c.has_value());
  ExpectRecords(*c, 0);
}

TEST(RmppTest, ManySegmentsLosslessUseTheWindow) {
  Pair p(Cfg(), 1);
  auto c = Fetch(p, 100);  // 6400 bytes = 32 segments
  ASSERT_TRUE(c.has_value());
  ExpectRecords(*c, 100);
  const RmppCounters& s = p.sa.counters().rmpp;
  EXPECT_EQ(s.segments_sent, 32u);
  EXPECT_EQ(s.retransmits, 0u);
  // ACK after segment 1, then at every window edge (4 segments), and the last.
  EXPECT_EQ(p.client.counters().rmpp.acks_sent, 9u);
  EXPECT_TRUE(p.sa.idle());
}

class LossyRmppTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(LossyRmppTest, ReassemblesDespiteLossAndReordering) {
  Pair p(Cfg(), GetParam());
  p.drop = 0.15;
  p.reorder = true;
  auto c = Fetch(p, 150);  // 48 segments
  ASSERT_TRUE(c.has_value());
  ExpectRecords(*c, 150);
  EXPECT_GT(p.dropped, 0);
  EXPECT_GT(p.sa.counters().rmpp.retransmits, 0u);
  EXPECT_TRUE(p.client.idle());
  EXPECT_TRUE(p.sa.idle());
}

INSTANTIATE_TEST_SUITE_P(Seeds, LossyRmppTest, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8));

// ----- receiver unit paths

struct Rx {
  RmppConfig cfg;
  RmppCounters counters;
  std::vector<Mad> out;
};

Mad Data(uint32_t seg, uint32_t segs, size_t payload_bytes) {
  Mad m = GetTable();
  m[3] = 0x92;
  RmppHeader h;
  h.version = 1;
  h.type = RmppType::kData;
  h.active = true;
  h.first = seg == 1;
  h.last = seg == segs;
  h.segment_number = seg;
  const uint32_t pad = segs * 200 - static_cast<uint32_t>(payload_bytes);
  if (seg == 1) h.payload_length = segs * 220 - pad;
  if (seg == segs) h.payload_length = 220 - pad;
  EXPECT_TRUE(h.Emit(m).ok());
  std::fill(m.begin() + 56, m.end(), static_cast<uint8_t>(seg));
  return m;
}

TEST(RmppReceiverTest, OutOfOrderWithinWindowIsHeldAndDuplicatesReAcked) {
  Rx rx;
  rx.cfg.receive_window = 4;
  RmppReceiver r(rx.cfg, &rx.counters, At(0));
  r.OnSegment(At(0), Data(1, 3, 600), Rmpp(Data(1, 3, 600)), &rx.out);
  ASSERT_EQ(rx.out.size(), 1u);
  RmppHeader ack = Rmpp(rx.out[0]);
  EXPECT_EQ(ack.type, RmppType::kAck);
  EXPECT_EQ(ack.segment_number, 1u);
  EXPECT_EQ(ack.new_window_last(), 5u);
  EXPECT_TRUE(ack.active && !ack.first && !ack.last);
  EXPECT_EQ(rx.out[0][3], 0x12) << "ACK flips the response bit";
  rx.out.clear();

  r.OnSegment(At(1), Data(3, 3, 600), Rmpp(Data(3, 3, 600)), &rx.out);
  EXPECT_THAT(rx.out, IsEmpty()) << "a gap is not ACKed";
  EXPECT_EQ(rx.counters.out_of_order, 1u);
  r.OnSegment(At(2), Data(1, 3, 600), Rmpp(Data(1, 3, 600)), &rx.out);
  ASSERT_EQ(rx.out.size(), 1u) << "a duplicate is re-ACKed";
  EXPECT_EQ(Rmpp(rx.out[0]).segment_number, 1u);
  rx.out.clear();
  r.OnSegment(At(3), Data(2, 3, 600), Rmpp(Data(2, 3, 600)), &rx.out);
  ASSERT_EQ(rx.out.size(), 1u);
  EXPECT_EQ(Rmpp(rx.out[0]).segment_number, 3u);
  ASSERT_EQ(r.state(), RmppReceiver::State::kDone);
  std::vector<uint8_t> msg = r.TakeMessage();
  ASSERT_EQ(msg.size(), 56u + 600u);
  EXPECT_EQ(msg[56], 1);
  EXPECT_EQ(msg[56 + 200], 2);
  EXPECT_EQ(msg[56 + 400], 3);
}

TEST(RmppReceiverTest, SegmentBeyondWindowIsDropped) {
  Rx rx;
  rx.cfg.receive_window = 2;
  RmppReceiver r(rx.cfg, &rx.counters, At(0));
  r.OnSegment(At(0), Data(1, 9, 1800), Rmpp(Data(1, 9, 1800)), &rx.out);
  rx.out.clear();
  r.OnSegment(At(0), Data(4, 9, 1800), Rmpp(Data(4, 9, 1800)), &rx.out);
  EXPECT_THAT(rx.out, IsEmpty());
  EXPECT_EQ(rx.counters.out_of_window, 1u);
  EXPECT_EQ(r.state(), RmppReceiver::State::kReceiving);
}

TEST(RmppReceiverTest, InconsistentFirstFlagAborts120) {
  Rx rx;
  RmppReceiver r(rx.cfg, &rx.counters, At(0));
  Mad m = Data(1, 2, 400);
  m[26] &= ~0x02;  // clear First on segment 1
  r.OnSegment(At(0), m, Rmpp(m), &rx.out);
  ASSERT_EQ(rx.out.size(), 1u);
  EXPECT_EQ(Rmpp(rx.out[0]).type, RmppType::kAbort);
  EXPECT_EQ(Rmpp(rx.out[0]).status, RmppStatus::kInconsistentFirstAndSegmentNumber);
  EXPECT_EQ(r.state(), RmppReceiver::State::kFailed);
  EXPECT_EQ(r.error().code(), absl::StatusCode::kAborted);
}

TEST(RmppReceiverTest, LastLengthDisagreeingWithFirstAborts119) {
  Rx rx;
  RmppReceiver r(rx.cfg, &rx.counters, At(0));
  r.OnSegment(At(0), Data(1, 2, 400), Rmpp(Data(1, 2, 400)), &rx.out);
  rx.out.clear();
  Mad last = Data(2, 2, 300);  // says 300 bytes; segment 1 said 400
  r.OnSegment(At(0), last, Rmpp(last), &rx.out);
  ASSERT_EQ(rx.out.size(), 1u);
  EXPECT_EQ(Rmpp(rx.out[0]).status, RmppStatus::kInconsistentLastAndPayloadLength);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("first PayloadLength"));
}

TEST(RmppReceiverTest, WrongVersionAndTypeAbort) {
  Rx rx;
  RmppReceiver v(rx.cfg, &rx.counters, At(0));
  Mad m = Data(1, 1, 10);
  m[24] = 2;
  v.OnSegment(At(0), m, Rmpp(m), &rx.out);
  EXPECT_EQ(Rmpp(rx.out.back()).status, RmppStatus::kUnsupportedVersion);
  RmppReceiver t(rx.cfg, &rx.counters, At(0));
  Mad n = Data(1, 1, 10);
  n[25] = 9;
  t.OnSegment(At(0), n, Rmpp(n), &rx.out);
  EXPECT_EQ(Rmpp(rx.out.back()).status, RmppStatus::kBadRmppType);
  EXPECT_EQ(rx.counters.aborts_sent, 2u);
}

TEST(RmppReceiverTest, SenderAbortFailsTheTransfer) {
  Rx rx;
  RmppReceiver r(rx.cfg, &rx.counters, At(0));
  r.OnSegment(At(0), Data(1, 3, 600), Rmpp(Data(1, 3, 600)), &rx.out);
  Mad abort = MakeRmppControl(Data(1, 3, 600), false, RmppType::kAbort,
                              RmppStatus::kTooManyRetries, 0, 0);
  rx.out.clear();
  r.OnSegment(At(1), abort, Rmpp(abort), &rx.out);
  EXPECT_THAT(rx.out, IsEmpty()) << "an ABORT is not answered";
  EXPECT_EQ(r.state(), RmppReceiver::State::kFailed);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("too many retries"));
  EXPECT_EQ(rx.counters.aborts_received, 1u);
}

TEST(RmppReceiverTest, AgentReportsTotalTimeoutAndAborts118) {
  AgentConfig cfg = Cfg();
  cfg.rmpp.total_timeout = Duration::Seconds(5);
  Agent client(cfg, At(0));
  ASSERT_TRUE(client.SendRequest(At(0), Lid(kSaLid), GetTable()).ok());
  Mad req = client.PollTransmit()->data;
  Mad seg1 = Data(1, 3, 600);
  std::memcpy(&seg1[8], &req[8], 8);
  client.OnReceive(At(10), ReceivedMad{Lid(kSaLid), seg1});
  ASSERT_EQ(Rmpp(client.PollTransmit()->data).type, RmppType::kAck);
  // The request's own retransmission timer stopped with the first segment.
  client.OnTimeout(At(4000));
  EXPECT_FALSE(client.PollTransmit().has_value());
  EXPECT_LE(*client.NextDeadline(), At(5010));
  client.OnTimeout(At(5009));
  EXPECT_FALSE(client.PollTransmit().has_value());
  client.OnTimeout(At(5010));
  auto abort = client.PollTransmit();
  ASSERT_TRUE(abort.has_value());
  EXPECT_EQ(Rmpp(abort->data).status, RmppStatus::kTotalTimeTooLong);
  EXPECT_EQ(abort->to.lid, kSaLid);
  auto c = client.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(client.idle());
}

TEST(RmppAgentTest, SenderAbortFailsTheRequest) {
  Agent client(Cfg(), At(0));
  ASSERT_TRUE(client.SendRequest(At(0), Lid(kSaLid), GetTable()).ok());
  Mad req = client.PollTransmit()->data;
  Mad seg1 = Data(1, 3, 600);
  std::memcpy(&seg1[8], &req[8], 8);
  client.OnReceive(At(1), ReceivedMad{Lid(kSaLid), seg1});
  ASSERT_TRUE(client.PollTransmit().has_value());  // the ACK
  Mad abort = MakeRmppControl(seg1, false, RmppType::kAbort, RmppStatus::kTooManyRetries, 0, 0);
  client.OnReceive(At(2), ReceivedMad{Lid(kSaLid), abort});
  auto c = client.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(c->status.message()), HasSubstr("status 126"));
  EXPECT_FALSE(client.PollTransmit().has_value()) << "an ABORT is not answered";
  EXPECT_TRUE(client.idle());
  EXPECT_EQ(client.lingering(), 0u);
}

TEST(RmppAgentTest, RepeatedLastSegmentIsAckedAgainAfterCompletion) {
  Agent client(Cfg(), At(0));
  ASSERT_TRUE(client.SendRequest(At(0), Lid(kSaLid), GetTable()).ok());
  Mad req = client.PollTransmit()->data;
  Mad seg1 = Data(1, 1, 100);
  std::memcpy(&seg1[8], &req[8], 8);
  client.OnReceive(At(1), ReceivedMad{Lid(kSaLid), seg1});
  ASSERT_TRUE(client.PollCompletion().has_value());
  ASSERT_TRUE(client.PollTransmit().has_value());
  EXPECT_EQ(client.lingering(), 1u);
  // The sender lost our ACK and repeats the segment: ACK it again.
  client.OnReceive(At(2000), ReceivedMad{Lid(kSaLid), seg1});
  auto ack = client.PollTransmit();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(Rmpp(ack->data).type, RmppType::kAck);
  EXPECT_EQ(Rmpp(ack->data).segment_number, 1u);
  EXPECT_FALSE(client.PollCompletion().has_value());
  EXPECT_EQ(client.counters().unmatched, 0u);
  // Forgotten after the linger time; then it is just unmatched.
  client.OnTimeout(At(31'000));
  EXPECT_EQ(client.lingering(), 0u);
  client.OnReceive(At(31'001), ReceivedMad{Lid(kSaLid), seg1});
  EXPECT_FALSE(client.PollTransmit().has_value());
  EXPECT_EQ(client.counters().unmatched, 1u);
}

// ----- sender unit paths

TEST(RmppSenderTest, RetransmitsFromLastAckThenAborts126) {
  RmppConfig cfg;
  cfg.ack_timeout = Duration::Millis(100);
  cfg.max_send_retries = 2;
  RmppCounters counters;
  std::vector<Mad> out;
  Mad header = Data(1, 1, 0);
  RmppSender s(cfg, &counters, Lid(kClientLid), std::span(header).first(56), Records(10));
  EXPECT_EQ(s.segments(), 4u);
  s.Start(At(0), &out);
  ASSERT_EQ(out.size(), 1u) << "the first window is one segment";
  EXPECT_EQ(Rmpp(out[0]).payload_length, 4u * 220 - (800 - 640));
  out.clear();
  // ACK 1, window to 3: segments 2 and 3 go out.
  Mad ack = MakeRmppControl(header, true, RmppType::kAck, RmppStatus::kNormal, 1, 3);
  s.OnControl(At(10), ack, Rmpp(ack), &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Rmpp(out[0]).segment_number, 2u);
  EXPECT_EQ(Rmpp(out[1]).segment_number, 3u);
  out.clear();
  s.OnTimeout(At(109), &out);
  EXPECT_THAT(out, IsEmpty());
  s.OnTimeout(At(110), &out);  // resend 2..3
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Rmpp(out[0]).segment_number, 2u);
  out.clear();
  s.OnTimeout(At(210), &out);
  EXPECT_EQ(out.size(), 2u);
  out.clear();
  s.OnTimeout(At(310), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Rmpp(out[0]).type, RmppType::kAbort);
  EXPECT_EQ(Rmpp(out[0]).status, RmppStatus::kTooManyRetries);
  EXPECT_EQ(s.state(), RmppSender::State::kFailed);
  EXPECT_EQ(counters.retransmits, 4u);
}

TEST(RmppSenderTest, BadAcksAbort) {
  RmppConfig cfg;
  RmppCounters counters;
  std::vector<Mad> out;
  Mad header = Data(1, 1, 0);
  RmppSender s(cfg, &counters, Lid(kClientLid), std::span(header).first(56), Records(10));
  s.Start(At(0), &out);
  out.clear();
  Mad ack = MakeRmppControl(header, true, RmppType::kAck, RmppStatus::kNormal, 3, 5);
  s.OnControl(At(1), ack, Rmpp(ack), &out);  // ACKs a segment never sent
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Rmpp(out[0]).status, RmppStatus::kSegmentNumberTooBig);

  RmppSender w(cfg, &counters, Lid(kClientLid), std::span(header).first(56), Records(10));
  w.Start(At(0), &out);
  out.clear();
  Mad small = MakeRmppControl(header, true, RmppType::kAck, RmppStatus::kNormal, 1, 0);
  w.OnControl(At(1), small, Rmpp(small), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Rmpp(out[0]).status, RmppStatus::kNewWindowLastTooSmall);
}

TEST(RmppSenderTest, ReceiverStopEndsTheTransfer) {
  Pair p(Cfg(), 3);
  Responder responder(&p.sa, Records(100));
  p.sa.RegisterHandler(0x03, kAnyAttribute, &responder);
  ASSERT_TRUE(p.client.SendRequest(p.now, Lid(kSaLid), GetTable()).ok());
  Mad req = p.client.PollTransmit()->data;
  p.sa.OnReceive(At(1), ReceivedMad{Lid(kClientLid), req});
  Mad seg1 = p.sa.PollTransmit()->data;
  Mad stop = MakeRmppControl(seg1, true, RmppType::kStop, RmppStatus::kResourcesExhausted, 0, 0);
  p.sa.OnReceive(At(2), ReceivedMad{Lid(kClientLid), stop});
  EXPECT_EQ(p.sa.rmpp_sends(), 0u);
  EXPECT_EQ(p.sa.counters().rmpp.aborts_received, 1u);
  EXPECT_FALSE(p.sa.PollTransmit().has_value());
  EXPECT_TRUE(p.sa.idle());
}

}  // namespace
}  // namespace uscm::mad
