// uscm_device_open on a device context the caller already has (internal to
// uscm: the drop-in librdmacm, api/librdmacm/ports.cc). Not installed.
#ifndef USCM_API_C_USCM_DEVICE_ON_H_
#define USCM_API_C_USCM_DEVICE_ON_H_

#include <infiniband/verbs.h>

#include "api/c/uscm_device.h"

namespace uscm::c_api {

// uscm_device_open(name of `verbs`, port_num), with the port's active MTU and
// RoCE GID table read on `verbs` (and again on it by
// uscm_device_reread_addresses) instead of on a context opened for them (a
// device list and a context per process). `verbs` stays open until the device
// is closed; it is never closed here. NULL `verbs`: EINVAL.
uscm_device* OpenDeviceOn(ibv_context* verbs, int port_num);

// Both: `verbs` nullptr opens and closes a context of `ca_name` when needed.
uscm_device* OpenDevice(const char* ca_name, int port_num, ibv_context* verbs);

// The C API's handle lock (it guards the id and QP handle tables and the
// opened devices), for a library's pthread_atfork handlers that hold their
// own locks across a fork (the drop-in's: api/librdmacm/fork_locks.h): taken
// after them, as the library takes it under its own, and given back in the
// parent and the child.
void LockHandlesForFork();
void UnlockHandlesAfterFork();

}  // namespace uscm::c_api

#endif  // USCM_API_C_USCM_DEVICE_ON_H_
