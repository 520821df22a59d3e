// A port whose uscmd exited while its device stayed (killed, crashed,
// `systemctl restart`): replaced in the table and opened again through a new
// uscmd, the lost entry closed after the last id that lives on it. See
// ids_internal.h OnLostPathLocked, ids.h CloseLostPorts, docs/API.md
// "Devices and ports that appear later".
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_device.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm {
namespace internal {
namespace {

// DEVICE_REMOVAL to the listeners on `port` whose event Forward left to
// OnLostPathLocked (RemovalLeftToLostPathLocked), when they are not moved.
void SendLeftRemovalsLocked(const Port* port) {
  std::vector<Id*> ids;
  for (const auto& [uid, id] : ByUscmId()) {
    if (id->port == port && id->state->uid == uid && RemovalLeftToLostPathLocked(id)) {
      ids.push_back(id);
    }
  }
  for (Id* id : ids) SendDeviceRemovalToLocked(id);
}

}  // namespace

void OnLostPathLocked(Port* port) {
  constexpr const char* kCall = "uscmd exited";
  // Replaced already: nothing more. A second call comes when one step's
  // DEVICE_REMOVALs reach two pumps (uscm queues them one at a time under
  // the port channel's lock, not the library's: a call's pump on another
  // thread may take the first ones, the progress hook's the rest), or when
  // a call replaced the port before the step queued them
  // (OpenPortForIdLocked). The listeners bound to the port's address wait
  // on this entry for MoveListenersLocked, which moves them or sends each
  // its one DEVICE_REMOVAL (the device removed since): none from here.
  // A created id's placeholder (no device: the kernel's id never sees the
  // loss) leaves the port, removed or replaced, with no event.
  DropPlaceholdersLocked(port, kCall);
  if (port->lost) return;
  if (port->gone || port->testing || port->verbs == nullptr) {
    SendLeftRemovalsLocked(port);
    return;
  }
  // A uscmd also exits when its device is removed (its umad file reads EIO),
  // maybe before the drop-in's listing saw the removal: the devices are
  // listed now (one ibv_get_device_list, on this rare path), and a removed
  // device's port is left to the removal's path (device_calls.cc), which
  // moves the wildcard ids off it too.
  SyncDevices(kCall);
  if (DeviceGone(port->verbs)) {
    SendLeftRemovalsLocked(port);
    return;
  }
  // A wildcard id whose own uscm id is there takes another port's as its
  // own, or none until the fresh entry is claimed (ClaimNewPortsLocked).
  MoveWildcardIdsOffLocked(port, kCall);
  if (ReplaceLostPortLocked(port) == nullptr) SendLeftRemovalsLocked(port);
  DropPortLocked(port, kCall);
  // A listener bound to the port's address waits on the lost entry for the
  // thread's step (MoveListenersLocked): its period runs meanwhile.
  PortThreadNeedChangedLocked();
  if (DebugEnabled()) {
    fprintf(stderr,
            "uscm librdmacm: %s:%u's MAD path is lost (its uscmd exited) while the device "
            "stays: the port is opened again through a new uscmd\n",
            port->ca.c_str(), port->port_num);
  }
}

bool RemovalLeftToLostPathLocked(const Id* id) {
  return id->state->port_listening && !id->state->closed && id->state->OfThisProcess();
}

namespace {

// The listeners bound to a lost port's address that wait for its fresh entry.
std::vector<Id*> ListenersToMoveLocked() {
  std::vector<Id*> out;
  const std::vector<Port*> ports = PortsLocked();
  if (std::none_of(ports.begin(), ports.end(),
                   [](const Port* p) { return p->lost && p->channel != nullptr; })) {
    return out;
  }
  for (const auto& [uid, id] : ByUscmId()) {
    if (id->port != nullptr && id->port->lost && id->state->uid == uid &&
        !id->state->removal_sent && RemovalLeftToLostPathLocked(id)) {
      out.push_back(id);
    }
  }
  return out;
}

// The live entry that replaced the lost `port` (same device and port), or
// NULL (the device was removed since).
Port* FreshEntryOfLocked(const Port* port) {
  for (Port* p : LivePortsLocked()) {
    if (p->replaces_lost && p->verbs == port->verbs && p->port_num == port->port_num) return p;
  }
  return nullptr;
}

// A uscm id on `port` bound to `id`'s address and listening with its
// backlog and options; NULL with errno (USCM_DEBUG says why).
uscm_cm_id* ListenAgainLocked(const Id* id, Port* port) {
  constexpr const char* kCall = "rdma_listen";
  uscm_cm_id* uid = nullptr;
  if (uscm_create_id(port->channel, &uid, nullptr, static_cast<uscm_port_space>(id->pub.ps)) != 0) {
    UscmFailed(kCall);
    return nullptr;
  }
  // A UD RDMA_PS_IB listener stays UD (its uscm id is RC by default).
  bool ok = SyncQpType(&id->pub, uid, kCall) == 0;
  for (const IdState::Option& o : id->state->options) {
    ok = ok && uscm_set_option(uid, o.level, o.name, o.value.data(), o.value.size()) == 0;
  }
  ok = ok && uscm_bind_addr(uid, &id->state->listen_addr) == 0 &&
       uscm_listen(uid, id->state->backlog) == 0;
  if (ok) return uid;
  const int err = errno;
  UscmFailed(kCall);
  uscm_destroy_id(uid);
  errno = err;
  return nullptr;
}

// With USCM_DEBUG, as rdma_listen's line: the readiness line a script waits on.
void SayListeningAgain(const Id* id, const Port* port) {
  if (!DebugEnabled()) return;
  char host[INET6_ADDRSTRLEN] = "?";
  const uscm_addr& a = id->state->listen_addr;
  if (a.family == USCM_AF_INET) {
    inet_ntop(AF_INET, &a.ip[12], host, sizeof(host));
  } else if (a.family == USCM_AF_INET6) {
    inet_ntop(AF_INET6, a.ip, host, sizeof(host));
  }
  fprintf(stderr,
          "uscm librdmacm: rdma_listen: listening on %s port %u (%s:%u, opened again: its "
          "uscmd exited)\n",
          host, a.port, port->ca.c_str(), port->port_num);
}

// Whether `port` is open on a uscm device whose MAD path is lost (its uscmd
// exited: uscm_device_transport_lost).
bool PathLostLocked(const Port* port) {
  if (port->dev == nullptr || port->channel == nullptr || port->lost) return false;
  char why[160] = "";
  if (uscm_device_transport_lost(port->dev, why, sizeof why) != 1) return false;
  if (DebugEnabled()) {
    fprintf(stderr, "uscm librdmacm: %s:%u's MAD path is lost: %s\n", port->ca.c_str(),
            port->port_num, why);
  }
  return true;
}

}  // namespace

Port* OpenPortForIdLocked(Port* port, const char* call) {
  if (PathLostLocked(port)) {
    // The loss's events first: the ids there get their DEVICE_REMOVAL and
    // the pump replaces the port. None queued yet (none comes with no uscm
    // id there; else the port's progress thread has not taken the loss):
    // the port is replaced here, as the pump would, and the new id goes to
    // its fresh entry, where the kernel's, whose CM is never lost, would
    // be; a wildcard id's bind there is dropped (MoveWildcardIdsOffLocked,
    // DropPortLocked), not taken for the new id. The ids that live on the
    // lost entry get their DEVICE_REMOVAL when the step queues it, and its
    // pump's OnLostPathLocked finds the port replaced.
    if (AnyOpenChannelQueued()) PumpEventsLocked();
    if (!port->lost) OnLostPathLocked(port);
    if (port->lost) {
      port = FreshEntryOfLocked(port);
      if (port == nullptr) {
        Fail(ENODEV, call, "the port's uscmd exited and its device was removed since");
        return nullptr;
      }
    } else if (port->gone) {  // its device was removed (OnLostPathLocked listed them)
      Fail(ENODEV, call, "the port's device was removed");
      return nullptr;
    }
  }
  return OpenPortLocked(port, call, OnPortOpen) == 0 ? port : nullptr;
}

bool AnyLostPortToCloseLocked() {
  for (const Port* p : PortsLocked()) {
    if (p->lost && (p->dev != nullptr || p->channel != nullptr) && !IdOnPortLocked(p)) {
      return true;
    }
  }
  return false;
}

bool AnyListenerToMoveLocked() { return !ListenersToMoveLocked().empty(); }

bool ListenerWaitsForLocked(const Port* port) {
  for (const Id* id : ListenersToMoveLocked()) {
    if (FreshEntryOfLocked(id->port) == port) return true;
  }
  return false;
}

int MoveListenersLocked() {
  int moved = 0;
  for (Id* id : ListenersToMoveLocked()) {
    Port* fresh = FreshEntryOfLocked(id->port);
    if (fresh != nullptr && fresh->channel == nullptr) continue;  // not open yet
    uscm_cm_id* uid = fresh != nullptr ? ListenAgainLocked(id, fresh) : nullptr;
    if (uid == nullptr) {  // as before the move: the program makes a new one
      Fail(fresh != nullptr ? errno : ENODEV, "uscmd exited",
           "a listener bound to the port's address cannot listen there again: "
           "DEVICE_REMOVAL");
      SendDeviceRemovalToLocked(id);
      continue;
    }
    if (uscm_destroy_id(id->state->uid) != 0) UscmFailed("uscmd exited");
    ByUscmId().erase(id->state->uid);
    id->state->uid = uid;
    id->port = fresh;
    ByUscmId()[uid] = id;
    SayListeningAgain(id, fresh);
    ++moved;
  }
  return moved;
}

}  // namespace internal

int CloseLostPorts() {
  std::vector<OpenedPort> opened;
  {
    std::lock_guard<std::mutex> lock(internal::g_mu);
    // Events queued first: a CONNECT_REQUEST's new id there lives there.
    if (AnyOpenChannelQueued()) internal::PumpEventsLocked();
    for (Port* p : PortsLocked()) {
      if (!p->lost || (p->dev == nullptr && p->channel == nullptr) ||
          internal::IdOnPortLocked(p)) {
        continue;
      }
      internal::DropPortLocked(p, "uscmd exited");
      const OpenedPort o = ReleasePortLocked(p);
      if (o.channel != nullptr) RemoveOpenChannel(o.channel);
      opened.push_back(o);
    }
    if (!opened.empty()) internal::PortThreadNeedChangedLocked();
  }
  // Without the library's lock: closing a uscm device joins its progress
  // thread, whose hook takes that lock.
  int closed = 0;
  for (const OpenedPort& o : opened) {
    if (CloseOpenedPort(o) != 0) {
      Fail(errno, "uscmd exited", uscm_last_error());  // USCM_DEBUG: it stays open
    } else {
      ++closed;
    }
  }
  return closed;
}

}  // namespace uscm::librdmacm
