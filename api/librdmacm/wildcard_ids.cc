// An id bound to a wildcard, with no device of its own, on every port: the
// kernel's rdma_cm keeps one bind list for the host (cma_get_port at
// rdma_bind_addr, before any device is chosen) and a wildcard listener
// listens on every device (cma_listen_on_all). The drop-in has a uscm id per
// port, each port's uscmd holding the claims of that port, so the bind and
// the listen are made on every port and succeed or fail as a whole. See
// ids_internal.h.
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/port_resync.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm::internal {
namespace {

// Every id bound to a wildcard, listening or not (ClaimNewPortsLocked), under
// the library's lock; the first one starts the uscm-ports thread, the last
// one stops it (port_resync.h).
std::vector<Id*>& WildcardIds() {
  static auto* ids = new std::vector<Id*>;
  return *ids;
}

// Starts the thread when none runs: the first wildcard id, or the first of a
// fork's child (the parent's ids and thread are not the child's).
void RegisterWildcardLocked(Id* id) {
  if (id->state->registered_wildcard) return;
  id->state->registered_wildcard = true;
  WildcardIds().push_back(id);
  PortThreadNeedChangedLocked();
}

void ForgetListener(Id* id) {
  if (!id->state->wildcard_listening) return;
  id->state->wildcard_listening = false;
}

bool HeldOn(const Id* id, const Port* port) {
  if (port == id->port) return true;
  const auto& others = id->state->other_ports;
  return std::any_of(others.begin(), others.end(),
                     [&](const IdState::OnPort& o) { return o.port == port; });
}

// With USCM_DEBUG, as rdma_listen's line: the readiness line a script waits on.
void SayHeld(const Id* id, const Port* port) {
  if (!DebugEnabled()) return;
  const uscm_addr& a = id->state->bound;
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.family == USCM_AF_INET) {
    inet_ntop(AF_INET, &a.ip[12], host, sizeof(host));
  } else if (a.family == USCM_AF_INET6) {
    inet_ntop(AF_INET6, a.ip, host, sizeof(host));
  }
  const bool listening = id->state->wildcard_listening;
  fprintf(stderr, "uscm librdmacm: %s: %s %s port %u (%s:%u, %s)\n",
          listening ? "rdma_listen" : "rdma_bind_addr", listening ? "listening on" : "bound to",
          host, a.port, port->ca.c_str(), port->port_num,
          port->replaces_lost ? "opened again: its uscmd exited" : "a port added later");
}

// With USCM_DEBUG: the wildcard id whose own port's device was removed (or
// its uscmd exited: `why`), and where it went (MoveWildcardIdsOffLocked).
void SayMoved(const Id* id, const Port* from, const char* why) {
  if (!DebugEnabled()) return;
  const Port* to = id->port;
  const std::string where =
      to == nullptr ? "no port until one is added" : to->ca + ":" + std::to_string(to->port_num);
  fprintf(stderr,
          "uscm librdmacm: %s: the wildcard id of port %u leaves %s:%u for %s\n", why,
          id->state->bound.port, from->ca.c_str(), from->port_num, where.c_str());
}

// The wildcard id `id` on `port` too: its bind, and its listen when it
// listens. 0, or -1 with errno.
int ClaimPortLocked(Id* id, Port* port) {
  const bool listening = id->state->wildcard_listening;
  const char* call = listening ? "rdma_listen" : "rdma_bind_addr";
  uscm_cm_id* uid = CloneOnLocked(id, port, call);  // binds (the port is open)
  if (uid == nullptr) return -1;
  if (listening && uscm_listen(uid, id->state->backlog) != 0) {
    UscmFailed(call);  // errno, and USCM_DEBUG's line
    const int err = errno;
    uscm_destroy_id(uid);
    errno = err;
    return -1;
  }
  // No uscm id of its own: its own port's device was removed
  // (MoveWildcardIdsOffLocked), and this port is its own now.
  if (id->state->uid == nullptr) {
    id->state->uid = uid;
    id->port = port;
  } else {
    id->state->other_ports.push_back({port, uid});
  }
  ByUscmId()[uid] = id;
  SayHeld(id, port);
  return 0;
}

// A port of a device not removed, other than `removed`, among the wildcard
// id's other ports, or NULL.
const IdState::OnPort* LiveOtherPort(const Id* id, const Port* removed) {
  for (const IdState::OnPort& o : id->state->other_ports) {
    if (o.port != removed && !o.port->gone && !DeviceGone(o.port->verbs)) return &o;
  }
  return nullptr;
}

// The kernel leaves an id whose bind failed unbound (IDLE): every uscm id of
// it goes, and their claims with them; the next call that needs one makes a
// fresh one on the default port with the id's options (MaterializeLocked).
void UnbindLocked(Id* id, const char* call) {
  ForgetWildcardIdLocked(id);
  DropOtherPortsLocked(id, call);
  if (id->state->uid != nullptr) {
    if (uscm_destroy_id(id->state->uid) != 0) UscmFailed(call);
    ByUscmId().erase(id->state->uid);
  }
  id->state->uid = nullptr;
  id->port = nullptr;
  id->state->wildcard_bound = false;
  id->state->bound = {};
  memset(&id->pub.route.addr.src_storage, 0, sizeof(id->pub.route.addr.src_storage));
}

// A listening uscm id cannot stop listening: a listen refused on one port
// replaces the id's uscm ids by bound ones (the port is free to another
// process for that moment). If the bind fails now, the id is unbound.
void RebindLocked(Id* id, const char* call) {
  Port* port = id->port;
  DropOtherPortsLocked(id, call);
  if (uscm_destroy_id(id->state->uid) != 0) UscmFailed(call);
  ByUscmId().erase(id->state->uid);
  id->state->uid = nullptr;
  uscm_cm_id* uid = CloneOnLocked(id, port, call);  // wildcard_bound: bound again
  if (uid == nullptr) {
    UnbindLocked(id, call);
    return;
  }
  id->state->uid = uid;
  ByUscmId()[uid] = id;
  (void)BindOnOtherPortsLocked(id, call);  // unbinds the id itself when refused
}

}  // namespace

void RememberWildcard(Id* id) {
  FillAddrs(id);
  id->state->wildcard_bound = uscm_getname(id->state->uid, &id->state->bound) == 0;
  if (id->state->wildcard_bound) RegisterWildcardLocked(id);
}

uscm_cm_id* CloneOnLocked(Id* id, Port* port, const char* call) {
  if (OpenPortLocked(port, call, OnPortOpen) != 0) return nullptr;
  uscm_cm_id* uid = nullptr;
  if (uscm_create_id(port->channel, &uid, nullptr, static_cast<uscm_port_space>(id->pub.ps)) != 0) {
    UscmFailed(call);
    return nullptr;
  }
  if (SyncQpType(&id->pub, uid, call) != 0) {
    uscm_destroy_id(uid);
    return nullptr;
  }
  for (const IdState::Option& o : id->state->options) {
    if (uscm_set_option(uid, o.level, o.name, o.value.data(), o.value.size()) != 0) {
      UscmFailed(call);
      uscm_destroy_id(uid);
      return nullptr;
    }
  }
  if (id->state->wildcard_bound && uscm_bind_addr(uid, &id->state->bound) != 0) {
    const int err = errno;
    UscmFailed(call);
    uscm_destroy_id(uid);
    errno = err;
    return nullptr;
  }
  return uid;
}

int BindOnOtherPortsLocked(Id* id, const char* call) {
  if (id->pub.port_num != 0 || !id->state->wildcard_bound || !id->state->other_ports.empty()) {
    return 0;
  }
  for (Port* listed : LivePortsLocked()) {
    if (listed == id->port) continue;
    Port* port = OpenPortForIdLocked(listed, call);  // its fresh entry if its uscmd died
    if (port == nullptr) continue;                   // USCM_DEBUG said why
    uscm_cm_id* uid = CloneOnLocked(id, port, call);
    if (uid == nullptr) {
      const int err = errno;
      UnbindLocked(id, call);
      errno = err;
      return -1;
    }
    id->state->other_ports.push_back({port, uid});
    ByUscmId()[uid] = id;
  }
  return 0;
}

int ListenOnOtherPortsLocked(Id* id, int backlog) {
  if (id->pub.port_num != 0) {  // bound to a port's address: kept for its move
    id->state->port_listening = uscm_getname(id->state->uid, &id->state->listen_addr) == 0;
    id->state->backlog = backlog;
    return 0;
  }
  if (!id->state->wildcard_bound) {  // bound by the listen itself
    if (uscm_getname(id->state->uid, &id->state->bound) != 0) return 0;
    id->state->wildcard_bound = true;
    RegisterWildcardLocked(id);
    if (BindOnOtherPortsLocked(id, "rdma_listen") != 0) return -1;
  }
  for (const IdState::OnPort& o : id->state->other_ports) {
    if (SyncQpType(&id->pub, o.uid, "rdma_listen") != 0 || uscm_listen(o.uid, backlog) != 0) {
      const int err = errno;
      const std::string why =
          std::string(o.port->ca) + " port " + std::to_string(o.port->port_num) + ": " +
          uscm_last_error() + " (the listen is undone on every port)";
      RebindLocked(id, "rdma_listen");
      return Fail(err, "rdma_listen", why.c_str());
    }
  }
  if (!id->state->wildcard_listening) {
    id->state->wildcard_listening = true;
    id->state->backlog = backlog;
  }
  return 0;
}

bool AnyWildcardIdLocked() { return !WildcardIds().empty(); }

void ForgetWildcardIdsInChildLocked() {
  for (Id* id : WildcardIds()) id->state->registered_wildcard = false;
  WildcardIds().clear();
}

void ForgetWildcardIdLocked(Id* id) {
  if (!id->state->registered_wildcard) return;
  id->state->registered_wildcard = false;
  id->state->refused_ports.clear();
  std::erase(WildcardIds(), id);
  PortThreadNeedChangedLocked();
}

void PortThreadNeedChangedLocked() {
  const bool periodic =
      !WildcardIds().empty() || AnyListenerToMoveLocked() || AnyLostPortToCloseLocked();
  if (periodic || AnyLivePortOpenLocked()) {
    StartPortResyncLocked(periodic);
  } else {
    StopPortResyncLocked();
  }
}

void ClaimNewPortsLocked() {
  for (Id* id : WildcardIds()) {
    for (Port* port : LivePortsLocked()) {
      std::vector<Port*>& refused = id->state->refused_ports;
      // A port not open yet is left for the uscm-ports thread to open: an
      // open here would hold the lock while it starts the port's uscmd.
      if (port->channel == nullptr || HeldOn(id, port) ||
          std::find(refused.begin(), refused.end(), port) != refused.end()) {
        continue;
      }
      if (ClaimPortLocked(id, port) != 0) refused.push_back(port);
    }
  }
}

uscm_cm_id* TakeOtherPortLocked(Id* id, Port* port) {
  auto& others = id->state->other_ports;
  for (auto it = others.begin(); it != others.end(); ++it) {
    if (it->port != port) continue;
    uscm_cm_id* uid = it->uid;
    others.erase(it);
    return uid;
  }
  return nullptr;
}

bool IdOnPortLocked(const Port* port) {
  for (const auto& [uid, id] : ByUscmId()) {
    if (id->port == port && id->state->uid == uid) return true;
  }
  return false;
}

void SendDeviceRemovalToLocked(Id* id) {
  if (id->state->removal_sent || id->state->closed) return;
  id->state->removal_sent = true;
  rdma_cm_event ev = {};
  ev.id = &id->pub;
  ev.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
  QueueForId(id, id->pub.channel, ev, nullptr, 0);
}

int SendDeviceRemovalLocked(const Port* port) {
  std::vector<Id*> ids;
  for (const auto& [uid, id] : ByUscmId()) {
    if (id->port != port || id->state->uid != uid || id->state->removal_sent ||
        id->state->closed) {
      continue;
    }
    ids.push_back(id);
  }
  for (Id* id : ids) SendDeviceRemovalToLocked(id);
  return static_cast<int>(ids.size());
}

bool OnNoDeviceLocked(const Id* id) {
  return id->state->registered_wildcard && id->pub.port_num == 0;
}

bool IsPlaceholderLocked(const Id* id) {
  const IdState& s = *id->state;
  return s.uid != nullptr && id->pub.port_num == 0 && !s.wildcard_bound &&
         !s.registered_wildcard && !s.port_listening && !s.wildcard_listening &&
         id->pub.route.addr.src_addr.sa_family == AF_UNSPEC &&
         id->pub.route.addr.dst_addr.sa_family == AF_UNSPEC;
}

void DropPlaceholdersLocked(const Port* port, const char* call) {
  std::vector<Id*> ids;
  for (const auto& [uid, id] : ByUscmId()) {
    if (id->port == port && id->state->uid == uid && IsPlaceholderLocked(id)) ids.push_back(id);
  }
  for (Id* id : ids) {
    if (uscm_destroy_id(id->state->uid) != 0) UscmFailed(call);
    ByUscmId().erase(id->state->uid);
    id->state->uid = nullptr;
    id->port = nullptr;
    if (DebugEnabled()) {
      fprintf(stderr,
              "uscm librdmacm: %s: %s:%u left: an id on no device had its placeholder there "
              "(its options alone): no event, its next call makes one on the default port\n",
              call, port->ca.c_str(), port->port_num);
    }
  }
}

void SayWildcardPathLost(const Id* id, const Port* port) {
  if (!DebugEnabled()) return;
  fprintf(stderr,
          "uscm librdmacm: %s:%u's MAD path is lost (its uscmd exited): no event for the "
          "wildcard id of port %u (it listens there again once the port is opened again)\n",
          port->ca.c_str(), port->port_num, id->state->bound.port);
}

void MoveWildcardIdsOffLocked(Port* port, const char* call) {
  for (Id* id : WildcardIds()) {
    if (id->port != port || !OnNoDeviceLocked(id) || id->state->uid == nullptr) continue;
    uscm_cm_id* gone = id->state->uid;
    if (const IdState::OnPort* o = LiveOtherPort(id, port)) {
      id->state->uid = o->uid;
      id->port = o->port;
      std::erase_if(id->state->other_ports,
                    [&](const IdState::OnPort& x) { return x.uid == id->state->uid; });
    } else {  // on no port until one is added (ClaimPortLocked)
      id->state->uid = nullptr;
      id->port = nullptr;
    }
    if (uscm_destroy_id(gone) != 0) UscmFailed(call);
    ByUscmId().erase(gone);
    SayMoved(id, port, call);
  }
}

void DropPortLocked(Port* port, const char* call) {
  std::vector<Id*> ids;
  for (const auto& [uid, id] : ByUscmId()) {
    if (id->port != port) ids.push_back(id);
  }
  for (Id* id : ids) {
    std::erase(id->state->refused_ports, port);
    if (uscm_cm_id* uid = TakeOtherPortLocked(id, port)) {
      if (uscm_destroy_id(uid) != 0) UscmFailed(call);
      ByUscmId().erase(uid);
    }
  }
}

void DropOtherPortsLocked(Id* id, const char* call) {
  ForgetListener(id);
  for (const IdState::OnPort& o : id->state->other_ports) {
    if (uscm_destroy_id(o.uid) != 0) UscmFailed(call);
    ByUscmId().erase(o.uid);
  }
  id->state->other_ports.clear();
}

}  // namespace uscm::librdmacm::internal
