// rdma_get_devices / rdma_free_devices, and the close of a removed device
// once nothing holds it, as librdmacm's remove_cma_dev (docs/API.md "Devices
// and ports that appear later"): above devices.h, ports.h, the GID watch and
// the kept tables, which each hold a part of a device.
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_device.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/fork_locks.h"
#include "api/librdmacm/gid_watch.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"
#include "api/librdmacm/ports.h"
#include "api/librdmacm/ud_ah.h"

namespace uscm::librdmacm {

namespace {

// One closer at a time: a second one would find the same devices.
std::mutex g_closing;

// CloseRemovedDevices under g_closing. *skipped: whether a device was left
// for later (the uscm-ports thread opens one of its ports without the lock).
int CloseRemovedLocked(bool* skipped) {
  *skipped = false;
  const std::vector<ibv_context*> gone = GoneOpenContexts();
  if (gone.empty()) return 0;
  std::vector<OpenedPort> opened;
  std::vector<ibv_context*> unused;
  {
    std::lock_guard<std::mutex> lock(internal::g_mu);
    // Events queued on the ports' channels first: a CONNECT_REQUEST's new
    // id on a removed device's port is an id that lives there.
    if (AnyOpenChannelQueued()) internal::PumpEventsLocked();
    for (ibv_context* verbs : gone) {
      const std::vector<Port*> ports = PortsOfLocked(verbs);
      if (std::any_of(ports.begin(), ports.end(), [](const Port* p) { return p->resync_opening; })) {
        *skipped = true;  // the thread's step closes it after the open
        continue;
      }
      // A wildcard id, on no device, moves off (it keeps nothing); an id on
      // one of its ports keeps it (librdmacm's refcnt) and is sent
      // DEVICE_REMOVAL, as the kernel's cma_process_remove does.
      for (Port* p : ports) {
        internal::MoveWildcardIdsOffLocked(p, "device removed");
        internal::DropPlaceholdersLocked(p, "device removed");  // on no device either
      }
      bool used = false;
      for (const Port* p : ports) used |= internal::IdOnPortLocked(p);
      if (used) {
        for (Port* p : ports) {
          p->gone = true;  // served until destroyed, no new id
          internal::SendDeviceRemovalLocked(p);
        }
        continue;
      }
      for (Port* p : ports) {
        internal::DropPortLocked(p, "device removed");
        const OpenedPort o = ReleasePortLocked(p);
        if (o.channel != nullptr) RemoveOpenChannel(o.channel);
        if (o.dev != nullptr || o.channel != nullptr) opened.push_back(o);
      }
      unused.push_back(verbs);
    }
    internal::PortThreadNeedChangedLocked();  // no live port left: nothing to watch
  }
  // Without the library's lock: closing a uscm device joins its progress
  // thread, whose hook takes that lock.
  for (const OpenedPort& o : opened) {
    if (CloseOpenedPort(o) != 0) {
      Fail(errno, "device removed", uscm_last_error());  // USCM_DEBUG: it stays open
    }
  }
  int closed = 0;
  for (ibv_context* verbs : unused) {
    StopGidWatch(verbs);
    ForgetPortGids(verbs);
    if (CloseIfUnused(verbs)) ++closed;  // else an rdma_get_devices array holds it
  }
  return closed;
}

}  // namespace

std::mutex& RemovedDevicesLock() { return g_closing; }

int CloseRemovedDevices() {
  std::lock_guard<std::mutex> one(g_closing);
  bool skipped;
  const int closed = CloseRemovedLocked(&skipped);
  if (skipped) RenewRemovalNotice();
  return closed;
}

void CloseRemovedDevicesIfNew() {
  if (TakeRemovalNotice()) CloseRemovedDevices();
}

}  // namespace uscm::librdmacm

// As librdmacm: NULL and *num_devices = 0 with errno ENODEV when there is no
// device; otherwise a NULL-terminated malloc'ed array of the contexts of the
// devices listed now, each opened here when no call opened it yet and held
// until rdma_free_devices (librdmacm's ucma_init_all after sync_devices_list
// at each call: a device added since the last call is opened and in it, a
// removed one is not, and is closed once nothing holds it; one that does not
// open is left out).
extern "C" ibv_context** rdma_get_devices(int* num_devices) {
  using namespace uscm::librdmacm;
  if (num_devices != nullptr) *num_devices = 0;
  if (SyncDevices("rdma_get_devices") != 0) return nullptr;
  TakeRemovalNotice();  // closed now
  CloseRemovedDevices();
  const std::vector<ibv_context*> open = TakeArrayOfListedDevices();
  auto** devs = static_cast<ibv_context**>(malloc(sizeof(ibv_context*) * (open.size() + 1)));
  if (devs == nullptr) {
    std::vector<ibv_context*> held = open;
    held.push_back(nullptr);
    ReleaseArray(held.data());
    Fail(ENOMEM, "rdma_get_devices", "out of memory");
    return nullptr;
  }
  size_t i = 0;
  for (ibv_context* verbs : open) devs[i++] = verbs;
  devs[i] = nullptr;
  if (num_devices != nullptr) *num_devices = static_cast<int>(i);
  return devs;
}

// As librdmacm's: the array's devices are no longer held by it, and a removed
// one nothing else holds is closed.
extern "C" void rdma_free_devices(ibv_context** list) {
  if (list == nullptr) return;  // librdmacm dereferences it
  uscm::librdmacm::ReleaseArray(list);
  free(list);
  uscm::librdmacm::CloseRemovedDevices();
}
