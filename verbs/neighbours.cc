#include "verbs/neighbours.h"

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "mad/status_errno.h"

namespace uscm::verbs {
namespace {

size_t AddrLen(int family) { return family == AF_INET ? 4 : 16; }

bool SameIp(const IpAddr& a, const uint8_t* bytes, size_t len) {
  return len == AddrLen(a.family) && memcmp(a.ip.data(), bytes, len) == 0;
}

// One request, its answer (or the kernel's error) through `on_message`.
struct Exchange {
  int error = 0;  // the kernel's errno (positive) from the NLMSG_ERROR
  int (*on_message)(nl_msg*, void*) = nullptr;
  void* arg = nullptr;
};

int OnError(sockaddr_nl*, nlmsgerr* err, void* arg) {
  static_cast<Exchange*>(arg)->error = -err->error;
  return NL_STOP;
}

int OnValid(nl_msg* msg, void* arg) {
  auto* x = static_cast<Exchange*>(arg);
  return x->on_message != nullptr ? x->on_message(msg, x->arg) : NL_OK;
}

// Sends `msg` (consumed) and reads until the answer or the kernel's error.
// Returns the errno (0 = answered).
int Transact(nl_sock* sock, nl_msg* msg, Exchange& x) {
  nl_cb* cb = nl_cb_alloc(NL_CB_DEFAULT);
  if (cb == nullptr) {
    nlmsg_free(msg);
    return ENOMEM;
  }
  nl_cb_err(cb, NL_CB_CUSTOM, OnError, &x);
  nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, OnValid, &x);
  int rc = nl_send_auto(sock, msg);
  nlmsg_free(msg);
  if (rc >= 0) rc = nl_recvmsgs(sock, cb);
  nl_cb_put(cb);
  if (x.error != 0) return x.error;
  return rc < 0 ? EIO : 0;
}

struct RouteAnswer {
  bool got = false;
  RouteToHost route;
};

// The fixed header of an rtnetlink message of `type`, its attributes in `tb`
// (type N - 1 at most); NULL for another type or a malformed message.
template <typename Body, size_t N>
const Body* ParseRtnl(nl_msg* msg, int type, nlattr* (&tb)[N]) {
  nlmsghdr* nlh = nlmsg_hdr(msg);
  if (nlh->nlmsg_type != type ||
      nlmsg_parse(nlh, sizeof(Body), tb, static_cast<int>(N - 1), nullptr) < 0) {
    return nullptr;
  }
  return static_cast<const Body*>(nlmsg_data(nlh));
}

int OnRoute(nl_msg* msg, void* arg) {
  auto* a = static_cast<RouteAnswer*>(arg);
  nlattr* tb[RTA_MAX + 1];
  const auto* rtm = ParseRtnl<rtmsg>(msg, RTM_NEWROUTE, tb);
  if (rtm == nullptr) return NL_OK;
  a->got = true;
  a->route.local = rtm->rtm_type == RTN_LOCAL;
  if (tb[RTA_OIF] != nullptr) a->route.ifindex = static_cast<int>(nla_get_u32(tb[RTA_OIF]));
  if (tb[RTA_PREFSRC] != nullptr &&
      static_cast<size_t>(nla_len(tb[RTA_PREFSRC])) == AddrLen(rtm->rtm_family)) {
    a->route.source.family = rtm->rtm_family;
    memcpy(a->route.source.ip.data(), nla_data(tb[RTA_PREFSRC]), AddrLen(rtm->rtm_family));
  }
  if (tb[RTA_GATEWAY] != nullptr &&
      static_cast<size_t>(nla_len(tb[RTA_GATEWAY])) == AddrLen(rtm->rtm_family)) {
    a->route.next_hop.family = rtm->rtm_family;
    memcpy(a->route.next_hop.ip.data(), nla_data(tb[RTA_GATEWAY]), AddrLen(rtm->rtm_family));
  }
  return NL_OK;
}

struct NeighAnswer {
  IpAddr dst;
  absl::optional<NeighbourEntry> entry;
};

int OnNeigh(nl_msg* msg, void* arg) {
  auto* a = static_cast<NeighAnswer*>(arg);
  nlmsghdr* nlh = nlmsg_hdr(msg);
  auto e = ParseNeighbourMessage(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(nlh), nlh->nlmsg_len), a->dst);
  if (e.has_value()) a->entry = std::move(e);
  return NL_OK;
}

struct AddrAnswer {
  IpAddr local;
  int first = 0;  // the lowest ifindex holding `local`, not tentative
};

// One RTM_NEWADDR of the dump: the address's netdev, when it is `local` and
// usable as the kernel's ipv6_chk_addr sees it (not tentative, unless
// optimistic: IFA_F_TENTATIVE is banned, and an optimistic address counts
// as not tentative).
int OnAddr(nl_msg* msg, void* arg) {
  auto* a = static_cast<AddrAnswer*>(arg);
  nlattr* tb[IFA_MAX + 1];
  const auto* ifa = ParseRtnl<ifaddrmsg>(msg, RTM_NEWADDR, tb);
  if (ifa == nullptr) return NL_OK;
  // A point-to-point address is IFA_LOCAL (IFA_ADDRESS is its peer).
  nlattr* addr = tb[IFA_LOCAL] != nullptr ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
  if (ifa->ifa_family != a->local.family || addr == nullptr ||
      !SameIp(a->local, static_cast<const uint8_t*>(nla_data(addr)),
              static_cast<size_t>(nla_len(addr)))) {
    return NL_OK;
  }
  uint32_t flags = ifa->ifa_flags;
  if (tb[IFA_FLAGS] != nullptr && nla_len(tb[IFA_FLAGS]) == 4) flags = nla_get_u32(tb[IFA_FLAGS]);
  if ((flags & IFA_F_TENTATIVE) != 0 && (flags & IFA_F_OPTIMISTIC) == 0) return NL_OK;
  const int ifindex = static_cast<int>(ifa->ifa_index);
  if (ifindex > 0 && (a->first == 0 || ifindex < a->first)) a->first = ifindex;
  return NL_OK;
}

// validate_ipv4_net_dev's refusals: a source that is multicast or limited
// broadcast, either address zeronet (0/8) or loopback (127/8), a destination
// that is limited broadcast.
bool Martian(const IpAddr& a, bool as_source) {
  const uint8_t first = a.ip[0];
  const bool lbcast = a.ip[0] == 255 && a.ip[1] == 255 && a.ip[2] == 255 && a.ip[3] == 255;
  return first == 0 || first == 127 || lbcast || (as_source && first >= 224 && first < 240);
}

// The kernel starts ARP / neighbour discovery for a datagram to `addr` too;
// port 9 (discard), nothing listens or answers.
void SendProbeDatagram(const IpAddr& addr) {
  int fd = socket(addr.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_storage to = {};
  socklen_t len = 0;
  if (addr.family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&to);
    s->sin_family = AF_INET;
    s->sin_port = htons(9);
    memcpy(&s->sin_addr, addr.ip.data(), 4);
    len = sizeof(*s);
  } else {
    auto* s = reinterpret_cast<sockaddr_in6*>(&to);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(9);
    memcpy(&s->sin6_addr, addr.ip.data(), 16);
    s->sin6_scope_id = addr.scope_id;  // a link-local next hop: its interface
    len = sizeof(*s);
  }
  (void)sendto(fd, "", 0, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), len);
  close(fd);
}

}  // namespace

bool IpAddr::is_link_local() const {
  return family == AF_INET6 && ip[0] == 0xFE && (ip[1] & 0xC0) == 0x80;
}

std::string IpAddr::ToString() const {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, ip.data(), text, sizeof(text));
  return text;
}

// include/net/neighbour.h's NUD_VALID (not in the uapi headers).
bool NeighbourEntry::usable() const {
  return (state & (NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE |
                   NUD_DELAY)) != 0;
}

absl::optional<NeighbourEntry> ParseNeighbourMessage(std::span<const uint8_t> nlmsg,
                                                    const IpAddr& dst) {
  // A netlink message is at most a page or two; a length beyond 64 KiB is not one.
  if (nlmsg.size() < NLMSG_HDRLEN + sizeof(ndmsg) || nlmsg.size() > 65536) return absl::nullopt;
  // nlmsg_parse reads in place: an aligned copy of the message.
  std::vector<uint32_t> aligned((nlmsg.size() + 3) / 4);
  std::copy(nlmsg.begin(), nlmsg.end(), reinterpret_cast<uint8_t*>(aligned.data()));
  auto* nlh = reinterpret_cast<nlmsghdr*>(aligned.data());
  if (nlh->nlmsg_type != RTM_NEWNEIGH || nlh->nlmsg_len > nlmsg.size() ||
      nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(ndmsg)) {
    return absl::nullopt;
  }
  nlattr* tb[NDA_MAX + 1];
  if (nlmsg_parse(nlh, sizeof(ndmsg), tb, NDA_MAX, nullptr) < 0) return absl::nullopt;
  const auto* nd = static_cast<const ndmsg*>(nlmsg_data(nlh));
  if (nd->ndm_family != dst.family || tb[NDA_DST] == nullptr ||
      !SameIp(dst, static_cast<const uint8_t*>(nla_data(tb[NDA_DST])),
              static_cast<size_t>(nla_len(tb[NDA_DST])))) {
    return absl::nullopt;
  }
  NeighbourEntry e;
  e.ifindex = nd->ndm_ifindex;
  e.state = nd->ndm_state;
  if (tb[NDA_LLADDR] != nullptr) {
    const auto* p = static_cast<const uint8_t*>(nla_data(tb[NDA_LLADDR]));
    e.lladdr.assign(p, p + nla_len(tb[NDA_LLADDR]));
  }
  return e;
}

absl::StatusOr<NeighbourTable> NeighbourTable::Open() {
  nl_sock* sock = nl_socket_alloc();
  if (sock == nullptr) return absl::ResourceExhaustedError("netlink: no memory for a socket");
  if (int rc = nl_connect(sock, NETLINK_ROUTE); rc < 0) {
    nl_socket_free(sock);
    return mad::WithErrno(
        absl::UnavailableError(absl::StrCat("netlink: cannot open NETLINK_ROUTE: ", nl_geterror(rc))),
        EIO);
  }
  nl_socket_disable_auto_ack(sock);
  return NeighbourTable(sock);
}

NeighbourTable::NeighbourTable(NeighbourTable&& o) noexcept : sock_(o.sock_) { o.sock_ = nullptr; }
NeighbourTable& NeighbourTable::operator=(NeighbourTable&& o) noexcept {
  std::swap(sock_, o.sock_);
  return *this;
}
NeighbourTable::~NeighbourTable() {
  if (sock_ != nullptr) nl_socket_free(sock_);
}

// One RTM_GETROUTE for `dst` (from `src` when given, on `oif` when not 0,
// `flags` in rtm_flags): the kernel's errno, 0 with `answer` filled.
int NeighbourTable::AskRoute(const IpAddr& dst, const absl::optional<IpAddr>& src, uint32_t oif,
                             unsigned flags, RouteToHost* answer) {
  nl_msg* msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST);
  if (msg == nullptr) return ENOMEM;
  rtmsg rtm = {};
  rtm.rtm_family = static_cast<unsigned char>(dst.family);
  rtm.rtm_dst_len = static_cast<unsigned char>(AddrLen(dst.family) * 8);
  if (src.has_value()) rtm.rtm_src_len = static_cast<unsigned char>(AddrLen(src->family) * 8);
  rtm.rtm_flags = flags;
  nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO);
  nla_put(msg, RTA_DST, static_cast<int>(AddrLen(dst.family)), dst.ip.data());
  if (src.has_value()) nla_put(msg, RTA_SRC, static_cast<int>(AddrLen(src->family)), src->ip.data());
  if (oif != 0) nla_put_u32(msg, RTA_OIF, oif);
  RouteAnswer got;
  Exchange x{0, OnRoute, &got};
  int err = Transact(sock_, msg, x);
  if (err == 0 && !got.got) err = ENETUNREACH;
  if (err == 0) *answer = got.route;
  return err;
}

absl::StatusOr<RouteToHost> NeighbourTable::Route(const IpAddr& dst,
                                                  const absl::optional<IpAddr>& src) {
  const uint32_t oif = dst.scope_id != 0 ? dst.scope_id : src.has_value() ? src->scope_id : 0;
  RouteToHost r;
  if (int err = AskRoute(dst, src, oif, 0, &r); err != 0) {
    return mad::WithErrno(
        absl::UnavailableError(absl::StrCat("no route to ", dst.ToString(),
                                            src.has_value() ? " from " + src->ToString() : "",
                                            ": ", strerror(err))),
        err);
  }
  if (r.next_hop.family == 0) r.next_hop = dst;
  return r;
}

absl::Status NeighbourTable::RouteLeavesOn(const IpAddr& dst, const IpAddr& src, int ifindex) {
  const std::string what = absl::StrCat("the route to ", dst.ToString(), " from ", src.ToString(),
                                        " asked on ifindex ", ifindex);
  if (dst.family != src.family) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": two address families"));
  }
  // validate_ipv4_net_dev refuses these before it asks the FIB.
  if (dst.family == AF_INET && (Martian(src, /*as_source=*/true) || Martian(dst, false))) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": a multicast, broadcast, zero or loopback address"));
  }
  // IPv4: the FIB entry itself (RTM_F_FIB_MATCH), as validate_ipv4_net_dev's
  // fib_lookup with flowi4_oif; the output route without it would assume a
  // destination with no route on `ifindex` is on its link. IPv6: the route
  // as rt6_lookup gives it (a link-local destination strictly on `ifindex`).
  RouteToHost r;
  const int err = AskRoute(dst, src, static_cast<uint32_t>(ifindex),
                           dst.family == AF_INET ? RTM_F_FIB_MATCH : 0, &r);
  if (err != 0) return absl::FailedPreconditionError(absl::StrCat(what, ": ", strerror(err)));
  if (r.ifindex != ifindex) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " leaves on ifindex ", r.ifindex, r.local ? " (a local address)" : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> NeighbourTable::NetdevOfSource(const IpAddr& local) {
  if (local.family == AF_INET6) return NetdevOfIpv6Source(local);
  if (local.family != AF_INET) {
    return absl::InvalidArgumentError(
        absl::StrCat("the netdev of ", local.ToString(), ": not an IP address"));
  }
  IpAddr broadcast;
  broadcast.family = AF_INET;
  broadcast.ip[0] = broadcast.ip[1] = broadcast.ip[2] = broadcast.ip[3] = 0xff;
  RouteToHost r;
  if (int err = AskRoute(broadcast, local, /*oif=*/0, 0, &r); err != 0 || r.ifindex == 0) {
    return absl::NotFoundError(absl::StrCat("no netdev has ", local.ToString(), ": ",
                                            err != 0 ? strerror(err) : "no output interface"));
  }
  return r.ifindex;
}

absl::StatusOr<int> NeighbourTable::NetdevOfIpv6Source(const IpAddr& local) {
  // cma_check_linklocal: the scope id is the id's bound_dev_if, which
  // rdma_translate_ip takes as it is (EINVAL without one).
  if (local.is_link_local()) {
    if (local.scope_id == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the netdev of ", local.ToString(), ": link-local, and no scope id names its netdev"));
    }
    return static_cast<int>(local.scope_id);
  }
  // Every IPv6 address of the host (RTM_GETADDR dump): the lowest ifindex
  // that holds `local`, not tentative (OnAddr).
  nl_msg* msg = nlmsg_alloc_simple(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP);
  if (msg == nullptr) return absl::ResourceExhaustedError("netlink: no memory for a message");
  ifaddrmsg ifa = {};
  ifa.ifa_family = AF_INET6;
  nlmsg_append(msg, &ifa, sizeof(ifa), NLMSG_ALIGNTO);
  AddrAnswer got{local, 0};
  Exchange x{0, OnAddr, &got};
  if (int err = Transact(sock_, msg, x); err != 0) {
    return mad::WithErrno(absl::UnavailableError(absl::StrCat(
                              "the netdev of ", local.ToString(),
                              ": the kernel's address list (RTM_GETADDR): ", strerror(err))),
                          err);
  }
  if (got.first == 0) {
    return absl::NotFoundError(
        absl::StrCat("no netdev has ", local.ToString(), " (or only a tentative one)"));
  }
  return got.first;
}

RouteBackCache::RouteBackCache() {
  fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd_ < 0) return;
  sockaddr_nl local = {};
  local.nl_family = AF_NETLINK;
  bool ok = bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0;
  // What the route to a host, asked on a netdev, depends on.
  for (int group : {RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, RTNLGRP_IPV4_RULE, RTNLGRP_IPV6_RULE,
                    RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, RTNLGRP_LINK}) {
    ok = ok && setsockopt(fd_, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) == 0;
  }
  if (!ok) {
    close(fd_);
    fd_ = -1;
  }
}

RouteBackCache::~RouteBackCache() {
  if (fd_ >= 0) close(fd_);
}

bool RouteBackCache::Changed() {
  bool changed = false;
  std::array<uint8_t, 8192> buf;
  for (;;) {
    const ssize_t n = recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno == ENOBUFS)) {  // ENOBUFS: some were lost
      changed = true;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (changed) ++generation_;
      return changed;  // EAGAIN: read them all
    }
  }
}

uint64_t RouteBackCache::Generation() {
  if (fd_ < 0) return ++generation_;
  if (Changed() && !kept_.empty()) {  // RouteLeavesOn will not see these changes
    kept_.clear();
    ++dropped_;
  }
  return generation_;
}

absl::Status RouteBackCache::RouteLeavesOn(NeighbourTable& table, const IpAddr& dst,
                                           const IpAddr& src, int ifindex) {
  if (fd_ < 0) {
    ++asked_;
    return table.RouteLeavesOn(dst, src, ifindex);
  }
  if ((Changed() || kept_.size() >= kMaxKept) && !kept_.empty()) {
    kept_.clear();
    ++dropped_;
  }
  std::string key;
  for (const IpAddr* a : {&dst, &src}) {
    key.append(reinterpret_cast<const char*>(&a->family), sizeof(a->family));
    key.append(reinterpret_cast<const char*>(a->ip.data()), AddrLen(a->family));
    key.append(reinterpret_cast<const char*>(&a->scope_id), sizeof(a->scope_id));
  }
  key.append(reinterpret_cast<const char*>(&ifindex), sizeof(ifindex));
  if (auto it = kept_.find(key); it != kept_.end()) return it->second;
  ++asked_;
  absl::Status s = table.RouteLeavesOn(dst, src, ifindex);
  if (s.ok() || s.code() == absl::StatusCode::kFailedPrecondition) kept_.emplace(key, s);
  return s;
}

absl::optional<NeighbourEntry> NeighbourTable::Lookup(int ifindex, const IpAddr& addr) {
  nl_msg* msg = nlmsg_alloc_simple(RTM_GETNEIGH, NLM_F_REQUEST);
  if (msg == nullptr) return absl::nullopt;
  ndmsg nd = {};
  nd.ndm_family = static_cast<uint8_t>(addr.family);
  nd.ndm_ifindex = ifindex;
  nlmsg_append(msg, &nd, sizeof(nd), NLMSG_ALIGNTO);
  nla_put(msg, NDA_DST, static_cast<int>(AddrLen(addr.family)), addr.ip.data());
  NeighAnswer answer{addr, absl::nullopt};
  Exchange x{0, OnNeigh, &answer};
  if (Transact(sock_, msg, x) != 0) return absl::nullopt;  // ENOENT: no entry yet
  return answer.entry;
}

void NeighbourTable::StartResolution(int ifindex, const IpAddr& addr) {
  // RTM_NEWNEIGH with NTF_USE: the kernel creates the entry and calls
  // neigh_event_send on it, as rdma_cm's fetch_ha does (CAP_NET_ADMIN).
  nl_msg* msg = nlmsg_alloc_simple(RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK);
  int err = ENOMEM;
  if (msg != nullptr) {
    ndmsg nd = {};
    nd.ndm_family = static_cast<uint8_t>(addr.family);
    nd.ndm_ifindex = ifindex;
    nd.ndm_flags = NTF_USE;
    nlmsg_append(msg, &nd, sizeof(nd), NLMSG_ALIGNTO);
    nla_put(msg, NDA_DST, static_cast<int>(AddrLen(addr.family)), addr.ip.data());
    Exchange x;
    err = Transact(sock_, msg, x);
  }
  if (err != 0) {  // EPERM without CAP_NET_ADMIN
    IpAddr on = addr;
    if (on.is_link_local()) on.scope_id = static_cast<uint32_t>(ifindex);
    SendProbeDatagram(on);
  }
}

absl::StatusOr<std::vector<uint8_t>> NeighbourTable::Resolve(const IpAddr& dst,
                                                             const absl::optional<IpAddr>& src,
                                                             std::chrono::milliseconds timeout) {
  absl::StatusOr<RouteToHost> route = Route(dst, src);
  if (!route.ok()) return route.status();
  if (route->local) return std::vector<uint8_t>{};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(200);
  for (bool first = true;; first = false) {
    absl::optional<NeighbourEntry> e = Lookup(route->ifindex, route->next_hop);
    if (e.has_value() && e->usable()) return e->lladdr;
    // An INCOMPLETE entry is being resolved already; a missing or FAILED one
    // is asked for, once per call.
    if (first && (!e.has_value() || e->state == NUD_NONE || (e->state & NUD_FAILED) != 0)) {
      StartResolution(route->ifindex, route->next_hop);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);  // ARP answers in well under a millisecond on a LAN
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
  return mad::WithErrno(
      absl::DeadlineExceededError(absl::StrCat(
          "no neighbour entry for ", route->next_hop.ToString(),
          route->next_hop.ip == dst.ip ? "" : absl::StrCat(" (the gateway to ", dst.ToString(), ")"),
          ": the host does not answer ARP / neighbour discovery")),
      ETIMEDOUT);
}

}  // namespace uscm::verbs
