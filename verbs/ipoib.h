// The IPoIB side of rdma_cm's address resolution on an InfiniBand port: which
// IP addresses belong to a port (its IPoIB interfaces) and which GID an IP
// address has (the kernel's neighbour table), read from the files the kernel
// exports (the neighbour's hardware address comes over netlink:
// verbs/neighbours.h). Pure parsers plus thin readers, so tests feed them text.
//
// An IPoIB interface's hardware address is 20 bytes: 4 bytes of flags and QPN,
// then the port GID it runs on ("00:00:10:49:fe:80:00:...:c9:03:00:a1:b2:c3"
// in /sys/class/net/<if>/address and in the HW address column of
// /proc/net/arp, ARP hardware type 0x20).
#ifndef USCM_VERBS_IPOIB_H_
#define USCM_VERBS_IPOIB_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "mad/gid.h"
#include "verbs/interface_addresses.h"

namespace uscm::verbs {

// The GID in a 20-byte IPoIB hardware address in colon-separated hex; nullopt
// for anything else (an Ethernet MAC, a malformed string).
absl::optional<mad::Gid> GidOfIpoibHwAddr(absl::string_view text);

// The GID in a 20-byte IPoIB hardware address as netlink gives it (a
// neighbour's NDA_LLADDR, verbs/neighbours.h); nullopt for any other length.
absl::optional<mad::Gid> GidOfIpoibLladdr(std::span<const uint8_t> lladdr);

// The names of the network interfaces whose IPoIB hardware address carries
// `port_gid` (<sysfs>/class/net/*/address).
std::vector<std::string> IpoibInterfacesOf(const mad::Gid& port_gid,
                                           const std::string& sysfs = "/sys");

// The IP addresses of those interfaces: what rdma_cm binds and resolves from
// on the port. `addresses` lists the host's (InterfaceAddresses, tests a
// fake), asked only when the port has an IPoIB interface.
std::vector<InterfaceAddress> IpoibAddressesOf(
    const mad::Gid& port_gid, const std::string& sysfs = "/sys",
    std::vector<InterfaceAddress> (*addresses)() = InterfaceAddresses);

// An IPoIB interface as rdma_cm's request check needs it
// (<sysfs>/class/net/<if>/ifindex, pkey, flags).
struct IpoibNetdev {
  std::string name;
  int ifindex = 0;
  uint16_t pkey = 0;  // as sysfs gives it, membership bit included
  bool up = false;    // IFF_UP
};

// The IPoIB interfaces whose hardware address carries `port_gid` (a parent
// and its P_Key children: ib0, ib0.8001), with their ifindex, P_Key and
// IFF_UP; one whose files do not parse is left out.
std::vector<IpoibNetdev> IpoibNetdevsOf(const mad::Gid& port_gid,
                                        const std::string& sysfs = "/sys");

// IpoibNetdevsOf's answer kept while `generation` (RouteBackCache's: a link
// change moves it) stays the same.
class IpoibNetdevCache {
 public:
  explicit IpoibNetdevCache(std::string sysfs = "/sys") : sysfs_(std::move(sysfs)) {}
  const std::vector<IpoibNetdev>& Of(const mad::Gid& port_gid, uint64_t generation);
  uint64_t reads() const { return reads_; }  // IpoibNetdevsOf calls

 private:
  std::string sysfs_;
  bool kept_ = false;
  uint64_t generation_ = 0;
  mad::Gid gid_;
  std::vector<IpoibNetdev> netdevs_;
  uint64_t reads_ = 0;
};

// The kernel's ipoib_get_net_dev_by_params, which rdma_cm's cma_get_net_dev
// asks for a request with an IP header on an InfiniBand port: of the port's
// `netdevs`, those of the request's P_Key (15 bits: ib_find_cached_pkey
// matches without the membership bit); one is the request's netdev whatever
// its addresses; of several, the first that holds the request's destination
// `local` (`ipv6`, an IPv4 one as ::ffff:a.b.c.d) among the host's
// `addresses` (asked only then); none: NULL (the kernel refuses the request).
const IpoibNetdev* IpoibNetdevOfRequest(
    const std::vector<IpoibNetdev>& netdevs, uint16_t pkey, bool ipv6,
    const std::array<uint8_t, 16>& local,
    std::vector<InterfaceAddress> (*addresses)() = InterfaceAddresses);

}  // namespace uscm::verbs

#endif  // USCM_VERBS_IPOIB_H_
