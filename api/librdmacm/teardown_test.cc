// perftest's teardown on the drop-in (ib_send_bw -R; perftest 4.5,
// src/perftest_resources.c destroy_ctx): the connection that carries its
// control messages is created with rdma_create_qp and never disconnected;
// at the end perftest destroys that QP with ibv_destroy_qp and exits, and
// the peer's exit then sends a DREQ. librdmacm (and the kernel) never touch
// a QP on an incoming DREQ; uscm moved it to ERROR from its own thread, on
// the QP perftest had freed: SIGSEGV in about one run of two, depending on
// whether the DREQ came before the exit. Here the QPs are fakes whose verbs
// calls are recorded (uscm_set_verbs_ops_for_testing), so a call on a
// destroyed QP is counted instead of crashing.
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <functional>
#include <mutex>
#include <set>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"
#include "gtest/gtest.h"
#include "verbs/qp_transitions.h"

namespace uscm::librdmacm {
namespace {

// What verbs saw: every modify of a live QP (its new state), and how many
// calls reached a QP after the program destroyed it.
struct FakeVerbs {
  std::mutex mu;
  std::set<const ibv_qp*> destroyed;
  std::vector<ibv_qp_state> states;
  int calls_after_destroy = 0;
};
FakeVerbs& Fake() {
  static FakeVerbs* f = new FakeVerbs;
  return *f;
}

int FakeModify(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard<std::mutex> lock(Fake().mu);
  if (Fake().destroyed.count(qp) != 0) {
    ++Fake().calls_after_destroy;
    return 0;
  }
  if (mask & IBV_QP_STATE) Fake().states.push_back(attr->qp_state);
  return 0;
}
int FakeMcast(ibv_qp*, const ibv_gid*, uint16_t) { return 0; }

class TeardownTest : public IdsTest {
 protected:
  void SetUp() override {
    IdsTest::SetUp();
    {
      std::lock_guard<std::mutex> lock(Fake().mu);
      Fake().destroyed.clear();
      Fake().states.clear();
      Fake().calls_after_destroy = 0;
    }
    uscm_set_verbs_ops_for_testing(&kOps);
    SetModifyQpForTesting(&FakeModify);
    qp_.qp_type = IBV_QPT_RC;
    qp_.qp_num = 0x321;
  }
  void TearDown() override {
    uscm_set_verbs_ops_for_testing(nullptr);
    SetModifyQpForTesting(nullptr);
    IdsTest::TearDown();
  }

  // What rdma_create_qp does on a device (the simulated one has no verbs
  // context): the QP handed to uscm and shown in id->qp.
  void AttachQp(rdma_cm_id* id) {
    ASSERT_EQ(uscm_set_qp_ex(UscmIdOf(id, "test"), &qp_, 0, IBV_MTU_1024), 0) << uscm_last_error();
    id->qp = &qp_;
  }
  // perftest's ibv_destroy_qp on the id's QP (id->qp is left as it was,
  // as perftest leaves it).
  void DestroyQp() {
    std::lock_guard<std::mutex> lock(Fake().mu);
    Fake().destroyed.insert(&qp_);
  }
  int CallsAfterDestroy() {
    std::lock_guard<std::mutex> lock(Fake().mu);
    return Fake().calls_after_destroy;
  }
  // The end of the test, not of perftest (whose exit leaves it to the
  // kernel): the DREP, then the id; id->qp no longer names the QP.
  void FinishWithDrep(rdma_cm_id* id) {
    id->qp = nullptr;
    EXPECT_EQ(rdma_disconnect(id), 0) << strerror(errno);
    uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_DISCONNECTED));
    EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
    EXPECT_EQ(CallsAfterDestroy(), 0);
  }
  ibv_qp_state LastState() {
    std::lock_guard<std::mutex> lock(Fake().mu);
    return Fake().states.empty() ? IBV_QPS_UNKNOWN : Fake().states.back();
  }
  // The drop-in as a server: the peer connects to `port`, the
  // CONNECT_REQUEST's id gets the fake QP and is accepted with `param`;
  // `after_accept` runs (perftest destroys its listener there), then the
  // peer's RTU makes the id ESTABLISHED, its QP in RTS. Call with
  // ASSERT_NO_FATAL_FAILURE.
  void AcceptPeer(uint16_t port, uint32_t peer_qpn, rdma_conn_param* param,
                  const std::function<void()>& after_accept, rdma_cm_id** id, uscm_cm_id** peer) {
    *peer = PeerConnect(port, peer_qpn, "");
    peer_ids_.push_back(*peer);
    rdma_cm_event* e = Next(RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NE(e, nullptr);
    *id = e->id;
    AttachQp(*id);
    ASSERT_EQ(rdma_accept(*id, param), 0) << strerror(errno);
    rdma_ack_cm_event(e);
    after_accept();
    uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_RESPONSE);
    ASSERT_NE(pe, nullptr);
    uscm_ack_cm_event(pe);
    ASSERT_EQ(uscm_establish(*peer), 0) << uscm_last_error();
    e = Next(RDMA_CM_EVENT_ESTABLISHED);
    ASSERT_NE(e, nullptr);
    rdma_ack_cm_event(e);
    EXPECT_EQ(LastState(), IBV_QPS_RTS);
  }

  static constexpr verbs::VerbsOps kOps = {&FakeModify, &FakeMcast, &FakeMcast};
  ibv_qp qp_ = {};
};

// The drop-in as perftest's client: its control connection is established,
// its QP destroyed with ibv_destroy_qp, then the kernel peer exits (DREQ).
TEST_F(TeardownTest, PeersDreqAfterIbvDestroyQpLeavesTheQpAlone) {
  uscm_cm_id* listener = nullptr;
  ASSERT_EQ(uscm_create_id(peer_ch_, &listener, nullptr, USCM_PS_TCP), 0);
  uscm_addr here;
  ASSERT_EQ(uscm_parse_addr("10.0.0.2:18515", &here), 0);
  ASSERT_EQ(uscm_bind_addr(listener, &here), 0);
  ASSERT_EQ(uscm_listen(listener, 8), 0);
  peer_ids_.push_back(listener);

  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in dst = Ipv4("10.0.0.2", 18515);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED));
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ROUTE_RESOLVED));
  AttachQp(id);
  rdma_conn_param param = {};
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);

  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(pe, nullptr);
  uscm_cm_id* peer = pe->id;
  peer_ids_.push_back(peer);
  EXPECT_EQ(pe->param.conn.qp_num, 0x321u) << "the attached QP's number";
  uscm_ack_cm_event(pe);
  uscm_conn_param answer = {};
  answer.qp_num = 0x77;
  answer.responder_resources = 1;
  answer.initiator_depth = 1;
  ASSERT_EQ(uscm_accept(peer, &answer), 0) << uscm_last_error();
  rdma_cm_event* e = Next(RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(e, nullptr);
  rdma_ack_cm_event(e);
  EXPECT_EQ(LastState(), IBV_QPS_RTS) << "uscm moved the QP while connecting, as librdmacm does";
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_ESTABLISHED));

  DestroyQp();
  ASSERT_EQ(uscm_disconnect(peer), 0) << uscm_last_error();  // the kernel's DREQ at exit
  e = Next(RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(CallsAfterDestroy(), 0) << "the DREQ made uscm modify a QP the program destroyed";
  EXPECT_EQ(id->qp, &qp_) << "id->qp is the program's, as with librdmacm";
  rdma_ack_cm_event(e);
  FinishWithDrep(id);
}

// The drop-in as perftest's server: the accepted id's QP, the listener
// destroyed after the accept (rdma_server_connect), ibv_destroy_qp, DREQ.
TEST_F(TeardownTest, ServerSideLeavesTheDestroyedQpAloneToo) {
  rdma_cm_id* listener = Listen(18516, nullptr);
  rdma_conn_param param = {};
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  rdma_cm_id* id = nullptr;
  uscm_cm_id* peer = nullptr;
  ASSERT_NO_FATAL_FAILURE(AcceptPeer(
      18516, 0x88, &param, [&] { EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno); },
      &id, &peer));

  DestroyQp();
  ASSERT_EQ(uscm_disconnect(peer), 0) << uscm_last_error();
  rdma_cm_event* e = Next(RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(CallsAfterDestroy(), 0) << "the DREQ made uscm modify a QP the program destroyed";
  rdma_ack_cm_event(e);
  FinishWithDrep(id);
}

// rdma_disconnect still moves the program's QP to ERROR first, in the
// caller's thread (librdmacm's ucma_shutdown): what flushes the receives a
// program's completion thread waits on (rping's).
TEST_F(TeardownTest, RdmaDisconnectMovesTheQpToError) {
  rdma_cm_id* listener = Listen(18517, nullptr);
  rdma_cm_id* id = nullptr;
  uscm_cm_id* peer = nullptr;
  ASSERT_NO_FATAL_FAILURE(AcceptPeer(18517, 0x89, nullptr, [] {}, &id, &peer));

  ASSERT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  EXPECT_EQ(LastState(), IBV_QPS_ERR);
  uscm_ack_cm_event(PeerNext(USCM_CM_EVENT_DISCONNECTED));
  ASSERT_EQ(uscm_disconnect(peer), 0) << uscm_last_error();  // the DREP
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_DISCONNECTED));
  // After the QP is gone (rdma_destroy_qp would do both), a second
  // rdma_disconnect (perftest's destroy_ctx makes one) touches no QP.
  DestroyQp();
  id->qp = nullptr;
  rdma_disconnect(id);
  EXPECT_EQ(CallsAfterDestroy(), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
}

// qperf 0.4.11's server (rdma.c cm_close): after the peer's DREQ it acks
// DISCONNECTED, destroys its listener (cm->id still names it, not the
// accepted id) and the channel, and exits. librdmacm's
// rdma_destroy_event_channel closes the ucma fd and the kernel destroys the
// accepted id: DREP. The drop-in left the DREQ unanswered, and the kernel's
// qperf client waited for its DREQ to time out after every test.
TEST_F(TeardownTest, DestroyingTheChannelAnswersThePeersDreq) {
  rdma_cm_id* listener = Listen(18518, nullptr);
  rdma_cm_id* id = nullptr;
  uscm_cm_id* peer = nullptr;
  ASSERT_NO_FATAL_FAILURE(AcceptPeer(18518, 0x8a, nullptr, [] {}, &id, &peer));
  ASSERT_EQ(uscm_disconnect(peer), 0) << uscm_last_error();
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_DISCONNECTED));
  EXPECT_EQ(rdma_destroy_id(listener), 0) << strerror(errno);
  rdma_destroy_event_channel(ch_);
  ch_ = NewEventChannel();  // for TearDown

  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_DISCONNECTED);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->status, 0) << "the peer's DREQ timed out: no DREP";
  uscm_ack_cm_event(pe);
  // The struct stays, as librdmacm's; the id is gone (librdmacm: EBADF, its
  // write to the closed fd).
  EXPECT_EQ(rdma_destroy_id(id), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(rdma_disconnect(id), -1);
}

// The same close with the connection established: the kernel sends the DREQ.
TEST_F(TeardownTest, DestroyingTheChannelDisconnectsAnEstablishedId) {
  rdma_cm_id* listener = Listen(18519, nullptr);
  rdma_cm_id* id = nullptr;
  uscm_cm_id* peer = nullptr;
  ASSERT_NO_FATAL_FAILURE(AcceptPeer(18519, 0x8b, nullptr, [] {}, &id, &peer));
  DestroyQp();
  rdma_destroy_event_channel(ch_);
  ch_ = NewEventChannel();

  uscm_cm_event* pe = PeerNext(USCM_CM_EVENT_DISCONNECTED);
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->status, 0);
  uscm_ack_cm_event(pe);
  EXPECT_EQ(uscm_disconnect(peer), 0) << uscm_last_error();  // the DREP
  EXPECT_EQ(CallsAfterDestroy(), 0);
  EXPECT_EQ(rdma_destroy_id(listener), -1) << "the listener went with the channel";
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace uscm::librdmacm
