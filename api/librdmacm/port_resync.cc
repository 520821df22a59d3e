// The uscm-ports thread: the ports added while a wildcard id exists. See
// port_resync.h.
#include "api/librdmacm/port_resync.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm {
namespace {

using internal::g_mu;

// The step's opens, as USCM_DEBUG names them.
constexpr const char* kCall = "a port added later";

// A live port not open yet, and its open (made without the lock).
struct ToOpen {
  Port* port;  // the table's deque keeps it valid
  ibv_context* verbs;
  uint8_t port_num;
  bool testing;
  bool ok = false;
  OpenedPort opened;
};

void Step() {
  PortListing listing;
  bool listing_due;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!internal::AnyWildcardIdLocked()) return;
    listing_due = BeginPortListingLocked(&listing);
  }
  if (listing_due) ListPorts(&listing);
  std::vector<ToOpen> to_open;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (listing_due) FinishPortListingLocked(&listing);
    for (Port* p : LivePortsLocked()) {
      if (p->channel == nullptr && !p->resync_open_failed) {
        to_open.push_back({p, p->verbs, p->port_num, p->testing, false, {}});
      }
    }
  }
  for (ToOpen& o : to_open) {
    o.ok = OpenPortDevice(o.verbs, o.port_num, o.testing, kCall, &o.opened) == 0;
  }
  std::vector<OpenedPort> unused;  // a call opened the port meanwhile
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const ToOpen& o : to_open) {
      if (!o.ok) {
        o.port->resync_open_failed = true;
      } else if (!InstallOpenedPortLocked(o.port, o.opened, internal::OnPortOpen)) {
        unused.push_back(o.opened);
      }
    }
    internal::ClaimNewPortsLocked();
  }
  for (const OpenedPort& o : unused) CloseOpenedPort(o);
}

// One thread's state: a thread stopped and taken out for joining keeps its
// own, so a thread started meanwhile is not told to stop by it.
struct Worker {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool stepping = false;  // in Step: a join would wait for it (a port's open)
  bool exited = false;    // past its last lock: join returns at once
  pthread_t thread;
};

void* Run(void* arg) {
  auto* w = static_cast<Worker*>(arg);
  std::unique_lock<std::mutex> lock(w->mu);
  for (;;) {
    w->cv.wait_for(lock, std::chrono::seconds(1), [w] { return w->stop; });
    if (w->stop) break;
    w->stepping = true;
    lock.unlock();
    Step();
    lock.lock();
    w->stepping = false;
  }
  w->exited = true;
  return nullptr;
}

// The current thread (NULL: none), under `mu`. Replaced whole in a fork's
// child (ForgetInChild): the parent's thread is not there, and another
// thread of the parent may have held `mu` at the fork.
struct Workers {
  std::mutex mu;
  Worker* current = nullptr;
};

std::atomic<bool> g_allow_simulated{false};  // AllowPortResyncThreadForTesting

Workers*& TheWorkers() {
  static Workers* workers = new Workers;
  return workers;
}

void Join(Worker* w) {
  pthread_join(w->thread, nullptr);
  delete w;
}

// Takes the current thread out, telling it to stop; the caller joins it (no
// lock held). `stopped_only`: only one told to stop already and not in a
// step (its join is then its wake-up and return; one in a step is joined by
// the next start or at exit).
Worker* TakeCurrent(bool stopped_only) {
  Workers& ws = *TheWorkers();
  std::lock_guard<std::mutex> lock(ws.mu);
  Worker* w = ws.current;
  if (w == nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> wl(w->mu);
    if (stopped_only && (!w->stop || w->stepping)) return nullptr;
    w->stop = true;
  }
  w->cv.notify_all();
  ws.current = nullptr;
  return w;
}

void JoinAtExit() {
  if (Worker* w = TakeCurrent(/*stopped_only=*/false)) Join(w);
}

void ForgetInChild() { TheWorkers() = new Workers; }  // the parent's is leaked

}  // namespace

namespace internal {

void StartPortResyncLocked() {
  Workers& ws = *TheWorkers();
  std::lock_guard<std::mutex> lock(ws.mu);
  if (Worker* w = ws.current) {
    std::unique_lock<std::mutex> wl(w->mu);
    if (!w->exited) {  // running, or stopped but still in its loop: it goes on
      w->stop = false;
      return;
    }
    wl.unlock();
    Join(w);  // past its last lock: it takes none of ours
    ws.current = nullptr;
  }
  const std::vector<Port*> ports = PortsLocked();
  if (!ports.empty() && ports.front()->testing && !g_allow_simulated.load()) return;
  static const bool hooks = [] {
    atexit(JoinAtExit);
    pthread_atfork(nullptr, nullptr, ForgetInChild);
    return true;
  }();
  (void)hooks;
  auto* w = new Worker;
  if (int rc = pthread_create(&w->thread, nullptr, Run, w); rc != 0) {
    delete w;
    Fail(rc, "port resync",
         (std::string("no thread (") + strerror(rc) +
          "): a port added later gets no wildcard id until the next wildcard id starts one")
             .c_str());
    return;
  }
  pthread_setname_np(w->thread, "uscm-ports");
  ws.current = w;
}

void StopPortResyncLocked() {
  Workers& ws = *TheWorkers();
  std::lock_guard<std::mutex> lock(ws.mu);
  if (Worker* w = ws.current) {
    {
      std::lock_guard<std::mutex> wl(w->mu);
      w->stop = true;
    }
    w->cv.notify_all();
  }
}

void JoinStoppedPortResync() {
  if (Worker* w = TakeCurrent(/*stopped_only=*/true)) Join(w);
}

}  // namespace internal

void RunPortResyncForTesting() { Step(); }

bool PortResyncRunning() {
  Workers& ws = *TheWorkers();
  std::lock_guard<std::mutex> lock(ws.mu);
  if (ws.current == nullptr) return false;
  std::lock_guard<std::mutex> wl(ws.current->mu);
  return !ws.current->stop;
}

void AllowPortResyncThreadForTesting(bool allow) { g_allow_simulated.store(allow); }

}  // namespace uscm::librdmacm
