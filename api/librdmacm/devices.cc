// rdma_get_devices / rdma_free_devices and the per-device shared PD.
#include "api/librdmacm/devices.h"

#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>

#include <map>
#include <mutex>
#include <vector>

#include "api/librdmacm/fail.h"

namespace uscm::librdmacm {
namespace {

struct Device {
  ibv_device* dev = nullptr;
  ibv_context* verbs = nullptr;  // kept open for the process
  ibv_pd* pd = nullptr;
  int pd_refs = 0;
};

struct Devices {
  std::mutex mu;
  bool listed = false;
  ibv_device** list = nullptr;  // kept: contexts refer to its devices
  std::vector<Device> open;     // in ibv_get_device_list order
};

// Never destroyed: contexts stay open until the process exits, as librdmacm's.
Devices& TheDevices() {
  static Devices* devices = new Devices;
  return *devices;
}

Device* FindLocked(Devices& d, ibv_context* verbs) {
  for (Device& dev : d.open) {
    if (dev.verbs == verbs) return &dev;
  }
  return nullptr;
}

}  // namespace

int EnsureDevices(const char* call) {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.listed) {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) {
      return Fail(ENODEV, call, "ibv_get_device_list failed: no RDMA device");
    }
    for (int i = 0; i < count; ++i) {
      // A device that does not open is left out (librdmacm marks it dead).
      ibv_context* verbs = ibv_open_device(list[i]);
      if (verbs != nullptr) d.open.push_back(Device{list[i], verbs, nullptr, 0});
    }
    d.list = list;
    d.listed = true;
  }
  if (d.open.empty()) {
    return Fail(ENODEV, call, "no RDMA device (ibv_get_device_list lists none that opens)");
  }
  return 0;
}

int OpenDeviceCount() {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  return static_cast<int>(d.open.size());
}

std::vector<ibv_context*> OpenContexts() {
  Devices& d = TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  std::vector<ibv_context*> out;
  for (const Device& dev : d.open) out.push_back(dev.verbs);
  return out;
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
    dev->pd = ibv_alloc_pd(verbs);
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
    ibv_dealloc_pd(dev->pd);
    dev->pd = nullptr;
  }
  return 0;
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

uint64_t DeviceQueries() {
  DeviceAttrs& a = TheDeviceAttrs();
  std::lock_guard<std::mutex> lock(a.mu);
  return a.queries;
}

}  // namespace uscm::librdmacm

// As librdmacm: NULL and *num_devices = 0 with errno ENODEV when there is no
// device; otherwise a NULL-terminated malloc'ed array of the kept contexts.
extern "C" ibv_context** rdma_get_devices(int* num_devices) {
  using uscm::librdmacm::Fail;
  if (num_devices != nullptr) *num_devices = 0;
  if (uscm::librdmacm::EnsureDevices("rdma_get_devices") != 0) return nullptr;
  uscm::librdmacm::Devices& d = uscm::librdmacm::TheDevices();
  std::lock_guard<std::mutex> lock(d.mu);
  auto** devs = static_cast<ibv_context**>(malloc(sizeof(ibv_context*) * (d.open.size() + 1)));
  if (devs == nullptr) {
    Fail(ENOMEM, "rdma_get_devices", "out of memory");
    return nullptr;
  }
  size_t i = 0;
  for (const auto& dev : d.open) devs[i++] = dev.verbs;
  devs[i] = nullptr;
  if (num_devices != nullptr) *num_devices = static_cast<int>(i);
  return devs;
}

// The contexts stay open (librdmacm keeps them too while ids may use them).
extern "C" void rdma_free_devices(ibv_context** list) { free(list); }
