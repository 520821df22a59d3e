// rdma_get_cm_event's blocking wait as SCHED_BATCH. See batch_wait.h.
#include "api/librdmacm/batch_wait.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

namespace uscm::librdmacm {
namespace {

std::atomic<bool> g_enabled{true};
std::atomic<uint64_t> g_batch_waits{0};

// USCM_BATCH_WAIT=0: the program's waits as before (its event thread
// preempts the thread that queued the event, as a ucma reader's wake does).
bool OffByEnvironment() {
  const char* v = getenv("USCM_BATCH_WAIT");
  return v != nullptr && strcmp(v, "0") == 0;
}

}  // namespace

void BatchWhileWaiting::Enter() {
  if (checked_) return;
  checked_ = true;
  if (!g_enabled.load(std::memory_order_relaxed) || OffByEnvironment()) return;
  // Exactly SCHED_OTHER: not a real-time or idle thread, nor one with
  // SCHED_RESET_ON_FORK (sched_getscheduler ORs it in).
  const int saved = errno;
  if (sched_getscheduler(0) == SCHED_OTHER) {
    sched_param none = {};
    changed_ = sched_setscheduler(0, SCHED_BATCH, &none) == 0;
    if (changed_) g_batch_waits.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved;  // a refusal (a seccomp filter) only costs the wake-ups
}

BatchWhileWaiting::~BatchWhileWaiting() {
  if (!changed_) return;
  const int saved = errno;  // the call's own errno (EAGAIN, ...) stays
  // Still ours: the program may have set the thread's policy meanwhile
  // (pthread_setschedparam from another thread), and that one stays.
  if (sched_getscheduler(0) == SCHED_BATCH) {
    sched_param none = {};
    sched_setscheduler(0, SCHED_OTHER, &none);
  }
  errno = saved;
}

uint64_t BatchWaits() { return g_batch_waits.load(std::memory_order_relaxed); }

void SetBatchWaitsForTesting(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

}  // namespace uscm::librdmacm
