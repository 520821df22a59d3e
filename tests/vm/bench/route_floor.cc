// The floor under cmtime's resolve-route step (docs/API.md "cmtime"): on RoCE a CM's
// rdma_resolve_route is local work and one event, so what any user-space library whose
// channel has a real fd must pay per id is the event's hand-over from the calling thread
// to the program's event thread. This does that with no CM at all, as cmtime (rdma-core
// 44, librdmacm/examples/cmtime.c) drives the step:
//  - the main thread makes N "calls", each queueing one event on a channel: a mutex, a
//    FIFO and an eventfd that is readable exactly while events are queued (librdmacm's
//    contract for the channel's fd): written when the queue goes empty -> non-empty,
//    read when the getter drains it, as api/librdmacm/event_channel.cc does; then it
//    waits for the N completions in a sched_yield loop, as cmtime's main thread does;
//  - an event thread loops "get event" (blocked in read(2) on the eventfd while nothing
//    is queued, as cmtime's event thread is in rdma_get_cm_event), counts the completion
//    (cmtime's handler: an atomic add) and "acks" the event (frees it).
// No device, no syscall but the eventfd's and the scheduler's. Prints the step's wall
// time (cmtime's "total" for the step), this process's CPU (getrusage), the VM's busy
// CPU (/proc/stat) and the eventfd reads and writes and context switches it took.
//   route_floor [--n N] [--rounds R]   (R rounds of N ids, one line each)
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "tests/vm/bench/floor_clocks.h"

namespace {

[[noreturn]] void Die(const std::string& what) {
  fprintf(stderr, "route_floor: %s: %s\n", what.c_str(), strerror(errno));
  exit(1);
}

struct Event {  // what the program gets: cmtime reads the id and the type
  void* id;
  int type;
};

// The channel: events under a mutex and an eventfd holding 1 exactly while some are
// queued (the waiter may take the 1 while it sleeps in read; it then re-checks).
class Channel {
 public:
  Channel() : fd_(eventfd(0, EFD_CLOEXEC)) {
    if (fd_ < 0) Die("eventfd");
  }
  ~Channel() { close(fd_); }

  void Queue(Event* e) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(e);
    SyncLocked();
  }

  Event* Get() {  // blocks in read(2) while nothing is queued
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!queue_.empty()) {
        Event* e = queue_.front();
        queue_.pop_front();
        SyncLocked();
        return e;
      }
      ++waiters_;
      ++reads_;
      lock.unlock();
      eventfd_t one;
      const int rc = eventfd_read(fd_, &one);
      if (rc != 0 && errno != EINTR) Die("eventfd_read");
      lock.lock();
      --waiters_;
      if (rc == 0) readable_ = false;  // this read took the 1
      SyncLocked();
    }
  }

  uint64_t writes() const { return writes_; }
  uint64_t reads() const { return reads_; }

 private:
  void SyncLocked() {  // the fd readable iff events are queued
    const bool want = !queue_.empty();
    if (want == readable_) return;
    if (want) {
      ++writes_;
      if (eventfd_write(fd_, 1) != 0) Die("eventfd_write");
      readable_ = true;
    } else if (waiters_ == 0) {
      eventfd_t one;
      ++reads_;
      if (eventfd_read(fd_, &one) != 0) Die("eventfd_read (clear)");
      readable_ = false;
    }
  }

  const int fd_;
  std::mutex mu_;
  std::deque<Event*> queue_;
  bool readable_ = false;
  int waiters_ = 0;
  uint64_t writes_ = 0, reads_ = 0;
};

using uscm::floor_bench::Clocks;
using uscm::floor_bench::Now;

// One round: N calls, each an event, then the sched_yield wait for N completions.
void Round(int n, int round) {
  Channel channel;
  std::atomic<int> completed{0};
  std::thread events([&] {
    for (int i = 0; i < n; ++i) {
      Event* e = channel.Get();
      if (e->type != 1) {
        errno = EPROTO;
        Die("unexpected event");
      }
      completed.fetch_add(1);  // cmtime's ROUTE_RESOLVED handler
      delete e;                // rdma_ack_cm_event
    }
  });
  const Clocks a = Now();
  static int ids[1];
  for (int i = 0; i < n; ++i) channel.Queue(new Event{&ids[0], 1});
  while (completed.load() < n) sched_yield();
  const Clocks b = Now();
  events.join();
  const double wall = b.wall_ms - a.wall_ms;
  printf("route_floor round %d N=%d  wall %.2f ms (%.2f us/id)  process CPU %.1f ms  "
         "VM busy %.1f ms  eventfd writes %llu reads %llu  context switches %ld\n",
         round, n, wall, 1000 * wall / n, b.self_cpu_ms - a.self_cpu_ms,
         b.vm_busy_ms - a.vm_busy_ms, static_cast<unsigned long long>(channel.writes()),
         static_cast<unsigned long long>(channel.reads()), b.switches - a.switches);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 1000, rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--n") n = atoi(v.c_str());
    else if (k == "--rounds") rounds = atoi(v.c_str());
    else {
      fprintf(stderr, "usage: route_floor [--n N] [--rounds R]\n");
      return 2;
    }
  }
  if (n <= 0 || rounds <= 0) {
    fprintf(stderr, "route_floor: --n and --rounds must be positive\n");
    return 2;
  }
  for (int r = 1; r <= rounds; ++r) Round(n, r);
  return 0;
}
