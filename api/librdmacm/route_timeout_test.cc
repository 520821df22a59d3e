// ROUTE_ERROR when the SA never answers, through the drop-in's own calls: the
// simulated two-host fabric (api/rdma_cm/rdma_cm_testing.h) with every MAD
// the hosts send dropped, so the PathRecord query goes unanswered. The kernel
// reports ROUTE_ERROR with status -ETIMEDOUT (sa_query.c send_handler gives
// -ETIMEDOUT for IB_WC_RESP_TIMEOUT_ERR; cma_query_handler passes it on) and
// puts the id back in ADDR_RESOLVED, when rdma_resolve_route's timeout_ms
// passes (cma_query_ib_route gives it to ib_sa_path_rec_get), not after the
// agent's own retries (15 s). af_ib_test has the SA's "no record".
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <memory>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

class RouteTimeoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::FaultInjectorOptions silent;
    silent.seed = 7;
    silent.send.drop = 1.0;  // nothing leaves either host: the SA hears no query
    auto f = testing::SimFabric::Create(29, &silent);
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
    dev_ = uscm_device_wrap(fabric_->host(0).device.get());
    ASSERT_EQ(UseDeviceForTesting(dev_), 0) << strerror(errno);
    ch_ = NewNonBlockingChannel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override {
    DestroyDrainedChannel(ch_);
    ResetBackendForTesting();
    uscm_device_unwrap_free(dev_);
  }

  // The next event, running virtual time (at most `limit`) until the
  // backend has one when none is queued.
  rdma_cm_event* Next(rdma_cm_event_type want, mad::Duration limit) {
    sim::Scheduler& s = fabric_->scheduler();
    auto run_until = [&](const auto& ready) { return s.RunUntil(ready, s.Now() + limit).ok(); };
    return NextPumpedEvent(ch_, BackendChannel(), run_until, want);
  }

  std::unique_ptr<testing::SimFabric> fabric_;
  uscm_device* dev_ = nullptr;
  rdma_event_channel* ch_ = nullptr;
};

TEST_F(RouteTimeoutTest, UnansweredPathQueryIsRouteErrorEtimedout) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
  sockaddr_in dst = Ipv4("10.0.0.2", 7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
      << strerror(errno);
  rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED, mad::Duration::Seconds(1)));
  // The id is back in ADDR_RESOLVED after each: a second call with another
  // timeout ends at its own. Virtual time, so the bounds are exact but for
  // the simulated steps (the node's 1 us timer tick).
  for (int timeout_ms : {2000, 500}) {
    const mad::TimePoint asked = fabric_->scheduler().Now();
    ASSERT_EQ(rdma_resolve_route(id, timeout_ms), 0) << timeout_ms << ": " << strerror(errno);
    rdma_cm_event* e = Next(RDMA_CM_EVENT_ROUTE_ERROR, mad::Duration::Seconds(120));
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->id, id);
    EXPECT_EQ(e->status, -ETIMEDOUT) << timeout_ms;
    EXPECT_EQ(id->route.num_paths, 0);
    rdma_ack_cm_event(e);
    const mad::Duration took = fabric_->scheduler().Now() - asked;
    EXPECT_GE(took, mad::Duration::Millis(timeout_ms));
    EXPECT_LT(took, mad::Duration::Millis(timeout_ms + 10));
    printf("timeout_ms %d: ROUTE_ERROR after %s of virtual time\n", timeout_ms,
           took.ToString().c_str());
  }
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

// Two ids to one destination: the second's PathRecord query is coalesced
// into the first's (one MAD), yet each ends at its own timeout_ms, as the
// kernel's two ib_sa_path_rec_get calls would (before: both at 500 ms).
TEST_F(RouteTimeoutTest, ACoalescedRouteQueryEndsAtItsOwnTimeout) {
  rdma_cm_id* ids[2] = {nullptr, nullptr};
  sockaddr_in dst = Ipv4("10.0.0.2", 7471);
  for (rdma_cm_id*& id : ids) {
    ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0)
        << strerror(errno);
    rdma_ack_cm_event(Next(RDMA_CM_EVENT_ADDR_RESOLVED, mad::Duration::Seconds(1)));
  }
  const mad::TimePoint asked = fabric_->scheduler().Now();
  ASSERT_EQ(rdma_resolve_route(ids[0], 500), 0) << strerror(errno);
  ASSERT_EQ(rdma_resolve_route(ids[1], 2000), 0) << strerror(errno);
  for (int i = 0; i < 2; ++i) {
    const int timeout_ms = i == 0 ? 500 : 2000;
    rdma_cm_event* e = Next(RDMA_CM_EVENT_ROUTE_ERROR, mad::Duration::Seconds(120));
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->id, ids[i]);
    EXPECT_EQ(e->status, -ETIMEDOUT);
    rdma_ack_cm_event(e);
    const mad::Duration took = fabric_->scheduler().Now() - asked;
    EXPECT_GE(took, mad::Duration::Millis(timeout_ms));
    EXPECT_LT(took, mad::Duration::Millis(timeout_ms + 10));
  }
  for (rdma_cm_id* id : ids) EXPECT_EQ(rdma_destroy_id(id), 0);
}

}  // namespace
}  // namespace uscm::librdmacm
