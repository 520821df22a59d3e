// rdma_join_multicast on a RoCE port through the drop-in (roce_port_testing.h:
// one simulated RoCE port, 192.168.78.1): the join completes without an SA,
// as the kernel's cma_iboe_join_multicast, and its MULTICAST_JOIN carries the
// id's Q_Key. The kernel (since "RDMA/cma: Allow UD qp_type to join multicast
// only", 6.2, in Debian 12's 6.1 stable series) gives an id without one its
// default (cma_set_default_qkey: RDMA_UDP_QKEY for RDMA_PS_UDP and
// RDMA_PS_IB) at the join, and cma_make_mc_event's param.ud.qkey is the id's.
// rdma_leave_multicast waits for the join's events to be acked, as
// librdmacm's.
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/roce_port_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

class RoceMulticastTest : public RocePortTest {
 protected:
  static void SetUpTestSuite() { OpenPort(31); }

  // An id of `ps` and `qp_type` (0: rdma_create_id's) bound to the port's
  // IPv4 address; an RDMA_PS_IB one is made UD before its bind as a program
  // makes it.
  rdma_cm_id* BoundId(rdma_port_space ps, ibv_qp_type qp_type = ibv_qp_type{}) {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, ps), 0) << strerror(errno);
    if (id == nullptr) return nullptr;
    if (qp_type != ibv_qp_type{}) id->qp_type = qp_type;
    sockaddr_in here = Ipv4("192.168.78.1", 0);
    EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&here)), 0) << strerror(errno);
    return id;
  }

  // `id` joins 239.1.2.3: its MULTICAST_JOIN (pumped from the port), which
  // the caller acks.
  rdma_cm_event* Join(rdma_cm_id* id, void* context) {
    sockaddr_in group = Ipv4("239.1.2.3", 0);
    EXPECT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&group), context), 0)
        << strerror(errno);
    if (QueuedEvents(ch_) == 0) PumpEvents();
    return Take(ch_, RDMA_CM_EVENT_MULTICAST_JOIN);
  }

  void Leave(rdma_cm_id* id) {
    sockaddr_in group = Ipv4("239.1.2.3", 0);
    EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&group)), 0) << strerror(errno);
  }
};

TEST_F(RoceMulticastTest, AUdIbIdsJoinCarriesRdmaUdpQkeyAsAUdpIds) {
  rdma_cm_id* udp = BoundId(RDMA_PS_UDP);
  rdma_cm_id* ib = BoundId(RDMA_PS_IB, IBV_QPT_UD);
  ASSERT_NE(udp, nullptr);
  ASSERT_NE(ib, nullptr);
  int udp_ctx = 0, ib_ctx = 0;
  rdma_cm_event* u = Join(udp, &udp_ctx);
  ASSERT_NE(u, nullptr);
  const rdma_ud_param from_udp = u->param.ud;
  EXPECT_EQ(from_udp.qkey, RDMA_UDP_QKEY);
  EXPECT_EQ(rdma_ack_cm_event(u), 0);

  rdma_cm_event* e = Join(ib, &ib_ctx);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, ib);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(e->param.ud.private_data, &ib_ctx);
  EXPECT_EQ(e->param.ud.qp_num, 0xFFFFFFu);
  EXPECT_EQ(e->param.ud.qkey, RDMA_UDP_QKEY) << "0x" << std::hex << e->param.ud.qkey;
  // The group's address vector does not depend on the port space
  // (cma_iboe_set_mgid, ib_init_ah_from_mcmember): the same as the UDP id's.
  const ibv_ah_attr& a = e->param.ud.ah_attr;
  EXPECT_EQ(a.is_global, 1);
  EXPECT_EQ(GidText(a.grh.dgid.raw), "::ffff:239.1.2.3");
  EXPECT_EQ(memcmp(&a, &from_udp.ah_attr, sizeof(a)), 0);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);

  // rdma_init_qp_attr of the id gives the QP the same Q_Key.
  ibv_qp_attr qa = {};
  int mask = 0;
  qa.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(rdma_init_qp_attr(ib, &qa, &mask), 0) << strerror(errno);
  EXPECT_TRUE(mask & IBV_QP_QKEY);
  EXPECT_EQ(qa.qkey, RDMA_UDP_QKEY);

  Leave(udp);
  Leave(ib);
  EXPECT_EQ(rdma_destroy_id(udp), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(ib), 0) << strerror(errno);
}

// The drop-in reads qp_type at the join too, as at rdma_connect, rdma_listen
// and rdma_create_qp: an RDMA_PS_IB id made UD after its bind joins as UD.
TEST_F(RoceMulticastTest, AnIbIdMadeUdAfterItsBindJoins) {
  rdma_cm_id* id = BoundId(RDMA_PS_IB);
  ASSERT_NE(id, nullptr);
  id->qp_type = IBV_QPT_UD;
  rdma_cm_event* e = Join(id, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->param.ud.qkey, RDMA_UDP_QKEY);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  Leave(id);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

// An RC RDMA_PS_IB id joins nothing, as the kernel's rdma_join_multicast
// (qp_type not UD: EINVAL).
TEST_F(RoceMulticastTest, AnRcIbIdJoinsNothing) {
  rdma_cm_id* id = BoundId(RDMA_PS_IB);
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->qp_type, IBV_QPT_RC);
  sockaddr_in group = Ipv4("239.1.2.3", 0);
  errno = 0;
  EXPECT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&group), nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

// rdma_init_qp_attr's INIT of an RDMA_PS_IPOIB id: the kernel's
// cma_set_default_qkey asks the IPoIB broadcast group's record, which a RoCE
// port has not (ib_sa_get_mcmember_rec: ENODEV); uscm refuses it the same
// way rather than answer an INIT without the Q_Key a UD QP needs.
TEST_F(RoceMulticastTest, InitQpAttrOfAnIpoibIdIsEnodevAsTheKernel) {
  rdma_cm_id* id = BoundId(RDMA_PS_IPOIB);
  ASSERT_NE(id, nullptr);
  ibv_qp_attr qa = {};
  int mask = 0;
  qa.qp_state = IBV_QPS_INIT;
  errno = 0;
  EXPECT_EQ(rdma_init_qp_attr(id, &qa, &mask), -1);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

// rdma_leave_multicast waits as librdmacm's (events_completed <
// events_reported): a join's event the program took returns the leave only
// once acked, so the program may free the join's context after the call.
// The leave runs on another thread; the library's hook says when it waits.
struct LeaveWatch {
  std::mutex mu;
  std::condition_variable changed;
  bool waiting = false;
  bool left = false;
};

void OnLeaveWait(void* arg) {
  auto* w = static_cast<LeaveWatch*>(arg);
  std::lock_guard<std::mutex> lock(w->mu);
  w->waiting = true;
  w->changed.notify_all();
}

TEST_F(RoceMulticastTest, LeaveReturnsOnceTheJoinsEventIsAcked) {
  rdma_cm_id* id = BoundId(RDMA_PS_UDP);
  ASSERT_NE(id, nullptr);
  int ctx = 0;
  rdma_cm_event* e = Join(id, &ctx);
  ASSERT_NE(e, nullptr);
  LeaveWatch w;
  SetLeaveWaitHookForTesting(OnLeaveWait, &w);
  std::thread leave([&] {
    Leave(id);
    std::lock_guard<std::mutex> lock(w.mu);
    w.left = true;
    w.changed.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(w.mu);
    w.changed.wait(lock, [&] { return w.waiting || w.left; });
    EXPECT_FALSE(w.left) << "rdma_leave_multicast returned with the join's event not acked";
  }
  EXPECT_EQ(e->param.ud.private_data, &ctx);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  leave.join();
  EXPECT_TRUE(w.left);
  SetLeaveWaitHookForTesting(nullptr, nullptr);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

// A join's event not yet taken goes with the leave (the kernel's
// ucma_cleanup_mc_events; librdmacm then waits for none), and the leave
// does not wait for another join's event, even one of the same context.
TEST_F(RoceMulticastTest, LeaveDropsTheJoinsEventsNotTakenAndNoOther) {
  rdma_cm_id* id = BoundId(RDMA_PS_UDP);
  ASSERT_NE(id, nullptr);
  int ctx = 0;
  rdma_cm_event* first = Join(id, &ctx);  // 239.1.2.3, taken, not acked
  ASSERT_NE(first, nullptr);
  sockaddr_in other = Ipv4("239.1.2.4", 0);
  ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&other), &ctx), 0)
      << strerror(errno);
  if (QueuedEvents(ch_) == 0) PumpEvents();
  ASSERT_EQ(QueuedEvents(ch_), 1);
  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&other)), 0) << strerror(errno);
  EXPECT_EQ(QueuedEvents(ch_), 0) << "the left join's MULTICAST_JOIN is still queued";
  EXPECT_EQ(rdma_ack_cm_event(first), 0);
  Leave(id);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

// A synchronous id keeps its join's event in id->event, unacked: librdmacm's
// leave would wait for it forever; the drop-in's acks it (as rdma_destroy_id
// does) and returns.
TEST_F(RoceMulticastTest, ASynchronousIdsLeaveReturns) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_UDP), 0) << strerror(errno);
  sockaddr_in here = Ipv4("192.168.78.1", 0);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&here)), 0) << strerror(errno);
  int ctx = 0;
  sockaddr_in group = Ipv4("239.1.2.3", 0);
  ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&group), &ctx), 0)
      << strerror(errno);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_MULTICAST_JOIN);
  EXPECT_EQ(id->event->param.ud.private_data, &ctx);
  Leave(id);
  EXPECT_EQ(id->event, nullptr);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

// rdma_join_multicast_ex without an address is refused as librdmacm's
// (EINVAL; ENOTSUP for a reserved mask bit first), no crash.
TEST_F(RoceMulticastTest, AJoinExWithoutAnAddressIsRefused) {
  rdma_cm_id* id = BoundId(RDMA_PS_UDP);
  ASSERT_NE(id, nullptr);
  rdma_cm_join_mc_attr_ex attr = {};
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  attr.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(id, &attr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  attr.comp_mask |= RDMA_CM_JOIN_MC_ATTR_RESERVED;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(id, &attr, nullptr), -1);
  EXPECT_EQ(errno, ENOTSUP);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

// rdma_destroy_id of an id with a join it never left, its event acked:
// returns (the join goes with the id).
TEST_F(RoceMulticastTest, DestroyingAnIdWithAJoinReturns) {
  rdma_cm_id* id = BoundId(RDMA_PS_UDP);
  ASSERT_NE(id, nullptr);
  rdma_cm_event* e = Join(id, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
}

}  // namespace
}  // namespace uscm::librdmacm
