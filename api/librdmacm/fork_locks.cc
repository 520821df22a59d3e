// The pthread_atfork handlers of the library's locks. See fork_locks.h.
#include "api/librdmacm/fork_locks.h"

#include <pthread.h>

#include <array>
#include <atomic>
#include <mutex>

#include "api/c/uscm_device_on.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"

namespace uscm::librdmacm {
namespace {

thread_local int t_own_forks = 0;  // OwnFork scopes on this thread
// Whether this thread's prepare took the locks (the same thread runs the
// parent's or the child's handler after it).
thread_local bool t_taken = false;
std::atomic<uint64_t> g_prepares{0};
std::atomic<uint64_t> g_generation{0};  // ForkGeneration

// In fork_locks.h's order.
std::array<std::mutex*, 8> Locks() {
  return {&RemovedDevicesLock(), &internal::g_mu, &QpTableLock(),  &DeviceTableLock(),
          &DeviceAttrsLock(),    &GidCacheLock(), &GidWatchesLock(), &EventPoolLock()};
}

void Prepare() {
  if (t_own_forks > 0) return;
  g_prepares.fetch_add(1, std::memory_order_relaxed);
  for (std::mutex* mu : Locks()) mu->lock();
  c_api::LockHandlesForFork();
  t_taken = true;
}

void Release() {
  if (!t_taken) return;
  t_taken = false;
  c_api::UnlockHandlesAfterFork();
  const std::array<std::mutex*, 8> locks = Locks();
  for (auto it = locks.rbegin(); it != locks.rend(); ++it) (*it)->unlock();
}

void InChild() {
  // A parent's progress thread may have been checking the ports' channels;
  // the child has none of its threads.
  ForgetOpenChannelReadersInChild();
  if (t_taken) {  // a program's fork: the library's locks are held (Prepare)
    g_generation.fetch_add(1, std::memory_order_relaxed);
    internal::LeaveToParentInChildLocked();
  }
  Release();
}

// At load, before any call: a registration never waits for a fork's
// handlers, and the library's locks exist from then on.
const bool g_registered = pthread_atfork(Prepare, Release, InChild) == 0;

}  // namespace

OwnFork::OwnFork() { ++t_own_forks; }
OwnFork::~OwnFork() { --t_own_forks; }

uint64_t ForkPrepares() { return g_prepares.load(std::memory_order_relaxed); }
uint64_t ForkGeneration() { return g_generation.load(std::memory_order_relaxed); }

}  // namespace uscm::librdmacm
