// The RDMA ports the drop-in serves, as librdmacm finds a device per id: every
// ACTIVE port of the devices libibverbs lists (USCM_DEVICE /
// `uscm exec --device` restricts them to one: port_choice.h; only those
// devices are opened, devices.h), listed at the first id call that needs a
// port (not rdma_create_id) with the addresses that belong to each (and again
// when a lookup misses: a port ACTIVE since, a device added or removed), and each
// opened through
// uscm_device_open (umad, or the host's uscmd) on first use. An id goes to
// the port of the address it binds or resolves from (librdmacm's
// ucma_get_device after the kernel's cma_acquire_dev_by_src_ip): the GID
// table of a RoCE port (IPv4-mapped and IPv6 GIDs), the IPoIB interfaces of
// an InfiniBand port (verbs/ipoib.h), the GIDs for AF_IB.
//
// The "Locked" calls run under the caller's lock (ids.cc's): the table has
// no lock of its own.
#ifndef USCM_API_LIBRDMACM_PORTS_H_
#define USCM_API_LIBRDMACM_PORTS_H_

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/port_choice.h"

namespace uscm::librdmacm {

using Addr16 = std::array<uint8_t, 16>;  // an IPv6 address, IPv4 as ::ffff:a.b.c.d, or a GID

struct Port {
  std::string ca;
  uint8_t port_num = 0;
  ibv_context* verbs = nullptr;  // NULL for a simulated device
  std::vector<Addr16> ips;       // the port's IP addresses
  std::vector<Addr16> gids;      // its GID table (AF_IB)
  bool ethernet = false;         // RoCE
  int gid_count = 0;             // the GID table's length (ibv_port_attr)
  // The generation of the port's addresses taken before `ips` and `gids`
  // were read (AddressGeneration), and the one a miss last read them again at.
  uint64_t generation = 0;
  uint64_t missed_at = ~uint64_t{0};
  bool testing = false;          // a simulated device of UsePortsForTesting
  // Its device was removed (devices.h DeviceGone), or its MAD path was lost
  // (`lost`): its ids stay until destroyed, no new id is put on it.
  bool gone = false;
  // Its MAD path was lost while its device stayed (its uscmd exited: killed,
  // crashed, restarted) and ReplaceLostPortLocked put a fresh entry for the
  // same port in the table; this one is kept for the ids that live on it
  // (they got DEVICE_REMOVAL) and closed after the last (ids.h CloseLostPorts).
  bool lost = false;
  // The fresh entry of a lost port: opened again (a new uscmd, started on
  // demand) by the next call that needs it or the uscm-ports thread.
  bool replaces_lost = false;
  // Once opened (OpenPortLocked):
  uscm_device* dev = nullptr;
  uscm_event_channel* channel = nullptr;
  // Opened by a call or the uscm-ports thread (InstallOpenedPortLocked), not
  // a test's device given opened (UsePortsForTesting): a fork's child leaves
  // it to the parent (LeaveOpenedPortsToParentLocked).
  bool opened_by_library = false;
  // The parent of this fork's child had opened it (and the child has not).
  bool parents_open = false;
  // The uscm-ports thread's back-off after its opens of it failed (a new
  // uscmd that did not start): the step it tries again at, counted in the
  // thread's steps that open ports, 1, 2, 4, 8 ... up to 32 steps after the
  // 1st, 2nd, 3rd, 4th ... failure in a row, and that count
  // (port_resync.cc; a program's call that needs the port tries at once).
  // {0, 0}: due at every step.
  struct ResyncRetry {
    uint64_t at_step = 0;
    int failures = 0;
  };
  ResyncRetry resync_retry;
  // USCM_CM_COUNTERS: the CM counters of its uscm device when a removed
  // device's port was released (ReleasePortLocked), printed at exit.
  std::string counters_at_release;
  // The uscm-ports thread opens it without the lock (port_resync.h): its
  // device is not closed meanwhile (ids.h CloseRemovedDevices waits for the
  // next step's).
  bool resync_opening = false;
};

// Lists the ports the first time (later calls reuse the list), opening the
// devices USCM_DEVICE allows (devices.h: no other is opened): 0, or -1 with
// errno (ENODEV: none ACTIVE among those USCM_DEVICE allows; EINVAL: a
// malformed USCM_DEVICE).
int EnsurePortsLocked(const char* call);
// What rdma_create_id needs, as librdmacm's ucma_init (sync_devices_list:
// ENODEV when libibverbs lists none): the devices listed, none opened, and no
// ACTIVE port (the kernel's rdma_create_id is port-independent; the first call
// that needs a port lists them: EnsurePortsLocked). 0 once the ports are
// listed (simulated ones too), or -1 with errno ENODEV when libibverbs lists
// no device.
int EnsureDevicesListedLocked(const char* call);
// The listed ports (stable pointers), in listing order, gone ones included
// (their ids are still served: events, teardown).
std::vector<Port*> PortsLocked();
// The listed ports a new id may go to or an address may be found on: those
// of PortsLocked whose device is not gone, in listing order.
std::vector<Port*> LivePortsLocked();
// The port whose addresses hold `addr` (AF_INET, AF_INET6: its IPs; AF_IB:
// its GIDs); NULL when none does (a loopback or foreign address: the caller
// keeps its default, and uscm says what is wrong with the address).
//
// The addresses follow the kernel's as the kernel's rdma_cm sees them at
// every call, without a syscall per call: each port's are read again when
// their generation moved since they were read (AddressGeneration: a RoCE
// port's GID table changes, gid_watch.h GidTableGeneration; an InfiniBand
// port's IPoIB addresses, the host's rtnetlink address events,
// IpAddressGeneration), at every call when it is not followed
// (kGidsNotFollowed), and once more when no port holds `addr` (a change whose
// event the watch's thread has not counted yet; once per generation, so a
// foreign address costs no read per call). The generations are asked only
// when the process's gid_watch.h AddressChanges() moved since they were last
// asked (or one was not followed then): otherwise a call costs one atomic
// load, not a mutex and a lookup per port. When still no port holds it, the
// devices and their ports are listed again (a device added, a port ACTIVE
// since; a removed device's ports marked gone and not answered), as librdmacm
// does for a device it does not know: one ibv_get_device_list, and an
// ibv_query_port per port not listed, per miss (at most one per 100 ms);
// nothing on a hit. An opened port's uscm device is
// told too (uscm_device_reread_addresses: what its binds accept, and on
// RoCE the source GID of its CM MADs).
Port* PortOfAddressLocked(const uscm_addr& addr);
// Whether a listed port of a device not gone is open (not a simulated one).
bool AnyLivePortOpenLocked();
// The listed ports of the device `verbs` (gone ones included).
std::vector<Port*> PortsOfLocked(ibv_context* verbs);
// A gone port whose device is about to be closed (no id on it): its uscm
// device and channel, if it was opened (both null if not), are handed to the
// caller, which closes them once the library's lock is released
// (CloseOpenedPort: closing the device joins its progress thread, whose hook
// takes that lock); the port stays in the table (pointers to it stay valid)
// with no context, device or address.
struct OpenedPort;
OpenedPort ReleasePortLocked(Port* port);
// A port whose MAD path was lost while its device stayed (its uscmd exited;
// a port of a removed device, a simulated one, or one lost already: NULL,
// nothing done): marked `lost` and gone, and a fresh unopened entry for the
// same device and port, with its addresses, added to the table (returned),
// where the lookups and the uscm-ports thread find it instead. The lost entry
// keeps its uscm device and channel for the ids that live on it.
Port* ReplaceLostPortLocked(Port* port);
// USCM_CM_COUNTERS=1's lines, printed at exit (under the lock, waiting for
// it at most 2 s): one per opened port with its CM counters, and one per port
// of a device removed before exit with its counters at its release.
std::string CmCountersLinesLocked();
// The first half of PortOfAddressLocked: each port's addresses read again
// when their generation moved (an opened port's uscm device told), with no
// lookup. The uscm-ports thread's steps run it (port_resync.h), so a port
// opened before its addresses were set (a step right after a device's
// uevent, before the kernel filled its GID table) is served with them in a
// program that makes no lookup (a server that only listens).
void RefreshPortAddressesLocked();
// A miss's listing of the devices and their ports (PortOfAddressLocked: under
// the lock throughout, the program's own call pays for it, as librdmacm's) in
// three steps, for a caller that must not hold the library's lock while it
// lists (port_resync.h's thread: the kernel puts every wildcard id on a
// device added later, cma_add_one, with no call of the program to notice
// it). BeginPortListingLocked takes what the listing needs from the table
// (false: none due: `spaced` and within 100 ms of the last listing; not
// `spaced`: a uevent said a device was added, uevents.h);
// ListPorts reads the devices, an ibv_query_port and the addresses of each
// port not in the table, with no lock of the library's held (sysfs reads,
// netlink); FinishPortListingLocked adds the ports found that no call added
// meanwhile and marks a removed device's gone. Whether the table changed.
struct PortListing {
  bool simulated = false;  // UsePortsForTesting's table: only AddPortForTesting's are found
  bool choice_ok = false;  // USCM_DEVICE parsed
  PortChoice choice;
  // The ports in the table when the listing began, (device, port).
  std::vector<std::pair<ibv_context*, uint8_t>> known;
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
  std::vector<Port> found;  // ListPorts: ACTIVE, allowed, not in `known`
};
bool BeginPortListingLocked(PortListing* listing, bool spaced);
void ListPorts(PortListing* listing);
bool FinishPortListingLocked(PortListing* listing);

// Whether an IPv4 / IPv6 `addr` is one of the host's interface addresses
// (getifaddrs; loopback interfaces left out): what tells an address of a
// netdev with no RDMA port (the kernel's rdma_bind_addr: ENODEV, from
// cma_acquire_dev_by_src_ip) from one that is nobody's (EADDRNOTAVAIL, from
// rdma_translate_ip). One getifaddrs (a netlink dump) per call: asked only
// after PortOfAddressLocked missed. False for AF_IB.
bool HostHoldsAddress(const uscm_addr& addr);
// Tests: the answer of HostHoldsAddress (nullptr: getifaddrs).
void SetHostAddressesForTesting(bool (*holds)(const uscm_addr& addr));
// Opens `port` once: its uscm device and event channel, then `on_open(port)`
// (ids.cc: the progress hook). 0, or -1 with errno. Under the lock
// throughout (a program's call that needs the port waits for it anyway).
int OpenPortLocked(Port* port, const char* call, void (*on_open)(Port*));
// Before a call that needs every port (a wildcard rdma_bind_addr) opens them
// one after another: starts the uscmds of the live ports not open yet, when
// two or more, all at once (router_on_demand.h StartRoutersOnDemand: each
// started before any is waited for), so each open then finds its router
// serving, and the starts take about the slowest one's time, not the sum.
// Under the lock, as the opens that follow.
void StartRoutersOfUnopenedPortsLocked();
// Tests: what starts the routers (nullptr: the ports' uscmds).
void SetPortRouterStartForTesting(void (*start)(const std::vector<const Port*>& ports));
// The same in two steps, for a caller that must not hold the library's lock
// while the port opens (the open may start the port's uscmd and wait up to
// 10 s for it: router_on_demand.h): OpenPortDevice opens the uscm device and
// channel of port `port_num` of `verbs` with no lock held (0, or -1 with
// errno); InstallOpenedPortLocked makes them `port`'s and calls
// `on_open(port)`, or, when a call opened the port meanwhile, returns false
// and the caller closes them (CloseOpenedPort, without the lock).
struct OpenedPort {
  uscm_device* dev = nullptr;
  uscm_event_channel* channel = nullptr;
  bool testing = false;  // a simulated device: the test's to close
};
int OpenPortDevice(ibv_context* verbs, uint8_t port_num, bool testing, const char* call,
                   OpenedPort* out);
bool InstallOpenedPortLocked(Port* port, const OpenedPort& opened, void (*on_open)(Port*));
// Destroys the channel and closes the device (a simulated one is the
// test's); either may be null. 0, or -1 with errno when the close failed.
int CloseOpenedPort(const OpenedPort& opened);
// In a child of fork() (the library's locks held: fork_locks.cc): every
// port the library opened is the parent's. Its uscm device is a connection
// to the port's uscmd (or the port's umad file) that the child shares with
// the parent, whose progress thread reads it; the child has no such thread.
// The device and channel are kept as they are, never used, closed or
// destroyed in the child (a close would join a thread the child does not
// have, send on the parent's connection, or unregister the parent's umad
// agent); the port is left unopened, so the child's next call that needs it
// opens its own: a connection of its own to the port's uscmd, as a second
// program's; with USCM_NO_USCMD the port's umad file is the parent's, and the
// open fails as a second program's (EBUSY). A uscm-ports thread's open under
// way is the parent's too.
void LeaveOpenedPortsToParentLocked();
// The key `addr` is looked up by (IPv4 mapped; AF_IB: the GID).
Addr16 KeyOf(const uscm_addr& addr);

// Tests: the ports are the given simulated devices, already opened (channel
// made here), port_num 1, 2, ... in order. 0, or -1 with errno EBUSY when
// ports are listed already.
int UsePortsForTesting(const std::vector<uscm_device*>& devs,
                       const std::vector<std::vector<Addr16>>& ips);
// Tests: a port's address generation, its re-read (ips, gids) and the
// process's count of changes instead of the GID watch / rtnetlink, the
// device's tables and gid_watch.h AddressChanges; nullptr restores each.
// UsePortsForTesting's ports are otherwise never read again.
void SetPortAddressesForTesting(uint64_t (*generation)(const Port&), void (*read)(Port*),
                                uint64_t (*changes)());
// Tests: a simulated port (as UsePortsForTesting's, the next port_num) that
// the next listing finds, as a device added later. Its uscm channel, or NULL
// with errno.
uscm_event_channel* AddPortForTesting(uscm_device* dev, const std::vector<Addr16>& ips);
// Tests: what opens a listed port's uscm device on its context
// (c_api::OpenDeviceOn) and what closes it (uscm_device_close), e.g. a
// simulated device for a fake context; nullptr restores each. A simulated
// port added unopened (AddUnopenedPortForTesting) is opened through it too.
void SetPortDevicesForTesting(uscm_device* (*open)(ibv_context* verbs, int port_num),
                              int (*close)(uscm_device* dev));
// Tests: the same, listed unopened (no device yet): the open goes through
// SetPortDevicesForTesting's open, as a real port's through uscm_device_open.
// 0, or -1 with errno EINVAL when the ports are not simulated.
int AddUnopenedPortForTesting(const std::vector<Addr16>& ips);
// How many times a port's addresses were read again (not counting listing).
uint64_t PortAddressRereads();
// Tests: ibv_query_port as the listing calls it and the clock a miss's
// listing is spaced by (nullptr: libibverbs', CLOCK_MONOTONIC_COARSE), and how
// many times a miss listed the ports again.
void SetPortQueryForTesting(int (*query)(ibv_context*, uint8_t, ibv_port_attr*),
                            int64_t (*now_ns)());
uint64_t PortListSyncs();
// How many times a port's generation was asked (PortOfAddressLocked).
uint64_t PortGenerationsAsked();
// Drops the ports of UsePortsForTesting (every id must be destroyed).
void ResetPortsForTesting();

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_PORTS_H_
