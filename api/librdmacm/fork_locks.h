// fork() and the library's threads. A port's progress thread (its hook takes
// the library's lock to move events), the uscm-ports thread (port_resync.h)
// and the GID watch's (gid_watch.h) take the library's locks behind the
// program's back; fork() copies a lock one of them holds as held, and only
// the forking thread, so the child's first call that needs it waited for
// ever. The pthread_atfork handlers (fork_locks.cc) take every process-wide
// lock of the library before the fork, in the library's lock order, and
// release them in the parent and in the child. What a child may use:
// docs/API.md "fork()".
//
// Each lock below is defined by its module; the prepare handler takes them
// in this order, which is the order the library nests them in (a lock is
// only ever taken with none that comes after it held).
#ifndef USCM_API_LIBRDMACM_FORK_LOCKS_H_
#define USCM_API_LIBRDMACM_FORK_LOCKS_H_

#include <cstdint>
#include <mutex>

namespace uscm::librdmacm {

std::mutex& RemovedDevicesLock();  // device_calls.cc: one closer of removed devices
// then the library's lock (ids_internal.h internal::g_mu), then:
std::mutex& QpTableLock();      // qps.cc: the CQs and channels rdma_create_qp made
std::mutex& DeviceTableLock();  // devices.cc: the devices, their PDs and arrays
std::mutex& DeviceAttrsLock();  // devices.cc: QueryDeviceOnce's answers
std::mutex& GidCacheLock();     // ud_ah.cc: the kept GID tables (then the watches')
std::mutex& GidWatchesLock();   // gid_watch.cc: the GID watches
std::mutex& EventPoolLock();    // event_channel.cc: the events' pool
// then the uscm C API's handle lock (api/c/uscm_device_on.h).

// The library's own fork: a port's open may start the port's uscmd (fork,
// setsid, fork, exec: api/c/router_on_demand.h), maybe under the library's
// lock, and the child only execs. While one lives on a thread, that thread's
// forks take and release nothing.
class OwnFork {
 public:
  OwnFork();
  ~OwnFork();
  OwnFork(const OwnFork&) = delete;
  OwnFork& operator=(const OwnFork&) = delete;
};

// How many forks took the locks (tests).
uint64_t ForkPrepares();

// How many fork()s of the program this process is a child of (0 in the
// program's first process; the library's own forks are not counted). An id or
// event channel made at another generation is the parent's: in the child
// every call on it fails with EACCES, as the kernel refuses a child's use of
// its parent's rdma_cm fd (ucma_write: ib_safe_file_access), and none of
// them touches what the parent still uses (docs/API.md "fork()").
uint64_t ForkGeneration();

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_FORK_LOCKS_H_
