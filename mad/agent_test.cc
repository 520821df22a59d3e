// The agent in virtual time: exact retransmission timings, window queueing,
// Busy back-off, matching rules, unsolicited dispatch, malformed input, the
// measured retransmission timeout and lost requests giving up their slot.
#include "mad/agent.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/mad_header.h"

namespace uscm::mad {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint16_t kSmLid = 1;
constexpr uint16_t kPathRecord = 0x0035;

TimePoint At(int64_t ms) { return TimePoint::Epoch() + Duration::Millis(ms); }

MadAddress To(uint16_t lid) {
  MadAddress a;
  a.lid = lid;
  return a;
}

Mad Request(uint8_t method = 0x01, uint16_t attribute = kPathRecord, uint8_t cls = 0x03) {
  Mad m{};
  wire::MadHeader h;
  h.mgmt_class = cls;
  h.class_version = 2;
  h.method = method;
  h.attribute_id = attribute;
  EXPECT_TRUE(h.Emit(m).ok());
  return m;
}

// The response to `request` (as sent), with `status` and the TID high bits
// replaced as umad does.
Mad Answer(const Mad& request, uint8_t method = 0x81, uint16_t status = 0,
           uint32_t tid_high = 0xABCD0001) {
  Mad m = request;
  m[3] = method;
  m[4] = static_cast<uint8_t>(status >> 8);
  m[5] = static_cast<uint8_t>(status);
  m[8] = static_cast<uint8_t>(tid_high >> 24);
  m[9] = static_cast<uint8_t>(tid_high >> 16);
  m[10] = static_cast<uint8_t>(tid_high >> 8);
  m[11] = static_cast<uint8_t>(tid_high);
  return m;
}

ReceivedMad From(uint16_t lid, const Mad& m) {
  ReceivedMad r;
  r.from.lid = lid;
  r.data = m;
  return r;
}

uint32_t TidLow(const Mad& m) {
  return uint32_t{m[12]} << 24 | uint32_t{m[13]} << 16 | uint32_t{m[14]} << 8 | m[15];
}

std::vector<OutgoingMad> DrainOut(Agent& a) {
  std::vector<OutgoingMad> out;
  while (auto o = a.PollTransmit()) out.push_back(*o);
  return out;
}

AgentConfig Fast() {
  AgentConfig c;
  c.base_timeout = Duration::Millis(100);
  c.backoff_factor = 2;
  c.max_retries = 3;
  c.max_timeout = Duration::Seconds(10);
  return c;
}

TEST(AgentTest, RetransmitsWithExponentialBackoffThenTimesOut) {
  Agent agent(Fast(), At(0));
  auto id = agent.SendRequest(At(0), To(kSmLid), Request());
  ASSERT_TRUE(id.ok());
  std::vector<OutgoingMad> first = DrainOut(agent);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].to.lid, kSmLid);

  // Attempt k waits 100 ms * 2^k: resends at 100, 300, 700; fails at 1500.
  const int64_t sends[] = {100, 300, 700};
  int64_t prev = 0;
  for (int64_t t : sends) {
    EXPECT_LE(*agent.NextDeadline(), At(t));
    agent.OnTimeout(At(t - 1));
    EXPECT_THAT(DrainOut(agent), IsEmpty()) << "before " << t << " ms";
    agent.OnTimeout(At(t));
    std::vector<OutgoingMad> again = DrainOut(agent);
    ASSERT_EQ(again.size(), 1u) << "at " << t << " ms";
    EXPECT_EQ(again[0].data, first[0].data) << "a retransmission repeats the TID";
    prev = t;
  }
  EXPECT_LE(*agent.NextDeadline(), At(prev + 800));
  agent.OnTimeout(At(1499));
  EXPECT_FALSE(agent.PollCompletion().has_value());
  agent.OnTimeout(At(1500));
  EXPECT_THAT(DrainOut(agent), IsEmpty());
  auto c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->id, *id);
  EXPECT_EQ(c->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(c->status.message()), ::testing::HasSubstr("after 4 attempts"));
  EXPECT_EQ(c->retries, 3);
  EXPECT_EQ(agent.counters().retries, 3u);
  EXPECT_EQ(agent.counters().timeouts, 1u);
  EXPECT_EQ(agent.counters().sent, 4u);
  EXPECT_TRUE(agent.idle());
  EXPECT_EQ(agent.NextDeadline(), absl::nullopt);
}

TEST(AgentTest, BackoffIsCappedAtMaxTimeout) {
  AgentConfig c = Fast();
  c.backoff_factor = 10;
  c.max_timeout = Duration::Millis(500);
  Agent agent(c, At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  DrainOut(agent);
  // 100, then 1000 capped to 500, then 500.
  EXPECT_LE(*agent.NextDeadline(), At(100));
  agent.OnTimeout(At(100));
  EXPECT_LE(*agent.NextDeadline(), At(600));
  agent.OnTimeout(At(600));
  EXPECT_LE(*agent.NextDeadline(), At(1100));
}

TEST(AgentTest, ResponseMatchesOnLowTidBitsOnly) {
  Agent agent(Fast(), At(0));
  auto id = agent.SendRequest(At(0), To(kSmLid), Request(), /*cookie=*/77);
  ASSERT_TRUE(id.ok());
  const Mad sent = DrainOut(agent)[0].data;
  const Mad answer = Answer(sent, 0x81, 0, 0x12345678);
  agent.OnReceive(At(5), From(kSmLid, answer));
  auto c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->status.ok()) << c->status;
  EXPECT_EQ(c->cookie, 77u);
  EXPECT_EQ(c->response, std::vector<uint8_t>(answer.begin(), answer.end()));
  EXPECT_EQ(agent.counters().completed, 1u);
  // The timer died with the request: nothing is resent later.
  agent.OnTimeout(At(10'000));
  EXPECT_THAT(DrainOut(agent), IsEmpty());
  EXPECT_TRUE(agent.idle());
  // A second copy of the answer matches nothing.
  agent.OnReceive(At(20), From(kSmLid, answer));
  EXPECT_EQ(agent.counters().unmatched, 1u);
}

TEST(AgentTest, MismatchedResponsesAreCountedNotDelivered) {
  Agent agent(Fast(), At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  const Mad sent = DrainOut(agent)[0].data;

  Mad wrong_attr = Answer(sent);
  wrong_attr[17] = 0x38;  // MCMemberRecord
  agent.OnReceive(At(1), From(kSmLid, wrong_attr));
  agent.OnReceive(At(1), From(/*lid=*/9, Answer(sent)));   // wrong source
  agent.OnReceive(At(1), From(kSmLid, Answer(sent, 0x95)));  // DeleteResp to a Get
  Mad wrong_tid = Answer(sent);
  wrong_tid[15] ^= 1;
  agent.OnReceive(At(1), From(kSmLid, wrong_tid));
  EXPECT_EQ(agent.counters().unmatched, 4u);
  EXPECT_FALSE(agent.PollCompletion().has_value());
  EXPECT_EQ(agent.pending_requests(), 1u);
}

TEST(AgentTest, SetIsAnsweredByGetResp) {
  Agent agent(Fast(), At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request(0x02, 0x0038)).ok());
  agent.OnReceive(At(1), From(kSmLid, Answer(DrainOut(agent)[0].data, 0x81)));
  auto c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->status.ok());
}

TEST(AgentTest, WindowQueuesPerDestination) {
  AgentConfig cfg = Fast();
  cfg.window = 2;
  cfg.adaptive_timeout = false;  // fixed 100 ms attempts: the timings below
  Agent agent(cfg, At(0));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  ASSERT_TRUE(agent.SendRequest(At(0), To(7), Request()).ok());
  std::vector<OutgoingMad> out = DrainOut(agent);
  ASSERT_EQ(out.size(), 3u);  // two to the SM, one to LID 7
  EXPECT_EQ(out[0].to.lid, kSmLid);
  EXPECT_EQ(out[1].to.lid, kSmLid);
  EXPECT_EQ(out[2].to.lid, 7);
  EXPECT_EQ(agent.counters().queued, 1u);

  // The waiting request's clock starts when it is sent, not when queued.
  agent.OnReceive(At(50), From(kSmLid, Answer(out[0].data)));
  std::vector<OutgoingMad> next = DrainOut(agent);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].to.lid, kSmLid);
  EXPECT_NE(TidLow(next[0].data), TidLow(out[0].data));
  EXPECT_NE(TidLow(next[0].data), TidLow(out[1].data));
  agent.OnTimeout(At(100));  // the two still pending that were sent at 0 retry
  EXPECT_EQ(DrainOut(agent).size(), 2u);
  agent.OnTimeout(At(149));
  EXPECT_THAT(DrainOut(agent), IsEmpty());
  agent.OnTimeout(At(150));  // the one sent at 50
  std::vector<OutgoingMad> retry = DrainOut(agent);
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].data, next[0].data);
}

TEST(AgentTest, BusyBacksOffAndRetries) {
  Agent agent(Fast(), At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  const Mad sent = DrainOut(agent)[0].data;
  agent.OnReceive(At(10), From(kSmLid, Answer(sent, 0x81, wire::kStatusBusy)));
  EXPECT_THAT(DrainOut(agent), IsEmpty()) << "Busy must not be answered at once";
  EXPECT_FALSE(agent.PollCompletion().has_value());
  // Waits the next attempt's interval (200 ms) before resending.
  EXPECT_LE(*agent.NextDeadline(), At(210));
  agent.OnTimeout(At(209));
  EXPECT_THAT(DrainOut(agent), IsEmpty());
  agent.OnTimeout(At(210));
  ASSERT_EQ(DrainOut(agent).size(), 1u);
  agent.OnReceive(At(220), From(kSmLid, Answer(sent)));
  auto c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->status.ok());
  EXPECT_EQ(c->retries, 1);
  EXPECT_EQ(agent.counters().busy, 1u);
}

TEST(AgentTest, BusyToEveryAttemptFailsUnavailable) {
  AgentConfig cfg = Fast();
  cfg.max_retries = 1;
  Agent agent(cfg, At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  const Mad sent = DrainOut(agent)[0].data;
  agent.OnReceive(At(1), From(kSmLid, Answer(sent, 0x81, wire::kStatusBusy)));
  agent.OnTimeout(At(201));
  ASSERT_EQ(DrainOut(agent).size(), 1u);
  agent.OnReceive(At(202), From(kSmLid, Answer(sent, 0x81, wire::kStatusBusy)));
  auto c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status.code(), absl::StatusCode::kUnavailable);
}

TEST(AgentTest, CancelFreesTheWindowWithoutCompletion) {
  AgentConfig cfg = Fast();
  cfg.window = 1;
  Agent agent(cfg, At(0));
  auto a = agent.SendRequest(At(0), To(kSmLid), Request());
  auto b = agent.SendRequest(At(0), To(kSmLid), Request());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(DrainOut(agent).size(), 1u);
  EXPECT_TRUE(agent.Cancel(At(10), *a));
  EXPECT_FALSE(agent.Cancel(At(10), *a));
  EXPECT_EQ(DrainOut(agent).size(), 1u);  // b goes out
  agent.OnTimeout(At(109));
  EXPECT_THAT(DrainOut(agent), IsEmpty()) << "b's clock started at 10";
  agent.OnTimeout(At(110));
  EXPECT_EQ(DrainOut(agent).size(), 1u);
  EXPECT_TRUE(agent.Cancel(At(120), *b));
  EXPECT_FALSE(agent.PollCompletion().has_value());
  EXPECT_TRUE(agent.idle());
  agent.OnTimeout(At(5000));
  EXPECT_THAT(DrainOut(agent), IsEmpty());
}

class Recorder : public MadHandler {
 public:
  void OnMad(TimePoint now, const ReceivedMad& mad) override {
    attributes.push_back(uint16_t{mad.data[16]} << 8 | mad.data[17]);
  }
  std::vector<uint16_t> attributes;
};

TEST(AgentTest, UnsolicitedMadsGoToTheRegisteredHandler) {
  Agent agent(Fast(), At(0));
  Recorder any, rtu;
  agent.RegisterHandler(0x07, kAnyAttribute, &any);
  agent.RegisterHandler(0x07, 0x0014, &rtu);
  agent.OnReceive(At(0), From(3, Request(0x03, 0x0010, 0x07)));  // CM REQ (Send)
  agent.OnReceive(At(0), From(3, Request(0x03, 0x0014, 0x07)));  // CM RTU
  agent.OnReceive(At(0), From(3, Request(0x01, 0x0035, 0x03)));  // SA Get: nobody
  EXPECT_THAT(any.attributes, ElementsAre(0x0010));
  EXPECT_THAT(rtu.attributes, ElementsAre(0x0014));
  EXPECT_EQ(agent.counters().dropped, 1u);
  agent.UnregisterHandler(0x07, 0x0014);
  agent.OnReceive(At(0), From(3, Request(0x03, 0x0014, 0x07)));
  EXPECT_THAT(any.attributes, ElementsAre(0x0010, 0x0014));
  // A CM message's data bytes are never mistaken for an RMPP header.
  Mad cm = Request(0x03, 0x0010, 0x07);
  cm[24] = 1;
  cm[26] = 0x07;
  agent.OnReceive(At(0), From(3, cm));
  EXPECT_EQ(any.attributes.size(), 3u);
}

TEST(AgentTest, MalformedInputIsCounted) {
  Agent agent(Fast(), At(0));
  const uint8_t short_mad[10] = {1, 3, 2, 0x81};
  agent.OnReceive(At(0), ReceivedMad{To(1), short_mad});
  Mad opa = Request();
  opa[0] = 0x80;
  agent.OnReceive(At(0), From(1, opa));
  EXPECT_EQ(agent.counters().malformed, 2u);
  EXPECT_EQ(agent.counters().received, 2u);
}

TEST(AgentTest, RejectsBadRequests) {
  Agent agent(Fast(), At(0));
  const uint8_t small[100] = {1};
  EXPECT_EQ(agent.SendRequest(At(0), To(1), small).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(agent.SendRequest(At(0), To(1), Request(0x81)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(agent.idle());
}

TEST(AgentTest, KernelCoalescedResponseIsDeliveredWhole) {
  AgentConfig cfg = Fast();
  cfg.rmpp_reassembly = false;
  Agent agent(cfg, At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request(0x12)).ok());
  const Mad sent = DrainOut(agent)[0].data;
  std::vector<uint8_t> coalesced(56 + 3 * 64, 0x5A);
  Mad head = Answer(sent, 0x92);
  std::copy(head.begin(), head.begin() + 24, coalesced.begin());
  coalesced[24] = 1;     // RMPP version
  coalesced[26] = 0x07;  // Active, First, Last
  agent.OnReceive(At(1), ReceivedMad{To(kSmLid), coalesced});
  auto c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->status.ok()) << c->status;
  EXPECT_EQ(c->response, coalesced);
  EXPECT_THAT(DrainOut(agent), IsEmpty()) << "the kernel ACKs, not us";
}

// ------------------------------------------------ measured timeout (RFC 6298)

AgentConfig Adaptive() {
  AgentConfig c = Fast();
  c.base_timeout = Duration::Seconds(1);
  c.min_timeout = Duration::Millis(10);
  c.max_timeout = Duration::Seconds(16);
  return c;
}

// The one pending request is retransmitted exactly at `ms` (NextDeadline
// may be early; the wheel never fires early).
void ExpectRetransmissionAt(Agent& agent, int64_t ms) {
  agent.OnTimeout(At(ms - 1));
  EXPECT_THAT(DrainOut(agent), IsEmpty()) << "before " << ms << " ms";
  agent.OnTimeout(At(ms));
  EXPECT_EQ(DrainOut(agent).size(), 1u) << "at " << ms << " ms";
}

// Answers the one request in flight at `at_ms` after it went out.
void AnswerNext(Agent& agent, int64_t sent_ms, int64_t at_ms) {
  std::vector<OutgoingMad> out = DrainOut(agent);
  ASSERT_EQ(out.size(), 1u);
  agent.OnReceive(At(at_ms), From(kSmLid, Answer(out[0].data)));
  ASSERT_TRUE(agent.PollCompletion().has_value());
  (void)sent_ms;
}

TEST(AgentTest, FirstRequestWaitsTheInitialTimeoutThenTheMeasuredOne) {
  Agent agent(Adaptive(), At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  const Mad first = agent.PollTransmit()->data;
  ExpectRetransmissionAt(agent, 1000);  // no answer measured yet: 1 s
  ASSERT_TRUE(agent.Cancel(At(1000), 1));
  ASSERT_TRUE(agent.SendRequest(At(1000), To(kSmLid), Request()).ok());
  AnswerNext(agent, 1000, 1040);                    // SRTT 40, RTTVAR 20: RTO 120 ms
  ASSERT_NE(agent.Rto(To(kSmLid)), nullptr);
  EXPECT_EQ(agent.Rto(To(kSmLid))->rto(), Duration::Millis(120));
  EXPECT_EQ(agent.counters().rtt_samples, 1u);

  (void)first;
  ASSERT_TRUE(agent.SendRequest(At(1100), To(kSmLid), Request()).ok());
  DrainOut(agent);
  ExpectRetransmissionAt(agent, 1220);  // 1100 + 120
  ExpectRetransmissionAt(agent, 1460);  // backs off: + 2 x 120
}

TEST(AgentTest, AnAnswerToARetransmittedRequestIsNoSample) {
  Agent agent(Adaptive(), At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  const Mad sent = DrainOut(agent)[0].data;
  agent.OnTimeout(At(1000));
  ASSERT_EQ(DrainOut(agent).size(), 1u);
  agent.OnReceive(At(1005), From(kSmLid, Answer(sent)));  // which transmission? (Karn)
  ASSERT_TRUE(agent.PollCompletion().has_value());
  EXPECT_EQ(agent.counters().rtt_samples, 0u);
  ASSERT_TRUE(agent.SendRequest(At(2000), To(kSmLid), Request()).ok());
  DrainOut(agent);
  ExpectRetransmissionAt(agent, 3000);  // still the initial 1 s
}

TEST(AgentTest, FastAnswersBringTheTimeoutDownToTheFloor) {
  Agent agent(Adaptive(), At(0));
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(agent.SendRequest(At(i * 10), To(kSmLid), Request()).ok());
    AnswerNext(agent, i * 10, i * 10);  // answered within the same millisecond
  }
  EXPECT_EQ(agent.Rto(To(kSmLid))->rto(), Duration::Millis(10));
}

TEST(AgentTest, AnAdvertisedResponseTimeBoundsTheFirstTimeout) {
  Agent agent(Adaptive(), At(0));
  agent.SetResponseBound(To(kSmLid), Duration::Millis(270));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  DrainOut(agent);
  ExpectRetransmissionAt(agent, 270);
}

TEST(AgentTest, FixedTimeoutWhenNotAdaptive) {
  AgentConfig cfg = Adaptive();
  cfg.adaptive_timeout = false;
  Agent agent(cfg, At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  AnswerNext(agent, 0, 5);
  ASSERT_TRUE(agent.SendRequest(At(10), To(kSmLid), Request()).ok());
  DrainOut(agent);
  ExpectRetransmissionAt(agent, 1010);
}

// A lost request must not hold the window: the queries behind it go out at
// its first timeout, and an unrelated one is answered within its own RTT.
TEST(AgentTest, ATimedOutRequestGivesItsWindowSlotToTheNextWaiting) {
  AgentConfig cfg = Adaptive();
  cfg.window = 1;
  Agent agent(cfg, At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  AnswerNext(agent, 0, 2);  // RTO now max(2 + 4 x 1, 10) = 10 ms
  auto lost = agent.SendRequest(At(100), To(kSmLid), Request(), 1);
  auto behind = agent.SendRequest(At(100), To(kSmLid), Request(), 2);
  ASSERT_TRUE(lost.ok() && behind.ok());
  std::vector<OutgoingMad> first = DrainOut(agent);
  ASSERT_EQ(first.size(), 1u);  // the window holds one
  EXPECT_EQ(agent.counters().queued, 1u);

  agent.OnTimeout(At(110));  // the first one's timeout: retried beside the window
  std::vector<OutgoingMad> out = DrainOut(agent);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, first[0].data);  // the retransmission
  EXPECT_EQ(agent.counters().slots_released, 1u);
  agent.OnReceive(At(112), From(kSmLid, Answer(out[1].data)));
  auto done = agent.PollCompletion();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->cookie, 2u);
  EXPECT_TRUE(done->status.ok());

  // The retried one still completes, and a third request finds the slot free.
  agent.OnReceive(At(113), From(kSmLid, Answer(out[0].data)));
  auto late = agent.PollCompletion();
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->cookie, 1u);
  ASSERT_TRUE(agent.SendRequest(At(120), To(kSmLid), Request(), 3).ok());
  EXPECT_EQ(DrainOut(agent).size(), 1u);
  EXPECT_EQ(agent.counters().queued, 1u);
  EXPECT_EQ(agent.pending_requests(), 1u);
}

TEST(AgentTest, CancellingARequestRetriedBesideTheWindowKeepsTheCount) {
  AgentConfig cfg = Adaptive();
  cfg.window = 1;
  Agent agent(cfg, At(0));
  auto a = agent.SendRequest(At(0), To(kSmLid), Request(), 1);
  ASSERT_TRUE(a.ok());
  DrainOut(agent);
  agent.OnTimeout(At(1000));  // retried, slot given up
  DrainOut(agent);
  EXPECT_TRUE(agent.Cancel(At(1001), *a));
  // Two new requests: exactly one fits the window of one.
  ASSERT_TRUE(agent.SendRequest(At(1002), To(kSmLid), Request(), 2).ok());
  ASSERT_TRUE(agent.SendRequest(At(1002), To(kSmLid), Request(), 3).ok());
  EXPECT_EQ(DrainOut(agent).size(), 1u);
}

// RACK (RFC 8985): a later request answered is evidence that an earlier one
// still unanswered after SRTT + SRTT/4 was lost; its slot goes to the next.
TEST(AgentTest, ALaterAnswerReleasesTheSlotOfAnEarlierLostRequest) {
  AgentConfig cfg = Adaptive();
  cfg.window = 2;
  Agent agent(cfg, At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  AnswerNext(agent, 0, 2);  // SRTT 2 ms
  ASSERT_TRUE(agent.SendRequest(At(100), To(kSmLid), Request(), 1).ok());  // lost
  const Mad lost = DrainOut(agent)[0].data;
  ASSERT_TRUE(agent.SendRequest(At(101), To(kSmLid), Request(), 2).ok());
  const Mad answered = DrainOut(agent)[0].data;
  ASSERT_TRUE(agent.SendRequest(At(101), To(kSmLid), Request(), 3).ok());
  ASSERT_TRUE(agent.SendRequest(At(101), To(kSmLid), Request(), 4).ok());
  EXPECT_THAT(DrainOut(agent), IsEmpty());  // the window of 2 is full
  agent.OnReceive(At(103), From(kSmLid, Answer(answered)));
  std::vector<OutgoingMad> out = DrainOut(agent);
  // One into the answered request's slot, one into the lost one's.
  ASSERT_EQ(out.size(), 2u) << "both waiting requests go out at once";
  EXPECT_NE(out[0].data, lost);
  EXPECT_NE(out[1].data, lost);
  EXPECT_EQ(agent.counters().slots_released, 1u);
  // The lost one still waits for its own timeout (RTO 10 ms) to be resent.
  agent.OnTimeout(At(109));
  EXPECT_THAT(DrainOut(agent), IsEmpty());
  agent.OnTimeout(At(110));
  std::vector<OutgoingMad> retry = DrainOut(agent);
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].data, lost);
}

// A slow responder answering in order gives no such evidence: the window
// paces the requests until an answer or a timeout.
TEST(AgentTest, ASlowResponderKeepsTheWindow) {
  AgentConfig cfg = Adaptive();
  cfg.window = 1;
  Agent agent(cfg, At(0));
  ASSERT_TRUE(agent.SendRequest(At(0), To(kSmLid), Request()).ok());
  AnswerNext(agent, 0, 2);
  ASSERT_TRUE(agent.SendRequest(At(100), To(kSmLid), Request(), 1).ok());
  const Mad slow = DrainOut(agent)[0].data;
  ASSERT_TRUE(agent.SendRequest(At(105), To(kSmLid), Request(), 2).ok());
  ASSERT_TRUE(agent.SendRequest(At(108), To(kSmLid), Request(), 3).ok());
  EXPECT_THAT(DrainOut(agent), IsEmpty());
  agent.OnReceive(At(108), From(kSmLid, Answer(slow)));
  EXPECT_EQ(DrainOut(agent).size(), 1u);  // one answer, one slot
  EXPECT_EQ(agent.counters().slots_released, 0u);
}

// rdma_resolve_route's timeout_ms (the kernel's ib_sa_path_rec_get): a
// request with a deadline fails at it, with retries left, and is not resent
// after it; one waiting for the window fails at its deadline unsent.
TEST(AgentTest, ARequestFailsAtItsDeadlineWhateverRetriesRemain) {
  AgentConfig cfg = Fast();
  cfg.window = 1;
  cfg.adaptive_timeout = false;  // attempts at 0, 100, 300, 700 ms without a deadline
  Agent agent(cfg, At(0));
  auto first = agent.SendRequest(At(0), To(kSmLid), Request(), 0, nullptr, At(250));
  auto waiting = agent.SendRequest(At(0), To(kSmLid), Request(), 0, nullptr, At(50));
  ASSERT_TRUE(first.ok() && waiting.ok());
  EXPECT_EQ(DrainOut(agent).size(), 1u);
  agent.OnTimeout(At(49));
  EXPECT_FALSE(agent.PollCompletion().has_value());
  agent.OnTimeout(At(50));
  auto c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->id, *waiting);
  EXPECT_EQ(c->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(c->status.message()), ::testing::HasSubstr("(0 attempts)"));
  EXPECT_THAT(DrainOut(agent), IsEmpty());
  agent.OnTimeout(At(100));
  EXPECT_EQ(DrainOut(agent).size(), 1u);  // the first one's retry
  agent.OnTimeout(At(249));
  EXPECT_FALSE(agent.PollCompletion().has_value());
  agent.OnTimeout(At(250));  // before its next retry at 300
  c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->id, *first);
  EXPECT_EQ(c->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(c->status.message()), ::testing::HasSubstr("(2 attempts)"));
  EXPECT_THAT(DrainOut(agent), IsEmpty());
  EXPECT_EQ(agent.counters().timeouts, 2u);
  EXPECT_EQ(agent.counters().sent, 2u);
  EXPECT_TRUE(agent.idle());
  EXPECT_EQ(agent.NextDeadline(), absl::nullopt);
}

// ExtendDeadline (a coalesced SA query's later waiter): the request lives to
// the new deadline; the attempt in flight keeps its retransmission time
// (the old deadline had cut its timer short); a waiting one too.
TEST(AgentTest, AnExtendedDeadlineKeepsTheAttemptsOwnTimer) {
  AgentConfig cfg = Fast();
  cfg.window = 1;
  cfg.adaptive_timeout = false;  // attempts at 0, 100, 300, 700 ms without a deadline
  Agent agent(cfg, At(0));
  auto first = agent.SendRequest(At(0), To(kSmLid), Request(), 0, nullptr, At(50));
  auto waiting = agent.SendRequest(At(0), To(kSmLid), Request(), 0, nullptr, At(40));
  ASSERT_TRUE(first.ok() && waiting.ok());
  EXPECT_EQ(DrainOut(agent).size(), 1u);
  EXPECT_TRUE(agent.ExtendDeadline(*first, At(250)));
  EXPECT_TRUE(agent.ExtendDeadline(*waiting, absl::nullopt));
  EXPECT_TRUE(agent.ExtendDeadline(*first, At(60))) << "an earlier one is ignored";
  agent.OnTimeout(At(99));
  EXPECT_FALSE(agent.PollCompletion().has_value());
  EXPECT_THAT(DrainOut(agent), IsEmpty()) << "no retry before the attempt's 100 ms";
  agent.OnTimeout(At(100));
  // The retry, and the waiting one in the slot the retry gave up (it did
  // not fail at 40: no deadline now).
  EXPECT_EQ(DrainOut(agent).size(), 2u);
  agent.OnTimeout(At(250));
  auto c = agent.PollCompletion();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->id, *first);
  EXPECT_EQ(c->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(c->status.message()), ::testing::HasSubstr("(2 attempts)"));
  EXPECT_EQ(DrainOut(agent).size(), 1u) << "the other one's retry at 200";
  EXPECT_FALSE(agent.ExtendDeadline(*first, At(900))) << "not pending";
  EXPECT_TRUE(agent.Cancel(At(251), *waiting));
  EXPECT_TRUE(agent.idle());
}

class RecordingTimerSink : public TimerSink {
 public:
  void OnTimer(TimePoint now, uint64_t cookie) override { fired.emplace_back(now, cookie); }
  std::vector<std::pair<TimePoint, uint64_t>> fired;
};

TEST(AgentTest, ACallersTimerFiresOnceUnlessCancelled) {
  Agent agent(Fast(), At(0));
  RecordingTimerSink sink;
  const uint64_t t1 = agent.StartTimer(At(30), &sink, 7);
  const uint64_t t2 = agent.StartTimer(At(20), &sink, 8);
  EXPECT_NE(t1, 0u);
  EXPECT_FALSE(agent.idle()) << "a pending timer";
  EXPECT_TRUE(agent.CancelTimer(t2));
  EXPECT_FALSE(agent.CancelTimer(t2));
  agent.OnTimeout(At(29));
  EXPECT_THAT(sink.fired, IsEmpty());
  agent.OnTimeout(At(31));
  ASSERT_EQ(sink.fired.size(), 1u);
  EXPECT_EQ(sink.fired[0], std::make_pair(At(31), uint64_t{7}));
  EXPECT_FALSE(agent.CancelTimer(t1)) << "fired already";
  EXPECT_TRUE(agent.idle());
}

}  // namespace
}  // namespace uscm::mad
