// A context of our own per device and a thread reading its async events. See
// gid_watch.h.
#include "api/librdmacm/gid_watch.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/fork_locks.h"
#include "mad/signal_free_threads.h"

namespace uscm::librdmacm {
namespace {

// fork()s of this process, counted in the child: a child has none of the
// parent's threads, so a watch started before the fork follows nothing there.
std::atomic<uint64_t> g_forks{0};

// AddressChanges(): bumped after whatever a generation reads moved.
std::atomic<uint64_t> g_changes{0};

void NoteChange() { g_changes.fetch_add(1, std::memory_order_acq_rel); }

// A watch's count moved (an event, or events lost): the watch's own count
// first, then the process's, so a caller that sees the new AddressChanges()
// sees the new generation.
void Count(std::atomic<uint64_t>& changes) {
  changes.fetch_add(1, std::memory_order_acq_rel);
  NoteChange();
}

// A watch stopped following (its thread failed or never started): its
// generation is kGidsNotFollowed from now on.
void StopFollowing(std::atomic<bool>& following) {
  following.store(false, std::memory_order_release);
  NoteChange();
}

struct Watch {
  ibv_context* own = nullptr;  // ours, never the program's; open until StopGidWatch
  std::atomic<uint64_t> changes{0};
  std::atomic<bool> following{false};
  uint64_t forks = g_forks.load(std::memory_order_relaxed);  // when it started
  bool unwatched = false;  // a device with no Ethernet port: generation 0 for good
  // The thread (joined by StopGidWatch) and the eventfd that tells it to stop.
  int stop_fd = -1;
  pthread_t thread{};
  bool joinable = false;
};

// Never destroyed: each watch's thread runs until the process exits or its
// device is removed (StopGidWatch).
struct Watches {
  std::mutex mu;
  std::map<ibv_context*, std::unique_ptr<Watch>> by_context;
};

Watches& TheWatches() {
  static auto* watches = [] {
    // Lock-free: the child may have forked while another thread held mu.
    pthread_atfork(nullptr, nullptr, [] {
      g_forks.fetch_add(1, std::memory_order_relaxed);
      NoteChange();
    });
    return new Watches;
  }();
  return *watches;
}

std::atomic<uint64_t>& TheStarts() {
  static std::atomic<uint64_t> starts{0};
  return starts;
}
std::atomic<uint64_t> g_stops{0};

// Starts a thread `fn(arg)` named `name`: joinable into `*joinable` when it is
// not NULL (and true then), else detached; `following` is true from before it
// runs, false when it could not start (USCM_DEBUG says so: `what` is then
// read at every lookup).
void StartThread(void* (*fn)(void*), void* arg, const char* name, const char* what,
                 std::atomic<bool>* following, pthread_t* thread = nullptr,
                 bool* joinable = nullptr) {
  following->store(true, std::memory_order_release);
  pthread_t t;
  int rc;
  {
    mad::SignalFreeThreads no_signals;
    rc = pthread_create(&t, nullptr, fn, arg);
  }
  if (rc != 0) {
    StopFollowing(*following);
    const std::string why = std::string("no thread to follow ") + what + " (" + strerror(rc) +
                            "): read at every lookup";
    Fail(rc, "address watch", why.c_str());
    return;
  }
  pthread_setname_np(t, name);
  if (thread == nullptr) {
    pthread_detach(t);
    return;
  }
  *thread = t;
  *joinable = true;
}

// The thread: counts GID_CHANGE events until the fd fails, the device is
// lost or StopGidWatch writes the stop eventfd. The count is bumped after the
// kernel's table changed (gid_watch.h), and a lookup that sees the new count
// reads the table again.
void* Follow(void* arg) {
  auto* w = static_cast<Watch*>(arg);
  for (;;) {
    pollfd fds[2] = {{w->own->async_fd, POLLIN, 0}, {w->stop_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) return nullptr;  // StopGidWatch: no longer followed
    if (fds[0].revents == 0) continue;
    ibv_async_event e;
    if (ibv_get_async_event(w->own, &e) != 0) {
      if (errno == EINTR) continue;
      break;
    }
    const ibv_event_type type = e.event_type;
    ibv_ack_async_event(&e);
    if (type == IBV_EVENT_GID_CHANGE) Count(w->changes);
    if (type == IBV_EVENT_DEVICE_FATAL) break;
  }
  StopFollowing(w->following);
  return nullptr;
}

void Start(Watch* w, ibv_context* verbs) {
  ++TheStarts();
  const char* name = ibv_get_device_name(verbs->device);
  w->own = ibv_open_device(verbs->device);
  if (w->own == nullptr) {
    const int err = errno;
    const std::string why = std::string("a second context of ") + name + " did not open (" +
                            strerror(err) + "): its GID table is read at every lookup";
    Fail(err, "GID table watch", why.c_str());
    return;
  }
  w->stop_fd = eventfd(0, EFD_CLOEXEC);
  const std::string what = std::string(name) + "'s GID changes";
  if (w->stop_fd < 0) {
    StopFollowing(w->following);
    Fail(errno, "GID table watch", ("no eventfd to stop the thread following " + what).c_str());
    return;
  }
  StartThread(Follow, w, "uscm-gids", what.c_str(), &w->following, &w->thread, &w->joinable);
}

// What a device needs: a context the library did not open (a test's
// stand-in) is not watched, nor one whose ports are all InfiniBand (only a
// RoCE port's table follows its netdev's addresses; the kept tables of an
// InfiniBand port hold its link layer alone, ud_ah.cc). One ibv_query_port
// per port, at the device's first call.
WatchNeed NeedOf(ibv_context* verbs) {
  const std::vector<ibv_context*> ours = OpenContexts();
  if (std::find(ours.begin(), ours.end(), verbs) == ours.end()) return WatchNeed::kNotOurs;
  ibv_device_attr da;
  if (QueryDeviceOnce(verbs, &da) != 0) return WatchNeed::kHasEthernet;  // unknown: watch it
  for (int port = 1; port <= da.phys_port_cnt; ++port) {
    ibv_port_attr pa;
    if (ibv_query_port(verbs, port, &pa) != 0 || pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
      return WatchNeed::kHasEthernet;
    }
  }
  return WatchNeed::kInfiniBandOnly;
}

struct Hooks {
  WatchNeed (*need)(ibv_context*) = NeedOf;
  void (*start)(Watch*, ibv_context*) = Start;
};

Hooks& TheHooks() {
  static Hooks hooks;
  return hooks;
}

// The host's IP address events: a NETLINK_ROUTE socket in the IPv4 and IPv6
// address groups, and a thread counting what it reads.
struct AddressWatch {
  int fd = -1;
  std::atomic<uint64_t> changes{0};
  std::atomic<bool> following{false};
  uint64_t forks = 0;
};

// Counts RTM_NEWADDR / RTM_DELADDR messages; an overrun (ENOBUFS: events
// were lost) counts as a change too.
void* FollowAddresses(void* arg) {
  auto* w = static_cast<AddressWatch*>(arg);
  alignas(nlmsghdr) char buf[8192];
  for (;;) {
    const ssize_t n = recv(w->fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        Count(w->changes);
        continue;
      }
      break;
    }
    if (n == 0) break;
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == RTM_NEWADDR || h->nlmsg_type == RTM_DELADDR) Count(w->changes);
    }
  }
  StopFollowing(w->following);
  return nullptr;
}

AddressWatch* StartAddressWatch() {
  auto* w = new AddressWatch;  // lives as long as the process, as its thread
  w->forks = g_forks.load(std::memory_order_relaxed);
  w->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  local.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  if (w->fd < 0 || bind(w->fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
    const int err = errno;
    Fail(err, "address watch",
         (std::string("no rtnetlink socket (") + strerror(err) +
          "): the IPoIB ports' addresses are read at every lookup")
             .c_str());
    return w;
  }
  StartThread(FollowAddresses, w, "uscm-addrs", "the host's IP address events",
              &w->following);
  return w;
}

}  // namespace

std::mutex& GidWatchesLock() { return TheWatches().mu; }

uint64_t IpAddressGeneration() {
  TheWatches();  // the fork count
  static AddressWatch* w = [] {
    AddressWatch* started = StartAddressWatch();
    NoteChange();  // the first generation
    return started;
  }();
  if (!w->following.load(std::memory_order_acquire) ||
      w->forks != g_forks.load(std::memory_order_relaxed)) {
    return kGidsNotFollowed;
  }
  return w->changes.load(std::memory_order_acquire);
}

uint64_t GidTableGeneration(ibv_context* verbs) {
  if (verbs == nullptr) return 0;
  Watches& ws = TheWatches();
  std::lock_guard<std::mutex> lock(ws.mu);
  auto it = ws.by_context.find(verbs);
  if (it == ws.by_context.end()) {
    const WatchNeed need = TheHooks().need(verbs);
    if (need == WatchNeed::kNotOurs) return 0;  // nothing to open
    auto w = std::make_unique<Watch>();
    if (need == WatchNeed::kHasEthernet) {
      TheHooks().start(w.get(), verbs);
    } else {
      w->unwatched = true;  // InfiniBand only: no context, no thread
    }
    it = ws.by_context.emplace(verbs, std::move(w)).first;
    NoteChange();  // a device's first generation
  }
  const Watch& w = *it->second;
  if (w.unwatched) return 0;
  if (!w.following.load(std::memory_order_acquire) ||
      w.forks != g_forks.load(std::memory_order_relaxed)) {
    return kGidsNotFollowed;
  }
  return w.changes.load(std::memory_order_acquire);
}

uint64_t GidWatchesStarted() { return TheStarts().load(); }

void StopGidWatch(ibv_context* verbs) {
  std::unique_ptr<Watch> w;
  {
    Watches& ws = TheWatches();
    std::lock_guard<std::mutex> lock(ws.mu);
    auto it = ws.by_context.find(verbs);
    if (it == ws.by_context.end()) return;
    w = std::move(it->second);
    ws.by_context.erase(it);
  }
  ++g_stops;
  if (w->forks != g_forks.load(std::memory_order_relaxed)) {
    // A child of fork(): the thread stayed in the parent, and what it
    // reads is the parent's. Left as it is.
    (void)w.release();
    return;
  }
  if (w->joinable) {
    const uint64_t one = 1;
    if (write(w->stop_fd, &one, sizeof one) != sizeof one) {
      (void)w.release();  // cannot tell it: never freed under a running thread
      return;
    }
    pthread_join(w->thread, nullptr);
  }
  if (w->stop_fd >= 0) close(w->stop_fd);
  if (w->own != nullptr) ibv_close_device(w->own);
  NoteChange();
}

uint64_t GidWatchesStopped() { return g_stops.load(); }

uint64_t AddressChanges() { return g_changes.load(std::memory_order_acquire); }

void CountGidChangeForTesting(ibv_context* verbs) {
  Watches& ws = TheWatches();
  std::lock_guard<std::mutex> lock(ws.mu);
  if (auto it = ws.by_context.find(verbs); it != ws.by_context.end()) Count(it->second->changes);
}

void SetWatchNeedForTesting(WatchNeed (*need)(ibv_context*),
                            void (*start)(ibv_context*, bool* following)) {
  static void (*fake_start)(ibv_context*, bool*) = nullptr;
  Watches& ws = TheWatches();
  std::lock_guard<std::mutex> lock(ws.mu);
  fake_start = start;
  TheHooks().need = need != nullptr ? need : NeedOf;
  TheHooks().start = start == nullptr ? Start : [](Watch* w, ibv_context* verbs) {
    ++TheStarts();
    bool following = false;
    fake_start(verbs, &following);
    w->following.store(following, std::memory_order_release);
  };
}

void FollowForTesting(ibv_context* verbs) {
  Watches& ws = TheWatches();
  std::lock_guard<std::mutex> lock(ws.mu);
  auto w = std::make_unique<Watch>();
  w->following.store(true, std::memory_order_release);  // no context, no thread
  ws.by_context[verbs] = std::move(w);
  NoteChange();
}

}  // namespace uscm::librdmacm
