// More of the C API (api/c/uscm_cma.h) on the simulated two-host fabric:
// uscm_migrate_id (rdma_migrate_id) and uscm_set_qp_ex / uscm_destroy_qp (the
// CM drives a verbs QP, here fake ibv_qp structs whose ibv_modify_qp is
// recorded through uscm_set_verbs_ops_for_testing), with their misuse errors;
// uscm_create_qp's argument checks. uscm_set_qp (port queries) and
// uscm_create_qp on a real device are covered only by the VM lane. Every test
// ends with every table empty.
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/c/c_api_testing.h"
#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"
#include "mad/time.h"
#include "verbs/qp_transitions.h"

namespace uscm {
namespace {

// ibv_modify_qp / ibv_attach_mcast / ibv_detach_mcast of the fake QPs.
struct Modified {
  uint32_t qpn;
  int state;  // enum ibv_qp_state
  int mask;
  int path_mtu;
  uint32_t dest_qpn;
};
std::vector<Modified> g_modified;
int RecordModify(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  g_modified.push_back({qp->qp_num, a->qp_state, mask, a->path_mtu, a->dest_qp_num});
  return 0;
}
int NoMcast(ibv_qp*, const ibv_gid*, uint16_t) { return 0; }
const verbs::VerbsOps kFakeOps{&RecordModify, &NoMcast, &NoMcast};

ibv_qp FakeQp(ibv_qp_type type, uint32_t qpn) {
  ibv_qp q;
  memset(&q, 0, sizeof q);
  q.qp_type = type;
  q.qp_num = qpn;
  return q;
}
std::vector<int> StatesOf(uint32_t qpn) {
  std::vector<int> out;
  for (const Modified& m : g_modified) {
    if (m.qpn == qpn) out.push_back(m.state);
  }
  return out;
}

class CApiMoreTest : public testing::CApiSimTest {
 protected:
  void SetUp() override {
    StartFabric(/*seed=*/29);
    for (int i = 0; i < 4; ++i) {
      ch_[i] = uscm_create_event_channel_on(dev_[i % 2]);  // 0, 2: host 0; 1, 3: host 1
      ASSERT_NE(ch_[i], nullptr);
    }
  }
  void TearDown() override {
    for (uscm_event_channel* c : ch_) uscm_destroy_event_channel(c);
    CApiSimTest::TearDown();
  }

  // The next event on channel c (must be `want`); the caller acks.
  uscm_cm_event* Next(uscm_event_channel* c, uscm_cm_event_type want) { return NextOn(c, want); }
  void Ack(uscm_event_channel* c, uscm_cm_event_type want) { AckOn(c, want); }
  void ExpectQuiet(int ms = 200) {
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(RunUntilEvent(ch_[i], ms)) << "event on channel " << i;
  }
  void ExpectAllEmpty() { ExpectNoCmState(); }

  uscm_event_channel* ch_[4] = {nullptr, nullptr, nullptr, nullptr};
};

// An event queued on the old channel moves with the id; later events go to
// the new channel only; id->channel follows. Misuse: NULL id, NULL channel
// (synchronous mode: ENOTSUP), a channel of the other host, retrieved events
// not acked (EBUSY until the ack).
TEST_F(CApiMoreTest, MigrateMovesQueuedAndFutureEventsAndRefusesWhileUnacked) {
  uscm_cm_id* id = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &id, nullptr, USCM_PS_TCP), 0);
  ExpectError(uscm_migrate_id(nullptr, ch_[2]), EINVAL, "migrate_id: id is NULL");
  ExpectError(uscm_migrate_id(id, nullptr), ENOTSUP, "migrate_id: NULL channel");
  ExpectError(uscm_migrate_id(id, ch_[1]), EINVAL,
              "migrate_id: the channel belongs to another device");
  EXPECT_EQ(id->channel, ch_[0]);
  ASSERT_EQ(uscm_migrate_id(id, ch_[0]), 0) << "same channel: nothing to do";

  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
  ASSERT_TRUE(RunUntilEvent(ch_[0], 1000));
  ASSERT_EQ(uscm_migrate_id(id, ch_[2]), 0) << uscm_last_error();
  EXPECT_EQ(id->channel, ch_[2]);
  EXPECT_FALSE(Readable(ch_[0])) << "the queued ADDR_RESOLVED left the old channel";
  uscm_cm_event* e = nullptr;
  ExpectError(uscm_get_cm_event(ch_[0], &e), EAGAIN, "get_cm_event: no event queued");
  uscm_cm_event* resolved = Next(ch_[2], USCM_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->id, id);

  ExpectError(uscm_migrate_id(id, ch_[0]), EBUSY,
              "migrate_id: 1 retrieved event(s) of this id are not acked");
  EXPECT_EQ(id->channel, ch_[2]);
  ASSERT_EQ(uscm_ack_cm_event(resolved), 0);
  ASSERT_EQ(uscm_migrate_id(id, ch_[0]), 0) << uscm_last_error();
  ASSERT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ROUTE_RESOLVED);
  ExpectQuiet();
  ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  uscm_cm_id forged{};  // not from uscm_create_id
  ExpectError(uscm_migrate_id(&forged, ch_[2]), EINVAL, "migrate_id: unknown id");
  ExpectAllEmpty();
}

// A listener migrated with a CONNECT_REQUEST queued: the request (and its new
// id) are retrieved from the new channel, the new id's channel is the new one
// and its ESTABLISHED arrives there; the active id is migrated mid-connect.
TEST_F(CApiMoreTest, MigratedListenerTakesItsQueuedConnectRequests) {
  uscm_cm_id* l = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[1], &l, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_bind_addr(l, &server_), 0) << uscm_last_error();
  ASSERT_EQ(uscm_listen(l, 4), 0) << uscm_last_error();
  uscm_cm_id* id = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &id, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ROUTE_RESOLVED);
  uscm_conn_param cp{};
  cp.qp_num = 0x111;
  ASSERT_EQ(uscm_connect(id, &cp), 0) << uscm_last_error();
  ASSERT_EQ(uscm_migrate_id(id, ch_[2]), 0) << uscm_last_error();

  ASSERT_TRUE(RunUntilEvent(ch_[1], 120000));
  ASSERT_EQ(uscm_migrate_id(l, ch_[3]), 0) << uscm_last_error();
  EXPECT_FALSE(Readable(ch_[1]));
  uscm_cm_event* req = Next(ch_[3], USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->listen_id, l);
  uscm_cm_id* child = req->id;
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->channel, ch_[3]);
  ExpectError(uscm_migrate_id(child, ch_[1]), EBUSY, "migrate_id: 1 retrieved event(s)");
  ASSERT_EQ(uscm_ack_cm_event(req), 0);
  cp.qp_num = 0x222;
  ASSERT_EQ(uscm_accept(child, &cp), 0) << uscm_last_error();
  Ack(ch_[2], USCM_CM_EVENT_CONNECT_RESPONSE);
  ASSERT_EQ(uscm_establish(id), 0) << uscm_last_error();
  Ack(ch_[3], USCM_CM_EVENT_ESTABLISHED);
  ASSERT_EQ(uscm_disconnect(id), 0) << uscm_last_error();
  Ack(ch_[3], USCM_CM_EVENT_DISCONNECTED);
  Ack(ch_[2], USCM_CM_EVENT_DISCONNECTED);
  ASSERT_EQ(uscm_disconnect(child), 0) << uscm_last_error();
  ExpectQuiet();
  ASSERT_EQ(uscm_destroy_id(child), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(l), 0) << uscm_last_error();
  ExpectAllEmpty();
}

// A QP on each side through the C API: the CM moves both to INIT / RTR / RTS
// (the path MTU capped to the given active MTU, the peer's QPN from the QP,
// conn_param.qp_num 0), the active side sends the RTU itself (no
// CONNECT_RESPONSE) and DISCONNECTED moves both to ERROR. Misuse: NULL qp, a
// bad MTU, a QP type of the wrong port space, a second QP (EEXIST), an id
// already connecting; uscm_destroy_qp detaches (no more modifies) and allows
// a new QP.
TEST_F(CApiMoreTest, SetQpMakesTheCmDriveTheQpThroughInitRtrRtsAndError) {
  g_modified.clear();
  uscm_set_verbs_ops_for_testing(&kFakeOps);
  ibv_qp qa = FakeQp(IBV_QPT_RC, 0xA1), qb = FakeQp(IBV_QPT_RC, 0xB2);
  ibv_qp ud = FakeQp(IBV_QPT_UD, 0xC3), spare = FakeQp(IBV_QPT_RC, 0xD4);
  uscm_cm_id* l = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[1], &l, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_bind_addr(l, &server_), 0) << uscm_last_error();
  ASSERT_EQ(uscm_listen(l, 4), 0) << uscm_last_error();
  uscm_cm_id* id = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &id, nullptr, USCM_PS_TCP), 0);
  EXPECT_EQ(id->qp, nullptr);
  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ROUTE_RESOLVED);

  ExpectError(uscm_set_qp_ex(id, nullptr, 0, IBV_MTU_1024), EINVAL, "set_qp: qp is NULL");
  ExpectError(uscm_set_qp(id, nullptr), EINVAL, "set_qp: qp is NULL");
  ExpectError(uscm_set_qp_ex(nullptr, &qa, 0, IBV_MTU_1024), EINVAL, "set_qp: id is NULL");
  ExpectError(uscm_set_qp_ex(id, &qa, 0, 6), EINVAL, "set_qp: active_mtu 6 is not an enum ibv_mtu");
  ExpectError(uscm_set_qp_ex(id, &ud, 0, IBV_MTU_1024), EINVAL, "set_qp: QP type 4 does not fit");
  ASSERT_EQ(uscm_set_qp_ex(id, &qa, 0, IBV_MTU_1024), 0) << uscm_last_error();
  EXPECT_EQ(id->qp, &qa);
  ExpectError(uscm_set_qp_ex(id, &spare, 0, IBV_MTU_1024), EEXIST,
              "set_qp: the id already has a QP (QPN 0xa1)");
  uscm_destroy_qp(id);  // detach; the application owns the QP
  EXPECT_EQ(id->qp, nullptr);
  uscm_destroy_qp(id);  // no QP: nothing
  ASSERT_EQ(uscm_set_qp_ex(id, &qa, 0, IBV_MTU_1024), 0) << uscm_last_error();

  uscm_conn_param cp{};  // qp_num 0: taken from the QP
  ASSERT_EQ(uscm_connect(id, &cp), 0) << uscm_last_error();
  uscm_cm_event* req = Next(ch_[1], USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->param.conn.qp_num, 0xA1u);
  uscm_cm_id* child = req->id;
  ASSERT_EQ(uscm_ack_cm_event(req), 0);
  ASSERT_EQ(uscm_set_qp_ex(child, &qb, 0, IBV_MTU_1024), 0) << uscm_last_error();
  EXPECT_EQ(child->qp, &qb);
  ASSERT_EQ(uscm_accept(child, &cp), 0) << uscm_last_error();
  Ack(ch_[0], USCM_CM_EVENT_ESTABLISHED);  // no CONNECT_RESPONSE: the CM sent the RTU
  Ack(ch_[1], USCM_CM_EVENT_ESTABLISHED);
  ExpectError(uscm_set_qp_ex(l, &spare, 0, IBV_MTU_1024), EINVAL, "set_qp: id is in state LISTEN");
  ExpectQuiet();

  const std::vector<int> up = {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS};
  // The active QP: INIT at connect, and again at the REP with the
  // connection's access flags (librdmacm's ucma_modify_qp_rtr).
  EXPECT_EQ(StatesOf(0xA1), (std::vector<int>{IBV_QPS_INIT, IBV_QPS_INIT, IBV_QPS_RTR,
                                              IBV_QPS_RTS}));
  EXPECT_EQ(StatesOf(0xB2), up);
  for (const Modified& m : g_modified) {
    if (m.state != IBV_QPS_RTR) continue;
    EXPECT_EQ(m.path_mtu, IBV_MTU_1024) << "QP 0x" << std::hex << m.qpn << ": capped";
    EXPECT_EQ(m.dest_qpn, m.qpn == 0xA1 ? 0xB2u : 0xA1u);
  }

  ASSERT_EQ(uscm_disconnect(id), 0) << uscm_last_error();
  Ack(ch_[1], USCM_CM_EVENT_DISCONNECTED);
  Ack(ch_[0], USCM_CM_EVENT_DISCONNECTED);
  ASSERT_EQ(uscm_disconnect(child), 0) << uscm_last_error();
  ExpectQuiet();
  EXPECT_EQ(StatesOf(0xA1).back(), IBV_QPS_ERR);
  EXPECT_EQ(StatesOf(0xB2).back(), IBV_QPS_ERR);
  uscm_destroy_qp(child);
  uscm_destroy_qp(id);
  const size_t modifies = g_modified.size();
  ASSERT_EQ(uscm_destroy_id(child), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(l), 0) << uscm_last_error();
  ExpectAllEmpty();
  EXPECT_EQ(g_modified.size(), modifies) << "no QP touched after uscm_destroy_qp";
  uscm_set_verbs_ops_for_testing(nullptr);
}

// uscm_create_qp refuses before ibv_create_qp: NULL pd / attributes, a QP
// type that does not fit the port space; an unknown id.
TEST_F(CApiMoreTest, CreateQpArgumentChecks) {
  uscm_cm_id* tcp = nullptr;
  uscm_cm_id* udp = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &tcp, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_create_id(ch_[0], &udp, nullptr, USCM_PS_UDP), 0);
  ibv_qp_init_attr attr{};
  attr.qp_type = IBV_QPT_UD;
  auto* pd = reinterpret_cast<ibv_pd*>(&attr);  // never dereferenced: refused first
  ExpectError(uscm_create_qp(tcp, nullptr, &attr), EINVAL,
              "create_qp: pd and qp_init_attr must not be NULL");
  ExpectError(uscm_create_qp(tcp, pd, nullptr), EINVAL,
              "create_qp: pd and qp_init_attr must not be NULL");
  ExpectError(uscm_create_qp(tcp, pd, &attr), EINVAL, "create_qp: qp_init_attr->qp_type 4 does not fit");
  attr.qp_type = IBV_QPT_RC;
  ExpectError(uscm_create_qp(udp, pd, &attr), EINVAL, "create_qp: qp_init_attr->qp_type 2 does not fit");
  ExpectError(uscm_create_qp(nullptr, pd, &attr), EINVAL, "create_qp: id is NULL");
  uscm_destroy_qp(nullptr);  // EINVAL, nothing else
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(uscm_destroy_id(tcp), 0);
  ASSERT_EQ(uscm_destroy_id(udp), 0);
  ExpectAllEmpty();
}

}  // namespace
}  // namespace uscm

namespace uscm {
namespace {

// An unpolled channel (the drop-in's port channels): fd -1 and no eventfd
// written or read while events come and go; uscm_event_channel_queued counts
// them without a lock; uscm_try_get_cm_event takes them. The CM counters text
// names the REQ this host sent and the REJ it received.
TEST_F(CApiMoreTest, UnpolledChannelCountsItsEventsWithoutAnFd) {
  uscm_event_channel* ch = uscm_create_event_channel_unpolled_on(dev_[0]);
  ASSERT_NE(ch, nullptr) << uscm_last_error();
  EXPECT_EQ(ch->fd, -1);
  EXPECT_EQ(uscm_event_channel_queued(nullptr), 0u);
  uscm_cm_id* id = nullptr;
  ASSERT_EQ(uscm_create_id(ch, &id, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
  sim::Scheduler& s = fabric_->scheduler();
  ASSERT_TRUE(s.RunUntil([ch] { return uscm_event_channel_queued(ch) > 0; },
                         s.Now() + mad::Duration::Seconds(10))
                  .ok());
  EXPECT_EQ(uscm_event_channel_queued(ch), 1u);
  uscm_cm_event* e = nullptr;
  ASSERT_EQ(uscm_try_get_cm_event(ch, &e), 0) << uscm_last_error();
  EXPECT_EQ(e->event, USCM_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(uscm_event_channel_queued(ch), 0u);
  EXPECT_EQ(uscm_ack_cm_event(e), 0);
  ASSERT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
  ASSERT_TRUE(s.RunUntil([ch] { return uscm_event_channel_queued(ch) > 0; },
                         s.Now() + mad::Duration::Seconds(10))
                  .ok());
  ASSERT_EQ(uscm_try_get_cm_event(ch, &e), 0) << uscm_last_error();
  EXPECT_EQ(e->event, USCM_CM_EVENT_ROUTE_RESOLVED);
  EXPECT_EQ(uscm_ack_cm_event(e), 0);
  uscm_conn_param p = {};
  ASSERT_EQ(uscm_connect(id, &p), 0) << uscm_last_error();  // no listener: REJ
  ASSERT_TRUE(s.RunUntil([ch] { return uscm_event_channel_queued(ch) > 0; },
                         s.Now() + mad::Duration::Seconds(10))
                  .ok());
  ASSERT_EQ(uscm_try_get_cm_event(ch, &e), 0) << uscm_last_error();
  EXPECT_EQ(e->event, USCM_CM_EVENT_REJECTED);
  EXPECT_EQ(uscm_ack_cm_event(e), 0);
  ExpectError(uscm_try_get_cm_event(ch, &e), EAGAIN, "");
  EXPECT_EQ(ch->fd, -1) << "nothing asked for an fd";

  char text[512];
  ASSERT_EQ(uscm_device_cm_counters_text(dev_[0], text, sizeof text), 0) << uscm_last_error();
  EXPECT_NE(std::string(text).find("REQ 1/0/0/0"), std::string::npos) << text;
  EXPECT_NE(std::string(text).find("REJ 0/1/0/0"), std::string::npos) << text;
  char small[8];
  ASSERT_EQ(uscm_device_cm_counters_text(dev_[0], small, sizeof small), 0);
  EXPECT_EQ(std::string(small), "sent/re") << "cut to the buffer, NUL terminated";
  ExpectError(uscm_device_cm_counters_text(nullptr, text, sizeof text), EINVAL,
              "device_cm_counters_text");
  ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  uscm_destroy_event_channel(ch);
  ExpectAllEmpty();
}

}  // namespace
}  // namespace uscm
