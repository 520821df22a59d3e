// The kernel's neighbour table, as rdma_cm's address resolution reads it
// (drivers/infiniband/core/addr.c: addr4_resolve / addr6_resolve, then
// fetch_ha). uscm asks the same questions over rtnetlink (libnl-route-3):
//
//   1. the route to the destination (RTM_GETROUTE, preferring the source
//      address when one is given): the output interface and the next hop (the
//      gateway, or the destination itself). No route: ENETUNREACH, which the
//      kernel's rdma_resolve_addr returns from the call itself.
//   2. a local destination (route type RTN_LOCAL, e.g. two ports of one host):
//      resolved, no neighbour needed (the kernel's loopback case).
//   3. the next hop's entry on that interface (RTM_GETNEIGH): usable when its
//      state is NUD_VALID (REACHABLE, STALE, DELAY, PROBE, PERMANENT, NOARP).
//      Its hardware address is a MAC on RoCE, and on IPoIB 20 bytes whose last
//      16 are the peer port's GID (verbs/ipoib.h).
//   4. no usable entry: the kernel starts a resolution (neigh_event_send) and
//      retries until the id's timeout, then ADDR_ERROR with -ETIMEDOUT. uscm
//      asks the kernel for the same with RTM_NEWNEIGH NTF_USE (needs
//      CAP_NET_ADMIN; without it, a zero-length UDP datagram to the next hop
//      starts ARP / neighbour discovery just as well) and polls the table.
#ifndef USCM_VERBS_NEIGHBOURS_H_
#define USCM_VERBS_NEIGHBOURS_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"

struct nl_sock;  // libnl

namespace uscm::verbs {

struct IpAddr {
  int family = 0;                // AF_INET or AF_INET6
  std::array<uint8_t, 16> ip{};  // network order; IPv4 in the first 4 bytes
  // IPv6 link-local: the interface it is on (sin6_scope_id), 0 otherwise.
  // A route to a link-local destination is asked on that interface, as the
  // kernel's addr6_resolve asks with flowi6_oif = the id's bound_dev_if.
  uint32_t scope_id = 0;
  bool is_link_local() const;  // fe80::/10
  std::string ToString() const;
};

struct RouteToHost {
  int ifindex = 0;
  bool local = false;  // the destination is one of this host's addresses
  IpAddr next_hop;     // the gateway, or the destination itself
  IpAddr source;       // the source address the route picks (RTA_PREFSRC; family 0: none)
};

struct NeighbourEntry {
  int ifindex = 0;
  uint16_t state = 0;             // NUD_* bits
  std::vector<uint8_t> lladdr;    // 6 bytes (Ethernet) or 20 (IPoIB)
  bool usable() const;            // NUD_VALID
};

// The entry for `dst` in one RTM_NEWNEIGH message (as netlink delivers it);
// nullopt when the message is no neighbour message, is of another address, or
// is malformed (short, bad attribute lengths). Pure: tests feed it bytes.
absl::optional<NeighbourEntry> ParseNeighbourMessage(std::span<const uint8_t> nlmsg,
                                                    const IpAddr& dst);

// The questions above, over a NETLINK_ROUTE socket. Every error names the
// address and what failed, and carries the errno the kernel's rdma_cm would
// report (mad/status_errno.h).
class NeighbourTable {
 public:
  static absl::StatusOr<NeighbourTable> Open();
  NeighbourTable(NeighbourTable&&) noexcept;
  NeighbourTable& operator=(NeighbourTable&&) noexcept;
  ~NeighbourTable();

  absl::StatusOr<RouteToHost> Route(const IpAddr& dst, const absl::optional<IpAddr>& src);
  // The kernel's validate_net_dev (drivers/infiniband/core/cma.c) for an
  // rdma_cm request that came in on netdev `ifindex` (the netdev of its GID
  // entry on RoCE): the route back to `dst` (the request's source) from
  // `src` (its destination, an address of this host), asked on `ifindex`,
  // leaves on `ifindex`. IPv4 as the kernel's fib_lookup with flowi4_oif (a
  // route of another netdev is passed over, so only a route on `ifindex`
  // answers), IPv6 as its rt6_lookup with that oif (strict for a link-local
  // destination; a local destination's route is on the loopback device).
  // FailedPrecondition says which route and why not; the kernel refuses the
  // request then (REJ 28, SIDR_REP status 2).
  absl::Status RouteLeavesOn(const IpAddr& dst, const IpAddr& src, int ifindex);
  // The netdev the kernel's rdma_bind_addr puts a given source on
  // (rdma_translate_ip). IPv4: __ip_dev_find, whose address hash lists the
  // address added last first: the output netdev of the route to the limited
  // broadcast from `local` with no oif, which ip_route_output_key_hash takes
  // from __ip_dev_find itself. IPv6 (NetdevOfIpv6Source): the first netdev
  // of the kernel's list (for_each_netdev_rcu) that has the address, not
  // tentative (ipv6_chk_addr, strict); a link-local address's scope id.
  // NotFound for an address of no netdev, InvalidArgument for a link-local
  // one without a scope id.
  absl::StatusOr<int> NetdevOfSource(const IpAddr& local);
  absl::optional<NeighbourEntry> Lookup(int ifindex, const IpAddr& addr);
  // Asks the kernel to resolve `addr` on `ifindex` (NTF_USE, else a datagram).
  void StartResolution(int ifindex, const IpAddr& addr);

  // 1-4 above: the hardware address of the next hop (empty for a local
  // destination), waiting at most `timeout` for the kernel to resolve it.
  // DeadlineExceeded (ETIMEDOUT) when it did not; Unavailable (ENETUNREACH)
  // without a route.
  absl::StatusOr<std::vector<uint8_t>> Resolve(const IpAddr& dst,
                                               const absl::optional<IpAddr>& src,
                                               std::chrono::milliseconds timeout);

 private:
  explicit NeighbourTable(::nl_sock* sock) : sock_(sock) {}
  int AskRoute(const IpAddr& dst, const absl::optional<IpAddr>& src, uint32_t oif, unsigned flags,
               RouteToHost* answer);
  // The kernel's list of netdevs is in the order they were registered in the
  // namespace, which no netlink dump gives (RTM_GETADDR and RTM_GETLINK go
  // by ifindex); ifindexes are handed out in that order, so the lowest
  // ifindex that has the address is the first in the list, unless a netdev
  // was moved in from another namespace or made with an explicit index
  // (both join the list's end, whatever their ifindex).
  absl::StatusOr<int> NetdevOfIpv6Source(const IpAddr& local);
  ::nl_sock* sock_ = nullptr;
};

// NeighbourTable::RouteLeavesOn's answers, kept per (the request's source, its
// destination, the netdev it came in on) until the kernel says that a route,
// a routing rule, an address or a link changed: a socket of the cache's own
// in those rtnetlink groups, read (without waiting) before every answer; any
// message on it, or its overflow (ENOBUFS), drops every kept answer. The
// kernel queues the notification before it acknowledges the change, so an
// answer is never older than the last change a program has seen completed.
// Without the socket (it cannot be opened) nothing is kept. At most
// kMaxKept answers: a full cache is dropped (requests from many sources).
class RouteBackCache {
 public:
  static constexpr size_t kMaxKept = 4096;

  RouteBackCache();
  RouteBackCache(const RouteBackCache&) = delete;
  RouteBackCache& operator=(const RouteBackCache&) = delete;
  ~RouteBackCache();

  // `table`'s RouteLeavesOn(dst, src, ifindex), asked of the kernel once
  // between two changes. An error other than the route's answer (OK or
  // FailedPrecondition) is not kept.
  absl::Status RouteLeavesOn(NeighbourTable& table, const IpAddr& dst, const IpAddr& src,
                             int ifindex);

  // A number that changes when a route, rule, address or link changed since
  // the last call (every call when not watching): what another answer kept
  // beside this one (the port's IPoIB netdevs) compares.
  uint64_t Generation();

  bool watching() const { return fd_ >= 0; }
  uint64_t asked() const { return asked_; }      // answers asked of the kernel
  uint64_t dropped() const { return dropped_; }  // times the kept answers were dropped

 private:
  // True when a change was notified since the last call.
  bool Changed();
  int fd_ = -1;
  uint64_t generation_ = 0;
  absl::flat_hash_map<std::string, absl::Status> kept_;
  uint64_t asked_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace uscm::verbs

#endif  // USCM_VERBS_NEIGHBOURS_H_
