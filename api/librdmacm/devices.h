// The process's RDMA devices, as librdmacm keeps them: listed at the first
// call (rdma_create_event_channel, rdma_create_id: librdmacm's ucma_init),
// each opened (ibv_open_device) only when a call needs it (the port listing
// of a device USCM_DEVICE allows, ports.h; rdma_get_devices: all, as
// librdmacm's ucma_init_device / ucma_init_all) and then kept for the life of
// the process (a removed device's until nothing holds it: CloseIfUnused), so
// rdma_get_devices and every id->verbs hand out the same ibv_context
// pointers; one PD per device, allocated on first use and shared by every id
// on that device (id->pd), freed when its last user releases it.
#ifndef USCM_API_LIBRDMACM_DEVICES_H_
#define USCM_API_LIBRDMACM_DEVICES_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace uscm::librdmacm {

// Lists the devices the first time (later calls reuse the list), opening
// none. 0, or -1 with errno ENODEV when libibverbs lists no device
// (librdmacm's ucma_init). `call` names the caller for USCM_DEBUG.
int EnsureDevices(const char* call);
// Lists the devices again (librdmacm's sync_devices_list, which
// rdma_get_devices runs at every call): a device added since is kept (not
// opened), one no longer listed is marked gone (DeviceGone) and its context,
// when it was opened, stays open. One ibv_get_device_list (sysfs reads, no
// ioctl). 0, or -1 with errno ENODEV as EnsureDevices.
int SyncDevices(const char* call);
// Whether the device of `verbs` was removed (SyncDevices saw it gone).
bool DeviceGone(ibv_context* verbs);

// rdma_get_devices' array: the contexts of the listed devices not gone, each
// opened now when it was not (OpenListedDevices), each held by the array
// (librdmacm's refcnt) until ReleaseArray of the NULL-terminated array.
std::vector<ibv_context*> TakeArrayOfListedDevices();
void ReleaseArray(ibv_context* const* array);
// The removed devices whose context is still open, for the caller to release
// what it holds of each before CloseIfUnused.
std::vector<ibv_context*> GoneOpenContexts();
// librdmacm's remove_cma_dev: a removed device that no rdma_get_devices array
// and no id's shared PD holds is closed (ibv_close_device; its
// QueryDeviceOnce answer dropped, as the pointer may come back for another
// device) and forgotten. The caller has released everything else that holds
// the context (ports.h, gid_watch.h, ud_ah.h). Whether it was closed.
bool CloseIfUnused(ibv_context* verbs);
// Whether a listing saw an opened device gone since the last call (one
// atomic exchange: what tells a call whose lookup listed the devices again
// to close the removed ones, ids.h CloseRemovedDevicesIfNew).
bool TakeRemovalNotice();
// The notice given back: a removed device was left open for a later call.
void RenewRemovalNotice();
// How many removed devices were closed (tests).
uint64_t DevicesClosed();

// Opened devices not gone; 0 before one was opened.
int OpenDeviceCount();
// The contexts opened so far of devices not gone, in listing order; opens
// nothing.
std::vector<ibv_context*> OpenContexts();
// The contexts of the listed devices not gone whose name `wanted` accepts
// (every one when it is empty), in listing order, each opened now when it
// was not (one ibv_open_device per device, once per process; a device that
// does not open is left out and tried again at the next call).
std::vector<ibv_context*> OpenListedDevices(const std::function<bool(const char* name)>& wanted);

// Tests: the calls the listing makes (libibverbs' by default). Setting them
// forgets the kept devices without closing them (a test's own contexts);
// nullptr restores libibverbs'. DeviceListings: how many listings were made.
struct DeviceListOps {
  ibv_device** (*list)(int* count) = ibv_get_device_list;
  void (*free_list)(ibv_device** list) = ibv_free_device_list;
  ibv_context* (*open)(ibv_device* device) = ibv_open_device;
  int (*close)(ibv_context* verbs) = ibv_close_device;
  ibv_pd* (*alloc_pd)(ibv_context* verbs) = ibv_alloc_pd;  // the shared PD's
  int (*dealloc_pd)(ibv_pd* pd) = ibv_dealloc_pd;
};
void SetDeviceListForTesting(const DeviceListOps* ops);
uint64_t DeviceListings();

// The shared PD of the device `verbs` (one of the kept contexts), allocated on
// first use; each call takes a reference. NULL with errno: EINVAL for a
// NULL context, ENODEV for a context this library did not open, or what
// ibv_alloc_pd set.
ibv_pd* AcquireSharedPd(ibv_context* verbs);
// Drops a reference of AcquireSharedPd; the PD is deallocated with the last.
// 0, or -1 with errno EINVAL when `verbs` holds no reference.
int ReleaseSharedPd(ibv_context* verbs);

// ibv_query_device's answer for `verbs`, asked once per context and kept,
// as librdmacm keeps a device's limits from ucma_init_device (they do not
// change while the device is open; CloseIfUnused drops a closed one's).
// 0, or the errno ibv_query_device returned (nothing kept then).
int QueryDeviceOnce(ibv_context* verbs, ibv_device_attr* attr);
// Tests: the query QueryDeviceOnce makes (nullptr: ibv_query_device); the
// kept answers are dropped. DeviceQueries: how many it made.
void SetQueryDeviceForTesting(int (*query)(ibv_context*, ibv_device_attr*));
uint64_t DeviceQueries();

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_DEVICES_H_
