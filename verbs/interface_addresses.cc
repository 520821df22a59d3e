#include "verbs/interface_addresses.h"

#include <net/if.h>
#include <netinet/in.h>
#include <string.h>

namespace uscm::verbs {

std::vector<InterfaceAddress> AddressesOfList(const ifaddrs* list) {
  std::vector<InterfaceAddress> out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    InterfaceAddress a;
    if (i->ifa_addr->sa_family == AF_INET) {
      a.ip[10] = a.ip[11] = 0xff;
      memcpy(&a.ip[12], &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      a.ipv6 = true;
      memcpy(a.ip.data(), &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
    } else {
      continue;
    }
    a.interface = i->ifa_name != nullptr ? i->ifa_name : "";
    a.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<InterfaceAddress> InterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::vector<InterfaceAddress> out = AddressesOfList(list);
  freeifaddrs(list);
  return out;
}

}  // namespace uscm::verbs
