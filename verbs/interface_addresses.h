// The IP addresses of the host's network interfaces (getifaddrs), as rdma_cm's
// address resolution asks which interface holds an address: the IPoIB
// interfaces of an InfiniBand port (verbs/ipoib.h IpoibAddressesOf: api/c's
// uscm_device_open and the drop-in's port list) and the host's addresses on
// any netdev (the drop-in's ENODEV for an address on a netdev with no RDMA
// device). One walk, for every caller: the list's conversion is pure, so
// tests feed it a crafted list.
#ifndef USCM_VERBS_INTERFACE_ADDRESSES_H_
#define USCM_VERBS_INTERFACE_ADDRESSES_H_

#include <ifaddrs.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace uscm::verbs {

struct InterfaceAddress {
  std::string interface;         // ifa_name
  bool loopback = false;         // IFF_LOOPBACK
  bool ipv6 = false;             // else IPv4
  std::array<uint8_t, 16> ip{};  // IPv6, or IPv4 as ::ffff:a.b.c.d
};

// The IPv4 and IPv6 addresses of a getifaddrs list, in its order (entries
// with no address or of another family, AF_PACKET's, left out).
std::vector<InterfaceAddress> AddressesOfList(const ifaddrs* list);

// The host's, now: one getifaddrs (a netlink dump); empty when it fails.
std::vector<InterfaceAddress> InterfaceAddresses();

}  // namespace uscm::verbs

#endif  // USCM_VERBS_INTERFACE_ADDRESSES_H_
