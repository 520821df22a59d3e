// The ports added while a wildcard id exists, and the devices removed while a
// port is open. The kernel's rdma_cm puts every
// wildcard id on a device added later with no call of the program
// (cma_add_one: cma_listen_on_dev for the listeners; the bind list, cma_ps,
// is the host's, so a wildcard bind holds its port there too). The drop-in
// learns of a new device only by listing them (no event: libibverbs has
// none, and the RDMA netlink monitor, RDMA_NLDEV_CMD_MONITOR, came after
// Debian 12's 6.1 kernel), so while a wildcard-bound id exists (listening or
// not: wildcard_ids.cc) a thread of the drop-in's own, uscm-ports, lists
// the devices and their ports again once a second, and at once when the
// kernel's uevent says a verbs device was added (uevents.h; where no uevent
// comes, a container's network namespace, the once-a-second listing finds
// it), and puts every wildcard id on each port found since: its bind there,
// and its listen for a listener. Each step also reads the open ports'
// addresses again when they changed (ports.h RefreshPortAddressesLocked).
//
// The kernel also sends DEVICE_REMOVAL to every id on a device when it goes
// (cma_process_remove), with no call of the program. While a port of a
// listed device is open (a program with any id on a port), the thread also
// runs, with no period of its own when no wildcard id exists: when the
// uevent says a verbs device was removed (ib_uverbs deletes its char device
// first, then waits for the contexts still open), it lists the devices at
// once and closes the removed ones nothing holds, and the ids on the others
// get DEVICE_REMOVAL (ids.h CloseRemovedDevices). Where no uevent comes, a
// removal is noticed at the program's next call that lists the devices, or
// by the once-a-second listing while a wildcard id exists. A port whose
// uscmd exited while its device stayed is replaced in the table by the pump
// (ids_internal.h OnLostPathLocked): a step opens the fresh entry like a port
// added later (a new uscmd, started on demand), claims it for the wildcard
// ids, moves there the listeners bound to the port's address (their period
// runs while one waits, wildcard id or not: MoveListenersLocked), and
// closes the lost entry's uscm device once no id lives on it (ids.h
// CloseLostPorts; the period runs while such an entry waits, wildcard id or
// not: a port a call found lost with no id on it, ids_internal.h
// OpenPortForIdLocked).
//
// The slow parts run without the library's lock, so no call of the program
// waits for them: the listing (ibv_get_device_list, an ibv_query_port and the
// addresses of each new port: ports.h ListPorts) and the new port's open
// (uscm_device_open, which may start the port's uscmd and wait up to 10 s
// for it: ports.h OpenPortDevice); the lock is taken to read the table, to
// add what was found, and for the claims (a bind and a listen per id).
//
// The thread is started by the first wildcard id or port open, and stopped
// when no wildcard id and no open live port are left (StartPortResyncLocked,
// StopPortResyncLocked, under the lock: ids_internal.h
// PortThreadNeedChangedLocked); it is joined
// without the lock: by rdma_destroy_id once it returned its lock
// (JoinStoppedPortResync) unless a step is under way (a port's open: the
// call would wait for it), else by the next start once it exited, or at
// exit (an atexit handler stops and joins a running one; a step under way
// finishes first: at most one port's open per port added). A child of fork() has no such
// thread (only the forking thread is copied): it forgets the parent's, and
// its next wildcard id or port open starts one of its own (the ids it
// inherited are put on new ports from then on).
// A fork() made while the thread is in the locked part of a step (the
// table's read and extension, the claims: short) waits for it to end
// (fork_locks.h); the listing and the opens hold no lock of the library's.
#ifndef USCM_API_LIBRDMACM_PORT_RESYNC_H_
#define USCM_API_LIBRDMACM_PORT_RESYNC_H_

#include <cstdint>

namespace uscm::librdmacm::internal {

// Under the library's lock: the thread is needed (it starts when none runs;
// a stopped one not yet exited keeps running), with its once-a-second
// listing when `periodic` (a wildcard id exists; else it waits for uevents
// alone), or no longer (it is told to stop; not joined here: it may be
// waiting for the lock). On simulated ports (tests) no thread starts unless
// AllowPortResyncThreadForTesting: tests step it with RunPortResyncForTesting.
void StartPortResyncLocked(bool periodic);
void StopPortResyncLocked();
// Without the library's lock: joins the thread when StopPortResyncLocked
// stopped it and it is not in a step.
void JoinStoppedPortResync();

}  // namespace uscm::librdmacm::internal

namespace uscm::librdmacm {

// One step of the thread in the caller's thread, with no lock held on entry:
// the listing (spaced as a miss's: none within 100 ms of the last), the
// opening of every live port not open yet (one whose open failed is tried
// again at the 1st, 2nd, 4th ... step after, then every 32nd: ports.h
// resync_retry), then every wildcard id on every open port it is
// not on yet (ids_internal.h ClaimNewPortsLocked), then the close of the
// removed devices and the lost ports nothing holds.
void RunPortResyncForTesting();
// Whether the thread runs (started and not stopped).
bool PortResyncRunning();
// Tests: whether the thread may start on simulated ports.
void AllowPortResyncThreadForTesting(bool allow);
// Tests whose fake devices a thread must not list behind their back (they
// step it with RunPortResyncForTesting): no thread starts while `none`.
void NoPortResyncThreadForTesting(bool none);
// How many steps the thread made (all threads of the process, since it
// started).
uint64_t PortResyncSteps();
// How many times a thread began a wait (tests: a thread past its start).
uint64_t PortResyncWaits();
// Tests: the thread's period (0: 1 s), and what opens its uevent socket
// (nullptr: uevents.h OpenUeventSocket; a test's returns its own socket's
// fd, which the thread closes when it stops), both for threads started
// from now on.
void SetPortResyncPeriodForTesting(int ms);
void SetUeventSourceForTesting(int (*open)());

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_PORT_RESYNC_H_
