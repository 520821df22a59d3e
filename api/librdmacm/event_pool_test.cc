// Events are recycled, not allocated per event: the device's progress thread
// queues them and the program's event thread acks them, so a free(3) per
// event took the progress thread's malloc arena lock from the other thread
// (the cmtime server's largest source of futex calls: docs/API.md "The
// server's futexes and the extra ioctls"). Counted with a replacement operator new
// (api/rdma_cm/alloc_counter.h): in the steady state no event allocates.
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <thread>

#include "api/librdmacm/event_channel.h"
#include "api/rdma_cm/alloc_counter.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

constexpr int kEvents = 1000;

// n events of `type`, statuses 0..n-1, each carrying the 4 bytes of `data`
// when given; then taken and acked in order, checked.
void QueueAll(rdma_event_channel* channel, rdma_cm_event_type type, int n, const char* data) {
  rdma_cm_event ev = {};
  ev.event = type;
  for (int i = 0; i < n; ++i) {
    ev.status = i;
    ASSERT_EQ(QueueEvent(channel, ev, data, data != nullptr ? 4 : 0), 0);
  }
}
void AckAll(rdma_event_channel* channel, rdma_cm_event_type type, int n, const char* data) {
  for (int i = 0; i < n; ++i) {
    rdma_cm_event* got = nullptr;
    ASSERT_EQ(rdma_get_cm_event(channel, &got), 0);
    ASSERT_EQ(got->status, i);
    ASSERT_EQ(got->event, type);
    ASSERT_EQ(got->param.conn.private_data_len, data != nullptr ? 4 : 0);
    if (data != nullptr) {
      ASSERT_EQ(memcmp(got->param.conn.private_data, data, 4), 0);
    }
    ASSERT_EQ(rdma_ack_cm_event(got), 0);
  }
}

// First in this file: the pool is the process's, and empty only until a
// test has queued an event. A new process's first burst (cmtime's 1,000
// ADDR_RESOLVED, queued faster than its event thread acks them) takes an
// allocation per 64 events, not one per event.
TEST(EventPoolTest, AFirstBurstIsMadeInChunks) {
  rdma_event_channel* channel = NewEventChannel();
  ASSERT_NE(channel, nullptr) << strerror(errno);
  const unsigned long long before = uscm::testing::Allocations();
  uscm::testing::Counted(
      [&] { QueueAll(channel, RDMA_CM_EVENT_ADDR_RESOLVED, kEvents, nullptr); });
  // 16 chunks and the channel's deque blocks (one per 64 entries): ~32.
  EXPECT_LT(uscm::testing::Allocations() - before, kEvents / 20) << "one allocation per event before";
  AckAll(channel, RDMA_CM_EVENT_ADDR_RESOLVED, kEvents, nullptr);
  rdma_destroy_event_channel(channel);
}

// More events at once than the chunks hold: the others are allocated one by
// one, and on ack freed or kept, while the chunks' own are always kept (a
// delete of one would be a free of the middle of a chunk: ASan's
// bad-free under --config=asan).
TEST(EventPoolTest, EventsBeyondTheChunksAreAllocatedAndFreed) {
  rdma_event_channel* channel = NewEventChannel();
  ASSERT_NE(channel, nullptr) << strerror(errno);
  for (int round = 0; round < 2; ++round) {
    QueueAll(channel, RDMA_CM_EVENT_ESTABLISHED, 3 * kEvents, "data");
    AckAll(channel, RDMA_CM_EVENT_ESTABLISHED, 3 * kEvents, "data");
  }
  rdma_destroy_event_channel(channel);
}

TEST(EventPoolTest, AnAckedEventIsReusedNotFreed) {
  rdma_event_channel* channel = NewEventChannel();
  ASSERT_NE(channel, nullptr) << strerror(errno);
  rdma_cm_event ev = {};
  ev.event = RDMA_CM_EVENT_ESTABLISHED;
  auto round = [&] {
    for (int i = 0; i < kEvents; ++i) {
      ev.status = i;
      ASSERT_EQ(QueueEvent(channel, ev, "data", 4), 0);
      rdma_cm_event* got = nullptr;
      ASSERT_EQ(rdma_get_cm_event(channel, &got), 0);
      ASSERT_EQ(got->status, i);
      ASSERT_EQ(got->param.conn.private_data_len, 4);
      ASSERT_EQ(rdma_ack_cm_event(got), 0);
    }
  };
  round();  // warm: the pool holds an event
  const unsigned long long before = uscm::testing::Allocations();
  uscm::testing::Counted(round);
  // The channel's deque takes a block now and then (one per 64 entries); one
  // per event before.
  EXPECT_LT(uscm::testing::Allocations() - before, kEvents / 10);
  rdma_destroy_event_channel(channel);
}

TEST(EventPoolTest, EventsQueuedInOneThreadAndAckedInAnotherAreReused) {
  rdma_event_channel* channel = NewEventChannel();
  ASSERT_NE(channel, nullptr) << strerror(errno);
  auto queue_all = [&] {
    rdma_cm_event ev = {};
    ev.event = RDMA_CM_EVENT_CONNECT_REQUEST;
    for (int i = 0; i < kEvents; ++i) {
      ev.status = i;
      ASSERT_EQ(QueueEvent(channel, ev, nullptr, 0), 0);
    }
  };
  auto ack_all_in_another_thread = [&] {
    std::thread acker([&] {
      for (int i = 0; i < kEvents; ++i) {
        rdma_cm_event* got = nullptr;
        ASSERT_EQ(rdma_get_cm_event(channel, &got), 0);
        ASSERT_EQ(got->status, i);
        ASSERT_EQ(rdma_ack_cm_event(got), 0);
      }
    });
    acker.join();
  };
  queue_all();  // warm: kEvents made, then kept by the pool
  ack_all_in_another_thread();
  const unsigned long long before = uscm::testing::Allocations();
  uscm::testing::Counted(queue_all);
  EXPECT_LT(uscm::testing::Allocations() - before, kEvents / 10)
      << "one allocation per event before";
  ack_all_in_another_thread();
  rdma_destroy_event_channel(channel);
}

}  // namespace
}  // namespace uscm::librdmacm
