// The drop-in's id table, shared by ids.cc (the calls), forward.cc (the
// events) and wildcard_ids.cc (an id with no device on every port); not part
// of the library's interface. Every function here runs under ids.cc's lock.
#ifndef USCM_API_LIBRDMACM_IDS_INTERNAL_H_
#define USCM_API_LIBRDMACM_IDS_INTERNAL_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "api/c/uscm_cma.h"
#include "api/librdmacm/fork_locks.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm::internal {

struct IdState;

// One rdma_join_multicast(_ex) of an id, until rdma_leave_multicast or the
// id's destruction (librdmacm's struct cma_multicast): uscm is given
// `handle` as the join's context (as librdmacm gives the kernel its mc), and
// the pump turns it back into the program's `context` (multicast.cc).
struct McJoin {
  IdState* state;
  uint64_t handle;
  void* context;
  sockaddr_storage addr;  // the program's, compared over `addr_len` bytes
  size_t addr_len;
  // Its events queued or handed to the program and not yet acked (under
  // state->mu): what rdma_leave_multicast waits on once the queued ones
  // are dropped.
  int unacked = 0;
};

// What rdma_destroy_id waits on: events of the id handed to the program and
// not yet acked.
struct IdState {
  uscm_cm_id* uid = nullptr;
  bool holds_pd = false;
  // Synchronous mode (rdma_create_id with a NULL channel): the id has a
  // private channel and the calls wait for their event (id->event).
  bool sync = false;
  // A passive id's CONNECT_REQUEST, from this side (the kernel's swap): what
  // rdma_accept without conn_param (or with RDMA_MAX_*) offers.
  uint8_t req_initiator_depth = 0;
  uint8_t req_responder_resources = 0;
  // rdma_create_ep (RAI_PASSIVE) with a qp_init_attr: rdma_get_request
  // creates each new id's QP from it, on the listener's PD.
  bool has_ep_qp_attr = false;
  ibv_qp_init_attr ep_qp_attr = {};
  // The id's uscm ids on the other ports, once it is bound to a wildcard:
  // the kernel's bind list is the host's, so a wildcard bind holds its port
  // on every port (each port's uscmd refuses an address another process
  // holds there), and a wildcard listener listens on each
  // (cma_listen_on_all). Bound at rdma_bind_addr, listening from rdma_listen.
  struct OnPort {
    Port* port;
    uscm_cm_id* uid;
  };
  std::vector<OnPort> other_ports;
  // rdma_set_option's options, set again on the uscm id that replaces `uid`
  // when the id moves to another port (PlaceLocked).
  struct Option {
    int level, name;
    std::string value;
  };
  std::vector<Option> options;
  // rdma_bind_addr to a wildcard (port included): what a clone repeats.
  bool wildcard_bound = false;
  // In wildcard_ids.cc's list of wildcard ids (while wildcard_bound, until
  // unbound or destroyed): held on every port added later.
  bool registered_wildcard = false;
  // A wildcard listener (rdma_listen with no device): its backlog.
  bool wildcard_listening = false;
  int backlog = 0;
  // A listener bound to a port's own address (rdma_listen on an id with a
  // device): the address and `backlog` its listen is made again with on the
  // port's fresh entry when the port's uscmd exits while the device stays
  // (lost_ports.cc MoveListenersLocked).
  bool port_listening = false;
  uscm_addr listen_addr = {};
  // The ports added later that refused the id's bind or listen (another
  // process's address there): not tried again.
  std::vector<Port*> refused_ports;
  uscm_addr bound = {};
  // Its multicast joins (under g_mu); their events count in `unacked` too.
  std::vector<std::unique_ptr<McJoin>> joins;
  std::mutex mu;
  std::condition_variable acked;
  int unacked = 0;
  // The program destroyed the id's channel (CloseIdsOfChannel): the uscm
  // side is gone, every call fails.
  bool closed = false;
  // DEVICE_REMOVAL was queued for it (its port's device was removed).
  bool removal_sent = false;
  // fork_locks.h ForkGeneration() when it was made: another one's is the
  // parent's (FindLocked answers NULL for it, NotAnIdLocked EACCES).
  uint64_t fork_generation = ForkGeneration();
  // Made by this process, not by its parent before a fork().
  bool OfThisProcess() const { return fork_generation == ForkGeneration(); }
};

// `pub` first: the program's rdma_cm_id* points at it (standard layout).
struct Id {
  rdma_cm_id pub;
  IdState* state;
  Port* port;  // where `state->uid` lives; both NULL until the id needs one
  // What pub.route.path_rec points at once a route is known (librdmacm
  // allocates one per id; here it costs no allocation in resolve_route).
  ibv_sa_path_rec path_rec;
};
static_assert(offsetof(Id, pub) == 0);

// ids.cc
// The library's lock: the ports (ports.h), the id tables and the translation
// of events (the pump and rdma_destroy_id's uscm_destroy_id never overlap).
extern std::mutex g_mu;
// Every id of rdma_create_id not yet destroyed, by the program's pointer
// (the parent's too, in a child of fork()).
absl::flat_hash_map<rdma_cm_id*, Id*>& ByPublic();
absl::flat_hash_map<uscm_cm_id*, Id*>& ByUscmId();
// The live id behind a program's id (NULL: unknown, destroyed, its channel
// closed, or the parent's in a child of fork()).
Id* FindLocked(rdma_cm_id* pub);
// Moves every event queued on the open ports' uscm channels to the
// programs' channels; the number moved, or -1 with errno. `per_port` > 0
// (PumpSomeEvents): at most that many of each port's.
int PumpEventsLocked(int per_port = 0);
// `ev` of `id` onto `target` (the id's channel, or a listener's for a
// CONNECT_REQUEST), counted unacked until rdma_ack_cm_event (OnAck).
void QueueForId(Id* id, rdma_event_channel* target, const rdma_cm_event& ev, const void* data,
                size_t len);
void OnAck(void* state);
// A failed uscm_* call: its errno, and with USCM_DEBUG its detailed message.
int UscmFailed(const char* call);
// A real port, once opened: its events reach the programs' channels.
void OnPortOpen(Port* port);
// The route addresses as uscm knows them now (id->route.addr).
void FillAddrs(Id* id);
// The same from uscm_getname's and uscm_getpeer's answers (NULL: left).
void FillAddrsFrom(Id* id, const uscm_addr* local, const uscm_addr* peer);
// id->verbs, port_num and the shared PD, once the id has its port.
void AttachDevice(Id* id);
// id->route.path_rec (one path, as librdmacm's ucma_query_route fills it).
void FillRouteFrom(Id* id, const uscm_path& p);
// A new id's qp_type, as librdmacm's rdma_create_id gives it: UD for
// RDMA_PS_UDP and RDMA_PS_IPOIB, else RC (an RDMA_PS_IB id's may change
// before connect or listen: SyncQpType gives it to uscm).
ibv_qp_type DefaultQpType(rdma_port_space ps);
// The id is UD, as the kernel's ucma_get_qp_type decides it (and uscm's id,
// so the events' param.ud / param.conn follow it): for RDMA_PS_IB its
// qp_type (SyncQpType gives it to uscm; a passive id's is its request's,
// forward.cc), else its port space's (DefaultQpType). The one rule:
// librdmacm's ucma_is_ud_qp reads qp_type alone, which gives the same answer
// for every id the drop-in makes; it differs only where a program writes a
// qp_type against a non-IB port space, and then the kernel's id, uscm's and
// this stay of the port space's type.
bool IsUdId(const rdma_cm_id& pub);
// A new id in the tables (ByPublic; ByUscmId when `uid` is not NULL).
Id* NewId(uscm_cm_id* uid, Port* port, rdma_event_channel* channel, void* context,
         rdma_port_space ps);

// forward.cc
// One uscm event of `from` to the program's channel (PumpEventsLocked's
// step): a CONNECT_REQUEST's new passive id, the event's parameters.
void Forward(const uscm_cm_event& ue, Port* from);

// multicast.cc
// The join of `id` that uscm knows by `handle` (the context it was given);
// NULL once the join was left: its event is then dropped, as the kernel's
// ucma_cleanup_mc_events drops a left join's undelivered events.
McJoin* JoinOfLocked(Id* id, const void* handle);
// `ev` of `join` onto `target`, counted unacked for the id and for the join
// until rdma_ack_cm_event.
void QueueForJoin(McJoin* join, rdma_event_channel* target, const rdma_cm_event& ev);

// fork_ids.cc
// Why FindLocked found no id: -1 with errno EACCES for the parent's id in a
// child of fork(), else EINVAL (USCM_DEBUG names `call`).
int NotAnIdLocked(const char* call, rdma_cm_id* pub);
// In a child of fork(), the library's locks held (fork_locks.cc): the ids
// made before the fork are the parent's, their uscm ids no longer looked up
// (an event of the child's ports never names one) and the wildcard ones no
// longer held on any port; each port the parent opened is left to it
// (ports.h LeaveOpenedPortsToParentLocked), and the child's next call that
// needs it opens it again.
void LeaveToParentInChildLocked();

// wildcard_ids.cc
// After a bind to a wildcard: the address kept for the clones.
void RememberWildcard(Id* id);
// A new uscm id on `port` with the options and wildcard bind of `id`; NULL
// with errno (USCM_DEBUG names `call`).
uscm_cm_id* CloneOnLocked(Id* id, Port* port, const char* call);
// The wildcard bind on every other port, all or nothing: a port that refuses
// it (another process's address, EADDRINUSE / EADDRNOTAVAIL) undoes the whole
// bind (UnbindLocked) and gives -1 with its errno. A port that cannot be
// opened is left out (USCM_DEBUG says why).
int BindOnOtherPortsLocked(Id* id, const char* call);
// rdma_listen after the id's own listen: every other port listens too, all
// or nothing (a refusal leaves the id bound and listening nowhere, as the
// kernel's rdma_listen returns it to ADDR_BOUND). 0, or -1 with errno.
int ListenOnOtherPortsLocked(Id* id, int backlog);
// Whether an id is bound to a wildcard (listening or not): the uscm-ports
// thread's work (port_resync.h).
bool AnyWildcardIdLocked();
// In a child of fork(): the parent's wildcard ids are no longer held on the
// ports the child opens (no thread is started or stopped).
void ForgetWildcardIdsInChildLocked();
// The uscm-ports thread runs while a wildcard id exists (its once-a-second
// listing, the claims on new ports) or a live port is open (the uevent of
// its device's removal: DEVICE_REMOVAL at once, as the kernel's
// cma_process_remove): started, told whether its period runs, or stopped,
// after a wildcard id came or went, a port opened or a removed device's
// ports were released.
void PortThreadNeedChangedLocked();
// The id is no longer bound to a wildcard (unbound, destroyed, its channel
// closed): no port added later gets it; the last one stops the uscm-ports
// thread.
void ForgetWildcardIdLocked(Id* id);
// Every wildcard-bound id on every open live port it is not on yet (a port
// the listing found after its bind or listen; port_resync.h opens it
// first), as the kernel holds a wildcard bind's port on a device added
// later (the bind list is the host's) and puts each wildcard listener on it
// (cma_add_one: cma_listen_on_dev): a bind there, and a listen for a
// listener. A port that refuses the bind or the listen (another process's
// address there) is left out, and not tried again for that id (USCM_DEBUG
// says why); the id stays on the others. With USCM_DEBUG, one line per port
// added.
void ClaimNewPortsLocked();
// The uscm id the wildcard bind made on `port` (now the caller's), or NULL.
uscm_cm_id* TakeOtherPortLocked(Id* id, Port* port);
// Whether an id lives on `port` (its own uscm id there, not a wildcard's
// bind or listen).
bool IdOnPortLocked(const Port* port);
// DEVICE_REMOVAL (status 0, as the kernel's cma_process_remove sends it) to
// every id that lives on `port`, once per id, a synchronous id's on its own
// channel (its next call that waits for an event gets it, as librdmacm's
// ucma_complete reads the next event); the ids stay valid and served until
// the program destroys them. How many were sent.
int SendDeviceRemovalLocked(const Port* port);
// A removed device's `port`: each wildcard-bound id whose own uscm id lives
// there (no device of the program's: id->verbs, pd and port_num are NULL,
// as librdmacm's for a wildcard, whose kernel id is on no device) takes its
// bind or listen on a port of another device as its own, or none when it
// has no other (ClaimNewPortsLocked gives it the next port added), and the
// uscm id there is destroyed: the kernel's cma_process_remove destroys only
// the listener's listen on the device and sends the wildcard id no event,
// so the id no longer keeps the device open (its DEVICE_REMOVAL was
// SendDeviceRemovalLocked's, and rxe's `rdma link del` waited for the
// program).
void MoveWildcardIdsOffLocked(Port* port, const char* call);
// Whether `id` is a wildcard-bound id with no device of the program's (the
// ones MoveWildcardIdsOffLocked moves): the kernel sends it no
// DEVICE_REMOVAL.
bool OnNoDeviceLocked(const Id* id);
// Whether `id` is a created id on no device, not a wildcard: no address
// bound or asked for, its uscm id a placeholder on the default port that
// holds its options and QP type alone (MaterializeLocked made it for
// rdma_set_option, or another call that needs a uscm id). The kernel's id
// has no device (cma_process_remove never sees it), so it gets no
// DEVICE_REMOVAL (Forward) and its placeholder leaves a lost or removed port
// (DropPlaceholdersLocked).
bool IsPlaceholderLocked(const Id* id);
// Every placeholder uscm id on `port` (IsPlaceholderLocked) destroyed, with
// no event: its id is on no port again, and its next call that needs a uscm
// id makes one with its options on the default port (MaterializeLocked).
// Its port's MAD path was lost (OnLostPathLocked) or its device removed
// (device_calls.cc). With USCM_DEBUG, one line per id.
void DropPlaceholdersLocked(const Port* port, const char* call);
// The MAD path of `port` was lost (its uscmd exited) under the wildcard id
// `id`'s bind or listen there: no event (the kernel's wildcard listener has
// no device); with USCM_DEBUG one line (OnLostPathLocked puts the id on the
// port's fresh entry, or the device is removed).
void SayWildcardPathLost(const Id* id, const Port* port);
// lost_ports.cc: after the pump moved a DEVICE_REMOVAL of `port`'s uscm
// device (its MAD path lost: uscm sends one to each of the device's ids).
// When the device stays (its uscmd was killed, crashed or restarted, not
// removed with it), the port is replaced (ports.h ReplaceLostPortLocked): the
// wildcard ids leave it as from a removed device (MoveWildcardIdsOffLocked,
// DropPortLocked: no event, as the kernel's listener, whose CM never goes
// away, gets none), the fresh entry is opened again through a new uscmd
// started on demand (by the next call that needs the port, or the
// uscm-ports thread while a wildcard id exists, which then puts each
// wildcard id's bind and listen back on it: ClaimNewPortsLocked), and the
// lost entry stays with the ids that live on it (each got its one
// DEVICE_REMOVAL) until the last is destroyed (CloseLostPorts); a listener
// bound to the port's address (RemovalLeftToLostPathLocked) got none and
// waits there for MoveListenersLocked. A removed device's port or a
// simulated one: nothing but that listener's DEVICE_REMOVAL. One replaced
// already (a second call: one step's DEVICE_REMOVALs pumped in two
// batches): nothing.
void OnLostPathLocked(Port* port);
// Whether the DEVICE_REMOVAL of `id`'s own uscm id, for its port's lost MAD
// path, is left to OnLostPathLocked: a listener bound to the port's address
// (port_listening), whose listen is put back on the port's fresh entry when
// the device stays, with no event (the kernel's listener never loses its
// CM), and which gets its one DEVICE_REMOVAL when the device was removed.
bool RemovalLeftToLostPathLocked(const Id* id);
// The uscm-ports thread's step, after its opens: each listener bound to a
// lost port's address (OnLostPathLocked kept it there) listens again on the
// port's fresh entry once that is open (a uscm id of its own there, bound to
// its address, listening with its backlog and options) and leaves the lost
// entry, whose uscm device then closes (CloseLostPorts); with USCM_DEBUG,
// rdma_listen's line. A fresh entry not open yet (its open failed: tried
// again at a later step) keeps the listener waiting on the lost entry; a
// listen refused there (another process took the address through the new
// uscmd), or a device removed meanwhile, gives the listener its one
// DEVICE_REMOVAL, as before this move. How many moved.
int MoveListenersLocked();
// Whether a listener waits to be moved (MoveListenersLocked): the thread's
// once-a-second period runs.
bool AnyListenerToMoveLocked();
// `port`, opened for a new uscm id (ports.h OpenPortLocked), as the port the
// caller looked up: when it is open on a uscm device whose MAD path is lost
// (its uscmd exited: uscm_device_transport_lost), the loss's queued events
// are pumped (which replaces the port); with none queued (no uscm id there:
// a client between two connections, no wildcard id, no listener; or the
// port's progress thread has not taken the loss yet) it is replaced here as
// the pump would (OnLostPathLocked), and its fresh entry is opened and
// returned instead (a new uscmd, started on demand): the new id never sees
// the loss, as the kernel's. NULL with errno (ENODEV: the device was
// removed since; an open's). The caller puts its id on the port returned.
Port* OpenPortForIdLocked(Port* port, const char* call);
// Whether a lost port's entry holds a uscm device with no id on it (its
// wildcard ids' binds and listens were dropped, or none was there): the
// thread's once-a-second period runs, and its step closes it (CloseLostPorts).
bool AnyLostPortToCloseLocked();
// Whether `port` is the fresh entry a waiting listener moves to: the
// thread's step opens it even with no wildcard id.
bool ListenerWaitsForLocked(const Port* port);
// DEVICE_REMOVAL (status 0) to `id` alone, once, as SendDeviceRemovalLocked.
void SendDeviceRemovalToLocked(Id* id);
// A removed device's `port`, where no id lives: the wildcard ids' binds and
// listens there are destroyed (the kernel's cma_process_remove destroys a
// wildcard listener's listen on the device, and the wildcard id stays).
void DropPortLocked(Port* port, const char* call);
// Destroys the uscm ids on the other ports (rdma_destroy_id, channel close);
// the id is no longer a wildcard listener.
void DropOtherPortsLocked(Id* id, const char* call);

}  // namespace uscm::librdmacm::internal

#endif  // USCM_API_LIBRDMACM_IDS_INTERNAL_H_
