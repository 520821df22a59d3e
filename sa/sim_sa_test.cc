// The SA client against the simulated SA on the simulated fabric, in virtual
// time: path queries (Get, GetTable through RMPP with loss and reordering
// from the fault injector), errors surfaced, the window, Busy, the path
// cache, multicast join / leave / MGID 0 and local aggregation.
#include "sa/sim_sa.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/agent.h"
#include "mad/sim/fabric.h"
#include "mad/sim/fault_injector.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "sa/client.h"
#include "sa/multicast.h"
#include "sa/path_cache.h"

namespace uscm::sa {
namespace {

using mad::wire::JoinState;
using mad::wire::McMemberRecord;
using mad::wire::McMemberRecordMask;
using ::testing::HasSubstr;

constexpr uint64_t kServiceId = 0x0000000001060000ULL | 4791;

// One host: its QP1 (optionally behind the fault injector), an agent, an SA
// client, a multicast manager, and the actor that drives them.
struct Host {
  Host(sim::Fabric& fabric, const std::string& node, const sim::FaultInjectorOptions* faults,
       mad::AgentConfig agent_config = {}) {
    qp1 = *fabric.Open(node);
    mad::Transport* t = qp1.get();
    if (faults != nullptr) {
      fi = *sim::FaultInjector::Create(*qp1, fabric.scheduler().clock(), *faults);
      t = fi.get();
    }
    agent_config.rmpp_reassembly = !t->caps().kernel_rmpp;
    agent_config.first_tid = 0x1000;
    agent = std::make_unique<mad::Agent>(agent_config, fabric.scheduler().Now());
    SaClientConfig cfg;
    cfg.sa = SaAddressFor(t->port());
    cfg.path_cache = &cache;
    client = std::make_unique<SaClient>(agent.get(), cfg);
    mc = std::make_unique<McManager>(agent.get(), cfg);
    gid = t->port().gid;
    sim::SimTransport* raw = qp1.get();
    sim::FaultInjector* inj = fi.get();
    actor = std::make_unique<AgentActor>(
        *t, *agent, [raw] { return raw->pending() > 0; },
        [inj]() -> absl::optional<mad::TimePoint> {
          return inj ? inj->NextDeadline() : absl::nullopt;
        },
        [this](mad::TimePoint now) { mc->Process(now); });
    fabric.scheduler().AddActor(actor.get());
  }

  std::unique_ptr<sim::SimTransport> qp1;
  std::unique_ptr<sim::FaultInjector> fi;
  std::unique_ptr<mad::Agent> agent;
  PathCache cache;
  std::unique_ptr<SaClient> client;
  std::unique_ptr<McManager> mc;
  std::unique_ptr<AgentActor> actor;
  mad::Gid gid;
};

class SimSaTest : public ::testing::Test {
 protected:
  void Build(const sim::Topology& topo, SimSaConfig sa_config = {}, bool with_sa = true,
             const sim::FaultInjectorOptions* faults = nullptr, mad::AgentConfig agent = {}) {
    sched_ = std::make_unique<sim::Scheduler>(/*seed=*/7);
    fabric_ = *sim::Fabric::Create(*sched_, topo);
    if (with_sa) sa_ = *SimSa::Create(*fabric_, sa_config);
    for (const sim::Endpoint& ep : fabric_->endpoints()) {
      if (ep.type == sim::NodeType::kCa && hosts_.size() < 2) {
        hosts_.push_back(std::make_unique<Host>(*fabric_, ep.node_id, faults, agent));
      }
    }
  }
  void TearDown() override {
    for (auto& h : hosts_) sched_->RemoveActor(h->actor.get());
  }

  // Runs until `client` has a result; returns it.
  SaResult Await(SaClient& client) {
    absl::Status s = sched_->RunUntil([&] { return client.pending_results() > 0; },
                                      sched_->Now() + mad::Duration::Seconds(600));
    EXPECT_TRUE(s.ok()) << s;
    auto r = client.PollResult();
    return r ? std::move(*r) : SaResult{0, absl::InternalError("no result"), {}, {}, {}, {}, false};
  }
  McEvent AwaitEvent(Host& h) {
    absl::optional<McEvent> ev;
    absl::Status s = sched_->RunUntil(
        [&] {
          ev = h.mc->PollEvent();
          return ev.has_value();
        },
        sched_->Now() + mad::Duration::Seconds(600));
    EXPECT_TRUE(s.ok()) << s;
    return ev ? std::move(*ev) : McEvent{0, false, absl::InternalError("no event"), {}, false};
  }
  // Every table empty at the end of a scenario.
  void ExpectQuiet() {
    ASSERT_TRUE(sched_->RunFor(mad::Duration::Seconds(120)).ok());
    for (auto& h : hosts_) {
      EXPECT_EQ(h->agent->pending_requests(), 0u);
      EXPECT_EQ(h->client->outstanding(), 0u);
    }
    if (sa_) {
      EXPECT_EQ(sa_->agent().rmpp_sends(), 0u);
    }
  }

  std::unique_ptr<sim::Scheduler> sched_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<SimSa> sa_;
  std::vector<std::unique_ptr<Host>> hosts_;
};

TEST_F(SimSaTest, RdmaCmPathQueryReturnsTheFabricsPath) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  Host& b = *hosts_[1];
  auto id = a.client->GetPath(sched_->Now(), PathQuery::RdmaCm(a.gid, b.gid, 0xFFFF, kServiceId));
  ASSERT_TRUE(id.ok()) << id.status();
  SaResult r = Await(*a.client);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.id, *id);
  ASSERT_EQ(r.paths.size(), 1u);
  const mad::wire::PathRecord& p = r.paths[0];
  auto expect = fabric_->Path(a.qp1->port().lid, b.qp1->port().lid);
  ASSERT_TRUE(expect.ok());
  EXPECT_EQ(p.slid, a.qp1->port().lid);
  EXPECT_EQ(p.dlid, b.qp1->port().lid);
  EXPECT_EQ(p.sgid, a.gid);
  EXPECT_EQ(p.dgid, b.gid);
  EXPECT_EQ(static_cast<int>(p.mtu), expect->mtu);
  EXPECT_EQ(p.rate, expect->rate);
  EXPECT_EQ(p.packet_life_time, 18);
  EXPECT_EQ(p.service_id, kServiceId);
  EXPECT_EQ(p.pkey, 0xFFFF);
  EXPECT_TRUE(p.reversible);
  EXPECT_FALSE(r.from_cache);
  ExpectQuiet();
}

TEST_F(SimSaTest, SaStatusesBecomeClearErrors) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  Host& b = *hosts_[1];
  // Only the destination: every source matches -> TOO_MANY_RECORDS.
  ASSERT_TRUE(a.client->GetPath(sched_->Now(), PathQuery().Dgid(b.gid)).ok());
  SaResult many = Await(*a.client);
  EXPECT_EQ(many.status.code(), absl::StatusCode::kFailedPrecondition) << many.status;
  EXPECT_THAT(std::string(many.status.message()), HasSubstr("ERR_TOO_MANY_RECORDS"));
  // A P_Key not in the table -> NO_RECORDS.
  ASSERT_TRUE(a.client->GetPath(sched_->Now(), PathQuery().Sgid(a.gid).Dgid(b.gid).PKey(0x1234))
                  .ok());
  SaResult none = Await(*a.client);
  EXPECT_EQ(none.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status.message()),
              HasSubstr("SA has no path from " + a.gid.ToString() + " to " + b.gid.ToString()));
  // An unknown GID -> ERR_REQ_INVALID_GID.
  mad::Gid ghost = mad::Gid::FromParts(0xfe80000000000000ULL, 0x1234);
  ASSERT_TRUE(a.client->GetPath(sched_->Now(), PathQuery().Sgid(a.gid).Dgid(ghost)).ok());
  SaResult unknown = Await(*a.client);
  EXPECT_EQ(unknown.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status.message()), HasSubstr("knows no port"));
  EXPECT_EQ(a.client->counters().sa_errors, 3u);
  ExpectQuiet();
}

TEST_F(SimSaTest, GetTableOfEveryPathArrivesThroughRmpp) {
  Build(*sim::GenerateTopology(20, 3));
  Host& a = *hosts_[0];
  const size_t ports = fabric_->endpoints().size();
  ASSERT_TRUE(a.client->GetPaths(sched_->Now(), PathQuery()).ok());
  SaResult r = Await(*a.client);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.paths.size(), ports * ports);
  // ceil(64 * n / 200) segments.
  EXPECT_EQ(sa_->agent().counters().rmpp.segments_sent, (ports * ports * 64 + 199) / 200);
  EXPECT_EQ(a.agent->counters().rmpp.transfers_completed, 1u);
  // A half-specified table: every path from one source.
  ASSERT_TRUE(a.client->GetPaths(sched_->Now(), PathQuery().Sgid(a.gid)).ok());
  SaResult from_a = Await(*a.client);
  ASSERT_TRUE(from_a.status.ok());
  EXPECT_EQ(from_a.paths.size(), ports);
  for (const auto& p : from_a.paths) EXPECT_EQ(p.sgid, a.gid);
  // No match in a table is success with zero records.
  ASSERT_TRUE(a.client->GetPaths(sched_->Now(), PathQuery().Sgid(a.gid).Sl(5)).ok());
  SaResult empty = Await(*a.client);
  EXPECT_TRUE(empty.status.ok()) << empty.status;
  EXPECT_TRUE(empty.paths.empty());
  ExpectQuiet();
}

TEST_F(SimSaTest, GetTableSurvivesLossAndReorderingFromTheFaultInjector) {
  sim::FaultInjectorOptions faults;
  faults.seed = 42;
  faults.send.drop = 0.1;
  faults.receive.drop = 0.1;
  faults.receive.reorder = 0.3;
  faults.receive.reorder_delay = mad::Duration::Micros(50);
  mad::AgentConfig ac;
  ac.base_timeout = mad::Duration::Millis(200);
  ac.max_retries = 10;
  SimSaConfig sc;
  sc.agent.rmpp.ack_timeout = mad::Duration::Millis(100);
  sc.agent.rmpp.max_send_retries = 30;
  Build(*sim::GenerateTopology(16, 2), sc, true, &faults, ac);
  Host& a = *hosts_[0];
  const size_t ports = fabric_->endpoints().size();
  ASSERT_TRUE(a.client->GetPaths(sched_->Now(), PathQuery()).ok());
  SaResult r = Await(*a.client);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.paths.size(), ports * ports);
  EXPECT_GT(a.fi->receive_counters().dropped + a.fi->send_counters().dropped, 0u);
  EXPECT_GT(a.fi->receive_counters().reordered, 0u);
  EXPECT_GT(sa_->agent().counters().rmpp.retransmits, 0u);
  ExpectQuiet();
}

TEST_F(SimSaTest, SameSeedReproducesTheLossyRunExactly) {
  auto run = [this](uint64_t* digest, uint64_t* retransmits, mad::TimePoint* end) {
    for (auto& h : hosts_) sched_->RemoveActor(h->actor.get());
    hosts_.clear();
    sa_.reset();
    sim::FaultInjectorOptions faults;
    faults.seed = 9;
    faults.receive.drop = 0.1;
    faults.receive.reorder = 0.3;
    SimSaConfig sc;
    sc.agent.rmpp.ack_timeout = mad::Duration::Millis(100);
    sc.agent.rmpp.max_send_retries = 30;
    Build(*sim::GenerateTopology(8, 2), sc, true, &faults);
    Host& a = *hosts_[0];
    ASSERT_TRUE(a.client->GetPaths(sched_->Now(), PathQuery()).ok());
    SaResult r = Await(*a.client);
    ASSERT_TRUE(r.status.ok()) << r.status;
    *digest = fabric_->trace_digest();
    *retransmits = sa_->agent().counters().rmpp.retransmits;
    *end = sched_->Now();
  };
  uint64_t d1 = 0, d2 = 0, r1 = 0, r2 = 0;
  mad::TimePoint e1, e2;
  run(&d1, &r1, &e1);
  run(&d2, &r2, &e2);
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(e1, e2);
}

TEST_F(SimSaTest, ManyQueriesOutstandingShareTheWindow) {
  mad::AgentConfig ac;
  ac.window = 4;
  Build(*sim::GenerateTopology(12, 1), {}, true, nullptr, ac);
  Host& a = *hosts_[0];
  std::vector<uint64_t> ids;
  for (const sim::Endpoint& ep : fabric_->endpoints()) {
    ids.push_back(*a.client->GetPath(sched_->Now(), PathQuery().Sgid(a.gid).Dgid(ep.gid)));
  }
  EXPECT_EQ(a.agent->counters().queued, ids.size() - 4);
  size_t ok = 0;
  ASSERT_TRUE(sched_->RunUntil([&] {
                 while (auto r = a.client->PollResult()) ok += r->status.ok();
                 return ok == ids.size();
               }, sched_->Now() + mad::Duration::Seconds(10))
                  .ok());
  EXPECT_EQ(a.agent->counters().retries, 0u);
  ExpectQuiet();
}

TEST_F(SimSaTest, BusyAnswersAreRetriedAfterBackoff) {
  SimSaConfig sc;
  sc.busy_answers = 2;
  Build(sim::TwoHostsOneSwitch(), sc);
  Host& a = *hosts_[0];
  const mad::TimePoint start = sched_->Now();
  ASSERT_TRUE(a.client->GetPath(start, PathQuery().Sgid(a.gid).Dgid(hosts_[1]->gid)).ok());
  SaResult r = Await(*a.client);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(a.agent->counters().busy, 2u);
  // Waited the 2nd and 3rd attempts' intervals: 2 s + 4 s.
  EXPECT_GE(sched_->Now() - start, mad::Duration::Seconds(6));
  ExpectQuiet();
}

TEST_F(SimSaTest, NoSaMeansTimeoutAfterRetries) {
  mad::AgentConfig ac;
  ac.base_timeout = mad::Duration::Millis(100);
  ac.max_retries = 2;
  Build(sim::TwoHostsOneSwitch(), {}, /*with_sa=*/false, nullptr, ac);
  Host& a = *hosts_[0];
  ASSERT_TRUE(a.client->GetPath(sched_->Now(), PathQuery().Sgid(a.gid).Dgid(hosts_[1]->gid)).ok());
  SaResult r = Await(*a.client);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(r.status.message()), HasSubstr("after 3 attempts"));
  EXPECT_EQ(a.agent->counters().sent, 3u);
}

// rdma_resolve_route(id, 500) and rdma_resolve_route(id2, 2000) to one
// destination: the second is coalesced into the first, yet each keeps its
// own timeout_ms (the kernel sends each ib_sa_path_rec_get on its own). The
// SA takes 700 ms: the first fails at 500 ms, the second and one without a
// deadline get the path at 700 ms, from one request to the SA.
TEST_F(SimSaTest, CoalescedPathQueriesKeepTheirOwnDeadlines) {
  SimSaConfig sc;
  sc.service_time = mad::Duration::Millis(700);
  Build(sim::TwoHostsOneSwitch(), sc);
  Host& a = *hosts_[0];
  const PathQuery q = PathQuery::RdmaCm(a.gid, hosts_[1]->gid, 0xFFFF, kServiceId);
  const mad::TimePoint start = sched_->Now();
  auto short_one = a.client->GetPath(start, q, start + mad::Duration::Millis(500));
  auto long_one = a.client->GetPath(start, q, start + mad::Duration::Millis(2000));
  auto no_deadline = a.client->GetPath(start, q);
  ASSERT_TRUE(short_one.ok() && long_one.ok() && no_deadline.ok());
  EXPECT_EQ(a.client->counters().coalesced, 2u);
  SaResult r = Await(*a.client);
  EXPECT_EQ(r.id, *short_one);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded) << r.status;
  EXPECT_EQ(sched_->Now() - start, mad::Duration::Millis(500));
  for (uint64_t id : {*long_one, *no_deadline}) {
    r = Await(*a.client);
    EXPECT_EQ(r.id, id);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.paths.at(0).dlid, hosts_[1]->qp1->port().lid);
  }
  EXPECT_GE(sched_->Now() - start, mad::Duration::Millis(700));
  EXPECT_LT(sched_->Now() - start, mad::Duration::Millis(800));
  EXPECT_EQ(sa_->counters().requests, 1u);
  EXPECT_EQ(a.client->counters().waiter_deadlines, 1u);
  EXPECT_EQ(a.client->counters().failures, 0u);
  EXPECT_EQ(a.agent->counters().timeouts, 0u);
  ExpectQuiet();
  EXPECT_TRUE(a.agent->idle());
}

// No SA: each query fails at its own deadline, the later one's ends the
// request (one timeout on the wire).
TEST_F(SimSaTest, WithoutAnSaCoalescedQueriesFailEachAtItsDeadline) {
  Build(sim::TwoHostsOneSwitch(), {}, /*with_sa=*/false);
  Host& a = *hosts_[0];
  const PathQuery q = PathQuery::RdmaCm(a.gid, hosts_[1]->gid, 0xFFFF, kServiceId);
  const mad::TimePoint start = sched_->Now();
  auto first = a.client->GetPath(start, q, start + mad::Duration::Millis(500));
  auto second = a.client->GetPath(start + mad::Duration::Millis(1), q,
                                  start + mad::Duration::Millis(2000));
  ASSERT_TRUE(first.ok() && second.ok());
  SaResult r = Await(*a.client);
  EXPECT_EQ(r.id, *first);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded) << r.status;
  EXPECT_EQ(sched_->Now() - start, mad::Duration::Millis(500));
  r = Await(*a.client);
  EXPECT_EQ(r.id, *second);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded) << r.status;
  EXPECT_EQ(sched_->Now() - start, mad::Duration::Millis(2000));
  EXPECT_EQ(a.agent->counters().timeouts, 1u);
  EXPECT_EQ(a.client->counters().failures, 1u);
  EXPECT_EQ(a.client->counters().waiter_deadlines, 1u);
  EXPECT_EQ(a.client->counters().coalesced, 1u);
  ExpectQuiet();
}

TEST_F(SimSaTest, PathCacheHitAsksTheSaNothing) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  const PathQuery q = PathQuery::RdmaCm(a.gid, hosts_[1]->gid, 0xFFFF, kServiceId);
  ASSERT_TRUE(a.client->GetPath(sched_->Now(), q).ok());
  SaResult first = Await(*a.client);
  ASSERT_TRUE(first.status.ok());
  const uint64_t sent = a.agent->counters().sent;
  const uint64_t sa_requests = sa_->counters().requests;
  ASSERT_TRUE(a.client->GetPath(sched_->Now(), q).ok());
  SaResult again = Await(*a.client);
  ASSERT_TRUE(again.status.ok());
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.paths, first.paths);
  EXPECT_EQ(a.agent->counters().sent, sent);
  EXPECT_EQ(sa_->counters().requests, sa_requests);
  // After invalidation the SA is asked again.
  EXPECT_EQ(a.cache.InvalidateGid(hosts_[1]->gid), 1u);
  ASSERT_TRUE(a.client->GetPath(sched_->Now(), q).ok());
  SaResult third = Await(*a.client);
  EXPECT_FALSE(third.from_cache);
  EXPECT_EQ(sa_->counters().requests, sa_requests + 1);
}

// GetPathOrCached: a hit comes back in the call, queues no SaResult and is
// counted and numbered as GetPath's hit; a miss is GetPath's query.
TEST_F(SimSaTest, GetPathOrCachedHandsAHitBackInTheCall) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  const PathQuery q = PathQuery::RdmaCm(a.gid, hosts_[1]->gid, 0xFFFF, kServiceId);
  absl::optional<mad::wire::PathRecord> hit;
  absl::StatusOr<uint64_t> miss = a.client->GetPathOrCached(sched_->Now(), q, &hit);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(hit.has_value());
  SaResult first = Await(*a.client);
  ASSERT_TRUE(first.status.ok());
  EXPECT_EQ(first.id, *miss);
  const SaClientCounters before = a.client->counters();
  const uint64_t sent = a.agent->counters().sent;
  absl::StatusOr<uint64_t> id = a.client->GetPathOrCached(sched_->Now(), q, &hit);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, first.paths[0]);
  EXPECT_EQ(*id, *miss + 1);
  EXPECT_EQ(a.client->pending_results(), 0u);
  EXPECT_EQ(a.client->counters().queries, before.queries + 1);
  EXPECT_EQ(a.client->counters().cache_hits, before.cache_hits + 1);
  EXPECT_EQ(a.agent->counters().sent, sent);
  // GetPath's hit takes the next id and is queued.
  absl::StatusOr<uint64_t> queued = a.client->GetPath(sched_->Now(), q);
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(*queued, *id + 1);
  EXPECT_EQ(a.client->pending_results(), 1u);
}

TEST_F(SimSaTest, ClassPortInfoAdvertisesSendOnlyFullMember) {
  Build(sim::TwoHostsOneSwitch());
  ASSERT_TRUE(hosts_[0]->client->GetClassPortInfo(sched_->Now()).ok());
  SaResult r = Await(*hosts_[0]->client);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_TRUE(r.class_port_info.has_value());
  EXPECT_EQ(r.class_port_info->capability_mask2 & mad::wire::kSaCap2SendOnlyFullMemberSupported,
            mad::wire::kSaCap2SendOnlyFullMemberSupported);
}

McJoin CreateJoin(const mad::Gid& port) {
  McJoin j;
  j.port_gid = port;
  j.qkey = 0x01234567;
  j.pkey = 0xFFFF;
  j.sl = 0;
  j.mtu = mad::wire::Mtu::k2048;
  return j;
}

TEST_F(SimSaTest, JoinWithMgidZeroCreatesAGroupOthersJoinAndLeave) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  Host& b = *hosts_[1];
  ASSERT_TRUE(a.client->Join(sched_->Now(), CreateJoin(a.gid)).ok());
  SaResult created = Await(*a.client);
  ASSERT_TRUE(created.status.ok()) << created.status;
  ASSERT_TRUE(created.group.has_value());
  const McGroup g = *created.group;
  EXPECT_EQ(g.mgid.raw[0], 0xFF);
  EXPECT_EQ(g.mgid.raw[1], 0x12);
  EXPECT_EQ(g.mgid.raw[2], 0xA0);
  EXPECT_EQ(g.mgid.raw[3], 0x1B);
  EXPECT_EQ(g.mlid, 0xC000);
  EXPECT_EQ(g.qkey, 0x01234567u);
  EXPECT_EQ(g.mtu, mad::wire::Mtu::k2048);
  EXPECT_EQ(g.remote_qpn, 0xFFFFFFu);
  EXPECT_EQ(g.join_state, JoinState(JoinState::kFullMember));

  McJoin join_existing;
  join_existing.mgid = g.mgid;
  join_existing.port_gid = b.gid;
  join_existing.join_state = JoinState(JoinState::kNonMember);
  join_existing.create = false;
  ASSERT_TRUE(b.client->Join(sched_->Now(), join_existing).ok());
  SaResult joined = Await(*b.client);
  ASSERT_TRUE(joined.status.ok()) << joined.status;
  EXPECT_EQ(joined.group->mlid, g.mlid);
  EXPECT_EQ(joined.group->qkey, g.qkey);

  McMemberRecord tmpl;
  tmpl.mgid = g.mgid;
  ASSERT_TRUE(a.client->GetMcMembers(sched_->Now(), tmpl, McMemberRecordMask::kMgid).ok());
  SaResult members = Await(*a.client);
  ASSERT_TRUE(members.status.ok()) << members.status;
  EXPECT_EQ(members.members.size(), 2u);

  ASSERT_TRUE(b.client->Leave(sched_->Now(), g.mgid, b.gid, JoinState(JoinState::kNonMember)).ok());
  EXPECT_TRUE(Await(*b.client).status.ok());
  EXPECT_EQ(sa_->groups(), 1u);
  ASSERT_TRUE(a.client->Leave(sched_->Now(), g.mgid, a.gid, JoinState(JoinState::kFullMember)).ok());
  SaResult left = Await(*a.client);
  EXPECT_TRUE(left.status.ok()) << left.status;
  EXPECT_EQ(sa_->groups(), 0u) << "the last full member's leave deletes the group";
  // Leaving again: the group is gone.
  ASSERT_TRUE(a.client->Leave(sched_->Now(), g.mgid, a.gid, JoinState(JoinState::kFullMember)).ok());
  EXPECT_EQ(Await(*a.client).status.code(), absl::StatusCode::kInvalidArgument);
  ExpectQuiet();
}

TEST_F(SimSaTest, SendOnlyNonMemberJoinsAnExistingGroupButCannotCreateOne) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  Host& b = *hosts_[1];
  // Not a creator state: a SendOnlyNonMember join of an unknown MGID is refused.
  McJoin orphan = CreateJoin(b.gid);
  orphan.mgid = *mad::Gid::Parse("ff12:a01b::77");
  orphan.join_state = JoinState(JoinState::kSendOnlyNonMember);
  ASSERT_TRUE(b.client->Join(sched_->Now(), orphan).ok());
  SaResult refused = Await(*b.client);
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status.message()), HasSubstr("ERR_REQ_INVALID"));
  EXPECT_EQ(sa_->groups(), 0u);

  ASSERT_TRUE(a.client->Join(sched_->Now(), CreateJoin(a.gid)).ok());
  SaResult created = Await(*a.client);
  ASSERT_TRUE(created.status.ok()) << created.status;
  const McGroup g = *created.group;

  McJoin send_only;
  send_only.mgid = g.mgid;
  send_only.port_gid = b.gid;
  send_only.join_state = JoinState(JoinState::kSendOnlyNonMember);
  send_only.create = false;
  ASSERT_TRUE(b.client->Join(sched_->Now(), send_only).ok());
  SaResult joined = Await(*b.client);
  ASSERT_TRUE(joined.status.ok()) << joined.status;
  ASSERT_TRUE(joined.group.has_value());
  EXPECT_EQ(joined.group->mgid, g.mgid);
  EXPECT_EQ(joined.group->mlid, g.mlid);
  EXPECT_EQ(joined.group->qkey, g.qkey);
  EXPECT_EQ(joined.group->remote_qpn, 0xFFFFFFu);
  EXPECT_EQ(joined.group->join_state, JoinState(JoinState::kSendOnlyNonMember));
  EXPECT_EQ(sa_->members(g.mgid), 2u);

  // The SA records b with JoinState SendOnlyNonMember (bit 2) only.
  McMemberRecord tmpl;
  tmpl.mgid = g.mgid;
  tmpl.port_gid = b.gid;
  ASSERT_TRUE(a.client
                  ->GetMcMembers(sched_->Now(), tmpl,
                                 McMemberRecordMask::kMgid | McMemberRecordMask::kPortGid)
                  .ok());
  SaResult members = Await(*a.client);
  ASSERT_TRUE(members.status.ok()) << members.status;
  ASSERT_EQ(members.members.size(), 1u);
  EXPECT_EQ(members.members[0].join_state.bits(), JoinState::kSendOnlyNonMember);

  // Its leave does not delete the group (it is no creator); the full member's does.
  ASSERT_TRUE(b.client
                  ->Leave(sched_->Now(), g.mgid, b.gid,
                          JoinState(JoinState::kSendOnlyNonMember))
                  .ok());
  EXPECT_TRUE(Await(*b.client).status.ok());
  EXPECT_EQ(sa_->groups(), 1u);
  EXPECT_EQ(sa_->members(g.mgid), 1u);
  ASSERT_TRUE(a.client->Leave(sched_->Now(), g.mgid, a.gid, JoinState(JoinState::kFullMember)).ok());
  EXPECT_TRUE(Await(*a.client).status.ok());
  EXPECT_EQ(sa_->groups(), 0u);
  ExpectQuiet();
}

TEST_F(SimSaTest, BadJoinsAreRejected) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  McJoin non_member = CreateJoin(a.gid);
  non_member.mgid = *mad::Gid::Parse("ff12:a01b::99");
  non_member.join_state = JoinState(JoinState::kNonMember);
  ASSERT_TRUE(a.client->Join(sched_->Now(), non_member).ok());
  SaResult r = Await(*a.client);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status.message()), HasSubstr("ERR_REQ_INVALID"));

  McJoin no_create = CreateJoin(a.gid);
  no_create.create = false;  // lacks Q_Key, P_Key, SL, ... for a new group
  ASSERT_TRUE(a.client->Join(sched_->Now(), no_create).ok());
  SaResult insufficient = Await(*a.client);
  EXPECT_EQ(insufficient.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(insufficient.status.message()),
              HasSubstr("ERR_REQ_INSUFFICIENT_COMPONENTS"));

  ASSERT_TRUE(a.client->Join(sched_->Now(), CreateJoin(a.gid)).ok());
  SaResult g = Await(*a.client);
  ASSERT_TRUE(g.status.ok());
  McJoin wrong_qkey = CreateJoin(hosts_[1]->gid);
  wrong_qkey.mgid = g.group->mgid;
  wrong_qkey.qkey = 0x42;
  ASSERT_TRUE(hosts_[1]->client->Join(sched_->Now(), wrong_qkey).ok());
  EXPECT_EQ(Await(*hosts_[1]->client).status.code(), absl::StatusCode::kInvalidArgument);
  McJoin nothing = CreateJoin(a.gid);
  nothing.join_state = JoinState(0);
  EXPECT_EQ(a.client->Join(sched_->Now(), nothing).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SimSaTest, LocalMembersShareOneSaMembership) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  McJoin j = CreateJoin(a.gid);
  j.mgid = *mad::Gid::Parse("ff12:401b:ffff::e000:1");
  auto t1 = a.mc->Join(sched_->Now(), j);
  ASSERT_TRUE(t1.ok());
  McEvent e1 = AwaitEvent(a);
  ASSERT_TRUE(e1.status.ok()) << e1.status;
  EXPECT_FALSE(e1.from_table);
  const uint64_t requests = sa_->counters().requests;
  auto t2 = a.mc->Join(sched_->Now(), j);
  ASSERT_TRUE(t2.ok());
  McEvent e2 = AwaitEvent(a);
  ASSERT_TRUE(e2.status.ok());
  EXPECT_TRUE(e2.from_table);
  EXPECT_EQ(e2.group.mlid, e1.group.mlid);
  EXPECT_EQ(sa_->counters().requests, requests) << "the second member asked the SA nothing";
  EXPECT_EQ(a.mc->members(j.mgid, a.gid), 2u);

  ASSERT_TRUE(a.mc->Leave(sched_->Now(), *t1).ok());
  McEvent l1 = AwaitEvent(a);
  EXPECT_TRUE(l1.left && l1.from_table);
  EXPECT_EQ(sa_->members(j.mgid), 1u);
  ASSERT_TRUE(a.mc->Leave(sched_->Now(), *t2).ok());
  McEvent l2 = AwaitEvent(a);
  EXPECT_TRUE(l2.left);
  EXPECT_FALSE(l2.from_table);
  EXPECT_TRUE(l2.status.ok()) << l2.status;
  EXPECT_EQ(sa_->groups(), 0u);
  EXPECT_EQ(a.mc->groups(), 0u);
  EXPECT_EQ(a.mc->Leave(sched_->Now(), *t2).code(), absl::StatusCode::kNotFound);
}

TEST_F(SimSaTest, SendOnlyFullMemberNeedsTheSaCapability) {
  SimSaConfig sc;
  sc.send_only_full_member = false;
  Build(sim::TwoHostsOneSwitch(), sc);
  Host& a = *hosts_[0];
  McJoin j = CreateJoin(a.gid);
  j.join_state = JoinState(JoinState::kSendOnlyFullMember);
  ASSERT_TRUE(a.mc->Join(sched_->Now(), j).ok());
  McEvent e = AwaitEvent(a);
  EXPECT_EQ(e.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(e.status.message()), HasSubstr("CapabilityMask2 bit 12"));
  EXPECT_EQ(sa_->groups(), 0u);
}

TEST_F(SimSaTest, SendOnlyFullMemberJoinsWhenSupported) {
  Build(sim::TwoHostsOneSwitch());
  Host& a = *hosts_[0];
  McJoin j = CreateJoin(a.gid);
  j.join_state = JoinState(JoinState::kSendOnlyFullMember);
  ASSERT_TRUE(a.mc->Join(sched_->Now(), j).ok());
  McEvent e = AwaitEvent(a);
  ASSERT_TRUE(e.status.ok()) << e.status;
  EXPECT_EQ(sa_->groups(), 1u);
  EXPECT_GE(e.group.mlid, 0xC000);
}

}  // namespace
}  // namespace uscm::sa
