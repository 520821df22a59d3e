// The ports of a Device as the kernel's rdma_cm binds them (cma_get_port,
// cma_use_port, cma_check_port, cma_alloc_any_port in the kernel's
// drivers/infiniband/core/cma.c): each (port space, port) has its owners;
// ephemeral ports come from the kernel's range.
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/status_errno.h"
#include "mad/wire/cma_header.h"

namespace uscm {
namespace {

uint32_t PortKey(const CmId* id, uint16_t port) {
  return uint32_t{static_cast<uint16_t>(id->port_space())} << 16 | port;
}

// The kernel's cma_any_addr: the wildcard or loopback.
bool AnyAddr(const Address& a) { return a.is_any() || a.is_loopback(); }

bool HaveNetBindService() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[0].effective & (1u << CAP_NET_BIND_SERVICE)) != 0;
}

}  // namespace

bool ReadBindV6Only() {
  FILE* f = fopen("/proc/sys/net/ipv6/bindv6only", "r");
  if (f == nullptr) return false;
  int v = 0;
  const bool set = fscanf(f, "%d", &v) == 1 && v != 0;
  fclose(f);
  return set;
}

absl::Status Device::AllocPort(CmId* id) {
  const uint16_t low = options_.ephemeral_low, high = options_.ephemeral_high;
  for (uint32_t tries = 0; tries <= uint32_t{high} - low; ++tries) {
    uint16_t p = next_port_;
    if (p < low || p > high) p = low;
    next_port_ = p >= high ? low : p + 1;
    auto [it, fresh] = port_owners_.try_emplace(PortKey(id, p));
    if (fresh) {
      it->second.push_back(id);
      id->local_.port = p;
      id->ephemeral_port_ = true;
      return absl::OkStatus();
    }
  }
  return mad::WithErrno(absl::ResourceExhaustedError(absl::StrCat(
                            "bind: no free port in ", low, "..", high, " (errno EADDRNOTAVAIL)")),
                        EADDRNOTAVAIL);
}

absl::Status Device::UsePort(CmId* id) {
  const uint16_t port = id->local_.port;
  if (port < 1024) {
    const bool may = options_.may_bind_privileged_port ? options_.may_bind_privileged_port()
                                                       : HaveNetBindService();
    if (!may) {
      return absl::PermissionDeniedError(absl::StrCat(
          "bind_addr: port ", port, " is below 1024 and this process does not have "
          "CAP_NET_BIND_SERVICE (errno EACCES)"));
    }
  }
  if (absl::Status s = CheckPort(id, id->opts().reuse_addr); !s.ok()) return s;
  port_owners_[PortKey(id, port)].push_back(id);
  return absl::OkStatus();
}

absl::Status Device::CheckPort(const CmId* id, bool reuse) const {
  auto it = port_owners_.find(PortKey(id, id->local_.port));
  if (it == port_owners_.end()) return absl::OkStatus();
  const Address& addr = id->local_;
  for (const CmId* cur : it->second) {
    if (cur == id) continue;
    if (reuse && cur->opts().reuse_addr) continue;
    const Address& cur_addr = cur->local_;
    if (id->af_only_ && cur->af_only_ && addr.family != cur_addr.family) continue;
    // A wildcard conflicts with every address of its families: the kernel
    // says EADDRNOTAVAIL there, EADDRINUSE for the same address.
    if (AnyAddr(addr) || AnyAddr(cur_addr)) {
      return mad::WithErrno(
          absl::AlreadyExistsError(absl::StrCat(
              "port ", addr.port, " is held by ", cur_addr.ToString(),
              " and one of the two is a wildcard (errno EADDRNOTAVAIL); REUSEADDR on both ids "
              "shares it, AFONLY separates IPv4 from IPv6")),
          EADDRNOTAVAIL);
    }
    if (addr.SameHost(cur_addr)) {
      return absl::AlreadyExistsError(absl::StrCat(
          addr.ToString(),
          " is in use in this port space (errno EADDRINUSE); set REUSEADDR on both ids to "
          "share it"));
    }
  }
  return absl::OkStatus();
}

void Device::FreePort(CmId* id) {
  auto it = port_owners_.find(PortKey(id, id->local_.port));
  if (it == port_owners_.end()) return;
  absl::InlinedVector<CmId*, 1>& owners = it->second;
  owners.erase(std::remove(owners.begin(), owners.end(), id), owners.end());
  if (owners.empty()) port_owners_.erase(it);
}

namespace {

// May a listener bound to `a` take a request for `dst` (the address the
// request came in on, its scope_id the netdev of the GID entry it came in on)?
// As the kernel's cma_match_net_dev: only a link-local destination is held
// to the netdev, and only by a listener bound to one (its sin6_scope_id, the
// kernel's bound_dev_if); a request whose netdev is not known (scope_id 0)
// is not refused.
bool OnListenersNetdev(const Address& a, const Address& dst) {
  if (!dst.is_link_local() || a.scope_id == 0 || dst.scope_id == 0) return true;
  return a.scope_id == dst.scope_id;
}

}  // namespace

CmId* Device::ListenerFor(CmId* first, const Address& dst) const {
  if (!first->local_.is_ip()) return first;
  auto it = port_owners_.find(PortKey(first, first->local_.port));
  if (it == port_owners_.end()) return first;
  CmId* wildcard = nullptr;
  for (CmId* cur : it->second) {
    if (cur->state_ != IdState::kListen) continue;
    const Address& a = cur->local_;
    if (!AnyAddr(a)) {
      if (a.SameHost(dst) && OnListenersNetdev(a, dst)) return cur;
    } else if (a.family == dst.family ||
               (a.family == Address::Family::kIpv6 && !cur->af_only_)) {
      if (wildcard == nullptr || a.family == dst.family) wildcard = cur;
    }
  }
  return wildcard;
}

mad::ListenAddress ListenAddressOf(const Address& a, bool af_only) {
  mad::ListenAddress l;
  if (!a.is_ip()) return l;
  l.family = a.family == Address::Family::kIpv4 ? mad::ListenAddress::Family::kIpv4
                                                : mad::ListenAddress::Family::kIpv6;
  l.ip = a.ip;
  l.af_only = af_only;
  return l;
}

absl::Status Device::Claim(uint64_t sid, uint64_t mask, bool reuse,
                           const mad::ListenAddress& address, mad::ClaimKind kind) {
  const std::tuple<uint64_t, mad::ListenAddress, mad::ClaimKind> key{sid, address, kind};
  int& n = claims_[key];
  if (n == 0) {
    absl::Status s = node_->transport().ClaimService(sid, mask, reuse, address, kind);
    if (!s.ok()) {
      claims_.erase(key);
      return s;
    }
  }
  ++n;
  return absl::OkStatus();
}

void Device::Release(uint64_t sid, uint64_t mask, const mad::ListenAddress& address,
                     mad::ClaimKind kind, bool wait) {
  auto it = claims_.find(std::tuple<uint64_t, mad::ListenAddress, mad::ClaimKind>{sid, address, kind});
  if (it == claims_.end() || --it->second > 0) return;
  claims_.erase(it);
  if (wait) {
    node_->transport().ReleaseService(sid, mask, address, kind);
  } else {
    node_->transport().ReleaseServiceNoWait(sid, mask, address, kind);
  }
}

absl::Status Device::ClaimBind(CmId* id) {
  if (!id->local_.is_ip()) return absl::OkStatus();
  for (int moves = 0;; ++moves) {
    const uint64_t sid =
        mad::wire::ServiceIdFor(static_cast<mad::wire::PortSpace>(id->ps_), id->local_.port);
    absl::Status s = Claim(sid, ~uint64_t{0}, id->opts().reuse_addr,
                           ListenAddressOf(id->local_, id->af_only_), mad::ClaimKind::kBind);
    if (s.ok()) {
      id->bind_claimed_ = true;
      return s;
    }
    if (!id->ephemeral_port_ || !absl::IsAlreadyExists(s) || moves >= 256) return s;
    ++ephemeral_moves_;
    FreePort(id);
    if (absl::Status a = AllocPort(id); !a.ok()) return a;
  }
}

absl::Status Device::ClaimBindReuse(CmId* id) {
  const uint64_t sid =
      mad::wire::ServiceIdFor(static_cast<mad::wire::PortSpace>(id->ps_), id->local_.port);
  const mad::ListenAddress address = ListenAddressOf(id->local_, id->af_only_);
  auto it = claims_.find(std::tuple<uint64_t, mad::ListenAddress, mad::ClaimKind>{
      sid, address, mad::ClaimKind::kBind});
  if (it == claims_.end() || it->second != 1) return absl::OkStatus();
  return node_->transport().ClaimService(sid, ~uint64_t{0}, /*reuse=*/true, address,
                                         mad::ClaimKind::kBind);
}

bool Device::AllocLeasedPort(CmId* id) {
  const uint16_t ps = static_cast<uint16_t>(id->port_space());
  for (bool rescanned = false;;) {
    for (LeasedBlock& b : leased_blocks_) {
      if (b.port_space != ps || b.full) continue;
      if (ClaimLeasedPort(id, b)) return true;
      b.full = true;
    }
    // Ports freed since a block filled (the router gives back a port it took
    // for another client) are found again before asking for another block.
    // A block whose every port this device claimed has none: not scanned.
    if (!rescanned) {
      rescanned = true;
      bool any = false;
      for (LeasedBlock& b : leased_blocks_) {
        if (b.port_space != ps || !b.full || b.claimed == b.lease.page->size()) continue;
        b.full = false;
        any = true;
      }
      if (any) continue;
    }
    if (!LeaseBlock(ps)) return false;
    rescanned = true;
  }
}

bool Device::ClaimLeasedPort(CmId* id, LeasedBlock& b) {
  mad::PortPage& page = *b.lease.page;
  const size_t n = page.size();
  if (b.claimed == n) return false;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (b.next + k) % n;
    ++lease_ports_scanned_;
    // A byte that is not free (ours, or taken by the router) costs a load,
    // not a CAS. A port this process holds otherwise (an explicit bind, an
    // active id's pick) is left alone: the bind lists keep those apart.
    if (page.Load(i) != static_cast<uint8_t>(mad::PortPage::State::kFree)) continue;
    const uint16_t port = static_cast<uint16_t>(b.lease.first_port + i);
    auto [owners, fresh] = port_owners_.try_emplace(PortKey(id, port));
    if (!fresh) continue;
    if (!page.Claim(i)) {  // the router took it since the load
      port_owners_.erase(owners);
      continue;
    }
    ++b.claimed;
    b.next = (i + 1) % n;
    owners->second.push_back(id);
    id->local_.port = port;
    id->ephemeral_port_ = true;
    id->leased_port_ = true;
    return true;
  }
  return false;
}

bool Device::LeaseBlock(uint16_t port_space) {
  size_t& backoff = lease_backoff_[port_space];
  if (backoff > 0) {
    if (backoff != SIZE_MAX) --backoff;
    return false;
  }
  absl::StatusOr<mad::PortLease> lease = node_->transport().LeasePorts(port_space);
  if (!lease.ok()) {
    // A transport that owns the port never leases; a router out of blocks
    // for this process is asked again after a block's worth of binds.
    backoff = absl::IsUnimplemented(lease.status()) ? SIZE_MAX : 256;
    return false;
  }
  leased_blocks_.push_back(LeasedBlock{port_space, *std::move(lease)});
  return true;
}

size_t Device::leased_blocks() const {
  std::lock_guard<std::mutex> lock(node_->mutex());
  return leased_blocks_.size();
}

uint64_t Device::lease_ports_scanned() const {
  std::lock_guard<std::mutex> lock(node_->mutex());
  return lease_ports_scanned_;
}

void Device::ReleaseBind(CmId* id) {
  if (id->leased_port_) {
    id->leased_port_ = false;
    const uint16_t ps = static_cast<uint16_t>(id->port_space());
    for (LeasedBlock& b : leased_blocks_) {
      const uint32_t first = b.lease.first_port;
      if (b.port_space != ps || id->local_.port < first ||
          id->local_.port >= first + b.lease.page->size()) {
        continue;
      }
      const size_t i = id->local_.port - first;
      b.lease.page->Free(i);
      --b.claimed;  // b.next stays: a port just freed is not the next one
                    // given (cma_alloc_any_port's last_used_port)
      b.full = false;
      break;
    }
    return;
  }
  if (!id->bind_claimed_) return;
  id->bind_claimed_ = false;
  // An ephemeral port is this process's pick: no other process waits for it
  // by name (one whose pick finds it still taken moves on, ClaimBind), so its
  // destroy need not wait for uscmd's answer (a round trip per id: cmtime's
  // destroy step, docs/ROUTER.md "Claims").
  Release(mad::wire::ServiceIdFor(static_cast<mad::wire::PortSpace>(id->ps_), id->local_.port),
          ~uint64_t{0}, ListenAddressOf(id->local_, id->af_only_), mad::ClaimKind::kBind,
          /*wait=*/!id->ephemeral_port_);
}

}  // namespace uscm
