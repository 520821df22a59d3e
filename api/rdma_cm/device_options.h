// uscm::DeviceOptions: how a Device (api/rdma_cm/rdma_cm.h, which includes
// this) is made: its node, addresses, RoCE GID table and the kernel's answers
// it asks for (neighbours, routes, the netdev of a source).
#ifndef USCM_API_RDMA_CM_DEVICE_OPTIONS_H_
#define USCM_API_RDMA_CM_DEVICE_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "api/rdma_cm/address.h"
#include "api/rdma_cm/roce_multicast.h"
#include "cm/runtime.h"
#include "mad/gid.h"
#include "mad/time.h"

namespace uscm {

struct DeviceOptions {
  cm::NodeOptions node;
  // The IP addresses of this port (the rdma_cm IPoIB interface addresses).
  std::vector<Address> local_ips;
  // A RoCE port, where uscm has neither ARP nor an SA: addresses are GIDs of
  // the IPs themselves (RoCE v2: IPv4 a.b.c.d is ::ffff:a.b.c.d, IPv6 the
  // address). A destination without a neighbour entry resolves to its GID
  // with the permissive LID, and resolve_route without IB_PATH builds the path
  // from the two GIDs as the kernel's rdma_cm does on RoCE (RocePath).
  bool roce = false;
  // RoCE: the path MTU (IBA enum 1..5: the port's active MTU, as rdma_cm).
  uint8_t roce_path_mtu = 3;
  // The kernel's neighbour table (a real port: verbs/neighbours.h through
  // api/c; tests: doubles). resolve_addr calls it, without the device lock,
  // for an IP destination that has no AddNeighbor entry, with the id's source
  // and timeout, as the kernel's rdma_resolve_ip. It returns the GID the link
  // layer gives (IPoIB: the hardware address), nullopt where the GID is the
  // IP's (RoCE), or an error carrying an errno (mad/status_errno.h): no route
  // (ENETUNREACH, ENETDOWN, EHOSTUNREACH) fails the call itself, as in the
  // kernel; anything else becomes ADDR_ERROR with -errno as status (ETIMEDOUT:
  // nobody answered ARP). Unset: RoCE destinations resolve to their IP's GID,
  // IB ones without an entry get ADDR_ERROR (the simulated fabric).
  std::function<absl::StatusOr<absl::optional<mad::Gid>>(const Address& src, const Address& dst,
                                                          mad::Duration timeout)>
      resolve_neighbour;
  // How long resolve_addr reuses resolve_neighbour's answer for the same
  // (source, destination) instead of asking again (zero: never). Only a
  // usable answer is kept (the GID or "the IP's"); a missing, pending or
  // failed neighbour is asked for every time, so each such call still starts
  // a resolution. The kernel itself answers from an entry that may be STALE
  // (unconfirmed for up to a minute), so one second changes no answer a
  // program can rely on; it spares the netlink round trips of a burst of
  // resolves to one destination (cmtime: 1,000 ids).
  mad::Duration neighbour_reuse = mad::Duration::Seconds(1);
  // RoCE multicast without SA (api/rdma_cm/roce_multicast.h): the port's GID table
  // (RoCE v2 entries; the source GID index of a group's AH) and the netdev's
  // IP group memberships (null: none taken, as on the simulated fabric).
  std::vector<mad::Gid> roce_gids;
  // roce_gids[i]'s netdev (ifindex; 0 or no element: not known). One address
  // can have an entry per netdev: a VLAN's (eth0.100 on eth0) link-local
  // fe80:: is the base netdev's, told apart by the address's scope_id
  // (RoceSourceGidIndex).
  std::vector<int> roce_gid_ifindexes;
  std::shared_ptr<cm::IpMulticast> ip_multicast;
  // The kernel's validate_net_dev (rdma_cm's cma_ib_id_from_event) for a
  // request (REQ, SIDR_REQ) with an IP header that came in on a GID entry of
  // a known netdev (roce_gid_ifindexes): OK when the route back to `remote`
  // (the request's source) from `local` (its destination), asked on netdev
  // `ifindex`, leaves on it (a real port: verbs::NeighbourTable::RouteLeavesOn).
  // FailedPrecondition refuses the request before any listener is looked
  // for, as the kernel's: REJ 28 without data (SIDR_REP status 2), nothing
  // for the listener; Device::misrouted_requests() counts them. Another
  // error (the table could not be asked) refuses nothing. Unset: not checked
  // (the simulated fabric). Called with the device lock held.
  std::function<absl::Status(const Address& local, const Address& remote, int ifindex)>
      route_back_on;
  // InfiniBand: the netdev of a request with an IP header, as the kernel's
  // cma_get_net_dev asks IPoIB (ipoib_get_net_dev_by_params: the port's
  // IPoIB netdevs of the request's P_Key `pkey`, the one holding `local`,
  // its destination, among several; verbs::IpoibNetdevOfRequest): its
  // ifindex when it is up, then checked by route_back_on as on RoCE; 0 when
  // none is the request's or it is down, which refuses the request as the
  // kernel's (-ENODEV, -EHOSTUNREACH: REJ 28, SIDR_REP status 2; counted in
  // Device::misrouted_requests()); -1 when the port has no IPoIB netdev at
  // all (a simulated port, ibsim's): not checked. Unset: not checked.
  // Called with the device lock held.
  std::function<int(uint16_t pkey, const Address& local)> ipoib_netdev_of;
  // The routing table's answer for `dst` (a real port: RTM_GETROUTE): the
  // source address it picks and the output netdev, nullopt without a route.
  // resolve_addr of an unbound id to a global destination takes that source
  // when it is the port's, and that netdev's GID entry (an address on two
  // netdevs: eth0 and eth0.100, or two rxe netdevs), as the kernel's
  // rdma_resolve_ip (addr4_resolve / addr6_resolve's route, then
  // rdma_copy_src_l2_addr's bound_dev_if, whose entry cma_acquire_dev_by_src_ip
  // takes). Unset, or a source not on the port: the port's first address of
  // the destination's family, and the address's first entry. Called without
  // the device lock.
  struct Route {
    Address source;
    int ifindex = 0;
  };
  std::function<absl::optional<Route>(const Address& dst)> route_to;
  // The netdev (ifindex) a given IP source of this host is on, as the
  // kernel's rdma_bind_addr finds it (rdma_translate_ip: IPv4's
  // __ip_dev_find, the netdev the address was added to last; IPv6's first
  // netdev in the kernel's list with the address, not tentative; a real
  // port: NeighbourTable::NetdevOfSource), 0 when not known. Asked only for
  // an address with GID entries on two netdevs of the port, not link-local
  // (its scope id names the netdev): a bound id (rdma_bind_addr, or
  // resolve_addr with a source) then takes that netdev's entry. Unset, or 0:
  // the address's first entry. Called without the device lock.
  std::function<int(const Address& local)> netdev_of;
  // Ephemeral ports (bind to port 0, resolve_addr without a source), as the
  // kernel's cma_alloc_any_port: from a start in [low, high] drawn from the
  // device's seed (random on a real device), then upwards, skipping ports in
  // use. Device::Create reads net.ipv4.ip_local_port_range when these are left
  // at the kernel's defaults. Several processes behind one uscmd each number
  // their own ports: a bind to one that another process claimed moves on
  // to the next free port (Device::ClaimBind).
  uint16_t ephemeral_low = 32768;
  uint16_t ephemeral_high = 60999;
  absl::optional<uint16_t> ephemeral_start;  // tests: the first port tried
  // net.ipv6.bindv6only (Device::Create reads it): AF_INET6 binds without the
  // AFONLY option are AF-only when set.
  bool bindv6only = false;
  // May this process bind a port below 1024 (CAP_NET_BIND_SERVICE, checked
  // at bind as the kernel's cma_use_port)? Null: this process's effective
  // capability set.
  std::function<bool()> may_bind_privileged_port;
};

}  // namespace uscm

#endif  // USCM_API_RDMA_CM_DEVICE_OPTIONS_H_
