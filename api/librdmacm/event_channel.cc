// rdma_create_event_channel, rdma_destroy_event_channel, rdma_get_cm_event,
// rdma_ack_cm_event over an eventfd. See event_channel.h.
#include "api/librdmacm/event_channel.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <vector>
#include <new>

#include "api/librdmacm/batch_wait.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/fork_locks.h"

namespace uscm::librdmacm {
namespace {

static_assert(offsetof(rdma_conn_param, private_data) == offsetof(rdma_ud_param, private_data));
static_assert(offsetof(rdma_conn_param, private_data_len) ==
              offsetof(rdma_ud_param, private_data_len));

// One queued or retrieved event. `pub` first: the program's rdma_cm_event*
// is a pointer to it (standard layout, so the two convert).
struct Event {
  rdma_cm_event pub;
  uint8_t private_data[kMaxEventPrivateData];
  void (*on_ack)(void*);
  void* on_ack_arg;
  bool in_chunk;  // made by MakeChunkLocked: never freed, always pooled
};

// Acked events are kept for the next ones, not freed. An event is made by
// the device's progress thread and acked by the program's event thread, so
// each free(3) was of another thread's arena and took that arena's lock,
// which the progress thread held as often as not in its next malloc:
// `CMTIME_MEASURE=callers` counted 156 of the cmtime server's 227 futex
// calls (-c 200) in free (rdma_ack_cm_event) and in the progress thread's
// operator new (docs/API.md "The server's futexes and the extra ioctls").
// The pool's lock is held for a push or a pop.
//
// The first kPooledEvents events are made kChunkEvents at a time, one
// allocation each (a new process's first burst, cmtime's 1,000
// ADDR_RESOLVED, took an operator new per event: ~190 of rdma_resolve_addr's
// ~2,000 instructions per id); they stay in the pool for good. Events
// beyond them are allocated one by one, and kept while fewer than
// kPooledEvents wait in the pool. At most ~800 KB are kept.
constexpr size_t kPooledEvents = 1024;
constexpr size_t kChunkEvents = 64;

struct EventPool {
  std::mutex mu;
  // Capacity 2 * kPooledEvents, reserved: no allocation under mu (every
  // chunk's events, and up to kPooledEvents of the others).
  std::vector<Event*> free;
  size_t chunked = 0;  // events made in chunks
};

EventPool& ThePool() {
  static EventPool* pool = [] {
    auto* p = new EventPool;
    p->free.reserve(2 * kPooledEvents);
    return p;
  }();
  return *pool;
}

// The pool is empty: kChunkEvents made at once, one returned, the others
// pooled; nullptr when the chunks are all made (or out of memory).
Event* MakeChunkLocked(EventPool& pool) {
  if (pool.chunked + kChunkEvents > kPooledEvents) return nullptr;
  auto* chunk = new (std::nothrow) Event[kChunkEvents];
  if (chunk == nullptr) return nullptr;
  pool.chunked += kChunkEvents;
  for (size_t i = 0; i < kChunkEvents; ++i) chunk[i].in_chunk = true;
  for (size_t i = 1; i < kChunkEvents; ++i) pool.free.push_back(&chunk[i]);
  return &chunk[0];
}

Event* NewEvent() {
  EventPool& pool = ThePool();
  Event* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    if (!pool.free.empty()) {
      e = pool.free.back();
      pool.free.pop_back();
    } else {
      e = MakeChunkLocked(pool);
    }
  }
  // Every field but private_data is set by the caller; private_data is
  // written only when the event carries some (not zeroed: 256 bytes).
  if (e == nullptr) {
    e = new (std::nothrow) Event;
    if (e != nullptr) e->in_chunk = false;
  }
  return e;
}

void Release(Event* e) {
  if (e->on_ack != nullptr) e->on_ack(e->on_ack_arg);
  EventPool& pool = ThePool();
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    if (e->in_chunk || pool.free.size() < kPooledEvents) {
      pool.free.push_back(e);
      return;
    }
  }
  delete e;
}

// The fd is an eventfd that holds 1 exactly while `queue` is not empty: it is
// written when the queue goes empty -> non-empty and read when it drains,
// so a burst of events costs two syscalls, not two per event (as the C++
// channel, api/rdma_cm/event_channel.cc). Everything below is under `mu`.
struct ChannelState {
  std::mutex mu;
  std::deque<Event*> queue;  // oldest first
  bool readable = false;     // the eventfd holds 1 (unless a waiter took it)
  // Writes of the 1 decided under mu and made after it (QueueEventWithAck):
  // until they land the fd may hold 0, so it is not read to clear it.
  int wakes_in_flight = 0;
  // Getters inside their read(2) of the fd (nothing was queued): one of them
  // may take the 1 at any moment, so the fd is only read to clear it while
  // there are none (a read of a blocking fd holding 0 would block under mu).
  int waiters = 0;
  uint64_t fd_syscalls = 0;
  // A read of the fd came back EAGAIN: the program set O_NONBLOCK, and its
  // gets never block, so they leave the thread's policy alone (batch_wait.h).
  bool nonblocking = false;
};

// `pub` first, as for Event.
struct Channel {
  rdma_event_channel pub;
  ChannelState* state;
  uint64_t fork_generation;  // fork_locks.h ForkGeneration() when it was made
};

static_assert(offsetof(Event, pub) == 0);
static_assert(offsetof(Channel, pub) == 0);

Channel* FromPublic(rdma_event_channel* channel) { return reinterpret_cast<Channel*>(channel); }

std::atomic<void (*)(void*, bool)> g_wait_hook{nullptr};  // SetWaitHookForTesting
std::atomic<void*> g_wait_hook_arg{nullptr};
std::atomic<void (*)(void*)> g_after_wake_hook{nullptr};  // SetAfterWakeHookForTesting
std::atomic<void*> g_after_wake_hook_arg{nullptr};

// Makes the fd readable iff events are queued (mu held). 0, or an errno.
int SyncFdLocked(Channel* ch) {
  ChannelState& st = *ch->state;
  const bool want = !st.queue.empty();
  if (want == st.readable) return 0;
  if (want) {
    ++st.fd_syscalls;
    if (eventfd_write(ch->pub.fd, 1) != 0) return errno;
    st.readable = true;
  } else if (st.waiters == 0 && st.wakes_in_flight == 0) {
    // Holds 1 (no waiter took it, no write pending): the read does not block.
    eventfd_t one;
    ++st.fd_syscalls;
    if (eventfd_read(ch->pub.fd, &one) != 0) return errno;
    st.readable = false;
  }
  // else: a waiter takes the 1, finds the queue empty and waits again; or
  // the pending write's thread clears it once its write landed.
  return 0;
}

// A getter's place in `waiters` while it is inside its read of the fd
// (unlocked). pthread_cancel stops a thread there (read(2) is a cancellation
// point) and unwinds it: libiscsi 1.19's iSER initiator cancels its CM thread,
// blocked in rdma_get_cm_event, when it tears a connection down
// (iser_free_iser_conn_res), as the kernel's librdmacm allows (its read of
// the ucma fd holds nothing). Without this the count stayed up, so the fd
// was never read clear again (SyncFdLocked) and stayed readable on an empty
// queue: a poll loop on the channel spun, and every later blocking get read a
// stale 1 first.
class WaitCount {
 public:
  explicit WaitCount(Channel* ch) : ch_(ch) {}
  WaitCount(const WaitCount&) = delete;
  WaitCount& operator=(const WaitCount&) = delete;
  ~WaitCount() {
    if (done_) return;
    std::lock_guard<std::mutex> lock(ch_->state->mu);  // unwinding a cancelled read
    --ch_->state->waiters;
    SyncFdLocked(ch_);
  }
  void Done() { done_ = true; }  // the read returned: the caller uncounts

 private:
  Channel* ch_;
  bool done_ = false;
};

}  // namespace

std::mutex& EventPoolLock() { return ThePool().mu; }

int QueueEvent(rdma_event_channel* channel, const rdma_cm_event& event, const void* private_data,
               size_t private_data_len) {
  return QueueEventWithAck(channel, event, private_data, private_data_len, nullptr, nullptr);
}

int QueueEventWithAck(rdma_event_channel* channel, const rdma_cm_event& event,
                      const void* private_data, size_t private_data_len, void (*on_ack)(void*),
                      void* arg) {
  if (channel == nullptr) return Fail(EINVAL, "queue event", "NULL channel");
  if (private_data_len > kMaxEventPrivateData) {
    return Fail(EINVAL, "queue event", "private data longer than 256 bytes");
  }
  Event* e = NewEvent();
  if (e == nullptr) return Fail(ENOMEM, "queue event", "out of memory");
  e->pub = event;
  e->on_ack = on_ack;
  e->on_ack_arg = arg;
  if (private_data_len > 0) {
    memcpy(e->private_data, private_data, private_data_len);
    e->pub.param.conn.private_data = e->private_data;
    e->pub.param.conn.private_data_len = static_cast<uint8_t>(private_data_len);
  }
  Channel* ch = FromPublic(channel);
  ChannelState& st = *ch->state;
  std::unique_lock<std::mutex> lock(st.mu);
  st.queue.push_back(e);
  if (st.readable) return 0;  // the fd holds 1 already (or a write is on its way)
  // The 1 is written outside the lock: the getter it wakes takes the lock
  // next, and on one CPU the woken thread often runs at once; with the write
  // under the lock it found the lock held (a futex wait, and a wake here).
  st.readable = true;
  ++st.wakes_in_flight;
  ++st.fd_syscalls;
  lock.unlock();
  const int rc = eventfd_write(ch->pub.fd, 1);
  const int err = errno;
  if (void (*hook)(void*) = g_after_wake_hook.load(); hook != nullptr) {
    hook(g_after_wake_hook_arg.load());
  }
  lock.lock();
  --st.wakes_in_flight;
  if (rc != 0) {
    st.readable = false;
    // Not queued after all, unless a getter took it meanwhile (delivered).
    auto it = std::find(st.queue.begin(), st.queue.end(), e);
    if (it != st.queue.end()) {
      st.queue.erase(it);
      SyncFdLocked(ch);
      lock.unlock();
      e->on_ack = nullptr;  // not queued: no on_ack
      Release(e);
      return Fail(err, "queue event", "eventfd_write failed");
    }
  }
  SyncFdLocked(ch);  // the queue drained before the write landed: clear it now
  return 0;
}

void SetAfterWakeHookForTesting(void (*fn)(void* arg), void* arg) {
  g_after_wake_hook_arg.store(arg);
  g_after_wake_hook.store(fn);
}

void SetWaitHookForTesting(void (*fn)(void* arg, bool woke), void* arg) {
  g_wait_hook_arg.store(arg);
  g_wait_hook.store(fn);
}

bool ChannelOfParent(rdma_event_channel* channel) {
  return FromPublic(channel)->fork_generation != ForkGeneration();
}

uint64_t ChannelFdSyscalls(rdma_event_channel* channel) {
  Channel* ch = FromPublic(channel);
  std::lock_guard<std::mutex> lock(ch->state->mu);
  return ch->state->fd_syscalls;
}

int QueuedEvents(rdma_event_channel* channel) {
  if (channel == nullptr) return -1;
  Channel* ch = FromPublic(channel);
  std::lock_guard<std::mutex> lock(ch->state->mu);
  return static_cast<int>(ch->state->queue.size());
}

int CountEvents(rdma_event_channel* channel, EventMatch match, const void* arg) {
  Channel* ch = FromPublic(channel);
  std::lock_guard<std::mutex> lock(ch->state->mu);
  int n = 0;
  for (const Event* e : ch->state->queue) n += match(e->pub, arg) ? 1 : 0;
  return n;
}

int MoveEvents(rdma_event_channel* from, rdma_event_channel* to, EventMatch match,
               const void* arg) {
  if (from == to) return 0;
  Channel* src = FromPublic(from);
  Channel* dst = FromPublic(to);
  std::scoped_lock lock(src->state->mu, dst->state->mu);
  int moved = 0;
  for (auto it = src->state->queue.begin(); it != src->state->queue.end();) {
    if (!match((*it)->pub, arg)) {
      ++it;
      continue;
    }
    dst->state->queue.push_back(*it);
    it = src->state->queue.erase(it);
    ++moved;
  }
  SyncFdLocked(src);
  SyncFdLocked(dst);
  return moved;
}

int DropEvents(rdma_event_channel* channel, EventMatch match, const void* arg) {
  Channel* ch = FromPublic(channel);
  std::vector<Event*> dropped;
  {
    std::lock_guard<std::mutex> lock(ch->state->mu);
    for (auto it = ch->state->queue.begin(); it != ch->state->queue.end();) {
      if (!match((*it)->pub, arg)) {
        ++it;
        continue;
      }
      dropped.push_back(*it);
      it = ch->state->queue.erase(it);
    }
    SyncFdLocked(ch);
  }
  for (Event* e : dropped) Release(e);  // on_ack outside the channel's lock
  return static_cast<int>(dropped.size());
}

const void* AckArgOf(const rdma_cm_event& event) {
  const Event& e = reinterpret_cast<const Event&>(event);  // `pub` first
  return e.on_ack != nullptr ? e.on_ack_arg : nullptr;
}

}  // namespace uscm::librdmacm

using uscm::librdmacm::Channel;
using uscm::librdmacm::ChannelState;
using uscm::librdmacm::Event;
using uscm::librdmacm::Fail;
using uscm::librdmacm::FromPublic;

namespace uscm::librdmacm {

namespace {
std::atomic<void (*)(rdma_event_channel*)> g_close_hook{nullptr};
}  // namespace

void SetChannelCloseHook(void (*hook)(rdma_event_channel*)) { g_close_hook.store(hook); }

rdma_event_channel* NewEventChannel() {
  Channel* ch = new (std::nothrow) Channel{};
  ChannelState* state = new (std::nothrow) ChannelState;
  if (ch == nullptr || state == nullptr) {
    delete ch;
    delete state;
    Fail(ENOMEM, "rdma_create_event_channel", "out of memory");
    return nullptr;
  }
  // Blocking, as /dev/infiniband/rdma_cm is opened: the program may set
  // O_NONBLOCK itself with fcntl.
  ch->pub.fd = eventfd(0, EFD_CLOEXEC);
  if (ch->pub.fd < 0) {
    int err = errno;
    delete state;
    delete ch;
    Fail(err, "rdma_create_event_channel", "eventfd failed");
    return nullptr;
  }
  ch->state = state;
  ch->fork_generation = ForkGeneration();
  return &ch->pub;
}

}  // namespace uscm::librdmacm

// As librdmacm: NULL with errno ENODEV when there is no RDMA device.
extern "C" rdma_event_channel* rdma_create_event_channel(void) {
  if (uscm::librdmacm::EnsureDevices("rdma_create_event_channel") != 0) return nullptr;
  return uscm::librdmacm::NewEventChannel();
}

// As librdmacm's close of the ucma fd: the ids still on the channel are
// destroyed first (the close hook); events still queued are freed with the
// channel; retrieved ones stay valid until acked (rdma_ack_cm_event does not
// touch the channel).
extern "C" void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel == nullptr) return;
  if (auto* hook = uscm::librdmacm::g_close_hook.load()) hook(channel);
  Channel* ch = FromPublic(channel);
  for (Event* e : ch->state->queue) uscm::librdmacm::Release(e);
  close(ch->pub.fd);
  delete ch->state;
  delete ch;
}

extern "C" int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (channel == nullptr) return Fail(EINVAL, "rdma_get_cm_event", "NULL channel");
  if (event == nullptr) return Fail(EINVAL, "rdma_get_cm_event", "NULL event");
  Channel* ch = FromPublic(channel);
  if (ch->fork_generation != uscm::librdmacm::ForkGeneration()) {
    return Fail(EACCES, "rdma_get_cm_event", uscm::librdmacm::kParentsChannel);
  }
  ChannelState& st = *ch->state;
  uscm::librdmacm::BatchWhileWaiting batch;  // declared first: restored after the lock's release
  std::unique_lock<std::mutex> lock(st.mu);
  for (;;) {
    if (!st.queue.empty()) {
      Event* e = st.queue.front();
      st.queue.pop_front();
      SyncFdLocked(ch);
      *event = &e->pub;
      return 0;
    }
    // Nothing queued: wait as the program set the fd up, in a read(2) that
    // blocks until the queue goes non-empty, or fails with EAGAIN at once
    // under O_NONBLOCK.
    ++st.waiters;
    ++st.fd_syscalls;
    const bool may_block = !st.nonblocking;
    lock.unlock();
    // The write that ends this wait does not preempt its writer (batch_wait.h).
    if (may_block) batch.Enter();
    void (*hook)(void*, bool) = uscm::librdmacm::g_wait_hook.load();
    void* hook_arg = uscm::librdmacm::g_wait_hook_arg.load();
    if (hook != nullptr) hook(hook_arg, false);
    eventfd_t one;
    int rc, err;
    {
      uscm::librdmacm::WaitCount counted(ch);  // the read is a cancellation point
      rc = eventfd_read(ch->pub.fd, &one);
      err = errno;
      counted.Done();
    }
    if (hook != nullptr) hook(hook_arg, true);
    lock.lock();
    --st.waiters;
    if (rc == 0) st.readable = false;  // this read took the 1
    if (rc == 0 && !st.queue.empty()) {
      Event* e = st.queue.front();
      st.queue.pop_front();
      SyncFdLocked(ch);  // others still queued: readable again
      *event = &e->pub;
      return 0;
    }
    SyncFdLocked(ch);  // a clear skipped while we waited
    if (rc == 0) continue;  // another getter took the event: wait again
    if (err == EAGAIN) {
      st.nonblocking = true;
      if (!st.queue.empty()) continue;  // queued meanwhile, written after our read
      errno = EAGAIN;  // the normal answer of a non-blocking loop: not printed
      return -1;
    }
    if (err == EINTR) continue;
    return Fail(err, "rdma_get_cm_event", "reading the channel's eventfd failed");
  }
}

extern "C" int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return Fail(EINVAL, "rdma_ack_cm_event", "NULL event");
  uscm::librdmacm::Release(reinterpret_cast<Event*>(event));
  return 0;
}
