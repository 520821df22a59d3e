// The event channel's fd with no device: a channel of NewEventChannel
// (rdma_create_event_channel without its device check), events queued
// through QueueEvent (the CM side's entry point), read back in order through
// rdma_get_cm_event.
#include "api/librdmacm/event_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

bool Readable(int fd, int timeout_ms = 0) {
  pollfd p = {fd, POLLIN, 0};
  int n = poll(&p, 1, timeout_ms);
  EXPECT_GE(n, 0);
  return n == 1 && (p.revents & POLLIN);
}

rdma_cm_event EventOf(rdma_cm_event_type type, int status = 0) {
  rdma_cm_event e = {};
  e.event = type;
  e.status = status;
  return e;
}

// For SetWaitHookForTesting: `waiting` once a getter found the queue empty
// and goes to its read of the fd.
struct WaitGate {
  std::mutex mu;
  std::condition_variable cv;
  bool waiting = false;

  static void Hook(void* arg, bool woke) {
    auto* g = static_cast<WaitGate*>(arg);
    std::lock_guard<std::mutex> lock(g->mu);
    if (!woke) g->waiting = true;
    g->cv.notify_all();
  }
  bool AwaitWaiting() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [this] { return waiting; });
  }
};

class EventChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    channel_ = NewEventChannel();
    ASSERT_NE(channel_, nullptr) << strerror(errno);
    ASSERT_GE(channel_->fd, 0);
  }
  void TearDown() override { rdma_destroy_event_channel(channel_); }
  void SetNonBlocking() {
    int flags = fcntl(channel_->fd, F_GETFL);
    ASSERT_GE(flags, 0);
    ASSERT_EQ(fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK), 0);
  }

  rdma_event_channel* channel_ = nullptr;
};

TEST_F(EventChannelTest, BlockingByDefault) {
  int flags = fcntl(channel_->fd, F_GETFL);
  ASSERT_GE(flags, 0);
  EXPECT_EQ(flags & O_NONBLOCK, 0);
}

TEST_F(EventChannelTest, ReadableExactlyWhileEventsAreQueued) {
  EXPECT_FALSE(Readable(channel_->fd));
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ADDR_RESOLVED), nullptr, 0), 0);
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ROUTE_RESOLVED), nullptr, 0), 0);
  EXPECT_EQ(QueuedEvents(channel_), 2);
  EXPECT_TRUE(Readable(channel_->fd));

  rdma_cm_event* first = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &first), 0);
  EXPECT_EQ(first->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_TRUE(Readable(channel_->fd)) << "one event still queued";

  rdma_cm_event* second = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &second), 0);
  EXPECT_EQ(second->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
  EXPECT_FALSE(Readable(channel_->fd)) << "retrieved, not acked: no longer queued";
  EXPECT_EQ(QueuedEvents(channel_), 0);

  EXPECT_EQ(rdma_ack_cm_event(first), 0);
  EXPECT_EQ(rdma_ack_cm_event(second), 0);
  EXPECT_FALSE(Readable(channel_->fd));
}

TEST_F(EventChannelTest, NonBlockingGetIsEagainWhenEmpty) {
  SetNonBlocking();
  rdma_cm_event* event = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(channel_, &event), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(event, nullptr);

  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_REJECTED, 28), nullptr, 0), 0);
  ASSERT_EQ(rdma_get_cm_event(channel_, &event), 0);
  EXPECT_EQ(event->event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(event->status, 28);
  EXPECT_EQ(rdma_ack_cm_event(event), 0);

  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(channel_, &event), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(EventChannelTest, BlockingGetWaitsForTheEvent) {
  std::atomic<bool> got{false};
  rdma_cm_event* event = nullptr;
  std::thread reader([&] {
    EXPECT_EQ(rdma_get_cm_event(channel_, &event), 0);
    got = true;
  });
  usleep(50 * 1000);
  EXPECT_FALSE(got) << "rdma_get_cm_event returned with nothing queued";
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED), nullptr, 0), 0);
  reader.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(event->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(rdma_ack_cm_event(event), 0);
}

TEST_F(EventChannelTest, EpollReportsTheFd) {
  SetNonBlocking();
  int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event want = {};
  want.events = EPOLLIN;
  want.data.u64 = 7;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, channel_->fd, &want), 0);
  epoll_event got[2];
  EXPECT_EQ(epoll_wait(ep, got, 2, 0), 0);

  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_DISCONNECTED), nullptr, 0), 0);
  ASSERT_EQ(epoll_wait(ep, got, 2, 1000), 1);
  EXPECT_EQ(got[0].data.u64, 7u);
  EXPECT_TRUE(got[0].events & EPOLLIN);

  rdma_cm_event* event = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &event), 0);
  EXPECT_EQ(epoll_wait(ep, got, 2, 0), 0);
  EXPECT_EQ(rdma_ack_cm_event(event), 0);
  close(ep);
}

TEST_F(EventChannelTest, PrivateDataIsCopiedWithTheEvent) {
  uint8_t data[148];
  for (size_t i = 0; i < sizeof(data); ++i) data[i] = static_cast<uint8_t>(i);
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_REJECTED, 28), data, sizeof(data)), 0);
  memset(data, 0xEE, sizeof(data));  // the event keeps its own copy

  rdma_cm_event* event = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &event), 0);
  ASSERT_EQ(event->param.conn.private_data_len, 148);
  const auto* got = static_cast<const uint8_t*>(event->param.conn.private_data);
  for (size_t i = 0; i < 148; ++i) ASSERT_EQ(got[i], i) << "byte " << i;
  EXPECT_EQ(event->param.ud.private_data, event->param.conn.private_data);
  EXPECT_EQ(rdma_ack_cm_event(event), 0);
}

TEST_F(EventChannelTest, RetrievedEventOutlivesItsChannel) {
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_TIMEWAIT_EXIT), nullptr, 0), 0);
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ADDR_CHANGE), nullptr, 0), 0);
  rdma_cm_event* event = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &event), 0);
  rdma_destroy_event_channel(channel_);  // frees the still queued ADDR_CHANGE
  channel_ = NewEventChannel();
  ASSERT_NE(channel_, nullptr);
  EXPECT_EQ(event->event, RDMA_CM_EVENT_TIMEWAIT_EXIT);
  EXPECT_EQ(rdma_ack_cm_event(event), 0);
}

// DropEvents frees the matching queued events (their on_ack runs once); the
// others stay, in order, and the fd is readable while they do.
TEST_F(EventChannelTest, DropEventsFreesOnlyTheMatchingOnes) {
  int acks = 0;
  auto ack = [](void* n) { ++*static_cast<int*>(n); };
  ASSERT_EQ(QueueEventWithAck(channel_, EventOf(RDMA_CM_EVENT_TIMEWAIT_EXIT), nullptr, 0, ack, &acks), 0);
  ASSERT_EQ(QueueEventWithAck(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED), nullptr, 0, ack, &acks), 0);
  ASSERT_EQ(QueueEventWithAck(channel_, EventOf(RDMA_CM_EVENT_TIMEWAIT_EXIT), nullptr, 0, ack, &acks), 0);
  auto timewait = [](const rdma_cm_event& e, const void*) {
    return e.event == RDMA_CM_EVENT_TIMEWAIT_EXIT;
  };
  EXPECT_EQ(DropEvents(channel_, timewait, nullptr), 2);
  EXPECT_EQ(acks, 2);
  EXPECT_EQ(QueuedEvents(channel_), 1);
  SetNonBlocking();
  rdma_cm_event* event = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &event), 0);
  EXPECT_EQ(event->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(rdma_ack_cm_event(event), 0);
  EXPECT_EQ(acks, 3);
  EXPECT_FALSE(Readable(channel_->fd, 0)) << "nothing queued any more";
  EXPECT_EQ(rdma_get_cm_event(channel_, &event), -1);
  EXPECT_EQ(errno, EAGAIN);
}

// The fd is written when the queue goes empty -> non-empty and read when it
// drains: a burst costs two eventfd syscalls, not two per event.
TEST_F(EventChannelTest, ABurstOfEventsCostsTwoFdSyscalls) {
  SetNonBlocking();
  const uint64_t before = ChannelFdSyscalls(channel_);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED, i), nullptr, 0), 0);
  }
  EXPECT_TRUE(Readable(channel_->fd));
  for (int i = 0; i < 8; ++i) {
    rdma_cm_event* event = nullptr;
    ASSERT_EQ(rdma_get_cm_event(channel_, &event), 0);
    EXPECT_EQ(event->status, i);
    EXPECT_EQ(rdma_ack_cm_event(event), 0);
    EXPECT_EQ(Readable(channel_->fd), i < 7) << "after event " << i;
  }
  EXPECT_EQ(ChannelFdSyscalls(channel_) - before, 2u);
}

TEST_F(EventChannelTest, MoveEventsMovesReadability) {
  rdma_event_channel* other = NewEventChannel();
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED), nullptr, 0), 0);
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_DISCONNECTED), nullptr, 0), 0);
  auto all = [](const rdma_cm_event&, const void*) { return true; };
  EXPECT_EQ(MoveEvents(channel_, other, all, nullptr), 2);
  EXPECT_FALSE(Readable(channel_->fd));
  EXPECT_TRUE(Readable(other->fd));
  rdma_cm_event* event = nullptr;
  ASSERT_EQ(rdma_get_cm_event(other, &event), 0);
  EXPECT_EQ(event->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(rdma_ack_cm_event(event), 0);
  EXPECT_TRUE(Readable(other->fd));
  rdma_destroy_event_channel(other);
}

// Two threads blocked in rdma_get_cm_event while another queues events one
// by one: every event reaches exactly one getter, nobody blocks forever, and
// the fd is not readable once all are taken (a getter's read of the fd and
// the drain's read of it must not both wait for the same 1).
TEST_F(EventChannelTest, ConcurrentBlockingGettersTakeEachEventOnce) {
  constexpr int kPerGetter = 20000;
  static std::atomic<int> seen[2 * kPerGetter];
  for (std::atomic<int>& n : seen) n = 0;
  auto getter = [&] {
    for (int i = 0; i < kPerGetter; ++i) {
      rdma_cm_event* event = nullptr;
      ASSERT_EQ(rdma_get_cm_event(channel_, &event), 0) << strerror(errno);
      ++seen[event->status];
      ASSERT_EQ(rdma_ack_cm_event(event), 0);
    }
  };
  std::thread a(getter), b(getter);
  for (int i = 0; i < 2 * kPerGetter; ++i) {
    ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED, i), nullptr, 0), 0);
  }
  a.join();
  b.join();
  for (int i = 0; i < 2 * kPerGetter; ++i) ASSERT_EQ(seen[i].load(), 1) << "event " << i;
  EXPECT_EQ(QueuedEvents(channel_), 0);
  EXPECT_FALSE(Readable(channel_->fd));
}

// A getter woke from its wait on the fd (it took the 1) and has not taken
// the lock again when another thread's get takes the event and drains the
// queue: the drain must not read the fd (it holds 0 now: a blocking read
// would wait forever, holding the channel's lock). The woken getter then
// finds nothing, waits again, and gets the next event.
TEST_F(EventChannelTest, DrainWhileAWokenGetterIsOutsideTheLock) {
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool waiting = false, woke = false, go = false;
  } gate;
  SetWaitHookForTesting(
      [](void* arg, bool woke) {
        auto* g = static_cast<Gate*>(arg);
        std::unique_lock<std::mutex> lock(g->mu);
        if (!woke) {
          g->waiting = true;
          g->cv.notify_all();
          return;
        }
        if (g->woke) return;  // only the first wake is held
        g->woke = true;
        g->cv.notify_all();
        g->cv.wait(lock, [g] { return g->go; });
      },
      &gate);
  rdma_cm_event* woken = nullptr;
  std::thread getter([&] { ASSERT_EQ(rdma_get_cm_event(channel_, &woken), 0); });
  {
    // Past its look at the empty queue: its read takes the 1 of the event.
    std::unique_lock<std::mutex> lock(gate.mu);
    ASSERT_TRUE(gate.cv.wait_for(lock, std::chrono::seconds(60), [&] { return gate.waiting; }));
  }
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED, 1), nullptr, 0), 0);
  {
    std::unique_lock<std::mutex> lock(gate.mu);
    ASSERT_TRUE(gate.cv.wait_for(lock, std::chrono::seconds(60), [&] { return gate.woke; }));
  }
  rdma_cm_event* mine = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &mine), 0);  // hangs if the drain reads the fd
  EXPECT_EQ(mine->status, 1);
  {
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.go = true;
    gate.cv.notify_all();
  }
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_DISCONNECTED, 2), nullptr, 0), 0);
  getter.join();
  SetWaitHookForTesting(nullptr, nullptr);
  ASSERT_NE(woken, nullptr);
  EXPECT_EQ(woken->status, 2);
  EXPECT_FALSE(Readable(channel_->fd));
  EXPECT_EQ(rdma_ack_cm_event(mine), 0);
  EXPECT_EQ(rdma_ack_cm_event(woken), 0);
}

// The 1 for an empty queue is written outside the channel's lock: the getter
// it wakes takes its event while the queuing thread is still stopped just
// after its write (the hook). With the write under the lock the getter
// would wait for the lock, a futex wait and wake per hand-over (the cmtime
// client's largest: docs/API.md "The server's futexes and the extra
// ioctls"), and here the hook's wait would run out.
TEST_F(EventChannelTest, AGetterWokenByTheWriteFindsTheLockFree) {
  struct Gate : WaitGate {
    bool got = false, got_in_hook = false;
  } gate;
  SetWaitHookForTesting(&WaitGate::Hook, static_cast<WaitGate*>(&gate));
  SetAfterWakeHookForTesting(
      [](void* arg) {
        auto* g = static_cast<Gate*>(arg);
        std::unique_lock<std::mutex> lock(g->mu);
        g->got_in_hook = g->cv.wait_for(lock, std::chrono::seconds(30), [g] { return g->got; });
      },
      &gate);
  rdma_cm_event* event = nullptr;
  std::thread getter([&] {
    ASSERT_EQ(rdma_get_cm_event(channel_, &event), 0) << strerror(errno);
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.got = true;
    gate.cv.notify_all();
  });
  ASSERT_TRUE(gate.AwaitWaiting());
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED, 7), nullptr, 0), 0);
  getter.join();
  SetAfterWakeHookForTesting(nullptr, nullptr);
  SetWaitHookForTesting(nullptr, nullptr);
  EXPECT_TRUE(gate.got_in_hook) << "the getter waited for the queuing thread's lock";
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->status, 7);
  EXPECT_FALSE(Readable(channel_->fd));
  EXPECT_EQ(rdma_ack_cm_event(event), 0);
}

// The queue drains while the write of its 1 is still on its way: the fd is
// not read then (it may hold 0: a blocking read would wait under the lock);
// the writer clears it once its write landed.
TEST_F(EventChannelTest, ADrainBeforeTheWriteLandsLeavesTheFdClear) {
  struct Ctx {
    rdma_event_channel* channel;
    rdma_cm_event* taken = nullptr;
  } ctx{channel_};
  SetAfterWakeHookForTesting(
      [](void* arg) {
        auto* c = static_cast<Ctx*>(arg);
        if (c->taken == nullptr) {
          ASSERT_EQ(rdma_get_cm_event(c->channel, &c->taken), 0);
        }
      },
      &ctx);
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED, 3), nullptr, 0), 0);
  SetAfterWakeHookForTesting(nullptr, nullptr);
  ASSERT_NE(ctx.taken, nullptr);
  EXPECT_EQ(ctx.taken->status, 3);
  EXPECT_EQ(QueuedEvents(channel_), 0);
  EXPECT_FALSE(Readable(channel_->fd));
  EXPECT_EQ(rdma_ack_cm_event(ctx.taken), 0);
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_DISCONNECTED, 4), nullptr, 0), 0);
  EXPECT_TRUE(Readable(channel_->fd));
  rdma_cm_event* next = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &next), 0);
  EXPECT_EQ(next->status, 4);
  EXPECT_FALSE(Readable(channel_->fd));
  EXPECT_EQ(rdma_ack_cm_event(next), 0);
}

// libiscsi 1.19's iSER initiator tears a connection down with
// pthread_cancel of its CM thread, blocked in rdma_get_cm_event (lib/iser.c
// iser_free_iser_conn_res). The kernel's librdmacm holds nothing in that
// read; here the cancelled getter must give back its place among the
// waiters, or the fd is never read clear again: readable with nothing
// queued, after the next event is taken.
void* GetOneEvent(void* channel) {
  rdma_cm_event* e = nullptr;
  rdma_get_cm_event(static_cast<rdma_event_channel*>(channel), &e);
  return e;  // not reached: cancelled in its read
}

TEST_F(EventChannelTest, ACancelledGetterLeavesTheFdAsTheQueueSays) {
  WaitGate gate;
  SetWaitHookForTesting(&WaitGate::Hook, &gate);
  pthread_t getter;
  ASSERT_EQ(pthread_create(&getter, nullptr, GetOneEvent, channel_), 0);
  // At its read (or just before it: a pending cancel acts on entry).
  ASSERT_TRUE(gate.AwaitWaiting());
  ASSERT_EQ(pthread_cancel(getter), 0);
  void* result = nullptr;
  ASSERT_EQ(pthread_join(getter, &result), 0);
  SetWaitHookForTesting(nullptr, nullptr);
  EXPECT_EQ(result, PTHREAD_CANCELED);

  EXPECT_FALSE(Readable(channel_->fd));
  ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED), nullptr, 0), 0);
  EXPECT_TRUE(Readable(channel_->fd));
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &e), 0);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_FALSE(Readable(channel_->fd)) << "the fd is readable with the queue empty";
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
}

TEST_F(EventChannelTest, ArgumentErrors) {
  rdma_cm_event* event = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(nullptr, &event), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(channel_, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rdma_ack_cm_event(nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  uint8_t big[kMaxEventPrivateData + 1] = {};
  errno = 0;
  EXPECT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_REJECTED), big, sizeof(big)), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(QueuedEvents(channel_), 0);
  EXPECT_FALSE(Readable(channel_->fd));
}

}  // namespace
}  // namespace uscm::librdmacm
