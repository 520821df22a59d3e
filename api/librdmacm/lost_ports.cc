// A port whose uscmd exited while its device stayed (killed, crashed,
// `systemctl restart`): replaced in the table and opened again through a new
// uscmd, the lost entry closed after the last id that lives on it. See
// ids_internal.h OnLostPathLocked, ids.h CloseLostPorts, docs/API.md
// "Devices and ports that appear later".
#include <errno.h>
#include <stdio.h>

#include <mutex>
#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm {
namespace internal {

void OnLostPathLocked(Port* port) {
  constexpr const char* kCall = "uscmd exited";
  if (port->lost || port->gone || port->testing || port->verbs == nullptr) return;
  // A uscmd also exits when its device is removed (its umad file reads EIO),
  // maybe before the drop-in's listing saw the removal: the devices are
  // listed now (one ibv_get_device_list, on this rare path), and a removed
  // device's port is left to the removal's path (device_calls.cc), which
  // moves the wildcard ids off it too.
  SyncDevices(kCall);
  if (DeviceGone(port->verbs)) return;
  // A wildcard id whose own uscm id is there takes another port's as its
  // own, or none until the fresh entry is claimed (ClaimNewPortsLocked).
  MoveWildcardIdsOffLocked(port, kCall);
  ReplaceLostPortLocked(port);
  DropPortLocked(port, kCall);
  if (DebugEnabled()) {
    fprintf(stderr,
            "uscm librdmacm: %s:%u's MAD path is lost (its uscmd exited) while the device "
            "stays: the port is opened again through a new uscmd\n",
            port->ca.c_str(), port->port_num);
  }
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
