// When a device's GID tables change: the signal the drop-in's kept GID tables
// (ud_ah.h) follow the kernel's by, without a syscall per lookup.
//
// The kernel's GID cache (drivers/infiniband/core/cache.c) dispatches
// IB_EVENT_GID_CHANGE after it wrote or deleted an entry (__ib_cache_gid_add:
// add_modify_gid then dispatch_gid_change_event; _ib_cache_gid_del: del_gid
// then the event), to every handler registered on the device, and uverbs
// registers one per user context (ib_uverbs_init_async_event_file:
// ib_uverbs_event_handler queues the event, with its port number, on the
// context's async fd). So a table read after the event is the kernel's new
// table. rtnetlink's address events come before it (roce_gid_mgmt updates
// the table later, from a workqueue): a read on them could still see the old
// table. The program's contexts (id->verbs) are not used: their async events
// are the program's to read. The watch opens a context of its own per device
// and a thread of ours blocks on its async fd.
#ifndef USCM_API_LIBRDMACM_GID_WATCH_H_
#define USCM_API_LIBRDMACM_GID_WATCH_H_

#include <infiniband/verbs.h>

#include <cstdint>

namespace uscm::librdmacm {

// GidTableGeneration when the device's events cannot be followed (a second
// context did not open, the thread did not start, or the device reported a
// fatal error): the caller cannot trust a kept table and reads it again.
inline constexpr uint64_t kGidsNotFollowed = ~uint64_t{0};

// How many IBV_EVENT_GID_CHANGE events the device of `verbs` (one of the
// drop-in's contexts, devices.h) reported since it was first asked about: a
// table read after taking generation G is the kernel's as long as this is
// still G. The first call for a device starts its watch (one context and one
// thread for the life of the process, as the contexts themselves); later
// calls take a mutex and an atomic load, no syscall. 0 for a NULL context
// and for one the library did not open (devices.h: tests' stand-ins), which
// are not watched, and for a device with no Ethernet port (its tables are not
// kept, ud_ah.cc): neither gets a context or a thread. In a child of fork() a watch started before the fork is
// kGidsNotFollowed: its thread stayed in the parent.
uint64_t GidTableGeneration(ibv_context* verbs);

// A removed device's watch ends (before its context closes, devices.h
// CloseIfUnused): its thread is told to stop and joined, its context of our
// own closed, and the device forgotten (its pointer may come back for another
// device). Nothing for a device not watched. No event comes when rxe's
// device is removed, so the thread would otherwise wait for the process's
// life, and its context would keep `rdma link del` waiting (docs/API.md
// "Devices and ports that appear later").
void StopGidWatch(ibv_context* verbs);
// How many watches StopGidWatch ended (tests).
uint64_t GidWatchesStopped();

// Which devices are watched (GidTableGeneration's first call for a device).
enum class WatchNeed { kNotOurs, kInfiniBandOnly, kHasEthernet };
// Tests: `need` decides for a device instead of OpenContexts and
// ibv_query_port, and `start` is called instead of opening a context and a
// thread (it says whether the device's events are followed). nullptr
// restores each. Devices already asked about keep their watch.
void SetWatchNeedForTesting(WatchNeed (*need)(ibv_context*),
                            void (*start)(ibv_context*, bool* following));
// How many watches were started (a context and a thread, or `start`'s fake).
uint64_t GidWatchesStarted();

// How many IPv4 / IPv6 address events (rtnetlink RTM_NEWADDR, RTM_DELADDR)
// the host reported since the first call: the IP addresses of an IPoIB
// interface (an InfiniBand port's, ports.h) read after taking generation G are
// the kernel's as long as this is still G (the kernel sends the event after
// the address list changed). The first call opens a NETLINK_ROUTE socket in
// the two address groups and starts a thread reading it (uscm-addrs), for the
// life of the process; later calls are an atomic load. kGidsNotFollowed when
// the socket or the thread did not start, the socket failed, and in a child
// of fork() (the thread stayed in the parent). Lost events (ENOBUFS) count as
// a change.
uint64_t IpAddressGeneration();

// How many times something GidTableGeneration or IpAddressGeneration
// returns may have moved, process-wide: bumped after a watch's count moves
// (an event, events lost), when a device's watch or the address watch is
// first asked about, when a watch stops following, and in the child of each
// fork(). A caller that asked its generations after reading C here need not
// ask them again while this still reads C (ports.h PortOfAddressLocked): one
// atomic load instead of a mutex and a lookup per device.
uint64_t AddressChanges();

// Records `verbs` as followed (generation 0) with no context or thread of
// its own, as if its watch had started.
void FollowForTesting(ibv_context* verbs);
// What the watch's thread does on IBV_EVENT_GID_CHANGE, for a device
// FollowForTesting recorded.
void CountGidChangeForTesting(ibv_context* verbs);

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_GID_WATCH_H_
