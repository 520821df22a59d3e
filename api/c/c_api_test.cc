// The C API (api/c/uscm_cma.h) end to end on the simulated two-host fabric
// (api/rdma_cm/rdma_cm_testing.h): uscm_reject_ece, uscm_notify, uscm_join_multicast_ex
// / uscm_leave_multicast, uscm_get_src_port / uscm_get_dst_port and the
// IB_PATH option, each checked on both sides (events, statuses, private
// data, what the peer and the SA hold) and for its misuse errors. Every test
// ends with every table empty.
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <cstdint>
#include <memory>
#include <string>

#include "api/c/c_api_testing.h"
#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"
#include "mad/time.h"
#include "mad/wire/path_record.h"

namespace uscm {
namespace {

class CApiTest : public testing::CApiSimTest {
 protected:
  void SetUp() override {
    StartFabric(/*seed=*/23);
    ch_[0] = uscm_create_event_channel_on(dev_[0]);
    ch_[1] = uscm_create_event_channel_on(dev_[1]);
    ASSERT_NE(ch_[0], nullptr);
    ASSERT_NE(ch_[1], nullptr);
  }
  void TearDown() override {
    uscm_destroy_event_channel(ch_[0]);
    uscm_destroy_event_channel(ch_[1]);
    CApiSimTest::TearDown();
  }

  // The next event on host h's channel (must be `want`); the caller acks.
  uscm_cm_event* Next(int h, uscm_cm_event_type want) { return NextOn(ch_[h], want); }
  void Ack(int h, uscm_cm_event_type want) { AckOn(ch_[h], want); }
  // No further event on either side within `ms` of virtual time.
  void ExpectQuiet(int ms = 200) {
    EXPECT_FALSE(RunUntilEvent(ch_[0], ms)) << "unexpected event on host 0";
    EXPECT_FALSE(RunUntilEvent(ch_[1], ms)) << "unexpected event on host 1";
  }

  uscm_cm_id* Listen(int backlog = 4) {
    uscm_cm_id* l = nullptr;
    EXPECT_EQ(uscm_create_id(ch_[1], &l, nullptr, USCM_PS_TCP), 0);
    EXPECT_EQ(uscm_bind_addr(l, &server_), 0) << uscm_last_error();
    EXPECT_EQ(uscm_listen(l, backlog), 0) << uscm_last_error();
    return l;
  }
  // A TCP id on host 0 with ADDR_RESOLVED and ROUTE_RESOLVED acked.
  uscm_cm_id* Resolved() {
    uscm_cm_id* id = nullptr;
    EXPECT_EQ(uscm_create_id(ch_[0], &id, nullptr, USCM_PS_TCP), 0);
    EXPECT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
    Ack(0, USCM_CM_EVENT_ADDR_RESOLVED);
    EXPECT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
    Ack(0, USCM_CM_EVENT_ROUTE_RESOLVED);
    return id;
  }

  void ExpectAllEmpty() {
    ExpectNoCmState();
    EXPECT_EQ(fabric_->sa().groups(), 0u);
  }

  uscm_event_channel* ch_[2] = {nullptr, nullptr};
};

// rdma_reject_ece: REJECTED with status 35 (vendor option not supported) and
// the REJ private data on the active side; the passive side read the REQ's
// ECE first. Misuse: NULL data with a length, too much data, wrong state.
TEST_F(CApiTest, RejectEceIsRejected35WithPrivateData) {
  uscm_cm_id* l = Listen();
  uscm_cm_id* id = Resolved();
  const uscm_ece mine{0x2c9, 0x1f};
  ASSERT_EQ(uscm_set_local_ece(id, &mine), 0) << uscm_last_error();
  ExpectError(uscm_reject_ece(id, nullptr, 0), EINVAL, "reject_ece: id is in state ROUTE_RESOLVED");
  uscm_conn_param cp{};
  cp.qp_num = 0x101;
  ASSERT_EQ(uscm_connect(id, &cp), 0) << uscm_last_error();
  uscm_cm_event* req = Next(1, USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  uscm_cm_id* child = req->id;
  EXPECT_EQ(req->listen_id, l);
  ASSERT_EQ(uscm_ack_cm_event(req), 0);
  uscm_ece theirs{};
  ASSERT_EQ(uscm_get_remote_ece(child, &theirs), 0) << uscm_last_error();
  EXPECT_EQ(theirs.vendor_id, 0x2c9u);
  EXPECT_EQ(theirs.options, 0x1fu);

  static const uint8_t too_much[149] = {0};
  ExpectError(uscm_reject_ece(child, nullptr, 3), EINVAL,
              "reject_ece: private_data is NULL but private_data_len is 3");
  ExpectError(uscm_reject_ece(child, too_much, 149), EINVAL,
              "reject_ece: private data is 149 bytes; REJ carries at most 148");
  const uint8_t data[5] = {0xEC, 0xE0, 1, 2, 3};
  ASSERT_EQ(uscm_reject_ece(child, data, sizeof data), 0) << uscm_last_error();
  uscm_cm_event* rej = Next(0, USCM_CM_EVENT_REJECTED);
  ASSERT_NE(rej, nullptr);
  EXPECT_EQ(rej->id, id);
  EXPECT_EQ(rej->status, 35);
  ASSERT_GE(rej->param.conn.private_data_len, sizeof data);
  EXPECT_EQ(memcmp(rej->param.conn.private_data, data, sizeof data), 0);
  ASSERT_EQ(uscm_ack_cm_event(rej), 0);
  ExpectQuiet();
  ExpectError(uscm_reject_ece(child, data, 1), EINVAL, "reject_ece: id is in state");
  ASSERT_EQ(uscm_destroy_id(child), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(l), 0) << uscm_last_error();
  ExpectAllEmpty();
}

// An event after an acked one holds only its own fields (the acked wrapper
// is handed out again: c_api_allocs_test), and a second ack of the old
// pointer is refused.
TEST_F(CApiTest, AnAckedEventIsHandedOutAgainWithItsOwnFields) {
  uscm_cm_id* l = Listen();
  uscm_cm_id* id = Resolved();
  const uint8_t data[7] = {1, 2, 3, 4, 5, 6, 7};
  uscm_conn_param cp{};
  cp.qp_num = 0x101;
  cp.private_data = data;
  cp.private_data_len = sizeof data;
  ASSERT_EQ(uscm_connect(id, &cp), 0) << uscm_last_error();
  uscm_cm_event* req = Next(1, USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  uscm_cm_id* child = req->id;
  EXPECT_EQ(req->listen_id, l);
  ASSERT_GE(req->param.conn.private_data_len, sizeof data);
  EXPECT_EQ(memcmp(req->param.conn.private_data, data, sizeof data), 0);
  ASSERT_EQ(uscm_ack_cm_event(req), 0);
  const int rc = uscm_ack_cm_event(req);
  EXPECT_EQ(rc, -1) << "a second ack of one event";

  uscm_conn_param accept{};
  accept.qp_num = 0x202;
  ASSERT_EQ(uscm_accept(child, &accept), 0) << uscm_last_error();
  Ack(0, USCM_CM_EVENT_CONNECT_RESPONSE);  // external QP: the RTU waits for establish
  ASSERT_EQ(uscm_establish(id), 0) << uscm_last_error();
  uscm_cm_event* est = Next(1, USCM_CM_EVENT_ESTABLISHED);
  ASSERT_NE(est, nullptr);
  EXPECT_EQ(est->id, child);
  EXPECT_EQ(est->listen_id, nullptr);
  EXPECT_EQ(est->status, 0);
  EXPECT_EQ(est->param.conn.private_data_len, 0);
  ASSERT_EQ(uscm_ack_cm_event(est), 0);

  ASSERT_EQ(uscm_disconnect(id), 0) << uscm_last_error();
  Ack(0, USCM_CM_EVENT_DISCONNECTED);
  Ack(1, USCM_CM_EVENT_DISCONNECTED);
  ASSERT_EQ(uscm_destroy_id(child), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  ASSERT_EQ(uscm_destroy_id(l), 0) << uscm_last_error();
  ExpectAllEmpty();
}

// rdma_notify (IBV_EVENT_COMM_EST on the passive QP): the passive id becomes
// ESTABLISHED before the RTU; the RTU that follows gives no second event.
// Also the ports: the active id's dst port is the listener's, its src port
// the passive id's dst port; NULL / foreign ids give 0 and EINVAL.
TEST_F(CApiTest, NotifyEstablishesBeforeTheRtuAndPortsMatchBothWays) {
  uscm_cm_id* l = Listen();
  EXPECT_EQ(uscm_get_src_port(l), 7471);
  EXPECT_EQ(uscm_get_dst_port(l), 0);
  uscm_cm_id* id = Resolved();
  uscm_conn_param cp{};
  cp.qp_num = 0x102;
  ASSERT_EQ(uscm_connect(id, &cp), 0) << uscm_last_error();
  uscm_cm_event* req = Next(1, USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  uscm_cm_id* child = req->id;
  ASSERT_EQ(uscm_ack_cm_event(req), 0);
  ExpectError(uscm_notify(child), EINVAL, "notify: id is in state CONNECT_REQUEST; expected ACCEPTED");
  ExpectError(uscm_notify(nullptr), EINVAL, "notify: id is NULL");
  cp.qp_num = 0x202;
  ASSERT_EQ(uscm_accept(child, &cp), 0) << uscm_last_error();
  Ack(0, USCM_CM_EVENT_CONNECT_RESPONSE);  // external QP: the RTU waits for establish
  ASSERT_EQ(uscm_notify(child), 0) << uscm_last_error();
  Ack(1, USCM_CM_EVENT_ESTABLISHED);
  // The kernel's cm_establish.
  ExpectError(uscm_notify(child), EISCONN, "notify: the connection is established already");
  const uint64_t rtu_dups = Dev(1).node().cm().counters().duplicates[4];
  ASSERT_EQ(uscm_establish(id), 0) << uscm_last_error();  // sends the RTU
  ExpectQuiet();  // no second ESTABLISHED on the passive side
  EXPECT_EQ(Dev(1).node().cm().counters().duplicates[4], rtu_dups + 1)
      << "the RTU arrived after COMM_EST: a counted duplicate";

  const uint16_t active_src = uscm_get_src_port(id);
  EXPECT_NE(active_src, 0);
  EXPECT_EQ(uscm_get_dst_port(id), 7471);
  EXPECT_EQ(uscm_get_src_port(child), 7471);
  EXPECT_EQ(uscm_get_dst_port(child), active_src);
  uscm_addr name{};
  ASSERT_EQ(uscm_getname(id, &name), 0);
  EXPECT_EQ(name.port, active_src);
  errno = 0;
  EXPECT_EQ(uscm_get_src_port(nullptr), 0);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(uscm_last_error(), "get_src_port: id is NULL");
  uscm_cm_id bogus{};
  bogus.impl = &bogus;
  errno = 0;
  EXPECT_EQ(uscm_get_dst_port(&bogus), 0);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(std::string(uscm_last_error()).rfind("get_dst_port: unknown id", 0), 0u);

  ASSERT_EQ(uscm_disconnect(child), 0) << uscm_last_error();
  Ack(0, USCM_CM_EVENT_DISCONNECTED);
  ASSERT_EQ(uscm_disconnect(id), 0) << uscm_last_error();
  Ack(1, USCM_CM_EVENT_DISCONNECTED);
  ASSERT_EQ(uscm_destroy_id(child), 0);
  ASSERT_EQ(uscm_destroy_id(id), 0);
  ASSERT_EQ(uscm_destroy_id(l), 0);
  ExpectAllEmpty();
}

// rdma_join_multicast_ex: a full member (host 0) and a send-only full member
// (host 1) of one group; each gets MULTICAST_JOIN with its own context, the
// group's MGID / MLID, the multicast QPN; the SA holds both members; leave
// removes them and the group. Misuse: reserved comp_mask bits (ENOTSUP), no
// address, no / bad join flags (EINVAL), an RC id, leaving twice.
TEST_F(CApiTest, JoinMulticastExFullAndSendOnlyThenLeave) {
  uscm_cm_id* ud[2] = {nullptr, nullptr};
  uscm_addr peer[2];
  ASSERT_EQ(uscm_parse_addr("10.0.0.2", &peer[0]), 0);
  ASSERT_EQ(uscm_parse_addr("10.0.0.1", &peer[1]), 0);
  for (int h = 0; h < 2; ++h) {
    ASSERT_EQ(uscm_create_id(ch_[h], &ud[h], nullptr, USCM_PS_UDP), 0);
    ASSERT_EQ(uscm_resolve_addr(ud[h], nullptr, &peer[h], 2000), 0) << uscm_last_error();
    Ack(h, USCM_CM_EVENT_ADDR_RESOLVED);
  }
  uscm_addr group{};
  ASSERT_EQ(uscm_parse_addr("239.7.7.7", &group), 0);
  uscm_cm_join_mc_attr_ex attr{};
  attr.addr = &group;
  // Misuse first: nothing is sent to the SA.
  const uint64_t sa_requests = fabric_->sa().counters().requests;
  attr.comp_mask = USCM_CM_JOIN_MC_ATTR_ADDRESS | USCM_CM_JOIN_MC_ATTR_JOIN_FLAGS |
                   USCM_CM_JOIN_MC_ATTR_RESERVED;
  ExpectError(uscm_join_multicast_ex(ud[0], &attr, nullptr), ENOTSUP,
              "join_multicast_ex: comp_mask 0x7 has bits beyond");
  attr.comp_mask = USCM_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  ExpectError(uscm_join_multicast_ex(ud[0], &attr, nullptr), EINVAL,
              "join_multicast_ex: no address");
  attr.comp_mask = USCM_CM_JOIN_MC_ATTR_ADDRESS;
  ExpectError(uscm_join_multicast_ex(ud[0], &attr, nullptr), EINVAL,
              "join_multicast_ex: join_flags 0 not given");
  attr.comp_mask = USCM_CM_JOIN_MC_ATTR_ADDRESS | USCM_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  attr.join_flags = USCM_MC_JOIN_FLAG_RESERVED;
  ExpectError(uscm_join_multicast_ex(ud[0], &attr, nullptr), EINVAL,
              "join_multicast_ex: join_flags 2 not given or not FULLMEMBER");
  ExpectError(uscm_join_multicast_ex(ud[0], nullptr, nullptr), EINVAL,
              "join_multicast_ex: attr is NULL");
  uscm_cm_id* rc = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &rc, nullptr, USCM_PS_TCP), 0);
  attr.join_flags = USCM_MC_JOIN_FLAG_FULLMEMBER;
  ExpectError(uscm_join_multicast_ex(rc, &attr, nullptr), EINVAL,
              "join_multicast: only UD ids (RDMA_PS_UDP, RDMA_PS_IPOIB, a UD RDMA_PS_IB id) "
              "join groups");
  ASSERT_EQ(uscm_destroy_id(rc), 0);
  ExpectQuiet();
  EXPECT_EQ(fabric_->sa().counters().requests, sa_requests);

  int ctx[2] = {0, 0};
  uint8_t mgid[2][16];
  for (int h = 0; h < 2; ++h) {
    attr.join_flags = h == 0 ? USCM_MC_JOIN_FLAG_FULLMEMBER : USCM_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
    ASSERT_EQ(uscm_join_multicast_ex(ud[h], &attr, &ctx[h]), 0) << uscm_last_error();
    uscm_cm_event* j = Next(h, USCM_CM_EVENT_MULTICAST_JOIN);
    ASSERT_NE(j, nullptr);
    EXPECT_EQ(j->id, ud[h]);
    EXPECT_EQ(j->status, 0);
    EXPECT_EQ(j->param.ud.private_data, &ctx[h]) << "the join's context, as librdmacm";
    EXPECT_EQ(j->param.ud.qp_num, 0xFFFFFFu);
    EXPECT_GE(j->param.ud.ah_attr.dlid, 0xC000);
    EXPECT_EQ(j->param.ud.ah_attr.dgid[0], 0xFF);
    memcpy(mgid[h], j->param.ud.ah_attr.dgid, 16);
    ASSERT_EQ(uscm_ack_cm_event(j), 0);
  }
  EXPECT_EQ(memcmp(mgid[0], mgid[1], 16), 0) << "one group";
  mad::Gid g;
  memcpy(g.raw.data(), mgid[0], 16);
  EXPECT_EQ(fabric_->sa().groups(), 1u);
  EXPECT_EQ(fabric_->sa().members(g), 2u) << "the SA holds the full and the send-only member";
  ExpectError(uscm_join_multicast_ex(ud[0], &attr, nullptr), EADDRINUSE,
              "join_multicast: already joined to");

  for (int h = 0; h < 2; ++h) {
    ASSERT_EQ(uscm_leave_multicast(ud[h], &group), 0) << uscm_last_error();
    ExpectError(uscm_leave_multicast(ud[h], &group), EADDRNOTAVAIL, "leave_multicast: ");
    fabric_->RunFor(mad::Duration::Seconds(5));
    EXPECT_EQ(fabric_->sa().members(g), h == 0 ? 1u : 0u);
  }
  ExpectError(uscm_leave_multicast(ud[0], nullptr), EINVAL, "leave_multicast: address is NULL");
  ExpectQuiet();
  for (uscm_cm_id* id : ud) ASSERT_EQ(uscm_destroy_id(id), 0);
  ExpectAllEmpty();
}

// RDMA_OPTION_IB_PATH: the route comes from the option (no SA query) and the
// connection uses it; bad lengths and a missing primary entry are refused.
TEST_F(CApiTest, IbPathOptionReplacesTheSaQuery) {
  uscm_cm_id* l = Listen();
  uscm_cm_id* id = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &id, nullptr, USCM_PS_TCP), 0);
  ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0);
  Ack(0, USCM_CM_EVENT_ADDR_RESOLVED);

  mad::wire::PathRecord r;
  r.sgid = Dev(0).port().gid;
  r.dgid = Dev(1).port().gid;
  r.slid = Dev(0).port().lid;
  r.dlid = Dev(1).port().lid;
  r.pkey = 0xFFFF;
  r.sl = 5;
  r.reversible = true;
  r.mtu = mad::wire::Mtu::k2048;
  r.rate = 3;
  r.packet_life_time = 12;
  uscm_path_data pd[2] = {};
  pd[0].flags = USCM_PATH_FLAG_GMP | USCM_PATH_FLAG_ALTERNATE | USCM_PATH_FLAG_BIDIRECTIONAL;
  pd[1].flags = USCM_PATH_FLAG_GMP | USCM_PATH_FLAG_PRIMARY | USCM_PATH_FLAG_BIDIRECTIONAL;
  ASSERT_TRUE(r.Emit(pd[1].path_rec).ok());
  ExpectError(uscm_set_option(id, USCM_OPTION_IB, USCM_OPTION_IB_PATH, pd, 10), EINVAL,
              "set_option(IB_PATH): optlen 10 is not a non-zero multiple of sizeof(struct "
              "uscm_path_data) = 72");
  ExpectError(uscm_set_option(id, USCM_OPTION_IB, USCM_OPTION_IB_PATH, pd, sizeof pd[0]), EINVAL,
              "set_option(IB_PATH): no entry has flags GMP | PRIMARY | BIDIRECTIONAL");
  // As the kernel: not before resolve_addr; an unknown option or level is ENOSYS.
  uscm_cm_id* idle = nullptr;
  ASSERT_EQ(uscm_create_id(ch_[0], &idle, nullptr, USCM_PS_TCP), 0);
  ExpectError(uscm_set_option(idle, USCM_OPTION_IB, USCM_OPTION_IB_PATH, pd, sizeof pd), EINVAL,
              "set_option(IB_PATH): id is in state IDLE; expected ADDR_RESOLVED");
  int one = 1;
  ExpectError(uscm_set_option(idle, USCM_OPTION_ID, 99, &one, sizeof one), ENOSYS,
              "set_option: unknown option (level 0, option 99)");
  ExpectError(uscm_set_option(idle, 99, USCM_OPTION_ID_TOS, &one, 1), ENOSYS,
              "set_option: unknown option (level 99, option 0)");
  ASSERT_EQ(uscm_destroy_id(idle), 0);
  ASSERT_EQ(uscm_set_option(id, USCM_OPTION_IB, USCM_OPTION_IB_PATH, pd, sizeof pd), 0)
      << uscm_last_error();
  const uint64_t sa_requests = fabric_->sa().counters().requests;
  ASSERT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
  Ack(0, USCM_CM_EVENT_ROUTE_RESOLVED);
  EXPECT_EQ(fabric_->sa().counters().requests, sa_requests) << "no PathRecord query";
  const CmId* impl = static_cast<const CmId*>(id->impl);
  ASSERT_TRUE(impl->route().has_value());
  EXPECT_EQ(impl->route()->sl, 5);
  EXPECT_EQ(impl->route()->packet_life_time, 12);

  uscm_conn_param cp{};
  cp.qp_num = 0x103;
  ASSERT_EQ(uscm_connect(id, &cp), 0) << uscm_last_error();
  uscm_cm_event* req = Next(1, USCM_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  uscm_cm_id* child = req->id;
  ASSERT_EQ(uscm_ack_cm_event(req), 0);
  uscm_qp_attr qa{};
  int mask = 0;
  qa.qp_state = USCM_QPS_RTR;
  ASSERT_EQ(uscm_init_qp_attr(child, &qa, &mask), 0) << uscm_last_error();
  EXPECT_EQ(qa.ah_attr.sl, 5) << "the passive side sees the SL of the path the option gave";
  // Too late while connecting.
  ExpectError(uscm_set_option(id, USCM_OPTION_IB, USCM_OPTION_IB_PATH, pd, sizeof pd), EINVAL,
              "set_option(IB_PATH): id is in state CONNECT");
  ASSERT_EQ(uscm_reject(child, nullptr, 0), 0);
  Ack(0, USCM_CM_EVENT_REJECTED);
  ASSERT_EQ(uscm_destroy_id(child), 0);
  ASSERT_EQ(uscm_destroy_id(id), 0);
  ASSERT_EQ(uscm_destroy_id(l), 0);
  ExpectAllEmpty();
}

}  // namespace
}  // namespace uscm
