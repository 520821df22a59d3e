// The SA client against hand-made SA answers: request bytes, the kernel-RMPP
// (umad) coalesced table, error mapping, malformed answers.
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
  void Answer(std::span<const uint8_t> bytes) {
    mad::ReceivedMad r;
    r.from.lid = kSmLid;
    r.data = bytes;
    agent.OnReceive(At(1), r);
  }
  mad::Agent agent;
  SaClient client;
};

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

}  // namespace
}  // namespace uscm::sa
