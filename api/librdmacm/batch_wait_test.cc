// rdma_get_cm_event's blocking wait as SCHED_BATCH (batch_wait.h): the policy
// seen from inside the wait (the wait hook runs in the waiting thread just
// before its read) and after the call. What it buys is a scheduler's
// decision, so it is measured, not asserted: cm_bench
// BM_DropInResolveRouteRoceThreaded batch:0 / batch:1 under `taskset -c 0`
// (docs/API.md "Why the event thread kept waking: the batch wait"). A unit
// test of it (the writer keeps the CPU across 200 hand-overs on one CPU: 0-2
// lost with the batch wait, 110-199 without) passed alone but failed under
// two CPU hogs on the host's EEVDF kernel (171-200 lost): not kept.
#include "api/librdmacm/batch_wait.h"

#include <errno.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "api/librdmacm/event_channel.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

rdma_cm_event EventOf(rdma_cm_event_type type, int status = 0) {
  rdma_cm_event e = {};
  e.event = type;
  e.status = status;
  return e;
}

// The waiting thread's policy, as the wait hook saw it before its read.
struct SeenPolicy {
  std::mutex mu;
  std::condition_variable cv;
  int policy = -1;
};

void RecordPolicy(void* arg, bool woke) {
  if (woke) return;
  auto* seen = static_cast<SeenPolicy*>(arg);
  std::lock_guard<std::mutex> lock(seen->mu);
  seen->policy = sched_getscheduler(0);
  seen->cv.notify_all();
}

// As RecordPolicy, then the program's own choice made during the wait.
void RecordPolicyThenSetIdle(void* arg, bool woke) {
  RecordPolicy(arg, woke);
  sched_param none = {};
  if (!woke) sched_setscheduler(0, SCHED_IDLE, &none);
}

class BatchWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    channel_ = NewEventChannel();
    ASSERT_NE(channel_, nullptr) << strerror(errno);
    SetWaitHookForTesting(RecordPolicy, &seen_);
  }
  void TearDown() override {
    SetWaitHookForTesting(nullptr, nullptr);
    SetBatchWaitsForTesting(true);
    rdma_destroy_event_channel(channel_);
  }

  // A thread with policy `start` that blocks in rdma_get_cm_event until an
  // event comes; *in_wait is its policy in the wait, *after after the call.
  void GetInAThread(int start, int* in_wait, int* after) {
    std::thread getter([&] {
      sched_param none = {};
      ASSERT_EQ(sched_setscheduler(0, start, &none), 0) << strerror(errno);
      rdma_cm_event* e = nullptr;
      ASSERT_EQ(rdma_get_cm_event(channel_, &e), 0) << strerror(errno);
      *after = sched_getscheduler(0);
      EXPECT_EQ(rdma_ack_cm_event(e), 0);
    });
    {
      std::unique_lock<std::mutex> lock(seen_.mu);
      ASSERT_TRUE(seen_.cv.wait_for(lock, std::chrono::seconds(60),
                                    [&] { return seen_.policy != -1; }));
      *in_wait = seen_.policy;
    }
    ASSERT_EQ(QueueEvent(channel_, EventOf(RDMA_CM_EVENT_ESTABLISHED), nullptr, 0), 0);
    getter.join();
  }

  rdma_event_channel* channel_ = nullptr;
  SeenPolicy seen_;
};

TEST_F(BatchWaitTest, AnOtherThreadWaitsAsBatchAndReturnsAsOther) {
  const uint64_t before = BatchWaits();
  int in_wait = -1, after = -1;
  GetInAThread(SCHED_OTHER, &in_wait, &after);
  EXPECT_EQ(in_wait, SCHED_BATCH);
  EXPECT_EQ(after, SCHED_OTHER);
  EXPECT_EQ(BatchWaits() - before, 1u);
}

TEST_F(BatchWaitTest, OffTheWaitKeepsThePolicy) {
  SetBatchWaitsForTesting(false);
  int in_wait = -1, after = -1;
  GetInAThread(SCHED_OTHER, &in_wait, &after);
  EXPECT_EQ(in_wait, SCHED_OTHER);
  EXPECT_EQ(after, SCHED_OTHER);
}

TEST_F(BatchWaitTest, UscmBatchWaitZeroKeepsThePolicy) {
  ASSERT_EQ(setenv("USCM_BATCH_WAIT", "0", 1), 0);
  int in_wait = -1, after = -1;
  GetInAThread(SCHED_OTHER, &in_wait, &after);
  unsetenv("USCM_BATCH_WAIT");
  EXPECT_EQ(in_wait, SCHED_OTHER);
  EXPECT_EQ(after, SCHED_OTHER);
}

// A policy set on the waiting thread during its wait is the program's: the
// call does not put SCHED_OTHER over it.
TEST_F(BatchWaitTest, APolicySetDuringTheWaitStays) {
  SetWaitHookForTesting(RecordPolicyThenSetIdle, &seen_);
  int in_wait = -1, after = -1;
  GetInAThread(SCHED_OTHER, &in_wait, &after);
  EXPECT_EQ(in_wait, SCHED_BATCH);
  EXPECT_EQ(after, SCHED_IDLE);
}

// The program's own choice stays: an idle (or batch, or real-time) thread
// is not touched.
TEST_F(BatchWaitTest, AnIdleThreadStaysIdle) {
  const uint64_t before = BatchWaits();
  int in_wait = -1, after = -1;
  GetInAThread(SCHED_IDLE, &in_wait, &after);
  EXPECT_EQ(in_wait, SCHED_IDLE);
  EXPECT_EQ(after, SCHED_IDLE);
  EXPECT_EQ(BatchWaits(), before);
}

// Under O_NONBLOCK a get never blocks: once it has seen EAGAIN, the channel's
// gets leave the thread alone (no two sched_setscheduler calls per poll).
TEST_F(BatchWaitTest, ANonBlockingChannelLeavesThePolicyAloneAfterItsFirstEagain) {
  const int flags = fcntl(channel_->fd, F_GETFL);
  ASSERT_EQ(fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(rdma_get_cm_event(channel_, &e), -1);
  ASSERT_EQ(errno, EAGAIN) << "errno kept through the policy's restore";
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  const uint64_t before = BatchWaits();
  ASSERT_EQ(rdma_get_cm_event(channel_, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(BatchWaits(), before);
  EXPECT_EQ(seen_.policy, SCHED_OTHER);
}

}  // namespace
}  // namespace uscm::librdmacm
