// The kernel's rules for rdma_cm listeners of one port on different
// addresses (drivers/infiniband/core/cma.c), applied by the router to the
// claims of different processes:
//
//   * two listeners conflict unless both are AFONLY and of different families
//     (IPv4 ids are AFONLY unless told otherwise); a wildcard or loopback
//     address (cma_any_addr) conflicts with every address of its families
//     (EADDRNOTAVAIL), the same address with itself (EADDRINUSE), different
//     specific addresses do not (cma_check_port, as rdma_listen calls it:
//     REUSEADDR never shares a listen);
//   * a REQ goes to a listener whose address is its destination, else to a
//     wildcard that takes its family (cma_find_listener,
//     cma_match_private_data), the destination coming from the rdma_cm IP
//     header at the start of the REQ's / SIDR_REQ's private data.
//
// A claim without an address (AF_IB, ListenAddress::Family::kNone) is the
// whole service: it conflicts with every other claim and takes every REQ.
#ifndef USCM_CM_ROUTER_LISTEN_ADDRESS_H_
#define USCM_CM_ROUTER_LISTEN_ADDRESS_H_

#include <cstdint>
#include <span>
#include <string>

#include "mad/transport.h"

namespace uscm::router {

// cma_any_addr: 0.0.0.0/8 (ipv4_is_zeronet) or 127.0.0.0/8; :: or ::1.
bool IsAnyAddress(const mad::ListenAddress& a);

enum class ListenOverlap : uint8_t {
  kNone,         // both may listen
  kWildcard,     // one of the two is a wildcard of the other's family: EADDRNOTAVAIL
  kSameAddress,  // the same address, or a claim without address: EADDRINUSE
};
ListenOverlap Overlap(const mad::ListenAddress& a, const mad::ListenAddress& b);

// The destination address in an rdma_cm IP header at the start of
// `private_data`; Family::kNone when there is none (AF_IB, not rdma_cm, a
// header that does not parse).
mad::ListenAddress RequestDestination(std::span<const uint8_t> private_data);

enum class ListenMatch : uint8_t { kNo, kWildcard, kExact };
// Whether a listener on `listener` takes a request for `dst`
// (cma_match_private_data), and how closely: an exact address goes first.
ListenMatch Match(const mad::ListenAddress& listener, const mad::ListenAddress& dst);

// "10.0.0.1", "[::]" (AFONLY), "fe80::1", "no address".
std::string ListenAddressString(const mad::ListenAddress& a);

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_LISTEN_ADDRESS_H_
