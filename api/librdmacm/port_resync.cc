// The uscm-ports thread: the ports added while a wildcard id exists. See
// port_resync.h.
#include "api/librdmacm/port_resync.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/ports.h"
#include "api/librdmacm/uevents.h"
#include "mad/signal_free_threads.h"

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

// What makes a step.
enum class StepFor {
  kPeriod,   // the once-a-second step (no listing within 100 ms of a miss's)
  kAdded,    // a uevent said a verbs device was added
  kRemoved,  // a uevent said a verbs device was removed
};

// The most steps between two tries of a port whose opens failed (about 32 s
// at the once-a-second period).
constexpr int kResyncMaxSteps = 32;

// The steps that opened ports (a wildcard id, or a listener waiting for a
// lost port's fresh entry), numbered from 1: Port::resync_retry's clock.
// Under g_mu.
uint64_t g_open_steps = 0;

// Whether step `step` tries to open `p`: not before the step a failed open
// set (CountOpenLocked).
bool OpenDueLocked(const Port* p, uint64_t step) { return step >= p->resync_retry.at_step; }

// After step `step`'s open of `p`: its failures in a row and the step to try
// again at, so a new uscmd that did not start is tried again at the 1st,
// 2nd, 4th, 8th ... step after the failure, then every 32nd.
void CountOpenLocked(Port* p, bool ok, uint64_t step) {
  if (ok) {
    p->resync_retry = {};
    return;
  }
  const int failures = p->resync_retry.failures + 1;
  const int after = std::min(1 << std::min(failures - 1, 5), kResyncMaxSteps);
  p->resync_retry = {step + after, failures};
  if (DebugEnabled()) {
    fprintf(stderr,
            "uscm librdmacm: uscm-ports: %s:%u did not open (%d in a row): tried again in %d "
            "step(s)\n",
            p->ca.c_str(), p->port_num, failures, after);
  }
}

// The listing, and with a wildcard id the new ports' opens and claims (a
// listener bound to a lost port's address: its fresh entry's open and the
// listener's move); then the close of the devices it saw go (and
// DEVICE_REMOVAL to the ids on them) and of the lost ports no id lives on.
// Without any of them only a removal makes a step.
void Step(StepFor why) {
  PortListing listing;
  bool listing_due;
  bool wildcard;
  bool moving;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    wildcard = internal::AnyWildcardIdLocked();
    moving = internal::AnyListenerToMoveLocked();
    if (!wildcard && !moving && !internal::AnyLostPortToCloseLocked() &&
        why != StepFor::kRemoved) {
      return;
    }
    listing_due = BeginPortListingLocked(&listing, why == StepFor::kPeriod);
  }
  if (listing_due) ListPorts(&listing);
  std::vector<ToOpen> to_open;
  uint64_t step = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (listing_due) FinishPortListingLocked(&listing);
    if (wildcard || moving) step = ++g_open_steps;
    for (Port* p : wildcard || moving ? LivePortsLocked() : std::vector<Port*>{}) {
      if (p->channel != nullptr || p->resync_opening ||
          !(wildcard || internal::ListenerWaitsForLocked(p)) || !OpenDueLocked(p, step)) {
        continue;
      }
      p->resync_opening = true;
      to_open.push_back({p, p->verbs, p->port_num, p->testing, false, {}});
    }
  }
  for (ToOpen& o : to_open) {
    o.ok = OpenPortDevice(o.verbs, o.port_num, o.testing, kCall, &o.opened) == 0;
  }
  std::vector<OpenedPort> unused;  // a call opened the port meanwhile
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const ToOpen& o : to_open) {
      o.port->resync_opening = false;
      CountOpenLocked(o.port, o.ok, step);
      if (o.ok && !InstallOpenedPortLocked(o.port, o.opened, internal::OnPortOpen)) {
        unused.push_back(o.opened);
      }
    }
    if (wildcard) {
      RefreshPortAddressesLocked();
      internal::ClaimNewPortsLocked();
    }
    if (moving) internal::MoveListenersLocked();
  }
  for (const OpenedPort& o : unused) CloseOpenedPort(o);
  // A device the listing saw go: closed once nothing holds it, its ids sent
  // DEVICE_REMOVAL (ids.h), from here as from a call (this is no port's
  // progress thread, so it can join theirs). The program of a wildcard
  // listener may make no call at all, nor one waiting for events.
  CloseRemovedDevicesIfNew();
  // A port whose uscmd exited, once its ids are gone (its entry was replaced
  // by the pump, and opened again above).
  CloseLostPorts();
}

std::atomic<int> g_period_ms{1000};  // SetPortResyncPeriodForTesting
std::atomic<bool> g_periodic{false};  // a wildcard id exists: StartPortResyncLocked
int (*g_open_uevents)() = OpenUeventSocket;
std::atomic<uint64_t> g_steps{0};  // PortResyncSteps
std::atomic<uint64_t> g_waits{0};  // PortResyncWaits

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// What the uevents queued on a socket said of verbs devices.
struct Uevents {
  bool added = false;
  bool removed = false;
  std::string devpath;  // of the last one that said either
};

// Reads every uevent queued on `fd`.
Uevents DrainUevents(int fd) {
  Uevents seen;
  char buf[8192];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOBUFS) {  // events lost: one may have been an add or a remove
      seen.added = seen.removed = true;
      seen.devpath = "(events lost)";
      continue;
    }
    if (n <= 0) return seen;
    switch (ParseVerbsUevent(buf, static_cast<size_t>(n), &seen.devpath)) {
      case VerbsUevent::kAdded: seen.added = true; break;
      case VerbsUevent::kRemoved: seen.removed = true; break;
      case VerbsUevent::kOther: break;
    }
  }
}

// One thread's state: a thread stopped and taken out for joining keeps its
// own, so a thread started meanwhile is not told to stop by it.
struct Worker {
  std::mutex mu;
  int wake_fd = -1;  // an eventfd: written when `stop` is set
  bool stop = false;
  bool stepping = false;  // in Step: a join would wait for it (a port's open)
  bool exited = false;    // past its last lock: join returns at once
  pthread_t thread;
};

// Waits for a uevent of a verbs device's add or removal or, while a wildcard
// id exists (g_periodic), the period's end, whichever comes first, then
// steps; other uevents (a netdev, a disk) and a wake-up only wake it.
void* Run(void* arg) {
  auto* w = static_cast<Worker*>(arg);
  const int uevents = g_open_uevents();  // -1: the once-a-second listing alone
  if (uevents < 0) {
    Fail(errno, "port resync",
         "no uevent socket: a device added is found by the once-a-second listing alone, "
         "one removed at the program's next call");
  }
  int64_t next = -1;  // the period's end; none while no wildcard id exists
  for (;;) {
    if (!g_periodic.load()) {
      next = -1;
    } else if (next < 0) {
      next = NowMs() + g_period_ms.load();
    }
    pollfd fds[2] = {{w->wake_fd, POLLIN, 0}, {uevents, POLLIN, 0}};
    const int64_t wait = next < 0 ? 60'000 : std::clamp<int64_t>(next - NowMs(), 0, 60'000);
    g_waits.fetch_add(1, std::memory_order_release);
    poll(fds, uevents >= 0 ? 2 : 1, static_cast<int>(wait));
    uint64_t junk;
    if ((fds[0].revents & POLLIN) != 0) (void)!read(w->wake_fd, &junk, sizeof junk);
    const Uevents seen =
        uevents >= 0 && (fds[1].revents & POLLIN) != 0 ? DrainUevents(uevents) : Uevents{};
    {
      std::lock_guard<std::mutex> lock(w->mu);
      if (w->stop) break;
      if (!seen.added && !seen.removed && (next < 0 || NowMs() < next)) continue;
      w->stepping = true;
    }
    if ((seen.added || seen.removed) && DebugEnabled()) {
      fprintf(stderr, "uscm librdmacm: uscm-ports: listing now: a uevent says %s@%s\n",
              seen.removed ? "remove" : "add", seen.devpath.c_str());
    }
    Step(seen.removed ? StepFor::kRemoved : seen.added ? StepFor::kAdded : StepFor::kPeriod);
    g_steps.fetch_add(1, std::memory_order_release);
    std::lock_guard<std::mutex> lock(w->mu);
    w->stepping = false;
    next = -1;  // the next period from now
  }
  if (uevents >= 0) close(uevents);
  std::lock_guard<std::mutex> lock(w->mu);
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
std::atomic<bool> g_no_thread{false};         // NoPortResyncThreadForTesting

Workers*& TheWorkers() {
  static Workers* workers = new Workers;
  return workers;
}

void Join(Worker* w) {
  pthread_join(w->thread, nullptr);
  close(w->wake_fd);
  delete w;
}

void Wake(Worker* w) {
  const uint64_t one = 1;
  (void)!write(w->wake_fd, &one, sizeof one);
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
  Wake(w);
  ws.current = nullptr;
  return w;
}

void JoinAtExit() {
  if (Worker* w = TakeCurrent(/*stopped_only=*/false)) Join(w);
}

void ForgetInChild() { TheWorkers() = new Workers; }  // the parent's is leaked

}  // namespace

namespace internal {

void StartPortResyncLocked(bool periodic) {
  Workers& ws = *TheWorkers();
  std::lock_guard<std::mutex> lock(ws.mu);
  const bool was_periodic = g_periodic.exchange(periodic);
  if (Worker* w = ws.current) {
    std::unique_lock<std::mutex> wl(w->mu);
    if (!w->exited) {  // running, or stopped but still in its loop: it goes on
      w->stop = false;
      if (periodic && !was_periodic) Wake(w);  // its period starts now, not after a 60 s wait
      return;
    }
    wl.unlock();
    Join(w);  // past its last lock: it takes none of ours
    ws.current = nullptr;
  }
  const std::vector<Port*> ports = PortsLocked();
  if (g_no_thread.load()) return;
  if (!ports.empty() && ports.front()->testing && !g_allow_simulated.load()) return;
  static const bool hooks = [] {
    atexit(JoinAtExit);
    pthread_atfork(nullptr, nullptr, ForgetInChild);
    return true;
  }();
  (void)hooks;
  auto* w = new Worker;
  w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->wake_fd < 0) {
    const int err = errno;
    delete w;
    Fail(err, "port resync", "no eventfd: a port added later gets no wildcard id");
    return;
  }
  int rc;
  {
    mad::SignalFreeThreads no_signals;
    rc = pthread_create(&w->thread, nullptr, Run, w);
  }
  if (rc != 0) {
    close(w->wake_fd);
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
    Wake(w);
  }
}

void JoinStoppedPortResync() {
  if (Worker* w = TakeCurrent(/*stopped_only=*/true)) Join(w);
}

}  // namespace internal

void RunPortResyncForTesting() { Step(StepFor::kPeriod); }

uint64_t PortResyncSteps() { return g_steps.load(std::memory_order_acquire); }

uint64_t PortResyncWaits() { return g_waits.load(std::memory_order_acquire); }

void SetPortResyncPeriodForTesting(int ms) { g_period_ms.store(ms > 0 ? ms : 1000); }

void SetUeventSourceForTesting(int (*open)()) {
  g_open_uevents = open != nullptr ? open : OpenUeventSocket;
}

bool PortResyncRunning() {
  Workers& ws = *TheWorkers();
  std::lock_guard<std::mutex> lock(ws.mu);
  if (ws.current == nullptr) return false;
  std::lock_guard<std::mutex> wl(ws.current->mu);
  return !ws.current->stop;
}

void AllowPortResyncThreadForTesting(bool allow) { g_allow_simulated.store(allow); }

void NoPortResyncThreadForTesting(bool none) { g_no_thread.store(none); }

}  // namespace uscm::librdmacm
