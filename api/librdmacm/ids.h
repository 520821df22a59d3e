// The rdma_cm_id calls of the drop-in over the uscm C API (api/c/uscm_cma.h).
//
// The process's RDMA ports (ports.h) are opened through uscm_device_open
// (umad, or the host's uscmd) on first use. An id is created on the first
// port that opens, with no device (id->verbs NULL, port_num 0), and moves to
// the port of the address it binds or resolves from (a NULL source: the
// routing table's); a listener with no device listens on every port (and a
// port added later: port_resync.h's thread, the drop-in's one thread of its
// own besides gid_watch.h's). Each opened port's uscm event channel is
// drained by the device's progress thread after each step and by each call
// before it returns, which turn each uscm event into the program's
// rdma_cm_event (its rdma_cm_id, listen_id, status, param.conn / param.ud
// with a copy of the private data) on the id's own channel.
//
// Done, for programs that bring their own QP (conn_param.qp_num,
// rdma_init_qp_attr, rdma_establish), in asynchronous mode (a channel given
// to rdma_create_id) and synchronous mode (NULL channel: the calls wait for
// their event, as librdmacm's ucma_complete): create_id, destroy_id (waits
// until the id's events are acked), bind_addr, resolve_addr, resolve_route,
// listen, get_request, connect, accept, reject, reject_ece, set_local_ece,
// get_remote_ece, establish, notify, disconnect, set_option, init_qp_attr,
// join_multicast(_ex), leave_multicast, migrate_id, create_ep, destroy_ep
// (get_request and create_ep: endpoints.cc; resolve_addr, resolve_route,
// listen, connect, accept, disconnect: connection_calls.cc; the pass-through
// calls: id_calls.cc). rdma_destroy_event_channel destroys the ids still on
// the channel, as the kernel does when librdmacm closes the fd (REJ, DREQ
// or DREP to the peer); their structs stay, and calls on them fail. Not
// done (ENOSYS): see cma.cc.
//
// Tests swap the ports for simulated uscm devices (UseDeviceForTesting,
// UseDevicesForTesting) and move their events by hand (PumpEvents).
#ifndef USCM_API_LIBRDMACM_IDS_H_
#define USCM_API_LIBRDMACM_IDS_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <functional>
#include <mutex>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm {

// Makes `dev` the only port (no verbs context: id->verbs and id->pd stay NULL;
// port_num 1) with no progress hook. 0, or -1 with errno EBUSY when
// ports are listed already.
int UseDeviceForTesting(uscm_device* dev);
// Several simulated devices as the process's ports (port_num 1, 2, ... in
// order), `ips[i]` the addresses of device i (ports.h: Addr16).
int UseDevicesForTesting(const std::vector<uscm_device*>& devs,
                         const std::vector<std::vector<Addr16>>& ips);
// A simulated device the next listing of the ports finds (a device added
// later: ports.h AddPortForTesting). 0, or -1 with errno.
int AddDeviceForTesting(uscm_device* dev, const std::vector<Addr16>& ips);
// The same, found unopened: its open goes through ports.h
// SetPortDevicesForTesting's open. 0, or -1 with errno.
int AddUnopenedDeviceForTesting(const std::vector<Addr16>& ips);
// Each port's uscm channel, in order.
std::vector<uscm_event_channel*> PortChannelsForTesting();
// Drops the ports of UseDevice(s)ForTesting (every id must be destroyed).
void ResetBackendForTesting();
// The first port's uscm channel (NULL without ports).
uscm_event_channel* BackendChannel();
// Runs the progress hook the real ports get (after every step of their
// progress thread) once, as `port`'s thread runs it (NULL: no port's); true
// when it took the library's lock to move events.
bool RunProgressHookForTesting();

// The library's lock (ids_internal.h g_mu), for a test that holds it as a
// port's progress hook or the uscm-ports thread does (fork_locks.h).
std::mutex& LibraryLockForTesting();

// Synchronous calls wait by calling `drive(arg)` until their channel has an
// event (tests: run the simulated fabric, then PumpEvents); NULL: block on
// the channel's fd (the progress thread's hook fills it).
void SetDriverForTesting(void (*drive)(void*), void* arg);

// Runs `op` on the uscm id behind `id` after the checks every call makes (a
// backend, an id of this library); 0, or -1 with errno (USCM_DEBUG names
// `call`). id_calls.cc's calls are made of it.
int ForId(const char* call, rdma_cm_id* id, const std::function<int(uscm_cm_id*)>& op);
// An RDMA_PS_IB id's qp_type (rdma_create_ep's ai_qp_type, or the
// program's before it connects: librdmacm reads id->qp_type) onto its uscm
// id `uid` (uscm_set_qp_type): UD for IBV_QPT_UD, RC for any other. Nothing
// for other port spaces (their ids are of their port space's type) nor when
// unchanged. 0, or -1 with errno (EINVAL: changed after connect or listen).
int SyncQpType(const rdma_cm_id* id, uscm_cm_id* uid, const char* call);
// librdmacm's ucma_complete: in synchronous mode waits for the id's event and
// turns its status into the call's result; 0 at once in asynchronous mode.
int CompleteCall(rdma_cm_id* id, const char* call);

// The ports listed and the first one opened (EnsureBackendLocked under the
// library's lock): 0, or -1 with errno (USCM_DEBUG names `call`).
int EnsureBackend(const char* call);
// True for an id of this library in synchronous mode (NULL channel).
bool IsSyncId(rdma_cm_id* id);
// rdma_create_ep (RAI_PASSIVE) with a qp_init_attr: kept on the listener,
// read back by rdma_get_request for each new id's QP.
void KeepEndpointQpAttr(rdma_cm_id* id, const ibv_qp_init_attr& attr);
bool EndpointQpAttr(rdma_cm_id* id, ibv_qp_init_attr* attr);
// rdma_set_option: set on the uscm id (and a wildcard listener's others) and
// kept, to be set again when the id moves to another port.
int SetOption(rdma_cm_id* id, int level, int name, const void* value, size_t len);
// rdma_listen, after the id's own listen: a listener with no device listens
// on every other port too (cma_listen_on_all), all or nothing (a refusal on
// one port leaves the id bound and listening nowhere). 0, or -1 with errno.
int ListenOnOtherPorts(rdma_cm_id* id, int backlog);
// The depths of a passive id's CONNECT_REQUEST (rdma_accept's defaults);
// unchanged for an unknown id.
void RequestDepths(rdma_cm_id* id, uint8_t* initiator_depth, uint8_t* responder_resources);
// rdma_join_multicast(_ex) (multicast.cc): keeps the join of `addr` with the
// program's `context`, runs `join` on the id's uscm id with the join's
// handle as uscm's context, then CompleteCall. 0, or -1 with errno (the join
// is then forgotten). A NULL `addr` (rdma_join_multicast_ex's) keeps nothing:
// uscm's checks refuse the join.
int JoinMulticast(const char* call, rdma_cm_id* id, const sockaddr* addr, void* context,
                  const std::function<int(uscm_cm_id*, void* handle)>& join);
// rdma_leave_multicast, as librdmacm's: the join of `addr` (compared as
// librdmacm does, over the address's length; none: EADDRNOTAVAIL) is left
// on uscm (`group`), its events still queued are dropped (the kernel's
// ucma_cleanup_mc_events) and the call returns once those the program took
// are acked, so the program may free the join's context after it. 0, or -1
// with errno.
int LeaveMulticast(rdma_cm_id* id, const sockaddr* addr, const uscm_addr& group);
// Tests: rdma_leave_multicast, about to wait for acks, calls fn(arg) outside
// the library's locks (NULL: nothing).
void SetLeaveWaitHookForTesting(void (*fn)(void* arg), void* arg);

// The next event on `channel`, blocking (under a test driver, the driver
// runs the fabric until one is queued).
int WaitForEvent(rdma_event_channel* channel, rdma_cm_event** event);

// The uscm id behind a program's id; NULL with errno EINVAL (and USCM_DEBUG
// naming `call`) for an id this library did not create or already destroyed.
uscm_cm_id* UscmIdOf(rdma_cm_id* id, const char* call);

// uscm stops driving the id's QP, which stays the program's (id->qp): once
// connected, only the program's calls touch it, as with librdmacm
// (rdma_disconnect: ShutdownQp). perftest -R frees a connected QP with
// ibv_destroy_qp, then the peer's DREQ made uscm move it to ERROR (SIGSEGV).
void DetachQp(uscm_cm_id* uid);
// True when the ports are simulated devices (UseDevice(s)ForTesting): no
// routing table to ask.
bool OnSimulatedPorts();
// rdma_resolve_addr: an id with no device yet moves to the port of `src`
// (none owns it: it stays). A `given` source (the program's, not the routing
// table's) that is the host's address on a netdev with no RDMA port is ENODEV,
// as rdma_bind_addr of it (the kernel binds the id to it first). 0, or -1
// with errno.
int PlaceForSource(rdma_cm_id* id, const uscm_addr& src, bool given, const char* call);

// device_calls.cc: librdmacm's remove_cma_dev for the removed devices (no
// longer listed, devices.h SyncDevices) on whose ports no id lives: first
// what holds each context (the wildcard ids' binds and listens there, each
// opened port's uscm device with its progress thread and its channel, the
// GID watch's context and thread, the kept GID tables), then the context,
// unless an rdma_get_devices array or a shared PD still holds it (closed at
// its rdma_free_devices). A device an id lives on stays open (its ports
// marked gone: served until destroyed, no new id; each id sent
// DEVICE_REMOVAL once). Runs at rdma_get_devices and rdma_free_devices, as
// librdmacm's, at rdma_destroy_id of an id on a removed device's port
// (ucma_put_device), and in the uscm-ports thread's step (port_resync.h: at
// once on a removal's uevent); takes the library's lock, so never under it.
// How many contexts were closed.
int CloseRemovedDevices();
// The same when a listing saw a device gone since the last call
// (devices.h TakeRemovalNotice), else one atomic exchange: after a call whose
// lookup missed (rdma_bind_addr, rdma_resolve_addr), as librdmacm's
// ucma_get_cma_device lists the devices again.
void CloseRemovedDevicesIfNew();

// lost_ports.cc: the uscm devices of the lost ports (ports.h
// ReplaceLostPortLocked: their uscmd exited while the device stayed) on which
// no id lives any more: the wildcard ids' binds and listens there dropped,
// each port's uscm device closed with its progress thread and its channel
// (the device's context stays: the device is there). Runs at rdma_destroy_id
// of an id on a lost port and in the uscm-ports thread's step; takes the
// library's lock, so never under it (nor on a port's progress thread: the
// close joins it). How many were closed.
int CloseLostPorts();

// qps.cc: drops what rdma_create_qp kept for `id` (rdma_destroy_id; a
// program that destroyed the QP with ibv_destroy_qp never calls
// rdma_destroy_qp). The CQs it made stay (they may still be in use).
void ForgetQp(rdma_cm_id* id);

// qps.cc: rdma_create_qp's hand-over of its QP (made on id->verbs) to the
// uscm id: uscm_set_qp_ex with the source GID index and active MTU of the
// kept GID table (ud_ah.h), no verbs query; uscm_set_qp (which queries the
// port and its GID entries) on InfiniBand or for an address not in it.
int HandQpToUscm(rdma_cm_id* id, uscm_cm_id* uid, ibv_qp* qp);

// qps.cc: librdmacm's ucma_shutdown, the first step of rdma_disconnect:
// the program's QP (id->qp) to ERROR, in the caller's thread; 0 without a
// QP, or -1 with errno. Once connected the QP is the program's alone (uscm
// no longer drives it: DetachQp in ids.cc), so this is what moves it.
int ShutdownQp(rdma_cm_id* id, const char* call);
// Tests: the ibv_modify_qp that ShutdownQp calls (NULL: ibv_modify_qp).
void SetModifyQpForTesting(int (*modify)(ibv_qp*, ibv_qp_attr*, int));

// Moves every event queued on the open ports' uscm channels to the programs'
// channels; the number moved, or -1 with errno.
int PumpEvents();
// Tests: as PumpEvents, at most `per_port` events of each port's channel: a
// call's pump that ran while a port's progress thread was still queuing one
// step's events (uscm queues them one at a time under the channel's lock).
int PumpSomeEvents(int per_port);

// direct_route.cc: rdma_resolve_route where the route needs no SA query
// (RoCE: the path from the two IPs; the IB_PATH option), in one lookup under
// the library's lock: uscm sets the id's route with no event of its own
// (uscm_resolve_route_now), id->route is filled and ROUTE_RESOLVED goes
// straight onto the program's channel, past the port's channel and the pump.
// *done false: not taken (no port yet, an SA route; nothing changed), the
// call goes through ForId as before. *sync (when done): a synchronous id,
// whose call waits for the event (CompleteCall). 0, or -1 with errno.
int ResolveRouteDirect(rdma_cm_id* id, bool* done, bool* sync);
// direct_addr.cc: rdma_resolve_addr for an id already on its device, with
// one look-up of the id and one uscm call (uscm_resolve_addr_now). Where
// uscm resolves the address within the call (RoCE with no neighbour
// resolution to wait for, AF_IB) it queues no event: the id is filled
// (device, port, PD, addresses) and ADDR_RESOLVED, as the kernel's (status
// 0, param zero), goes straight onto the program's channel. Otherwise
// uscm's event follows (a pending neighbour) or is pumped now (ADDR_ERROR).
// *done false: not taken (no device yet, not an id of ours), nothing
// changed: the call goes through ForId.
// *sync (when done): a synchronous id (CompleteCall). 0, or -1 with errno.
int ResolveAddrDirect(rdma_cm_id* id, const uscm_addr* src, const uscm_addr& dst, int timeout_ms,
                      bool* done, bool* sync);
// Addresses ResolveAddrDirect reported resolved so far.
uint64_t DirectAddrs();
// Tests, benches: false sends every rdma_resolve_addr through ForId (and
// its event through the port's channel and the pump).
void SetDirectAddrsForTesting(bool on);
// Routes ResolveRouteDirect resolved so far.
uint64_t DirectRoutes();
// Tests, benches: false sends every rdma_resolve_route through ForId.
void SetDirectRoutesForTesting(bool on);

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_IDS_H_
