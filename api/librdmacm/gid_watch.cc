// A context of our own per device and a thread reading its async events. See
// gid_watch.h.
#include "api/librdmacm/gid_watch.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

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

namespace uscm::librdmacm {
namespace {

// fork()s of this process, counted in the child: a child has none of the
// parent's threads, so a watch started before the fork follows nothing there.
std::atomic<uint64_t> g_forks{0};

struct Watch {
  ibv_context* own = nullptr;  // ours, never the program's; open for the process
  std::atomic<uint64_t> changes{0};
  std::atomic<bool> following{false};
  uint64_t forks = g_forks.load(std::memory_order_relaxed);  // when it started
};

// Never destroyed: each watch's thread runs until the process exits.
struct Watches {
  std::mutex mu;
  std::map<ibv_context*, std::unique_ptr<Watch>> by_context;
};

Watches& TheWatches() {
  static auto* watches = [] {
    // Lock-free: the child may have forked while another thread held mu.
    pthread_atfork(nullptr, nullptr, [] { g_forks.fetch_add(1, std::memory_order_relaxed); });
    return new Watches;
  }();
  return *watches;
}

// The thread: counts GID_CHANGE events until the fd fails or the device is
// lost. The count is bumped after the kernel's table changed (gid_watch.h),
// and a lookup that sees the new count reads the table again.
void* Follow(void* arg) {
  auto* w = static_cast<Watch*>(arg);
  for (;;) {
    ibv_async_event e;
    if (ibv_get_async_event(w->own, &e) != 0) {
      if (errno == EINTR) continue;
      break;
    }
    const ibv_event_type type = e.event_type;
    ibv_ack_async_event(&e);
    if (type == IBV_EVENT_GID_CHANGE) w->changes.fetch_add(1, std::memory_order_acq_rel);
    if (type == IBV_EVENT_DEVICE_FATAL) break;
  }
  w->following.store(false, std::memory_order_release);
  return nullptr;
}

void Start(Watch* w, ibv_context* verbs) {
  const char* name = ibv_get_device_name(verbs->device);
  w->own = ibv_open_device(verbs->device);
  if (w->own == nullptr) {
    const int err = errno;
    const std::string why = std::string("a second context of ") + name + " did not open (" +
                            strerror(err) + "): its GID table is read at every lookup";
    Fail(err, "GID table watch", why.c_str());
    return;
  }
  w->following.store(true, std::memory_order_release);
  pthread_t thread;
  if (int rc = pthread_create(&thread, nullptr, Follow, w); rc != 0) {
    w->following.store(false, std::memory_order_release);
    const std::string why = std::string("no thread to follow ") + name + "'s GID changes (" +
                            strerror(rc) + "): its GID table is read at every lookup";
    Fail(rc, "GID table watch", why.c_str());
    return;
  }
  pthread_setname_np(thread, "uscm-gids");
  pthread_detach(thread);
}

}  // namespace

uint64_t GidTableGeneration(ibv_context* verbs) {
  if (verbs == nullptr) return 0;
  Watches& ws = TheWatches();
  std::lock_guard<std::mutex> lock(ws.mu);
  auto it = ws.by_context.find(verbs);
  if (it == ws.by_context.end()) {
    const std::vector<ibv_context*> ours = OpenContexts();
    if (std::find(ours.begin(), ours.end(), verbs) == ours.end()) {
      return 0;  // not a device of ours (a test's stand-in): nothing to open
    }
    auto w = std::make_unique<Watch>();
    Start(w.get(), verbs);
    it = ws.by_context.emplace(verbs, std::move(w)).first;
  }
  const Watch& w = *it->second;
  if (!w.following.load(std::memory_order_acquire) ||
      w.forks != g_forks.load(std::memory_order_relaxed)) {
    return kGidsNotFollowed;
  }
  return w.changes.load(std::memory_order_acquire);
}

void FollowForTesting(ibv_context* verbs) {
  Watches& ws = TheWatches();
  std::lock_guard<std::mutex> lock(ws.mu);
  auto w = std::make_unique<Watch>();
  w->following.store(true, std::memory_order_release);  // no context, no thread
  ws.by_context[verbs] = std::move(w);
}

}  // namespace uscm::librdmacm
