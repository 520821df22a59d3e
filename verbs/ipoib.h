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

#include <cstdint>
#include <span>
#include <string>
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

}  // namespace uscm::verbs

#endif  // USCM_VERBS_IPOIB_H_
