// The rdma_cm_id calls over the uscm C API. See ids.h.
#include "api/librdmacm/ids.h"

#include <endian.h>
#include <errno.h>
#include <infiniband/ib.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "api/c/uscm_cma.h"
#include "api/c/uscm_device.h"
#include "api/librdmacm/convert.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/fork_locks.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"
#include "api/librdmacm/port_resync.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm {

using internal::AttachDevice;
using internal::ByPublic;
using internal::ByUscmId;
using internal::CloneOnLocked;
using internal::FillAddrs;
using internal::FindLocked;
using internal::Forward;
using internal::g_mu;
using internal::Id;
using internal::IdState;
using internal::NewId;
using internal::OnAck;
using internal::OnPortOpen;
using internal::PumpEventsLocked;
using internal::UscmFailed;

namespace {

void (*g_driver)(void*) = nullptr;  // SetDriverForTesting
void* g_driver_arg = nullptr;

// The device's progress thread, after each step (uscm_device_set_progress_hook):
// the events of the MADs and timers it handled reach the program's channels
// from here; with the calls' own pump (WithId) that is every way in, so no
// thread waits on a port channel (a forwarding thread did, and raced this
// hook for g_mu: docs/API.md "Where a connection's time goes"). Most steps
// queue nothing, so g_mu is taken only when a port channel's lock-free count
// says an event waits; one queued after the check is moved by its call or by
// the next step (at least once a second, cm/runtime.cc). The ports added
// later, and the close of removed devices, are the uscm-ports thread's
// (port_resync.h), not this hook's: it ran the listing and a new port's open
// (up to 10 s, a uscmd start) on a progress thread holding g_mu, and every
// call waited; and a progress thread cannot join itself.
std::atomic<uint64_t> g_hook_pumps{0};  // RunProgressHookForTesting
void PumpAfterProgress(void*) {
  if (!AnyOpenChannelQueued()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_hook_pumps.fetch_add(1, std::memory_order_relaxed);
  PumpEventsLocked();
}

// Where an id lives until an address says otherwise: the first port that
// opens (of those USCM_DEVICE allows: ports.h).
Port* DefaultPortLocked(const char* call) {
  if (EnsurePortsLocked(call) != 0) return nullptr;
  int err = ENODEV;
  for (Port* port : LivePortsLocked()) {
    if (Port* opened = internal::OpenPortForIdLocked(port, call)) return opened;
    err = errno;
  }
  errno = err;
  return nullptr;
}

int EnsureBackendLocked(const char* call) { return EnsurePortsLocked(call); }

// ---- ids ----

void AttachAndFill(Id* id) {
  AttachDevice(id);
  FillAddrs(id);
}

// librdmacm binds an id to the device of the address it binds or resolves
// from (ucma_get_device): an id with no device yet (created, or bound to a
// wildcard) moves to `to`'s uscm port. NULL `to` (an address of no port):
// it stays. 0, or -1 with errno.
int PlaceLocked(Id* id, Port* to, const char* call) {
  if (to == nullptr || id->pub.port_num != 0) return 0;
  // Its fresh entry if its uscmd died, also under the id's own uscm id (a
  // wildcard's bind there is dropped with the lost entry).
  to = internal::OpenPortForIdLocked(to, call);
  if (to == nullptr) return -1;
  if (to == id->port) return 0;
  // A wildcard-bound id has a bound uscm id there already: it takes that one,
  // and the one it leaves keeps its bind (the kernel's bind list is the host's),
  // as when it has none there (a lost port's fresh entry not claimed yet).
  uscm_cm_id* uid = internal::TakeOtherPortLocked(id, to);
  const bool had_one = uid != nullptr;
  if (uid == nullptr) uid = CloneOnLocked(id, to, call);
  if (uid == nullptr) return -1;
  if ((had_one || id->state->wildcard_bound) && id->state->uid != nullptr) {
    id->state->other_ports.push_back({id->port, id->state->uid});
  } else if (id->state->uid != nullptr) {
    uscm_destroy_id(id->state->uid);  // no device yet: no events, no peer
    ByUscmId().erase(id->state->uid);
  }
  ByUscmId()[uid] = id;
  id->state->uid = uid;
  id->port = to;
  return 0;
}

// An id goes to the port of the address it binds or resolves from. The host's
// address on a netdev with no RDMA port, given by the program: ENODEV (the
// kernel's cma_acquire_dev_by_src_ip); one nobody has is refused by uscm on
// the default port (EADDRNOTAVAIL, the kernel's rdma_translate_ip).
int PlaceAtSourceLocked(Id* id, const uscm_addr& a, bool given, const char* call) {
  Port* port = PortOfAddressLocked(a);
  if (port == nullptr && given && HostHoldsAddress(a)) {
    return Fail(ENODEV, call,
                "the host's address, on a netdev with no RDMA port (or none USCM_DEVICE allows)");
  }
  return PlaceLocked(id, port, call);
}

// An id gets its uscm id when a call needs one: on the port of its address
// (PlaceLocked), else on the default port. A created id on no device whose
// placeholder is on a port whose uscmd died, the loss not taken yet
// (rdma_resolve_addr with no source and no route): OpenPortForIdLocked takes
// or replaces the loss, which drops the placeholder (OnLostPathLocked), and
// the id goes to the port's fresh entry, through a new uscmd, as the
// kernel's, whose CM is never lost; to another port when the device went.
int MaterializeLocked(Id* id, const char* call) {
  if (id->state->uid != nullptr) {
    if (!internal::IsPlaceholderLocked(id)) return 0;
    Port* to = internal::OpenPortForIdLocked(id->port, call);
    if (id->state->uid != nullptr) return to == nullptr ? -1 : 0;  // still served there
    if (to != nullptr) return PlaceLocked(id, to, call);
  }
  Port* port = DefaultPortLocked(call);
  return port == nullptr ? -1 : PlaceLocked(id, port, call);
}

// librdmacm's rdma_destroy_event_channel is a plain close of the ucma fd, and
// the kernel then destroys every id still on it (ucma_close; cm_destroy_id:
// REJ while connecting, DREQ when established, DREP after the peer's DREQ).
// qperf's server destroys its listener and the channel, never the accepted
// id: without this the peer's DREQ went unanswered until it timed out. The
// ids' structs stay, as librdmacm's (a program may still read them).
void CloseIdsOfChannel(rdma_event_channel* channel) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [pub, id] : ByPublic()) {
    if (pub->channel != channel || id->state->closed) continue;
    id->state->closed = true;
    // The parent's, in a child of fork(): its uscm ids are the parent's, as
    // the kernel's ids stay with the parent's fd when the child closes its copy.
    if (!id->state->OfThisProcess()) continue;
    internal::ForgetWildcardIdLocked(id);
    internal::DropOtherPortsLocked(id, "rdma_destroy_event_channel");
    if (id->state->uid != nullptr) {
      if (uscm_destroy_id(id->state->uid) != 0) UscmFailed("rdma_destroy_event_channel");
      ByUscmId().erase(id->state->uid);
    }
    id->state->uid = nullptr;
  }
}

// Set once, before any id can exist (a constant-initialized atomic in
// event_channel.cc, so the order of static initializers does not matter).
const bool g_close_hook_set = (SetChannelCloseHook(&CloseIdsOfChannel), true);

}  // namespace

namespace internal {

// Guards the ports (ports.h), the id tables and the translation of events
// (the pump and rdma_destroy_id's uscm_destroy_id never overlap).
std::mutex g_mu;

ibv_qp_type DefaultQpType(rdma_port_space ps) {
  return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

bool IsUdId(const rdma_cm_id& pub) {
  return pub.ps == RDMA_PS_IB ? pub.qp_type == IBV_QPT_UD : DefaultQpType(pub.ps) == IBV_QPT_UD;
}

Id* NewId(uscm_cm_id* uid, Port* port, rdma_event_channel* channel, void* context,
         rdma_port_space ps) {
  auto* id = new Id{};
  id->state = new IdState;
  id->state->uid = uid;
  id->port = port;
  if (uid != nullptr) ByUscmId()[uid] = id;
  id->pub.channel = channel;
  id->pub.context = context;
  id->pub.ps = ps;
  id->pub.qp_type = DefaultQpType(ps);
  ByPublic()[&id->pub] = id;
  return id;
}

Id* FindLocked(rdma_cm_id* pub) {
  auto it = ByPublic().find(pub);
  if (it == ByPublic().end()) return nullptr;
  const IdState& state = *it->second->state;
  return state.closed || !state.OfThisProcess() ? nullptr : it->second;
}

void OnAck(void* arg) {
  auto* state = static_cast<IdState*>(arg);
  std::lock_guard<std::mutex> lock(state->mu);
  --state->unacked;
  state->acked.notify_all();
}

void QueueForId(Id* id, rdma_event_channel* target, const rdma_cm_event& ev, const void* data,
                size_t len) {
  {
    std::lock_guard<std::mutex> lock(id->state->mu);
    ++id->state->unacked;
  }
  if (QueueEventWithAck(target, ev, data, len, OnAck, id->state) != 0) {
    OnAck(id->state);  // not queued (errno and USCM_DEBUG said why)
  }
}

int PumpEventsLocked(int per_port) {
  int moved = 0;
  bool any = false;
  for (Port* port : PortsLocked()) {
    if (port->channel == nullptr) continue;
    any = true;
    bool lost = false;  // a DEVICE_REMOVAL: the port's MAD path is gone
    for (int n = 0; per_port <= 0 || n < per_port; ++n) {
      // Only what is queued now (uscm_get_cm_event would wait on a real
      // device), with no poll(2) of the channel's fd per event.
      uscm_cm_event* ue = nullptr;
      if (uscm_try_get_cm_event(port->channel, &ue) != 0) {
        if (errno == EAGAIN) break;
        return UscmFailed("pump");
      }
      lost |= ue->event == USCM_CM_EVENT_DEVICE_REMOVAL;
      Forward(*ue, port);
      uscm_ack_cm_event(ue);
      ++moved;
    }
    // After its events (the wildcard ids' uscm ids there are destroyed).
    if (lost) OnLostPathLocked(port);
  }
  if (!any) return Fail(ENODEV, "pump", "no port open");
  return moved;
}

}  // namespace internal

namespace {

// Runs `op` on the id's uscm id after the common checks; `after` (may be
// null) runs under the lock when op succeeded.
template <typename Op>
int WithId(const char* call, rdma_cm_id* pub, Op op, void (*after)(Id*) = nullptr) {
  uscm_cm_id* uid;
  Id* id;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (EnsureBackendLocked(call) != 0) return -1;
    id = FindLocked(pub);
    if (id == nullptr) return internal::NotAnIdLocked(call, pub);
    if (MaterializeLocked(id, call) != 0) return -1;
    uid = id->state->uid;
  }
  if (op(uid) != 0) return UscmFailed(call);
  std::lock_guard<std::mutex> lock(g_mu);
  if (after != nullptr) after(id);
  // An event the call posted at once (ADDR_RESOLVED and ROUTE_RESOLVED on
  // RoCE, a loopback's): to the program's channel from this thread (no
  // other thread waits for it: PumpAfterProgress). Most calls post none (a
  // bind, a listen): the ports' lock-free counts say so, with no
  // uscm_try_get_cm_event per port (882 instructions a bind, callgrind).
  if (AnyOpenChannelQueued()) PumpEventsLocked();
  return 0;
}

// The next event on `channel` (blocking; under a test driver, the driver runs
// the fabric until one is queued).
int WaitEvent(rdma_event_channel* channel, rdma_cm_event** event) {
  void (*driver)(void*);
  void* arg;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    driver = g_driver;
    arg = g_driver_arg;
  }
  while (driver != nullptr && QueuedEvents(channel) == 0) driver(arg);
  return rdma_get_cm_event(channel, event);
}

// librdmacm's ucma_complete: in synchronous mode, wait for the id's event,
// keep it in id->event (acked by the next call or rdma_destroy_id) and
// turn a failure into errno (REJECTED: ECONNREFUSED).
int Complete(rdma_cm_id* pub, const char* call) {
  Id* id;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    id = FindLocked(pub);
  }
  if (id == nullptr || !id->state->sync) return 0;
  if (pub->event != nullptr) {
    rdma_ack_cm_event(pub->event);
    pub->event = nullptr;
  }
  if (WaitEvent(pub->channel, &pub->event) != 0) return -1;
  const rdma_cm_event& e = *pub->event;
  if (e.status == 0) return 0;
  if (e.event == RDMA_CM_EVENT_REJECTED) return Fail(ECONNREFUSED, call, "REJECTED");
  return Fail(e.status < 0 ? -e.status : e.status, call, rdma_event_str(e.event));
}

bool OfId(const rdma_cm_event& e, const void* id) { return e.id == id || e.listen_id == id; }
bool OwnEvent(const rdma_cm_event& e, const void* id) { return e.id == id; }

}  // namespace

namespace internal {

absl::flat_hash_map<rdma_cm_id*, Id*>& ByPublic() {
  static auto* m = new absl::flat_hash_map<rdma_cm_id*, Id*>;
  return *m;
}

absl::flat_hash_map<uscm_cm_id*, Id*>& ByUscmId() {
  static auto* m = new absl::flat_hash_map<uscm_cm_id*, Id*>;
  return *m;
}

int UscmFailed(const char* call) {
  int err = errno;
  return Fail(err, call, uscm_last_error());
}

// A real port, once opened: its events reach the programs' channels.
void OnPortOpen(Port* port) {
  AddOpenChannel(port->channel);
  uscm_device_set_progress_hook(port->dev, PumpAfterProgress, nullptr);
  PortThreadNeedChangedLocked();  // its device's removal is watched from now on
}

// As librdmacm's ucma_query_addr copies them from the kernel's answer, for
// every address family, with route.addr.addr.ibaddr (SGID, DGID, P_Key in
// network order).
void FillAddrs(Id* id) {
  uscm_addr local, peer;
  FillAddrsFrom(id, uscm_getname(id->state->uid, &local) == 0 ? &local : nullptr,
                uscm_getpeer(id->state->uid, &peer) == 0 ? &peer : nullptr);
}

void FillAddrsFrom(Id* id, const uscm_addr* local, const uscm_addr* peer) {
  rdma_ib_addr& ib = id->pub.route.addr.addr.ibaddr;
  if (local != nullptr) {
    ToSockaddr(*local, &id->pub.route.addr.src_storage);
    memcpy(ib.sgid.raw, local->gid, 16);
    ib.pkey = htobe16(local->pkey);
  }
  if (peer != nullptr) {
    ToSockaddr(*peer, &id->pub.route.addr.dst_storage);
    memcpy(ib.dgid.raw, peer->gid, 16);
  }
}

void AttachDevice(Id* id) {
  if (id->pub.port_num != 0) return;
  id->pub.verbs = id->port->verbs;
  id->pub.port_num = id->port->port_num;
  if (id->port->verbs != nullptr) {
    id->pub.pd = AcquireSharedPd(id->port->verbs);
    id->state->holds_pd = id->pub.pd != nullptr;
  }
}

void FillRouteFrom(Id* id, const uscm_path& p) {
  rdma_route& route = id->pub.route;
  route.path_rec = &id->path_rec;
  ToPathRec(p, route.path_rec);
  route.num_paths = 1;
}

}  // namespace internal

void DetachQp(uscm_cm_id* uid) {
  if (uid->qp != nullptr) uscm_destroy_qp(uid);  // of uscm_set_qp: only detached
}

bool OnSimulatedPorts() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<Port*> ports = PortsLocked();
  return !ports.empty() && ports.front()->testing;
}

int PlaceForSource(rdma_cm_id* pub, const uscm_addr& src, bool given, const char* call) {
  std::lock_guard<std::mutex> lock(g_mu);
  Id* id = FindLocked(pub);
  return id == nullptr ? 0 : PlaceAtSourceLocked(id, src, given, call);
}

std::mutex& LibraryLockForTesting() { return g_mu; }

void SetDriverForTesting(void (*drive)(void*), void* arg) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_driver = drive;
  g_driver_arg = arg;
}

bool RunProgressHookForTesting() {
  const uint64_t before = g_hook_pumps.load();
  PumpAfterProgress(nullptr);
  return g_hook_pumps.load() != before;
}

int PumpEvents() {
  std::lock_guard<std::mutex> lock(g_mu);
  return PumpEventsLocked();
}

int PumpSomeEvents(int per_port) {
  std::lock_guard<std::mutex> lock(g_mu);
  return PumpEventsLocked(per_port);
}

int ForId(const char* call, rdma_cm_id* id, const std::function<int(uscm_cm_id*)>& op) {
  return WithId(call, id, op);
}

int CompleteCall(rdma_cm_id* id, const char* call) { return Complete(id, call); }

int SyncQpType(const rdma_cm_id* id, uscm_cm_id* uid, const char* call) {
  if (id->ps != RDMA_PS_IB) return 0;  // uscm's id is of its port space's type
  const uscm_qp_type want = internal::IsUdId(*id) ? USCM_QPT_UD : USCM_QPT_RC;
  if (uscm_get_qp_type(uid) == want) return 0;
  return uscm_set_qp_type(uid, want) == 0 ? 0 : UscmFailed(call);
}

int EnsureBackend(const char* call) {
  std::lock_guard<std::mutex> lock(g_mu);
  return EnsureBackendLocked(call);
}

bool IsSyncId(rdma_cm_id* pub) {
  std::lock_guard<std::mutex> lock(g_mu);
  Id* id = FindLocked(pub);
  return id != nullptr && id->state->sync;
}

void KeepEndpointQpAttr(rdma_cm_id* pub, const ibv_qp_init_attr& attr) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (Id* id = FindLocked(pub); id != nullptr) {
    id->state->has_ep_qp_attr = true;
    id->state->ep_qp_attr = attr;
  }
}

bool EndpointQpAttr(rdma_cm_id* pub, ibv_qp_init_attr* attr) {
  std::lock_guard<std::mutex> lock(g_mu);
  Id* id = FindLocked(pub);
  if (id == nullptr || !id->state->has_ep_qp_attr) return false;
  *attr = id->state->ep_qp_attr;
  return true;
}

int SetOption(rdma_cm_id* pub, int level, int name, const void* value, size_t len) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (EnsureBackendLocked("rdma_set_option") != 0) return -1;
  Id* id = FindLocked(pub);
  if (id == nullptr) return internal::NotAnIdLocked("rdma_set_option", pub);
  // uscm checks the option (a bad one fails now, as librdmacm's): on the
  // default port when the id has none yet; a later address still moves it.
  if (MaterializeLocked(id, "rdma_set_option") != 0) return -1;
  if (uscm_set_option(id->state->uid, level, name, value, len) != 0) {
    return UscmFailed("rdma_set_option");
  }
  for (const IdState::OnPort& o : id->state->other_ports) {
    uscm_set_option(o.uid, level, name, value, len);
  }
  std::vector<IdState::Option>& options = id->state->options;
  std::erase_if(options, [&](const IdState::Option& o) { return o.level == level && o.name == name; });
  options.push_back({level, name, std::string(static_cast<const char*>(value), len)});
  return 0;
}

int ListenOnOtherPorts(rdma_cm_id* pub, int backlog) {
  std::lock_guard<std::mutex> lock(g_mu);
  Id* id = FindLocked(pub);
  return id == nullptr ? 0 : internal::ListenOnOtherPortsLocked(id, backlog);
}

void RequestDepths(rdma_cm_id* pub, uint8_t* initiator_depth, uint8_t* responder_resources) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (Id* id = FindLocked(pub); id != nullptr) {
    *initiator_depth = id->state->req_initiator_depth;
    *responder_resources = id->state->req_responder_resources;
  }
}

int WaitForEvent(rdma_event_channel* channel, rdma_cm_event** event) {
  return WaitEvent(channel, event);
}

uscm_cm_id* UscmIdOf(rdma_cm_id* pub, const char* call) {
  std::lock_guard<std::mutex> lock(g_mu);
  Id* id = FindLocked(pub);
  if (id == nullptr) {
    internal::NotAnIdLocked(call, pub);
    return nullptr;
  }
  if (MaterializeLocked(id, call) != 0) return nullptr;
  return id->state->uid;
}

}  // namespace uscm::librdmacm

using uscm::librdmacm::Fail;

extern "C" {

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) {
  using namespace uscm::librdmacm;
  std::lock_guard<std::mutex> lock(g_mu);
  // A device, not an ACTIVE port (ports.h EnsureDevicesListedLocked).
  if (EnsureDevicesListedLocked("rdma_create_id") != 0) return -1;
  if (id == nullptr) return Fail(EINVAL, "rdma_create_id", "id is NULL");
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IPOIB && ps != RDMA_PS_IB) {
    return Fail(EINVAL, "rdma_create_id", "unknown port space");
  }
  if (channel != nullptr && ChannelOfParent(channel)) {
    return Fail(EACCES, "rdma_create_id", kParentsChannel);
  }
  const bool sync = channel == nullptr;
  if (sync) {
    channel = NewEventChannel();  // the id's own: its calls wait on it
    if (channel == nullptr) return -1;
  }
  // No device and no uscm id yet, as librdmacm: the port comes with the
  // address (PlaceLocked) or the first call that needs one.
  Id* created = NewId(nullptr, nullptr, channel, context, ps);
  created->state->sync = sync;
  *id = &created->pub;
  return 0;
}

// As librdmacm: the id's events still queued are discarded (the kernel's
// ucma drops them), then it waits until every event of the id handed to the
// program is acked. Waiting for queued ones too hung perftest's server
// (ib_send_bw -R) on a TIMEWAIT_EXIT it never reads.
int rdma_destroy_id(rdma_cm_id* pub) {
  using namespace uscm::librdmacm;
  Id* id;
  {
    std::lock_guard<std::mutex> lock(g_mu);  // no port needed: the id may have none
    id = FindLocked(pub);
    auto known = ByPublic().find(pub);
    if (id == nullptr && known != ByPublic().end() && known->second->state->OfThisProcess()) {
      // As librdmacm's write to the closed fd.
      return Fail(EBADF, "rdma_destroy_id", "the id's event channel was destroyed");
    }
    if (id == nullptr) return internal::NotAnIdLocked("rdma_destroy_id", pub);
  }
  if (pub->event != nullptr) {  // synchronous mode's last event
    rdma_ack_cm_event(pub->event);
    pub->event = nullptr;
  }
  std::unique_lock<std::mutex> lock(g_mu);  // the pump queues nothing meanwhile
  for (;;) {
    DropEvents(pub->channel, OwnEvent, pub);
    std::unique_lock<std::mutex> acked(id->state->mu);
    if (id->state->unacked == 0) break;
    lock.unlock();
    id->state->acked.wait(acked, [&] { return id->state->unacked == 0; });
    acked.unlock();
    lock.lock();
  }
  if (id->state->uid != nullptr) {
    if (uscm_destroy_id(id->state->uid) != 0) return UscmFailed("rdma_destroy_id");
    ByUscmId().erase(id->state->uid);
  }
  internal::ForgetWildcardIdLocked(id);
  internal::DropOtherPortsLocked(id, "rdma_destroy_id");
  ByPublic().erase(&id->pub);
  ForgetQp(&id->pub);
  if (id->state->holds_pd) ReleaseSharedPd(id->pub.verbs);
  rdma_event_channel* own = id->state->sync ? id->pub.channel : nullptr;
  // A removed device's last id closes it (librdmacm's ucma_put_device).
  const bool on_removed = id->port != nullptr && id->port->gone && !id->port->testing;
  // A lost port's last id closes its uscm device (lost_ports.cc).
  const bool on_lost = id->port != nullptr && id->port->lost;
  delete id->state;
  delete id;
  lock.unlock();  // the channel's close hook takes g_mu
  if (own != nullptr) rdma_destroy_event_channel(own);
  if (on_removed) CloseRemovedDevices();
  if (on_lost) CloseLostPorts();
  internal::JoinStoppedPortResync();  // the last wildcard id's: the thread may wait for g_mu
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  using namespace uscm::librdmacm;
  uscm_addr a;
  if (addr == nullptr || ToUscmAddr(addr, &a) != 0) {
    return Fail(EINVAL, "rdma_bind_addr", "address is NULL or not AF_INET / AF_INET6 / AF_IB");
  }
  const bool wildcard = IsWildcard(a);
  if (!wildcard) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (EnsureBackendLocked("rdma_bind_addr") != 0) return -1;
    Id* i = FindLocked(id);
    if (i != nullptr && PlaceAtSourceLocked(i, a, true, "rdma_bind_addr") != 0) return -1;
  }
  if (!wildcard) {
    CloseRemovedDevicesIfNew();  // the lookup may have listed them
  } else {
    // It opens every port below: their uscmds start at once, not one per open.
    std::lock_guard<std::mutex> lock(g_mu);
    if (EnsureBackendLocked("rdma_bind_addr") == 0) StartRoutersOfUnopenedPortsLocked();
  }
  void (*after)(Id*) = wildcard ? &internal::RememberWildcard : &AttachAndFill;
  // A wildcard holds its port on every port (wildcard_ids.cc), all or
  // nothing; an ephemeral one another process holds on some port is given
  // up for the next, as cma_alloc_any_port skips a port in use (bounded).
  for (int tries = 0;; ++tries) {
    if (WithId("rdma_bind_addr", id, [&](uscm_cm_id* uid) { return uscm_bind_addr(uid, &a); },
               after) != 0) {
      return -1;
    }
    if (!wildcard) return 0;
    std::lock_guard<std::mutex> lock(g_mu);
    Id* i = FindLocked(id);
    if (i == nullptr || internal::BindOnOtherPortsLocked(i, "rdma_bind_addr") == 0) return 0;
    if (a.port != 0 || (errno != EADDRINUSE && errno != EADDRNOTAVAIL) || tries >= 16) {
      return -1;
    }
  }
}

// The id's queued events (and a listener's queued CONNECT_REQUESTs) move to
// `channel`, NULL making the id synchronous; then, as librdmacm, waits until
// the id's events retrieved from the old channel are acked.
int rdma_migrate_id(rdma_cm_id* pub, rdma_event_channel* channel) {
  using namespace uscm::librdmacm;
  Id* id;
  rdma_event_channel* old;
  bool was_sync;
  {
    std::lock_guard<std::mutex> lock(g_mu);  // no port needed: the id may have none
    id = FindLocked(pub);
    if (id == nullptr) return internal::NotAnIdLocked("rdma_migrate_id", pub);
    if (channel != nullptr && ChannelOfParent(channel)) {
      return Fail(EACCES, "rdma_migrate_id", kParentsChannel);
    }
    if (channel == nullptr && id->state->sync) {
      return Fail(EINVAL, "rdma_migrate_id", "the id is synchronous already");
    }
    const bool sync = channel == nullptr;
    if (sync) {
      channel = NewEventChannel();
      if (channel == nullptr) return -1;
    }
    old = pub->channel;
    was_sync = id->state->sync;
    // Under g_mu: the pump queues nothing meanwhile.
    MoveEvents(old, channel, OfId, pub);
    pub->channel = channel;
    id->state->sync = sync;
  }
  if (was_sync) {
    if (pub->event != nullptr) {
      rdma_ack_cm_event(pub->event);
      pub->event = nullptr;
    }
    rdma_destroy_event_channel(old);  // frees what could not move
  }
  std::unique_lock<std::mutex> lock(id->state->mu);
  id->state->acked.wait(
      lock, [&] { return id->state->unacked <= CountEvents(pub->channel, OwnEvent, pub); });
  return 0;
}

}  // extern "C"
