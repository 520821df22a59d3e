#include "cm/router/listen_address.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "mad/wire/cma_header.h"

namespace uscm::router {

using Family = mad::ListenAddress::Family;

bool IsAnyAddress(const mad::ListenAddress& a) {
  const auto& ip = a.ip;
  if (a.family == Family::kIpv4) return ip[12] == 0 || ip[12] == 127;
  if (a.family == Family::kIpv6) {
    const bool zeros = std::all_of(ip.begin(), ip.end() - 1, [](uint8_t b) { return b == 0; });
    return zeros && (ip[15] == 0 || ip[15] == 1);
  }
  return false;
}

ListenOverlap Overlap(const mad::ListenAddress& a, const mad::ListenAddress& b) {
  if (a.family == Family::kNone || b.family == Family::kNone) return ListenOverlap::kSameAddress;
  if (a.af_only && b.af_only && a.family != b.family) return ListenOverlap::kNone;
  if (IsAnyAddress(a) || IsAnyAddress(b)) return ListenOverlap::kWildcard;
  // cma_addr_cmp: different families are different addresses.
  if (a.family == b.family && a.ip == b.ip) return ListenOverlap::kSameAddress;
  return ListenOverlap::kNone;
}

mad::ListenAddress RequestDestination(std::span<const uint8_t> private_data) {
  mad::ListenAddress dst;
  auto h = mad::wire::CmaHeader::Parse(private_data);
  if (!h.ok()) return dst;
  dst.family = h->ip_version == 6 ? Family::kIpv6 : Family::kIpv4;
  dst.ip = h->dst_addr;
  if (dst.family == Family::kIpv4) std::fill(dst.ip.begin(), dst.ip.begin() + 12, 0);
  return dst;
}

ListenMatch Match(const mad::ListenAddress& listener, const mad::ListenAddress& dst) {
  if (listener.family == Family::kNone) return ListenMatch::kWildcard;  // AF_IB: every request
  const bool any = IsAnyAddress(listener);
  if (any && !listener.af_only) return ListenMatch::kWildcard;
  if (dst.family != listener.family) return ListenMatch::kNo;
  if (any) return ListenMatch::kWildcard;
  return dst.ip == listener.ip ? ListenMatch::kExact : ListenMatch::kNo;
}

std::string ListenAddressString(const mad::ListenAddress& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  switch (a.family) {
    case Family::kNone:
      return "no address";
    case Family::kIpv4:
      inet_ntop(AF_INET, a.ip.data() + 12, buf, sizeof(buf));
      return buf;
    case Family::kIpv6:
      inet_ntop(AF_INET6, a.ip.data(), buf, sizeof(buf));
      return absl::StrCat("[", buf, "]", a.af_only ? " (AFONLY)" : "");
  }
  return "?";
}

}  // namespace uscm::router
