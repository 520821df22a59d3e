// fork() while a thread of the library holds its lock (fork_locks.h): the
// child's calls on the simulated port (ids_testing.h) complete.
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_sim_c.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/fork_locks.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_testing.h"
#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

using Clock = std::chrono::steady_clock;

// In the child: the next event on `ch` is `want` (the fabric run until the
// port has one). No gtest assertion in a child: the exit code says.
bool ChildGets(uscm_sim* sim, rdma_event_channel* ch, rdma_cm_event_type want) {
  if (QueuedEvents(ch) == 0) {
    if (uscm_sim_run_until_event(sim, BackendChannel(), 120000) != 0 || PumpEvents() <= 0) {
      return false;
    }
  }
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch, &e) != 0) return false;
  const bool ok = e->event == want && e->status == 0;
  rdma_ack_cm_event(e);
  return ok;
}

// The child's own channel and id, on the port its parent opened: create,
// bind, resolve the address and the route (an SA query on the fabric).
int ChildCalls(uscm_sim* sim) {
  rdma_event_channel* ch = NewNonBlockingChannel();
  if (ch == nullptr) return 2;
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) return 3;
  sockaddr_in src = Ipv4("10.0.0.1", 7501);
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&src)) != 0) return 4;
  sockaddr_in dst = Ipv4("10.0.0.2", 7502);
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0) return 5;
  if (!ChildGets(sim, ch, RDMA_CM_EVENT_ADDR_RESOLVED)) return 6;
  if (rdma_resolve_route(id, 2000) != 0) return 7;
  if (!ChildGets(sim, ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) return 8;
  if (rdma_destroy_id(id) != 0) return 9;
  rdma_destroy_event_channel(ch);
  return 0;
}

// The exit status of `child`, waited for up to `bound` (then killed: -1).
int WaitBounded(pid_t child, std::chrono::seconds bound) {
  const Clock::time_point end = Clock::now() + bound;
  int status = 0;
  while (Clock::now() < end) {
    const pid_t got = waitpid(child, &status, WNOHANG);
    if (got == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (got < 0) return -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  return -1;
}

// A thread holds the library's lock, as a port's progress hook does while it
// moves events, when another thread forks. Without the pthread_atfork
// handlers the child's copy of the lock stayed held and its first call
// (rdma_create_id) waited for ever; with them the fork waits for the lock,
// and the child's calls complete.
TEST_F(IdsTest, AChildForkedWhileALibraryThreadHoldsTheLockMakesItsCalls) {
  // Make the port's id tables and the event pool exist before the fork (the
  // child's calls then take locks that existed in the parent).
  rdma_cm_id* mine = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &mine, nullptr, RDMA_PS_TCP), 0) << strerror(errno);

  std::atomic<bool> held{false}, forked{false};
  const uint64_t prepares = ForkPrepares();
  // The holder lets go once the fork's prepare handler waits for the lock
  // (or after a bound: without the handler no prepare ever comes), then
  // waits for the fork to return before it exits (a thread's exit
  // allocates: under ASan a fork then could copy the allocator's lock held).
  std::thread holder([&] {
    {
      std::lock_guard<std::mutex> lock(LibraryLockForTesting());
      held.store(true);
      const Clock::time_point end = Clock::now() + std::chrono::seconds(20);
      while (ForkPrepares() == prepares && Clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    while (!forked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!held.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const pid_t child = fork();
  if (child == 0) _exit(ChildCalls(sim_));
  forked.store(true);
  const int status = child > 0 ? WaitBounded(child, std::chrono::seconds(30)) : -3;
  holder.join();
  ASSERT_GT(child, 0) << strerror(errno);
  EXPECT_EQ(status, 0)
      << "the child's step (-1: still running after 30 s, its copy of the lock held)";
  EXPECT_GT(ForkPrepares(), prepares);

  // The parent's lock was given back: its calls go on.
  sockaddr_in src = Ipv4("10.0.0.1", 7503);
  EXPECT_EQ(rdma_bind_addr(mine, reinterpret_cast<sockaddr*>(&src)), 0) << strerror(errno);
  EXPECT_EQ(rdma_destroy_id(mine), 0);
}

}  // namespace
}  // namespace uscm::librdmacm
