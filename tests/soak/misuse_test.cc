// API misuse at the CmEndpoint level: every entry point called with invalid
// ids, stale generations, in the wrong state and with too much private data
// returns a clear error, sends nothing, reports nothing and changes nothing.
#include <functional>
#include <string>
#include <vector>

#include "cm/cm_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::cm {
namespace {

using ::testing::HasSubstr;
using testing::DrainEvents;
using testing::DrainTx;
using testing::MakeAccept;
using testing::MakeConnect;
using testing::Pair;

using IdCall = std::function<absl::Status(CmEndpoint&, mad::TimePoint, ConnId)>;
struct Entry {
  std::string name;
  IdCall call;
};

// Every entry point that takes a ConnId, with otherwise valid arguments.
std::vector<Entry> IdEntryPoints() {
  return {
      {"Accept", [](CmEndpoint& e, mad::TimePoint t, ConnId id) { return e.Accept(t, id, MakeAccept()); }},
      {"Reject", [](CmEndpoint& e, mad::TimePoint t, ConnId id) {
         return e.Reject(t, id, RejReason::kConsumerReject, {});
       }},
      {"RejectEce", [](CmEndpoint& e, mad::TimePoint t, ConnId id) { return e.RejectEce(t, id, {}); }},
      {"SendMra", [](CmEndpoint& e, mad::TimePoint t, ConnId id) { return e.SendMra(t, id, 20); }},
      {"Rtu", [](CmEndpoint& e, mad::TimePoint t, ConnId id) { return e.Rtu(t, id); }},
      {"NotifyCommEstablished",
       [](CmEndpoint& e, mad::TimePoint t, ConnId id) { return e.NotifyCommEstablished(t, id); }},
      {"Disconnect", [](CmEndpoint& e, mad::TimePoint t, ConnId id) { return e.Disconnect(t, id); }},
      {"SidrReply", [](CmEndpoint& e, mad::TimePoint t, ConnId id) {
         return e.SidrReply(t, id, SidrReplyParams{});
       }},
      {"LoadAlternatePath", [](CmEndpoint& e, mad::TimePoint t, ConnId id) {
         return e.LoadAlternatePath(t, id, MakeConnect().primary);
       }},
      {"AprReply", [](CmEndpoint& e, mad::TimePoint t, ConnId id) { return e.AprReply(t, id, 0); }},
      {"Destroy", [](CmEndpoint& e, mad::TimePoint t, ConnId id) { return e.Destroy(t, id); }},
      {"GetQpAttributes", [](CmEndpoint& e, mad::TimePoint, ConnId id) {
         return e.GetQpAttributes(id, QpState::kInit).status();
       }},
      {"State", [](CmEndpoint& e, mad::TimePoint, ConnId id) { return e.State(id).status(); }},
      {"GetLapState", [](CmEndpoint& e, mad::TimePoint, ConnId id) { return e.GetLapState(id).status(); }},
      {"LocalCommId", [](CmEndpoint& e, mad::TimePoint, ConnId id) { return e.LocalCommId(id).status(); }},
      {"RemoteEce", [](CmEndpoint& e, mad::TimePoint, ConnId id) { return e.RemoteEce(id).status(); }},
  };
}

// A and B connected: returns (A's id, B's id) in ESTABLISHED.
std::pair<ConnId, ConnId> Establish(Pair& p) {
  EXPECT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  const ConnId a = *p.a.Connect(p.now, MakeConnect());
  p.Deliver();
  const ConnId b = p.events_b.at(0).conn;
  EXPECT_TRUE(p.b.Accept(p.now, b, MakeAccept()).ok());
  p.Deliver();
  EXPECT_TRUE(p.a.Rtu(p.now, a).ok());
  p.Deliver();
  EXPECT_EQ(*p.a.State(a), CmState::kEstablished);
  EXPECT_EQ(*p.b.State(b), CmState::kEstablished);
  p.events_a.clear();
  p.events_b.clear();
  return {a, b};
}

void ExpectQuiet(Pair& p) {
  EXPECT_TRUE(DrainTx(p.a).empty());
  EXPECT_TRUE(DrainTx(p.b).empty());
  EXPECT_TRUE(DrainEvents(p.a).empty());
  EXPECT_TRUE(DrainEvents(p.b).empty());
}

TEST(MisuseTest, InvalidIdsAreNotFoundEverywhere) {
  Pair p;
  for (const ConnId id : {ConnId{}, ConnId{0, 0}, ConnId{12345, 1}, ConnId{UINT32_MAX, UINT32_MAX}}) {
    for (const Entry& e : IdEntryPoints()) {
      SCOPED_TRACE(e.name + " id " + std::to_string(id.index) + "/" + std::to_string(id.generation));
      const absl::Status s = e.call(p.a, p.now, id);
      EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
      EXPECT_THAT(std::string(s.message()), HasSubstr("unknown connection id"));
    }
  }
  ExpectQuiet(p);
  EXPECT_EQ(p.a.connection_count(), 0u);
}

TEST(MisuseTest, StaleGenerationNeverReachesTheSlotsNewOwner) {
  Pair p;
  const ConnId old = *p.a.Connect(p.now, MakeConnect());
  ASSERT_TRUE(p.a.Destroy(p.now, old).ok());  // REJ 4, IDLE, freed
  DrainTx(p.a);
  ASSERT_EQ(p.a.connection_count(), 0u);
  const ConnId fresh = *p.a.Connect(p.now, MakeConnect(0x333));
  ASSERT_EQ(fresh.index, old.index);  // the slot is reused ...
  ASSERT_NE(fresh.generation, old.generation);  // ... under a new generation
  DrainTx(p.a);
  for (const Entry& e : IdEntryPoints()) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(e.call(p.a, p.now, old).code(), absl::StatusCode::kNotFound);
  }
  ExpectQuiet(p);
  EXPECT_EQ(*p.a.State(fresh), CmState::kReqSent);
}

TEST(MisuseTest, WrongStateIsFailedPreconditionNamingTheState) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  const ConnId req_sent = *p.a.Connect(p.now, MakeConnect());
  DrainTx(p.a);
  // In REQ_SENT only Destroy and the inspectors apply.
  for (const Entry& e : IdEntryPoints()) {
    if (e.name == "Destroy" || e.name == "State" || e.name == "GetLapState" ||
        e.name == "LocalCommId" || e.name == "RemoteEce" || e.name == "GetQpAttributes") {
      continue;
    }
    SCOPED_TRACE(e.name);
    const absl::Status s = e.call(p.a, p.now, req_sent);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("REQ_SENT"));
  }
  ExpectQuiet(p);
  EXPECT_EQ(*p.a.State(req_sent), CmState::kReqSent);
  EXPECT_EQ(p.a.GetQpAttributes(req_sent, QpState::kRtr).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MisuseTest, WrongStateInEstablished) {
  Pair p;
  const auto [a, b] = Establish(p);
  for (const std::string name : {"Accept", "Reject", "RejectEce", "SendMra", "Rtu", "SidrReply",
                                 "AprReply"}) {
    for (const Entry& e : IdEntryPoints()) {
      if (e.name != name) continue;
      SCOPED_TRACE(name);
      for (auto [ep, id] : {std::pair{&p.a, a}, std::pair{&p.b, b}}) {
        const absl::Status s = e.call(*ep, p.now, id);
        EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
        EXPECT_THAT(std::string(s.message()), HasSubstr("ESTABLISHED"));
      }
    }
  }
  ExpectQuiet(p);
  EXPECT_EQ(*p.a.State(a), CmState::kEstablished);
  EXPECT_EQ(*p.b.State(b), CmState::kEstablished);
}

TEST(MisuseTest, TooMuchPrivateDataPerMessage) {
  Pair p;
  auto bytes = [](size_t n) { return std::vector<uint8_t>(n, 0xAB); };
  auto expect = [](const absl::Status& s, const std::string& want) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), want);
  };
  ConnectParams cp = MakeConnect();
  cp.private_data = bytes(93);
  expect(p.a.Connect(p.now, cp).status(), "private data is 93 bytes; REQ carries at most 92");

  SidrRequestParams sp;
  sp.service_id = testing::kService;
  sp.peer = p.addr_b;
  sp.private_data = bytes(217);
  expect(p.a.SidrRequest(p.now, sp).status(), "private data is 217 bytes; SIDR_REQ carries at most 216");

  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  const ConnId a = *p.a.Connect(p.now, MakeConnect());
  p.Deliver();
  const ConnId b = p.events_b.at(0).conn;
  AcceptParams ap = MakeAccept();
  ap.private_data = bytes(197);
  expect(p.b.Accept(p.now, b, ap), "private data is 197 bytes; REP carries at most 196");
  expect(p.b.Reject(p.now, b, RejReason::kConsumerReject, bytes(149)),
         "private data is 149 bytes; REJ carries at most 148");
  expect(p.b.SendMra(p.now, b, 20, bytes(223)), "private data is 223 bytes; MRA carries at most 222");
  EXPECT_EQ(*p.b.State(b), CmState::kReqRcvd);
  ASSERT_TRUE(p.b.Accept(p.now, b, MakeAccept()).ok());
  p.Deliver();
  expect(p.a.Rtu(p.now, a, bytes(225)), "private data is 225 bytes; RTU carries at most 224");
  EXPECT_EQ(*p.a.State(a), CmState::kRepRcvd);
  ASSERT_TRUE(p.a.Rtu(p.now, a).ok());
  p.Deliver();

  PathInfo alt = MakeConnect().primary;
  alt.remote_lid = 7;
  expect(p.a.LoadAlternatePath(p.now, a, alt, bytes(169)),
         "private data is 169 bytes; LAP carries at most 168");
  ASSERT_TRUE(p.a.LoadAlternatePath(p.now, a, alt).ok());
  p.Deliver();
  expect(p.b.AprReply(p.now, b, 0, {}, bytes(149)), "private data is 149 bytes; APR carries at most 148");
  ASSERT_TRUE(p.b.AprReply(p.now, b, 0).ok());
  p.Deliver();

  expect(p.a.Disconnect(p.now, a, bytes(221)), "private data is 221 bytes; DREQ carries at most 220");
  EXPECT_EQ(*p.a.State(a), CmState::kEstablished);
  ASSERT_TRUE(p.a.Disconnect(p.now, a).ok());
  p.Deliver();
  ASSERT_EQ(*p.b.State(b), CmState::kDreqRcvd);
  expect(p.b.Disconnect(p.now, b, bytes(225)), "private data is 225 bytes; DREP carries at most 224");
  EXPECT_EQ(*p.b.State(b), CmState::kDreqRcvd);
  p.events_a.clear();
  p.events_b.clear();
  ExpectQuiet(p);
}

TEST(MisuseTest, SidrReplyLimits) {
  Pair p;
  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  SidrRequestParams sp;
  sp.service_id = testing::kService;
  sp.peer = p.addr_b;
  ASSERT_TRUE(p.a.SidrRequest(p.now, sp).ok());
  p.Deliver();
  const ConnId b = p.events_b.at(0).conn;
  SidrReplyParams rp;
  rp.private_data.assign(137, 0);
  EXPECT_EQ(p.b.SidrReply(p.now, b, rp).message(),
            "private data is 137 bytes; SIDR_REP carries at most 136");
  rp.private_data.clear();
  rp.additional_info.assign(73, 0);
  EXPECT_EQ(p.b.SidrReply(p.now, b, rp).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*p.b.State(b), CmState::kSidrReqRcvd);
  EXPECT_TRUE(DrainTx(p.b).empty());
}

TEST(MisuseTest, OutOfRangeValuesAndListenErrors) {
  Pair p;
  auto code = [](const absl::Status& s) { return s.code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  ConnectParams cp = MakeConnect();
  cp.qpn = 1u << 24;
  EXPECT_EQ(code(p.a.Connect(p.now, cp).status()), kInvalid);
  cp = MakeConnect();
  cp.path_mtu = 6;
  EXPECT_THAT(std::string(p.a.Connect(p.now, cp).status().message()), HasSubstr("path_mtu"));
  cp = MakeConnect();
  cp.retry.backoff_factor = 0;
  EXPECT_THAT(std::string(p.a.Connect(p.now, cp).status().message()), HasSubstr("backoff_factor"));
  cp = MakeConnect();
  cp.ece = Ece{};
  EXPECT_THAT(std::string(p.a.Connect(p.now, cp).status().message()), HasSubstr("vendor_id"));
  EXPECT_EQ(p.a.connection_count(), 0u);

  EXPECT_THAT(std::string(p.b.Listen(0x10, 0x0F, 8, false).status().message()),
              HasSubstr("outside mask"));
  EXPECT_THAT(std::string(p.b.Listen(1, ~uint64_t{0}, 0, false).status().message()),
              HasSubstr("backlog"));
  const ListenId l = *p.b.Listen(testing::kService, ~uint64_t{0}, 8, false);
  EXPECT_EQ(code(p.b.Listen(testing::kService, ~uint64_t{0}, 8, true).status()),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(code(p.b.StopListening(ListenId{})), absl::StatusCode::kNotFound);
  ASSERT_TRUE(p.b.StopListening(l).ok());
  EXPECT_EQ(code(p.b.StopListening(l)), absl::StatusCode::kNotFound);  // stale
  EXPECT_EQ(p.b.listener_count(), 0u);

  ASSERT_TRUE(p.b.Listen(testing::kService, ~uint64_t{0}, 8, false).ok());
  const ConnId a = *p.a.Connect(p.now, MakeConnect());
  p.Deliver();
  const ConnId b = p.events_b.at(0).conn;
  EXPECT_THAT(std::string(p.b.SendMra(p.now, b, 32).message()), HasSubstr("0..31"));
  EXPECT_THAT(std::string(p.b.Reject(p.now, b, RejReason::kConsumerReject, {},
                                     std::vector<uint8_t>(73, 0)).message()),
              HasSubstr("ARI is 73 bytes"));
  AcceptParams ap = MakeAccept();
  ap.retry.backoff_factor = 0;
  EXPECT_EQ(code(p.b.Accept(p.now, b, ap)), kInvalid);
  EXPECT_EQ(*p.b.State(b), CmState::kReqRcvd);
  EXPECT_EQ(*p.a.State(a), CmState::kReqSent);
  EXPECT_TRUE(DrainTx(p.b).empty());
}

}  // namespace
}  // namespace uscm::cm
