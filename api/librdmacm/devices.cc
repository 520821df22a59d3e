// The process's devices and the per-device shared PD (rdma_get_devices /
// rdma_free_devices: device_calls.cc).
#include "api/librdmacm/devices.h"

#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "api/librdmacm/fail.h"
#include "api/librdmacm/fork_locks.h"

namespace uscm::librdmacm {

// QueryDeviceOnce's answer for `verbs` dropped (CloseIfUnused).
void ForgetDeviceAttrs(ibv_context* verbs);

namespace {

struct Device {
  ibv_device* dev = nullptr;     // of the kept list (Devices::list) or held by its context
  ibv_context* verbs = nullptr;  // opened on first need (OpenLocked), then kept for the process
  ibv_pd* pd = nullptr;
  int pd_refs = 0;
  // No longer in ibv_get_device_list (removed): not listed, not given to new
  // ids; its context stays open until CloseIfUnused (ids on it, arrays).
  bool gone = false;
  int array_refs = 0;  // rdma_get_devices arrays not freed yet
};

struct Devices {
  std::mutex mu;
  bool listed = false;
  std::vector<Device> open;     // in listing order, opened or not; gone ones kept when opened
  // The last ibv_get_device_list, kept as librdmacm keeps its dev_list: it
  // holds the devices not opened yet (libibverbs frees a device once no list
  // and no context holds it).
  ibv_device** list = nullptr;
  DeviceListOps ops;
  uint64_t listings = 0;
  uint64_t closed = 0;
  std::atomic<bool> removed_since{false};  // an opened device seen gone
};

// Never destroyed: contexts stay open until the process exits, as
// librdmacm's (a removed device's until nothing holds it).
Devices& TheDevices() {
  static Devices* devices = new Devices;
  return *devices;
}

Device* FindLocked(Devices& d, ibv_context* verbs) {
  for (Device& dev : d.open) {
    if (dev.verbs != nullptr && dev.verbs == verbs) return &dev;
  }
  return nullptr;
}

// librdmacm's sync_devices_list: the devices ibv_get_device_list lists now
// against those kept, by ibv_device pointer (libibverbs keeps one per device
// while it exists; a device removed and added again is a new one). New ones
// are appended, not opened (librdmacm's ucma_init_device opens one when a
// call needs it: OpenLocked); kept ones no longer listed are marked gone, or
// forgotten when they were never opened (no context holds them: once the
// previous list is freed their pointer may name a new device). A failed
// listing changes nothing. 0, or -1 with errno ENODEV.
int SyncLocked(Devices& d, const char* call) {
  int count = 0;
  ++d.listings;
  ibv_device** list = d.ops.list(&count);
  if (list == nullptr) {
    return Fail(ENODEV, call, "ibv_get_device_list failed: no RDMA device");
  }
  for (Device& dev : d.open) {
    const bool gone = std::find(list, list + count, dev.dev) == list + count;
    if (gone && !dev.gone && dev.verbs != nullptr) {
      d.removed_since.store(true, std::memory_order_relaxed);  // TakeRemovalNotice
    }
    dev.gone = gone;
  }
  std::erase_if(d.open, [](const Device& dev) { return dev.gone && dev.verbs == nullptr; });
  for (int i = 0; i < count; ++i) {
    const bool kept = std::any_of(d.open.begin(), d.open.end(),
                                  [&](const Device& dev) { return dev.dev == list[i]; });
    if (!kept) d.open.push_back(Device{list[i]});
  }
  if (d.list != nullptr) d.ops.free_list(d.list);  // an opened device is held by its context
  d.list = list;
  d.listed = true;
  return 0;
}

// The context of `dev`, opened now when it was not (librdmacm's
// ucma_init_device): NULL with errno ENODEV when ibv_open_device fails (it
// is tried again at the next need).
ibv_context* OpenLocked(Devices& d, Device& dev) {
  if (dev.verbs == nullptr) dev.verbs = d.ops.open(dev.dev);
  if (dev.verbs == nullptr) errno = ENODEV;
  return dev.verbs;
}

// 0 when a kept device is not gone; else -1 with errno ENODEV (USCM_DEBUG
// names `call` unless it is NULL).
int NoLiveDevice(const Devices& d, const char* call) {
  const bool any = std::any_of(d.open.begin(), d.open.end(), [](const Device& dev) { return !dev.gone; });
  if (any) return 0;
  if (call == nullptr) {
    errno = ENODEV;
    return -1;
  }
  return Fail(ENODEV, call, "no RDMA device (ibv_get_device_list lists none)");
}

}  // namespace

std::mutex& DeviceTableLock() { return TheDevices().mu; }

int EnsureDevices(const char* call) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.listed && NoLiveDevice(d, nullptr) == 0) return 0;
  if (SyncLocked(d, call) != 0) return -1;  // first call, or none left: list again
  return NoLiveDevice(d, call);
}

int SyncDevices(const char* call) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  if (SyncLocked(d, call) != 0) return -1;
  return NoLiveDevice(d, call);
}

bool DeviceGone(ibv_context* verbs) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  const Device* dev = FindLocked(d, verbs);
  return dev != nullptr && dev->gone;
}

int OpenDeviceCount() {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  return static_cast<int>(std::count_if(d.open.begin(), d.open.end(), [](const Device& dev) {
    return !dev.gone && dev.verbs != nullptr;
  }));
}

std::vector<ibv_context*> OpenContexts() {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  std::vector<ibv_context*> out;
  for (const Device& dev : d.open) {
    if (!dev.gone && dev.verbs != nullptr) out.push_back(dev.verbs);
  }
  return out;
}

std::vector<ibv_context*> OpenListedDevices(const std::function<bool(const char* name)>& wanted) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  std::vector<ibv_context*> out;
  for (Device& dev : d.open) {
    if (dev.gone || (wanted && !wanted(ibv_get_device_name(dev.dev)))) continue;
    if (ibv_context* verbs = OpenLocked(d, dev)) out.push_back(verbs);
  }
  return out;
}

std::vector<ibv_context*> TakeArrayOfListedDevices() {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  std::vector<ibv_context*> out;
  for (Device& dev : d.open) {
    if (dev.gone) continue;
    if (ibv_context* verbs = OpenLocked(d, dev)) {
      ++dev.array_refs;
      out.push_back(verbs);
    }
  }
  return out;
}

void ReleaseArray(ibv_context* const* array) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  for (int i = 0; array[i] != nullptr; ++i) {
    Device* dev = FindLocked(d, array[i]);
    if (dev != nullptr && dev->array_refs > 0) --dev->array_refs;
  }
}

std::vector<ibv_context*> GoneOpenContexts() {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  std::vector<ibv_context*> out;
  for (const Device& dev : d.open) {
    if (dev.gone && dev.verbs != nullptr) out.push_back(dev.verbs);
  }
  return out;
}

bool CloseIfUnused(ibv_context* verbs) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  Device* dev = FindLocked(d, verbs);
  if (dev == nullptr || !dev->gone || dev->array_refs > 0 || dev->pd_refs > 0) return false;
  ForgetDeviceAttrs(verbs);
  d.ops.close(verbs);
  ++d.closed;
  std::erase_if(d.open, [&](const Device& kept) { return kept.verbs == verbs; });
  return true;
}

bool TakeRemovalNotice() {
  return TheDevices().removed_since.exchange(false, std::memory_order_relaxed);
}

void RenewRemovalNotice() {
  TheDevices().removed_since.store(true, std::memory_order_relaxed);
}

uint64_t DevicesClosed() {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.closed;
}

ibv_pd* AcquireSharedPd(ibv_context* verbs) {
  if (verbs == nullptr) {
    Fail(EINVAL, "shared PD", "NULL verbs context");
    return nullptr;
  }
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  Device* dev = FindLocked(d, verbs);
  if (dev == nullptr) {
    Fail(ENODEV, "shared PD", "verbs context not opened by rdma_get_devices / an id");
    return nullptr;
  }
  if (dev->pd == nullptr) {
    dev->pd = d.ops.alloc_pd(verbs);
    if (dev->pd == nullptr) {
      Fail(errno != 0 ? errno : ENOMEM, "shared PD", "ibv_alloc_pd failed");
      return nullptr;
    }
  }
  ++dev->pd_refs;
  return dev->pd;
}

int ReleaseSharedPd(ibv_context* verbs) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  Device* dev = verbs == nullptr ? nullptr : FindLocked(d, verbs);
  if (dev == nullptr || dev->pd_refs == 0) {
    return Fail(EINVAL, "shared PD", "release without a reference");
  }
  if (--dev->pd_refs == 0) {
    d.ops.dealloc_pd(dev->pd);
    dev->pd = nullptr;
  }
  return 0;
}

void SetDeviceListForTesting(const DeviceListOps* ops) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.list != nullptr) d.ops.free_list(d.list);
  d.list = nullptr;
  d.ops = ops != nullptr ? *ops : DeviceListOps{};
  d.open.clear();  // a test's devices: nothing to close
  d.listed = false;
  d.listings = 0;
  d.closed = 0;
}

uint64_t DeviceListings() {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.listings;
}

namespace {

struct DeviceAttrs {
  std::mutex mu;
  int (*query)(ibv_context*, ibv_device_attr*) = ibv_query_device;
  std::map<ibv_context*, ibv_device_attr> kept;
  uint64_t queries = 0;
};

DeviceAttrs& TheDeviceAttrs() {
  static auto* attrs = new DeviceAttrs;
  return *attrs;
}

}  // namespace

std::mutex& DeviceAttrsLock() { return TheDeviceAttrs().mu; }

int QueryDeviceOnce(ibv_context* verbs, ibv_device_attr* attr) {
  DeviceAttrs& a = TheDeviceAttrs();
  std::lock_guard<std::mutex> lock(a.mu);
  if (auto it = a.kept.find(verbs); it != a.kept.end()) {
    *attr = it->second;
    return 0;
  }
  ++a.queries;
  if (int err = a.query(verbs, attr); err != 0) return err;
  a.kept[verbs] = *attr;
  return 0;
}

void SetQueryDeviceForTesting(int (*query)(ibv_context*, ibv_device_attr*)) {
  DeviceAttrs& a = TheDeviceAttrs();
  std::lock_guard<std::mutex> lock(a.mu);
  a.query = query != nullptr ? query : ibv_query_device;
  a.kept.clear();
}

void ForgetDeviceAttrs(ibv_context* verbs) {
  DeviceAttrs& a = TheDeviceAttrs();
  std::lock_guard<std::mutex> lock(a.mu);
  a.kept.erase(verbs);
}

uint64_t DeviceQueries() {
  DeviceAttrs& a = TheDeviceAttrs();
  std::lock_guard<std::mutex> lock(a.mu);
  return a.queries;
}

}  // namespace uscm::librdmacm
