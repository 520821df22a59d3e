// The SA client against hand-made SA answers: request bytes, the kernel-RMPP
// (umad) coalesced table, error mapping, malformed answers, identical queries
// coalesced in flight, lost queries against unrelated ones, the SA's
// advertised response time.
#include "sa/client.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/agent.h"
#include "mad/wire/mad_header.h"
#include "mad/wire/sa_header.h"

namespace uscm::sa {
namespace {

using mad::wire::PathRecord;
using mad::wire::PathRecordMask;
using ::testing::HasSubstr;

constexpr uint16_t kSmLid = 1;
mad::TimePoint At(int64_t ms) { return mad::TimePoint::Epoch() + mad::Duration::Millis(ms); }

struct Fixture {
  explicit Fixture(bool kernel_rmpp = false)
      : agent(Config(kernel_rmpp), At(0)), client(&agent, ClientConfig()) {}
  static mad::AgentConfig Config(bool kernel_rmpp) {
    mad::AgentConfig c;
    c.rmpp_reassembly = !kernel_rmpp;
    return c;
  }
  static SaClientConfig ClientConfig() {
    SaClientConfig c;
    c.sa.lid = kSmLid;
    return c;
  }
  std::array<uint8_t, 256> Sent() {
    auto o = agent.PollTransmit();
    EXPECT_TRUE(o.has_value());
    EXPECT_EQ(o->to.lid, kSmLid);
    return o ? o->data : std::array<uint8_t, 256>{};
  }
  void Answer(std::span<const uint8_t> bytes, mad::TimePoint at = At(1)) {
    mad::ReceivedMad r;
    r.from.lid = kSmLid;
    r.data = bytes;
    agent.OnReceive(at, r);
  }
  // A GetResp for `request` carrying a PathRecord to DLID `dlid`.
  void AnswerPath(std::array<uint8_t, 256> request, uint16_t dlid, mad::TimePoint at) {
    auto m = mad::wire::SaRecordMad<PathRecord>::Parse(request);
    ASSERT_TRUE(m.ok()) << m.status();
    m->envelope.method = 0x81;
    m->record.dlid = dlid;
    std::array<uint8_t, 256> out{};
    ASSERT_TRUE(m->Emit(out).ok());
    Answer(out, at);
  }
  mad::MadAddress client_sa() const {
    mad::MadAddress a;
    a.lid = kSmLid;
    return a;
  }
  mad::Agent agent;
  SaClient client;
};

uint32_t TidLow(const std::array<uint8_t, 256>& m) {
  return uint32_t{m[12]} << 24 | uint32_t{m[13]} << 16 | uint32_t{m[14]} << 8 | m[15];
}

uint64_t Mask(const std::array<uint8_t, 256>& m) {
  uint64_t v = 0;
  for (int i = 48; i < 56; ++i) v = v << 8 | m[i];
  return v;
}

mad::Gid G(uint64_t id) { return mad::Gid::FromParts(0xfe80000000000000ULL, id); }

TEST(SaClientTest, RdmaCmQueryBytes) {
  Fixture f;
  ASSERT_TRUE(f.client.GetPath(At(0), PathQuery::RdmaCm(G(2), G(3), 0xFFFF, 0x1060000)).ok());
  auto m = f.Sent();
  EXPECT_EQ(m[1], 0x03);  // SubnAdm
  EXPECT_EQ(m[2], 2);
  EXPECT_EQ(m[3], 0x01);  // Get
  EXPECT_EQ(m[16], 0x00);
  EXPECT_EQ(m[17], 0x35);
  // ServiceID (0,1), DGID, SGID, Reversible, NumbPath, P_Key.
  EXPECT_EQ(Mask(m), 0x380Fu);
  auto rec = PathRecord::Parse(std::span(m).subspan(56, 64));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->sgid, G(2));
  EXPECT_EQ(rec->dgid, G(3));
  EXPECT_EQ(rec->numb_path, 1);
  EXPECT_TRUE(rec->reversible);
  EXPECT_EQ(rec->service_id, 0x1060000u);
}

TEST(SaClientTest, EveryComponentSetterSetsItsMaskBit) {
  PathQuery q;
  q.Sgid(G(1)).Dgid(G(2)).Slid(1).Dlid(2).PKey(0xFFFF).ServiceId(9).Sl(1).TClass(2)
      .QosClass(3).FlowLabel(4).HopLimit(5)
      .Mtu(mad::wire::Selector::kExactly, mad::wire::Mtu::k4096)
      .Rate(mad::wire::Selector::kBest, 6)
      .PacketLifeTime(mad::wire::Selector::kLessThan, 7)
      .NumbPath(8)
      .Reversible(true);
  // Every defined bit 0..21 except RawTraffic (6) and reserved (7).
  EXPECT_EQ(q.mask().bits(), 0x3FFF3Fu);
}

// A coalesced GetTableResp as umad returns it with kernel RMPP: the first
// segment's 56 header bytes, then the records.
std::vector<uint8_t> Coalesced(const std::array<uint8_t, 256>& request, size_t records,
                               uint16_t attribute_offset, uint16_t status = 0) {
  std::vector<uint8_t> out(56 + records * attribute_offset * 8, 0);
  std::copy(request.begin(), request.begin() + 56, out.begin());
  out[3] = 0x92;
  out[4] = static_cast<uint8_t>(status >> 8);
  out[5] = static_cast<uint8_t>(status);
  out[24] = 1;
  out[26] = 0x07;
  out[44] = static_cast<uint8_t>(attribute_offset >> 8);
  out[45] = static_cast<uint8_t>(attribute_offset);
  for (size_t i = 0; i < records; ++i) {
    PathRecord p;
    p.dlid = static_cast<uint16_t>(100 + i);
    p.sgid = G(1);
    p.dgid = G(100 + i);
    EXPECT_TRUE(p.Emit(std::span(out).subspan(56 + i * attribute_offset * 8, 64)).ok());
  }
  return out;
}

TEST(SaClientTest, KernelCoalescedTableIsCutIntoRecords) {
  Fixture f(/*kernel_rmpp=*/true);
  auto id = f.client.GetPaths(At(0), PathQuery().Sgid(G(1)));
  ASSERT_TRUE(id.ok());
  auto req = f.Sent();
  EXPECT_EQ(req[3], 0x12);
  f.Answer(Coalesced(req, 9, 8));
  auto r = f.client.PollResult();
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->status.ok()) << r->status;
  EXPECT_EQ(r->id, *id);
  ASSERT_EQ(r->paths.size(), 9u);
  EXPECT_EQ(r->paths[8].dlid, 108);
  EXPECT_EQ(r->paths[8].dgid, G(108));
}

TEST(SaClientTest, TooSmallAttributeOffsetIsBadData) {
  Fixture f(true);
  ASSERT_TRUE(f.client.GetPaths(At(0), PathQuery()).ok());
  auto req = f.Sent();
  std::vector<uint8_t> bad = Coalesced(req, 2, 8);
  bad[45] = 4;  // 32-byte stride for a 64-byte record
  f.Answer(bad);
  auto r = f.client.PollResult();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r->status.message()), HasSubstr("AttributeOffset"));
  EXPECT_EQ(f.client.counters().bad_responses, 1u);
}

TEST(SaClientTest, SaStatusesMapToCodes) {
  struct Case {
    uint16_t status;
    absl::StatusCode code;
    const char* text;
  } cases[] = {
      {0x0100, absl::StatusCode::kResourceExhausted, "ERR_NO_RESOURCES"},
      {0x0200, absl::StatusCode::kInvalidArgument, "ERR_REQ_INVALID"},
      {0x0300, absl::StatusCode::kNotFound, "SA has no path from"},
      {0x0400, absl::StatusCode::kFailedPrecondition, "more than one"},
      {0x0600, absl::StatusCode::kInvalidArgument, "INSUFFICIENT_COMPONENTS"},
      {0x0700, absl::StatusCode::kPermissionDenied, "ERR_REQ_DENIED"},
      {0x000C, absl::StatusCode::kUnknown, "method/attribute not supported"},
  };
  for (const Case& c : cases) {
    Fixture f;
    ASSERT_TRUE(f.client.GetPath(At(0), PathQuery().Sgid(G(1)).Dgid(G(2))).ok());
    auto m = f.Sent();
    m[3] = 0x81;
    m[4] = static_cast<uint8_t>(c.status >> 8);
    m[5] = static_cast<uint8_t>(c.status);
    f.Answer(m);
    auto r = f.client.PollResult();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status.code(), c.code) << c.text;
    EXPECT_THAT(std::string(r->status.message()), HasSubstr(c.text));
  }
}

TEST(SaClientTest, GetTableErrorInTheCoalescedHeader) {
  Fixture f(true);
  ASSERT_TRUE(f.client.GetPaths(At(0), PathQuery()).ok());
  f.Answer(Coalesced(f.Sent(), 0, 0, 0x0200));
  auto r = f.client.PollResult();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(SaClientTest, JoinBytesCarryTheCreateComponents) {
  Fixture f;
  McJoin j;
  j.port_gid = G(5);
  j.qkey = 0x01234567;
  j.mtu = mad::wire::Mtu::k2048;
  ASSERT_TRUE(f.client.Join(At(0), j).ok());
  auto m = f.Sent();
  EXPECT_EQ(m[3], 0x02);  // Set
  EXPECT_EQ(m[17], 0x38);
  // MGID, PortGID, Q_Key, MTUSelector, MTU, TClass, P_Key, SL, FlowLabel, JoinState.
  EXPECT_EQ(Mask(m), 0x130F7u);
  ASSERT_TRUE(f.client.Leave(At(0), G(9), G(5), mad::wire::JoinState(1)).ok());
  auto l = f.Sent();
  EXPECT_EQ(l[3], 0x15);
  EXPECT_EQ(Mask(l), 0x10003u);
}

TEST(SaClientTest, AgentFailuresNameTheQuery) {
  mad::AgentConfig c;
  c.base_timeout = mad::Duration::Millis(10);
  c.max_retries = 0;
  mad::Agent agent(c, At(0));
  SaClientConfig sc;
  sc.sa.lid = kSmLid;
  SaClient client(&agent, sc);
  ASSERT_TRUE(client.GetPath(At(0), PathQuery().Sgid(G(1)).Dgid(G(2))).ok());
  agent.OnTimeout(At(10));
  auto r = client.PollResult();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(r->status.message()), HasSubstr("path from fe80::1 to fe80::2"));
  EXPECT_EQ(client.outstanding(), 0u);
}

// ------------------------------------------------------------ coalescing

TEST(SaClientTest, IdenticalPathQueriesInFlightShareOneMad) {
  Fixture f;
  const PathQuery q = PathQuery::RdmaCm(G(2), G(3), 0xFFFF, 0x1060000);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = f.client.GetPath(At(0), q);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  auto req = f.Sent();
  EXPECT_FALSE(f.agent.PollTransmit().has_value()) << "one MAD for five identical queries";
  EXPECT_EQ(f.client.counters().coalesced, 4u);
  EXPECT_EQ(f.client.counters().queries, 5u);
  f.AnswerPath(req, 77, At(1));
  for (uint64_t id : ids) {
    auto r = f.client.PollResult();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->id, id);  // in the order asked
    ASSERT_TRUE(r->status.ok()) << r->status;
    ASSERT_EQ(r->paths.size(), 1u);
    EXPECT_EQ(r->paths[0].dlid, 77);
  }
  EXPECT_FALSE(f.client.PollResult().has_value());
  // Once answered, the same query goes on the wire again.
  ASSERT_TRUE(f.client.GetPath(At(2), q).ok());
  f.Sent();
}

TEST(SaClientTest, DifferentQueriesAreNotCoalesced) {
  Fixture f;
  ASSERT_TRUE(f.client.GetPath(At(0), PathQuery::RdmaCm(G(2), G(3), 0xFFFF, 1)).ok());
  ASSERT_TRUE(f.client.GetPath(At(0), PathQuery::RdmaCm(G(2), G(4), 0xFFFF, 1)).ok());
  ASSERT_TRUE(f.client.GetPath(At(0), PathQuery::RdmaCm(G(2), G(3), 0xFFFF, 2)).ok());
  f.Sent();
  f.Sent();
  f.Sent();
  EXPECT_EQ(f.client.counters().coalesced, 0u);
}

TEST(SaClientTest, CoalescedQueriesShareTheFailureToo) {
  mad::AgentConfig c;
  c.base_timeout = mad::Duration::Millis(10);
  c.max_retries = 0;
  mad::Agent agent(c, At(0));
  SaClientConfig sc;
  sc.sa.lid = kSmLid;
  SaClient client(&agent, sc);
  const PathQuery q = PathQuery().Sgid(G(1)).Dgid(G(2));
  ASSERT_TRUE(client.GetPath(At(0), q).ok());
  ASSERT_TRUE(client.GetPath(At(0), q).ok());
  agent.OnTimeout(At(10));
  for (int i = 0; i < 2; ++i) {
    auto r = client.PollResult();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status.code(), absl::StatusCode::kDeadlineExceeded);
  }
  EXPECT_EQ(client.outstanding(), 0u);
}

// rdma_resolve_route's timeout_ms: each query keeps its own deadline, also
// when coalesced (the kernel sends each ib_sa_path_rec_get on its own): one
// MAD on the wire for all three; a at 500, b at 501, the one without a
// deadline still waits and gets the answer.
TEST(SaClientTest, CoalescedQueriesTimeOutEachAtItsOwnDeadline) {
  Fixture f;
  const PathQuery q = PathQuery::RdmaCm(G(2), G(3), 0xFFFF, 0x1060000);
  auto a = f.client.GetPath(At(0), q, At(500));
  auto b = f.client.GetPath(At(1), q, At(501));
  auto no_deadline = f.client.GetPath(At(2), q);
  ASSERT_TRUE(a.ok() && b.ok() && no_deadline.ok());
  const auto request = f.Sent();
  EXPECT_FALSE(f.agent.PollTransmit().has_value()) << "one query on the wire";
  EXPECT_EQ(f.client.counters().coalesced, 2u);
  f.agent.OnTimeout(At(499));
  EXPECT_FALSE(f.client.PollResult().has_value());
  f.agent.OnTimeout(At(500));
  auto r = f.client.PollResult();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, *a);
  EXPECT_EQ(r->status.code(), absl::StatusCode::kDeadlineExceeded) << r->status;
  EXPECT_THAT(std::string(r->status.message()), HasSubstr("this query's deadline"));
  EXPECT_FALSE(f.client.PollResult().has_value()) << "b's deadline is 501";
  f.agent.OnTimeout(At(501));
  r = f.client.PollResult();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, *b);
  EXPECT_EQ(r->status.code(), absl::StatusCode::kDeadlineExceeded) << r->status;
  EXPECT_FALSE(f.client.PollResult().has_value()) << "the query without deadline still waits";
  EXPECT_EQ(f.client.outstanding(), 1u);
  f.AnswerPath(request, 7, At(600));
  r = f.client.PollResult();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, *no_deadline);
  ASSERT_TRUE(r->status.ok()) << r->status;
  EXPECT_EQ(r->paths.at(0).dlid, 7);
  EXPECT_FALSE(f.client.PollResult().has_value());
  EXPECT_EQ(f.client.counters().waiter_deadlines, 2u);
  EXPECT_EQ(f.client.counters().failures, 0u);
  EXPECT_TRUE(f.agent.idle()) << "no timer left behind";
}

// The query on the wire lives until its last waiter's deadline: a later
// waiter extends it, the earlier one times out alone, and the request itself
// fails (once, counted once) at the latest deadline.
TEST(SaClientTest, TheRequestOnTheWireEndsAtItsLastWaitersDeadline) {
  Fixture f;
  const PathQuery q = PathQuery::RdmaCm(G(2), G(3), 0xFFFF, 0x1060000);
  auto first = f.client.GetPath(At(0), q, At(500));
  auto second = f.client.GetPath(At(10), q, At(2000));
  auto third = f.client.GetPath(At(20), q, At(2000));
  ASSERT_TRUE(first.ok() && second.ok() && third.ok());
  std::vector<std::pair<int64_t, uint64_t>> ends;  // (ms, id)
  for (int64_t ms = 0; ms <= 2100; ++ms) {
    f.agent.OnTimeout(At(ms));
    while (f.agent.PollTransmit().has_value()) {
    }
    while (auto r = f.client.PollResult()) {
      EXPECT_EQ(r->status.code(), absl::StatusCode::kDeadlineExceeded) << r->status;
      ends.emplace_back(ms, r->id);
    }
  }
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[0], std::make_pair(int64_t{500}, *first));
  EXPECT_EQ(ends[1], std::make_pair(int64_t{2000}, *second));
  EXPECT_EQ(ends[2], std::make_pair(int64_t{2000}, *third));
  EXPECT_EQ(f.agent.counters().timeouts, 1u) << "one request, failed at 2000";
  EXPECT_EQ(f.client.counters().failures, 1u);
  EXPECT_EQ(f.client.counters().waiter_deadlines, 1u);
  EXPECT_EQ(f.client.counters().coalesced, 2u);
  EXPECT_TRUE(f.agent.idle());
}

TEST(SaClientTest, CoalescingCanBeTurnedOff) {
  mad::Agent agent(mad::AgentConfig{}, At(0));
  SaClientConfig sc;
  sc.sa.lid = kSmLid;
  sc.coalesce = false;
  SaClient client(&agent, sc);
  const PathQuery q = PathQuery().Sgid(G(1)).Dgid(G(2));
  ASSERT_TRUE(client.GetPath(At(0), q).ok());
  ASSERT_TRUE(client.GetPath(At(0), q).ok());
  EXPECT_TRUE(agent.PollTransmit().has_value());
  EXPECT_TRUE(agent.PollTransmit().has_value());
}

// ------------------------------------------------- loss against unrelated queries

// The SA answers in 1 ms, so the RTO settles on the 10 ms floor.
void Prime(Fixture& f) {
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(f.client.GetPath(At(i), PathQuery().Sgid(G(1)).Dgid(G(1000 + i))).ok());
    f.AnswerPath(f.Sent(), 1, At(i + 1));
    ASSERT_TRUE(f.client.PollResult().has_value());
  }
  ASSERT_EQ(f.agent.Rto(f.client_sa())->rto(), mad::Duration::Millis(10));
}

TEST(SaClientTest, ALostQueryDoesNotDelayAnUnrelatedOne) {
  Fixture f;
  Prime(f);
  ASSERT_TRUE(f.client.GetPath(At(100), PathQuery().Sgid(G(1)).Dgid(G(50))).ok());
  f.Sent();  // lost
  auto other = f.client.GetPath(At(100), PathQuery().Sgid(G(1)).Dgid(G(51)));
  ASSERT_TRUE(other.ok());
  f.AnswerPath(f.Sent(), 51, At(101));  // answered within its own RTT
  auto r = f.client.PollResult();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, *other);
  EXPECT_TRUE(r->status.ok());
}

// Even a window full of lost queries holds a waiting one back only until the
// first of them times out (the measured RTO), not for a fixed second.
TEST(SaClientTest, AWindowOfLostQueriesHoldsTheNextOnlyForOneRto) {
  Fixture f;
  Prime(f);
  for (int i = 0; i < 4; ++i) {  // the agent's window to one destination is 4
    ASSERT_TRUE(f.client.GetPath(At(100), PathQuery().Sgid(G(1)).Dgid(G(60 + i))).ok());
    f.Sent();  // lost
  }
  auto waiting = f.client.GetPath(At(100), PathQuery().Sgid(G(1)).Dgid(G(70)));
  ASSERT_TRUE(waiting.ok());
  EXPECT_FALSE(f.agent.PollTransmit().has_value());
  f.agent.OnTimeout(At(110));  // 100 + RTO: four retransmissions, and the waiting query
  std::array<uint8_t, 256> fifth{};
  for (int i = 0; i < 5; ++i) {
    auto m = f.Sent();
    auto rec = PathRecord::Parse(std::span(m).subspan(56, 64));
    ASSERT_TRUE(rec.ok());
    if (rec->dgid == G(70)) fifth = m;
  }
  f.AnswerPath(fifth, 70, At(111));
  auto r = f.client.PollResult();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, *waiting);
  EXPECT_TRUE(r->status.ok());
  EXPECT_EQ(f.agent.counters().slots_released, 4u);
}

// A query presumed lost (unanswered for longer than the SA's answers take)
// is not waited on: the next identical query goes on the wire, and the lost
// one and its waiters are answered with it.
TEST(SaClientTest, AnIdenticalQueryAfterAPresumedLossGoesOnTheWireForAll) {
  Fixture f;
  Prime(f);  // answers take 1 ms
  const PathQuery q = PathQuery::RdmaCm(G(2), G(3), 0xFFFF, 1);
  auto first = f.client.GetPath(At(100), q);
  const auto lost = f.Sent();
  auto second = f.client.GetPath(At(101), q);  // within the answer time: waits
  EXPECT_FALSE(f.agent.PollTransmit().has_value());
  auto third = f.client.GetPath(At(104), q);  // 4 ms unanswered: presumed lost
  ASSERT_TRUE(first.ok() && second.ok() && third.ok());
  const auto fresh = f.Sent();
  EXPECT_NE(TidLow(fresh), TidLow(lost));
  EXPECT_EQ(f.client.counters().superseded, 1u);
  EXPECT_EQ(f.client.counters().coalesced, 2u);
  f.AnswerPath(fresh, 9, At(105));
  for (uint64_t id : {*first, *second, *third}) {
    auto r = f.client.PollResult();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->id, id);
    ASSERT_TRUE(r->status.ok());
    EXPECT_EQ(r->paths[0].dlid, 9);
  }
  f.AnswerPath(lost, 9, At(106));  // the late answer to the cancelled one
  EXPECT_FALSE(f.client.PollResult().has_value());
  EXPECT_EQ(f.agent.pending_requests(), 0u);
}

TEST(SaClientTest, TheSasAdvertisedResponseTimeBoundsTheRetransmissionTimeout) {
  Fixture f;
  ASSERT_TRUE(f.client.GetClassPortInfo(At(0)).ok());
  auto req = f.Sent();
  auto m = mad::wire::SaRecordMad<mad::wire::ClassPortInfo>::Parse(req);
  ASSERT_TRUE(m.ok()) << m.status();
  m->envelope.method = 0x81;
  m->record.resp_time_value = 16;  // 4.096 us * 2^16 = 268.4 ms
  std::array<uint8_t, 256> out{};
  ASSERT_TRUE(m->Emit(out).ok());
  f.Answer(out, At(900));  // a slow answer: the measured RTO alone would be 2.7 s
  auto r = f.client.PollResult();
  ASSERT_TRUE(r.has_value() && r->class_port_info.has_value());
  const mad::RtoEstimator* rto = f.agent.Rto(f.client_sa());
  ASSERT_NE(rto, nullptr);
  // 268.435456 ms + 2 x 4.096 us * 2^18 (OpenSM's default packet lifetime).
  EXPECT_EQ(rto->bound(), mad::Duration::Nanos(268435456 + 2 * 1073741824LL));
  EXPECT_EQ(rto->rto(), rto->bound());
}

}  // namespace
}  // namespace uscm::sa
