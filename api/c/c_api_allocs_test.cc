// The C API's events cost no heap allocation once a channel is warm: an acked
// event's wrapper is handed out again (api/c/uscm_cma.cc ChannelImpl), as the
// C++ channel recycles its events. Counted by a replacement operator new in
// alloc_counter, inside uscm_get_cm_event and uscm_ack_cm_event only.
#include "api/c/c_api_testing.h"
#include "api/c/uscm_cma.h"
#include "api/rdma_cm/alloc_counter.h"
#include "gtest/gtest.h"

namespace uscm {
namespace {

class CApiAllocsTest : public testing::CApiOneChannelTest {
 protected:
  // Takes and acks the next event on ch_, counting what the two calls allocate.
  void TakeAndAck(uscm_cm_event_type want) {
    ASSERT_TRUE(RunUntilEvent(ch_, 5000)) << "no " << uscm_event_str(want);
    uscm_cm_event* e = nullptr;
    const int got = testing::Counted([&] { return uscm_get_cm_event(ch_, &e); });
    ASSERT_EQ(got, 0) << uscm_last_error();
    EXPECT_EQ(e->event, want) << uscm_event_str(e->event);
    const int acked = testing::Counted([&] { return uscm_ack_cm_event(e); });
    ASSERT_EQ(acked, 0) << uscm_last_error();
  }
};

// Address and route resolution of one id, ten times over: after the first
// round no event allocates (before: one wrapper per event).
TEST_F(CApiAllocsTest, EventsOfAWarmChannelAllocateNothing) {
  unsigned long long first_round = 0;
  for (int round = 0; round < 10; ++round) {
    uscm_cm_id* id = nullptr;
    ASSERT_EQ(uscm_create_id(ch_, &id, nullptr, USCM_PS_TCP), 0) << uscm_last_error();
    const unsigned long long before = testing::Allocations();
    ASSERT_EQ(uscm_resolve_addr(id, nullptr, &server_, 2000), 0) << uscm_last_error();
    TakeAndAck(USCM_CM_EVENT_ADDR_RESOLVED);
    ASSERT_EQ(uscm_resolve_route(id, 2000), 0) << uscm_last_error();
    TakeAndAck(USCM_CM_EVENT_ROUTE_RESOLVED);
    if (round == 0) {
      first_round = testing::Allocations() - before;
    } else {
      EXPECT_EQ(testing::Allocations() - before, 0u) << "round " << round;
    }
    ASSERT_EQ(uscm_destroy_id(id), 0) << uscm_last_error();
  }
  EXPECT_GE(first_round, 1u) << "the first event makes the wrapper";
}

}  // namespace
}  // namespace uscm
