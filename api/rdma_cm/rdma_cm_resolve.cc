// resolve_addr: the local address (bind), then the destination's GID, as the
// kernel's rdma_resolve_addr / rdma_resolve_ip (drivers/infiniband/core/addr.c):
//   * AF_IB: the GID as given;
//   * an AddNeighbor entry (the simulated fabric's ARP);
//   * DeviceOptions::resolve_neighbour (a real port: the kernel's route and
//     neighbour tables), or its usable answer for the same source and
//     destination of the last DeviceOptions::neighbour_reuse. It is probed at
//     once without waiting; an entry the
//     kernel is still resolving goes on the device's pending list, which one
//     thread probes every 2 ms until the entry resolves or the call's timeout
//     passes (the kernel's process_one_req list), so the call returns at once
//     and ADDR_RESOLVED / ADDR_ERROR comes later, as from the kernel;
//   * RoCE without a table: the IP's own GID.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/rdma_cm/call_errors.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/signal_free_threads.h"
#include "mad/status_errno.h"

namespace uscm {
namespace {

using internal::IbAddressFits;
using internal::Prefix;
using internal::WrongState;

constexpr auto kProbeInterval = std::chrono::milliseconds(2);

// The kernel is still resolving (the table's "not yet" answer to a probe).
bool StillResolving(const absl::StatusOr<absl::optional<mad::Gid>>& r) {
  return !r.ok() && mad::ErrnoOf(r.status()) == ETIMEDOUT;
}

}  // namespace

absl::Status CmId::ResolveAddr(const absl::optional<Address>& src, const Address& dst,
                               mad::Duration timeout) {
  return ResolveAddrIn(src, dst, timeout, nullptr);
}

absl::StatusOr<bool> CmId::ResolveAddrNow(const absl::optional<Address>& src, const Address& dst,
                                          mad::Duration timeout, Address* local, Address* peer) {
  AddrNow now{false, local, peer};
  absl::Status s = ResolveAddrIn(src, dst, timeout, &now);
  if (!s.ok()) return s;
  return now.done;
}

void CmId::AddrResolvedLocked(AddrNow* now) {
  state_ = IdState::kAddrResolved;
  // IB's IP addresses keep the event (the drop-in's direct path is RoCE's
  // and AF_IB's: docs/API.md "The direct paths of rdma_resolve_addr and
  // rdma_resolve_route").
  if (now != nullptr && (device_->options_.roce || peer_.family == Address::Family::kIb)) {
    now->done = true;
    if (now->local != nullptr) *now->local = local_;
    if (now->peer != nullptr) *now->peer = peer_;
    return;
  }
  device_->Post(this, EventType::kAddrResolved, 0);
}

absl::Status CmId::ResolveAddrIn(const absl::optional<Address>& src, const Address& dst,
                                 mad::Duration timeout, AddrNow* now) {
  if (src.has_value() && !bound_) {
    // A source with a port reserves it as rdma_bind_addr does (cma_use_port);
    // port 0 is an active id's ephemeral port, the process's own pick.
    absl::Status s = Bind(*src, /*reserve=*/src->port != 0);
    if (!s.ok()) return Prefix("resolve_addr", s);
  }
  // An unbound id's source and netdev from the routing table (DeviceOptions::
  // route_to), asked before the device lock is taken (netlink).
  absl::optional<DeviceOptions::Route> routed;
  if (!src.has_value() && device_->options_.route_to && dst.is_ip() && !dst.is_link_local() &&
      !dst.is_multicast()) {
    bool unbound;
    {
      std::lock_guard<std::mutex> l(device_->node_->mutex());
      unbound = !bound_;
    }
    if (unbound) routed = device_->options_.route_to(dst);
  }
  std::unique_lock<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kIdle) return WrongState("resolve_addr", state_, "IDLE");
  const mad::LocalPort& port = device_->port();
  if (dst.family == Address::Family::kIb) {
    // The kernel checks the source it binds (ServiceID 0: any port space
    // fits) and takes the destination's SID as given.
    Address any_sid = dst;
    any_sid.service_mask = 0;
    if (absl::Status fits = IbAddressFits("resolve_addr", ps_, any_sid); !fits.ok()) return fits;
    if (!bound_) {
      local_ = Address::Ib(port.gid, port.lid, 0, dst.pkey);
      bound_ = true;
    }
    peer_ = dst;
    AddrResolvedLocked(now);
    return absl::OkStatus();
  }
  // Any port space takes an IP destination, RDMA_PS_IB too: the kernel's
  // cma_select_inet_ps keeps the id's own (its ServiceID is then
  // rdma_get_service_id's (ps << 16) + port, and the CMA header leads the
  // private data as for every IP address: cma_user_data_offset).
  if (!dst.is_ip()) return absl::InvalidArgumentError("resolve_addr: destination family unspecified");
  if (!bound_) {
    // The routing table's source, when it is the port's, on the route's
    // netdev (rdma_resolve_ip). Else the port's first address of the
    // destination's family and scope: a link-local source for a link-local
    // destination, on its interface (the kernel's cma_bind_addr copies the
    // destination's sin6_scope_id), and a global one for the others.
    local_ = Address();
    netdev_ = 0;
    for (const Address& a : device_->options_.local_ips) {
      if (routed.has_value() && a.family == dst.family && a.SameHost(routed->source)) {
        local_ = a;
        local_.scope_id = 0;
        netdev_ = routed->ifindex;
        break;
      }
    }
    for (const Address& a : device_->options_.local_ips) {
      if (local_.family != Address::Family::kUnspec) break;
      if (a.family == dst.family && a.is_link_local() == dst.is_link_local()) {
        local_ = a;
        local_.scope_id = dst.scope_id;
        break;
      }
    }
    if (local_.family == Address::Family::kUnspec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resolve_addr: ", port.ca_name, " has no ",
          dst.family == Address::Family::kIpv4 ? "IPv4"
          : dst.is_link_local()                ? "IPv6 link-local"
                                               : "IPv6",
          " address to send from"));
    }
    local_.port = 0;
    absl::Status s = device_->AllocPort(this);
    if (!s.ok()) return s;
    local_.gid = port.gid;
    local_.lid = port.lid;
    bound_ = true;
  }
  peer_ = dst;
  // AddNeighbor's entries (the simulated fabric's ARP; none on a real port).
  auto it = device_->neighbors_.empty() ? device_->neighbors_.end()
                                        : device_->neighbors_.find(Device::IpKey(dst));
  if (it != device_->neighbors_.end()) {
    peer_.gid = it->second.gid;
    peer_.lid = it->second.lid;
  } else if (device_->options_.roce && dst.is_multicast()) {
    // A multicast group (mckey resolves to it): no ARP on Ethernet, the
    // kernel's neighbour is NOARP with the mapped MAC; the GID is the IP's.
    peer_.gid = RoceGidOf(dst);
    peer_.lid = mad::kPermissiveLid;
  } else if (device_->options_.resolve_neighbour) {
    if (auto reused = device_->ReusedNeighbour(local_, dst); reused.has_value()) {
      FinishResolveWith(*reused, now);
      return absl::OkStatus();
    }
    // The kernel's tables, without the device lock (netlink); ADDR_QUERY
    // keeps other calls off the id meanwhile.
    state_ = IdState::kAddrQuery;
    const uint64_t seq = ++resolve_seq_;
    const Address from = local_;
    lock.unlock();
    absl::StatusOr<absl::optional<mad::Gid>> probe =
        device_->options_.resolve_neighbour(from, dst, mad::Duration::Zero());
    lock.lock();
    device_->RememberNeighbour(from, dst, probe);
    if (state_ != IdState::kAddrQuery || resolve_seq_ != seq) return absl::OkStatus();
    if (StillResolving(probe)) {
      device_->QueueResolve({this, seq, from, dst, timeout,
                             std::chrono::steady_clock::now() +
                                 std::chrono::nanoseconds(timeout.nanos())});
      return absl::OkStatus();
    }
    return FinishResolve(probe, /*in_call=*/true, now);
  } else if (device_->options_.roce) {
    // RoCE without the kernel's table (the simulated fabric): the
    // destination's GID is its IP.
    peer_.gid = RoceGidOf(dst);
    peer_.lid = mad::kPermissiveLid;
  } else {
    device_->Post(this, EventType::kAddrError, -EHOSTUNREACH,
                  absl::StrCat("no neighbour entry for ", dst.ToString(),
                               " (Device::AddNeighbor plays ARP)"));
    return absl::OkStatus();
  }
  AddrResolvedLocked(now);
  return absl::OkStatus();
}

absl::Status CmId::FinishResolve(const absl::StatusOr<absl::optional<mad::Gid>>& gid,
                                 bool in_call, AddrNow* now) {
  state_ = IdState::kIdle;  // ADDR_BOUND again on failure, as the kernel's addr_handler
  if (!gid.ok()) {
    const int err = mad::ErrnoOf(gid.status());
    // No route: the kernel's rdma_resolve_addr fails the call itself.
    if (in_call && (err == ENETUNREACH || err == ENETDOWN || err == EHOSTUNREACH)) {
      return Prefix("resolve_addr", gid.status());
    }
    device_->Post(this, EventType::kAddrError, -(err != 0 ? err : EHOSTUNREACH),
                  std::string(gid.status().message()));
    return absl::OkStatus();
  }
  FinishResolveWith(*gid, now);
  return absl::OkStatus();
}

void CmId::FinishResolveWith(const absl::optional<mad::Gid>& gid, AddrNow* now) {
  state_ = IdState::kIdle;
  if (gid.has_value()) {
    peer_.gid = *gid;
    peer_.lid = 0;  // the SA's PathRecord gives it (resolve_route)
  } else if (device_->options_.roce) {
    peer_.gid = RoceGidOf(peer_);
    peer_.lid = mad::kPermissiveLid;
  } else {
    device_->Post(this, EventType::kAddrError, -EHOSTUNREACH,
                  absl::StrCat("the neighbour entry of ", peer_.ToString(),
                               " carries no GID (not an IPoIB hardware address)"));
    return;
  }
  AddrResolvedLocked(now);
}

absl::optional<absl::optional<mad::Gid>> Device::ReusedNeighbour(const Address& src,
                                                                 const Address& dst) {
  // IpKey(a) == k, without building the key: two 17-byte keys built and
  // compared were ~130 of the call's instructions per id.
  auto is_key_of = [](const IpKeyBytes& k, const Address& a) {
    return k[16] == (a.family == Address::Family::kIpv4 ? 4 : 6) &&
           std::memcmp(k.data(), a.ip.data(), a.ip.size()) == 0;
  };
  if (last_reusable_.set && is_key_of(last_reusable_.key.first, src) &&
      is_key_of(last_reusable_.key.second, dst) &&
      std::chrono::steady_clock::now() < last_reusable_.entry.until) {
    ++neighbour_reuses_;
    return last_reusable_.entry.gid;
  }
  std::pair<IpKeyBytes, IpKeyBytes> key{IpKey(src), IpKey(dst)};
  auto it = reusable_neighbours_.find(key);
  if (it == reusable_neighbours_.end()) return absl::nullopt;
  if (std::chrono::steady_clock::now() >= it->second.until) {
    reusable_neighbours_.erase(it);
    return absl::nullopt;
  }
  ++neighbour_reuses_;
  return it->second.gid;
}

void Device::RememberNeighbour(const Address& src, const Address& dst,
                               const absl::StatusOr<absl::optional<mad::Gid>>& answer) {
  if (!answer.ok() || options_.neighbour_reuse <= mad::Duration::Zero()) return;
  // Bounded: a program resolving to many destinations forgets them all at
  // once, at worst asking the table again.
  if (reusable_neighbours_.size() >= 4096) reusable_neighbours_.clear();
  // The map's entry and its copy in last_reusable_ are the same answer with
  // the same deadline, so asking the copy first changes no answer.
  last_reusable_.set = true;
  last_reusable_.key = {IpKey(src), IpKey(dst)};
  last_reusable_.entry = {*answer, std::chrono::steady_clock::now() +
                                       std::chrono::nanoseconds(options_.neighbour_reuse.nanos())};
  reusable_neighbours_[last_reusable_.key] = last_reusable_.entry;
}

uint64_t Device::neighbour_reuses() const {
  std::lock_guard<std::mutex> lock(node_->mutex());
  return neighbour_reuses_;
}

void Device::QueueResolve(PendingResolve p) {
  pending_resolves_.push_back(std::move(p));
  if (!resolver_.joinable()) {
    mad::SignalFreeThreads no_signals;
    resolver_ = std::thread([this] { ResolverLoop(); });
  }
  resolver_cv_.notify_one();
}

void Device::ResolverLoop() {
  std::unique_lock<std::mutex> lock(node_->mutex());
  while (!stop_resolver_) {
    if (pending_resolves_.empty()) {
      resolver_cv_.wait(lock);
      continue;
    }
    // Ids destroyed (or resolving again) since the last round are not probed.
    std::erase_if(pending_resolves_, [this](const PendingResolve& p) { return !Live(p); });
    if (pending_resolves_.empty()) continue;
    std::vector<PendingResolve> round = pending_resolves_;
    lock.unlock();
    std::vector<absl::StatusOr<absl::optional<mad::Gid>>> answers;
    answers.reserve(round.size());
    for (const PendingResolve& p : round) {
      answers.push_back(options_.resolve_neighbour(p.src, p.dst, mad::Duration::Zero()));
    }
    lock.lock();
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < round.size(); ++i) {
      const PendingResolve& p = round[i];
      auto it = std::find_if(pending_resolves_.begin(), pending_resolves_.end(),
                             [&](const PendingResolve& q) { return q.id == p.id && q.seq == p.seq; });
      if (it == pending_resolves_.end()) continue;
      const bool live = Live(p);
      if (live && StillResolving(answers[i]) && now < p.deadline) continue;
      if (live && StillResolving(answers[i])) {
        answers[i] = mad::WithErrno(
            absl::DeadlineExceededError(absl::StrCat(answers[i].status().message(), " (waited ",
                                                     p.timeout.ToString(), ")")),
            ETIMEDOUT);
      }
      RememberNeighbour(p.src, p.dst, answers[i]);
      if (live) (void)p.id->FinishResolve(answers[i], /*in_call=*/false);
      pending_resolves_.erase(it);
    }
    resolver_cv_.wait_for(lock, kProbeInterval);
  }
}

bool Device::Live(const PendingResolve& p) const {
  return ids_.contains(p.id) && p.id->resolve_seq_ == p.seq && p.id->state_ == IdState::kAddrQuery;
}

void Device::StopResolver() {
  {
    std::lock_guard<std::mutex> lock(node_->mutex());
    stop_resolver_ = true;
  }
  resolver_cv_.notify_all();
  if (resolver_.joinable()) resolver_.join();
}

}  // namespace uscm
