// The kernel's device events, as udev reads them: a NETLINK_KOBJECT_UEVENT
// socket in the kernel's group (1). The uscm-ports thread (port_resync.h)
// lists the ports at once when one says that a verbs device was added,
// instead of at its next once-a-second listing, and the devices when one says
// that a verbs device was removed (DEVICE_REMOVAL to the ids on it at once). Where the socket gets no
// events (a network namespace the kernel does not broadcast uevents to: a
// container's), the once-a-second listing is all there is, as before.
//
// A kernel uevent is one datagram: "ACTION@DEVPATH", then "KEY=VALUE"
// fields, each NUL-terminated (lib/kobject_uevent.c). udev's own
// re-broadcasts (group 2, "libudev" magic first) are not read.
#ifndef USCM_API_LIBRDMACM_UEVENTS_H_
#define USCM_API_LIBRDMACM_UEVENTS_H_

#include <stddef.h>

#include <string>

namespace uscm::librdmacm {

// A non-blocking, close-on-exec NETLINK_KOBJECT_UEVENT socket bound to the
// kernel's group; -1 with errno when it cannot be made.
int OpenUeventSocket();

// What the uevent `msg` (`len` bytes) says of a verbs device: kAdded, one
// libibverbs lists from now on (ACTION "add", SUBSYSTEM "infiniband_verbs":
// the uverbsN device ib_uverbs adds once the RDMA device is registered;
// libibverbs lists /sys/class/infiniband_verbs); kRemoved, one it no longer
// lists (ACTION "remove": ib_uverbs deletes it first when the RDMA device is
// unregistered, `rdma link del`, then waits for the open contexts); kOther
// for anything else, a truncated or malformed message included. `devpath`
// (may be NULL) is set to its DEVPATH for kAdded and kRemoved.
enum class VerbsUevent { kOther, kAdded, kRemoved };
VerbsUevent ParseVerbsUevent(const char* msg, size_t len, std::string* devpath);


}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_UEVENTS_H_
