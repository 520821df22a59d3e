/* Opening a real port from C (uscm-specific). librdmacm needs no such call:
 * rdma_create_event_channel opens the kernel's /dev/infiniband/rdma_cm. Here
 * the CM runs in the process, so the process opens the port: the umad device
 * (QP1), or, when another process already owns the port's CM class, the
 * host's uscmd router for that port (docs/ROUTER.md), chosen automatically.
 * The device then serves uscm_create_event_channel_on(dev) (or becomes the
 * default with uscm_set_default_device) and runs its own progress thread.
 *
 *   struct uscm_device *dev = uscm_device_open("mlx5_0", 1);   NULL, 0: the
 *   first ACTIVE port
 *   if (!dev) fprintf(stderr, "%s\n", uscm_last_error());
 *
 * Errors (NULL, errno set, uscm_last_error() says what to do): ENODEV no RDMA
 * device or port; EACCES no permission on /dev/infiniband/umad*; EBUSY the CM
 * class is taken and no router listens on the port's socket.
 *
 * A RoCE port works without SA and without ARP in uscm: the port's IPs are
 * read from its GID table (::ffff:a.b.c.d and global IPv6 GIDs, sysfs), a
 * destination IP resolves to its own GID, resolve_route builds the path from
 * the two IPs with the port's active MTU (DeviceOptions::roce), and MADs are
 * sent from the GID of the destination's family (verbs::RoceAddressing).
 * The GID table is read at open and again by uscm_device_reread_addresses.
 *
 * On an InfiniBand port the IP addresses are those of the IPoIB interfaces
 * whose hardware address carries the port's GID (read at open and by
 * uscm_device_reread_addresses); neighbours come from uscm_device_add_neighbor,
 * routes from the SA. */
#ifndef USCM_API_C_USCM_DEVICE_H_
#define USCM_API_C_USCM_DEVICE_H_

#include "api/c/uscm_cma.h"

#ifdef __cplusplus
extern "C" {
#endif

struct uscm_device* uscm_device_open(const char* ca_name, int port_num);
/* Stops the progress thread and closes the port. Every id and event channel
 * of the device must be destroyed first (EBUSY otherwise). 0 or -1. */
int uscm_device_close(struct uscm_device* dev);
/* The neighbour entry of `ip` (uscm's ARP cache): its GID on the port
 * (IPoIB: the GID in the neighbour's hardware address; the drop-in reads the
 * kernel's /proc/net/arp). 0, or -1 with errno EINVAL. */
int uscm_device_add_neighbor(struct uscm_device* dev, const struct uscm_addr* ip,
                             const uint8_t gid[16]);
/* Reads the port's addresses again, as at open: RoCE, the GID table (what
 * binds and a NULL source accept, the GID index of multicast AHs, the source
 * GID of CM MADs); InfiniBand, the IPoIB interfaces' IPs. For a caller that
 * learnt that the netdev's addresses changed (the drop-in librdmacm: a GID
 * change event, an rtnetlink address event); ids already bound keep theirs.
 * Not concurrent with uscm_device_close. 0, or -1 with errno EINVAL (unknown
 * device) or ENODEV (the GID table could not be read). */
int uscm_device_reread_addresses(struct uscm_device* dev);
/* `hook(arg)` runs on the device's progress thread after each of its steps,
 * with no uscm lock held: the events that step posted are in their channels
 * (a layer such as the drop-in librdmacm moves them on from there, without
 * waking a thread of its own). NULL removes it. 0, or -1 with errno EINVAL. */
int uscm_device_set_progress_hook(struct uscm_device* dev, void (*hook)(void*), void* arg);
/* Whether the port's MAD path is lost for good (its uscmd exited, was killed
 * or restarted; its umad file read EIO when the device was removed): 0 while
 * it serves, 1 once lost, `why` (when not NULL and `len` > 0) then holding the
 * reason, cut to `len` - 1 bytes and NUL-terminated. Each uscm id of the
 * device gets one DEVICE_REMOVAL (-ENODEV) when the loss is seen; this asks
 * it of a device with no id on it (the drop-in librdmacm, before it puts a
 * new id on a port it has open). Any thread; a device of uscm_device_open or
 * of the simulated fabric (uscm_sim_device). -1 with errno EINVAL for NULL. */
int uscm_device_transport_lost(struct uscm_device* dev, char* why, size_t len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* USCM_API_C_USCM_DEVICE_H_ */
