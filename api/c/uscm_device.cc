// uscm_device_open / uscm_device_close: a real port for C programs, owned by
// uscm (the transport, the Device and its progress thread).
#include "api/c/uscm_device.h"

#include <errno.h>
#include <infiniband/umad.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <string.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/c/router_on_demand.h"
#include "api/c/c_api_internal.h"
#include "api/c/uscm_device_on.h"
#include "cm/router/router_transport.h"
#include "mad/umad_transport.h"
#include "verbs/gid_table.h"
#include "verbs/ipoib.h"
#include "verbs/neighbours.h"
#include "verbs/roce_addressing.h"

namespace {

struct OpenedDevice {
  std::string ca;
  int port = 0;
  ibv_context* verbs = nullptr;  // the caller's (OpenDeviceOn), never closed here
  std::unique_ptr<uscm::mad::Transport> transport;
  std::unique_ptr<uscm::verbs::RoceAddressing> roce;  // RoCE: wraps `transport`
  std::unique_ptr<uscm::Device> device;  // destroyed before its transport
};

std::mutex g_opened_mu;  // Opened()
absl::flat_hash_map<uscm_device*, std::unique_ptr<OpenedDevice>>& Opened() {
  static auto* m = new absl::flat_hash_map<uscm_device*, std::unique_ptr<OpenedDevice>>();
  return *m;
}

int ErrnoFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound: return ENODEV;
    case absl::StatusCode::kPermissionDenied: return EACCES;
    case absl::StatusCode::kFailedPrecondition: return EBUSY;  // CM class taken, no router
    case absl::StatusCode::kUnavailable: return EBUSY;
    default: return EIO;
  }
}

uscm_device* Failed(int err, const std::string& message) {
  uscm_fail_with(err, message.c_str());
  return nullptr;
}

// The port's IP addresses as its RoCE GID table shows them: IPv4 for every
// ::ffff:a.b.c.d GID, IPv6 for every other, link-local fe80:: ones included
// (the kernel's roce_gid_mgmt puts the netdev's IPv6 addresses in the table,
// its link-local one too, and rdma_cm binds and resolves them given the
// interface: Address::scope_id).
std::vector<uscm::Address> IpsOfGids(const std::vector<uscm::mad::Gid>& gids) {
  std::vector<uscm::Address> ips;
  for (const uscm::mad::Gid& g : gids) {
    if (g.is_zero()) continue;
    uscm::Address a;
    if (uscm::verbs::IsIpv4Mapped(g)) {
      a.family = uscm::Address::Family::kIpv4;
      for (int i = 12; i < 16; ++i) a.ip[i] = g.raw[i];
    } else {
      a.family = uscm::Address::Family::kIpv6;
      a.ip = g.raw;
    }
    bool seen = false;
    for (const uscm::Address& b : ips) seen |= b.SameHost(a);
    if (!seen) ips.push_back(a);
  }
  return ips;
}

// DeviceOptions::resolve_neighbour on a real port: the kernel's route and
// neighbour tables (verbs/neighbours.h), as rdma_resolve_ip reads them. The
// GID on InfiniBand is in the IPoIB hardware address; on RoCE it is the IP's.
// One NETLINK_ROUTE socket per device, opened at the first question and shared
// by the calling threads and the device's resolver thread (a libnl socket is
// not thread-safe; the device asks with a zero timeout, so no one waits long).
class NeighbourResolver {
 public:
  explicit NeighbourResolver(bool ethernet) : ethernet_(ethernet) {}

  absl::StatusOr<absl::optional<uscm::mad::Gid>> Resolve(const uscm::Address& src,
                                                         const uscm::Address& dst,
                                                         uscm::mad::Duration timeout) {
    absl::optional<uscm::verbs::IpAddr> from;
    if (src.is_ip() && !src.is_any() && src.family == dst.family) from = ToIp(src);
    const auto ms = std::chrono::milliseconds(std::max<int64_t>(timeout.nanos() / 1000000, 0));
    absl::StatusOr<std::vector<uint8_t>> hw = Hardware(ToIp(dst), from, ms);
    if (!hw.ok()) return hw.status();
    if (ethernet_ || hw->empty()) return absl::optional<uscm::mad::Gid>();
    absl::optional<uscm::mad::Gid> gid = uscm::verbs::GidOfIpoibLladdr(*hw);
    if (!gid.has_value()) {
      return absl::NotFoundError(absl::StrCat("the neighbour entry of ", dst.ToString(), " has a ",
                                              hw->size(), "-byte hardware address, not IPoIB's 20"));
    }
    return gid;
  }

  // DeviceOptions::route_to: the routing table's source for `dst` and the
  // route's output netdev (NeighbourTable::Route).
  absl::optional<uscm::DeviceOptions::Route> RouteTo(const uscm::Address& dst) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!OpenTableLocked().ok()) return absl::nullopt;
    absl::StatusOr<uscm::verbs::RouteToHost> r = table_->Route(ToIp(dst), absl::nullopt);
    if (!r.ok() || r->source.family != ToIp(dst).family) return absl::nullopt;
    uscm::DeviceOptions::Route route;
    route.source.family = dst.family;
    if (dst.family == uscm::Address::Family::kIpv4) {
      memcpy(&route.source.ip[12], r->source.ip.data(), 4);
    } else {
      route.source.ip = r->source.ip;
    }
    route.ifindex = r->ifindex;
    return route;
  }

  // DeviceOptions::netdev_of: the netdev the kernel's rdma_bind_addr puts a
  // given IP source on (NeighbourTable::NetdevOfSource), 0 when not known.
  int NetdevOf(const uscm::Address& local) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!OpenTableLocked().ok()) return 0;
    absl::StatusOr<int> netdev = table_->NetdevOfSource(ToIp(local));
    return netdev.ok() ? *netdev : 0;
  }

  // DeviceOptions::route_back_on: the kernel's validate_net_dev, on the same
  // socket (NeighbourTable::RouteLeavesOn), its answers kept until a route,
  // rule, address or link changes (RouteBackCache): a REQ from a source
  // already answered asks no netlink round trip under the device lock.
  absl::Status RouteBackOn(const uscm::Address& local, const uscm::Address& remote, int ifindex) {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status s = OpenTableLocked(); !s.ok()) return s;
    if (!route_back_.has_value()) route_back_.emplace();
    return route_back_->RouteLeavesOn(*table_, ToIp(remote), ToIp(local), ifindex);
  }

  // DeviceOptions::ipoib_netdev_of on an InfiniBand port: the ifindex of the
  // request's IPoIB netdev (verbs::IpoibNetdevOfRequest) when it is up, 0
  // when none is or it is down, -1 when no IPoIB netdev carries the port's
  // GID. The port's netdevs are read from sysfs once and kept until a link
  // (or route, rule, address) changes: RouteBackCache's watch.
  int IpoibNetdevOf(const uscm::mad::Gid& port_gid, uint16_t pkey, const uscm::Address& local) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!route_back_.has_value()) route_back_.emplace();
    const std::vector<uscm::verbs::IpoibNetdev>& netdevs =
        ipoib_.Of(port_gid, route_back_->Generation());
    if (netdevs.empty()) return -1;
    const bool ipv6 = local.family == uscm::Address::Family::kIpv6;
    std::array<uint8_t, 16> ip = local.ip;  // an IPv4 one as ::ffff:a.b.c.d (InterfaceAddress)
    if (!ipv6) {
      std::fill(ip.begin(), ip.begin() + 10, 0);
      ip[10] = ip[11] = 0xff;
    }
    const uscm::verbs::IpoibNetdev* n = uscm::verbs::IpoibNetdevOfRequest(netdevs, pkey, ipv6, ip);
    return n != nullptr && n->up ? n->ifindex : 0;
  }

 private:
  static uscm::verbs::IpAddr ToIp(const uscm::Address& a) {
    uscm::verbs::IpAddr ip;
    ip.family = a.family == uscm::Address::Family::kIpv4 ? AF_INET : AF_INET6;
    if (ip.family == AF_INET) {
      memcpy(ip.ip.data(), &a.ip[12], 4);
    } else {
      ip.ip = a.ip;
      ip.scope_id = a.scope_id;
    }
    return ip;
  }
  absl::StatusOr<std::vector<uint8_t>> Hardware(const uscm::verbs::IpAddr& dst,
                                                const absl::optional<uscm::verbs::IpAddr>& from,
                                                std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status s = OpenTableLocked(); !s.ok()) return s;
    return table_->Resolve(dst, from, timeout);
  }
  absl::Status OpenTableLocked() {
    if (table_.has_value()) return absl::OkStatus();
    absl::StatusOr<uscm::verbs::NeighbourTable> t = uscm::verbs::NeighbourTable::Open();
    if (!t.ok()) return t.status();
    table_.emplace(std::move(*t));
    return absl::OkStatus();
  }

  const bool ethernet_;
  std::mutex mu_;
  absl::optional<uscm::verbs::NeighbourTable> table_;
  absl::optional<uscm::verbs::RouteBackCache> route_back_;
  uscm::verbs::IpoibNetdevCache ipoib_;  // IpoibNetdevOf's
};

// What uscm_device_open reads of a RoCE port: its GID table with only its
// RoCE v2 entries (a dual-mode port lists each address twice, and the
// kernel's rdma_cm speaks v2 by default; an entry whose type is unknown
// stays) and its active MTU (IBA enum), as rdma_cm puts it in the REQ on
// RoCE; 3 (1024) when libibverbs cannot tell.
struct RocePort {
  std::vector<uscm::mad::Gid> v2_gids;
  std::vector<int> ifindexes;  // v2_gids[i]'s netdev (0: not known)
  uint8_t active_mtu = 3;
};

// One context of `ca` answers both: the port query and one
// ibv_query_gid_table (verbs/gid_table.h). The table was 513 sysfs files per
// process (each index's gid and type) plus a context opened for the MTU.
// `verbs`: the caller's context of `ca` (OpenDeviceOn); nullptr: one is
// opened and closed here. Without a context, the table comes from sysfs.
absl::StatusOr<RocePort> ReadRocePort(const std::string& ca, int port, ibv_context* verbs) {
  RocePort out;
  ibv_context* ctx = verbs;
  if (ctx == nullptr) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    for (int i = 0; list != nullptr && i < n && ctx == nullptr; ++i) {
      if (ca == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
    }
    if (list != nullptr) ibv_free_device_list(list);
  }
  size_t max_entries = 0;
  ibv_port_attr pa;
  ibv_device_attr da;
  if (ctx != nullptr && ibv_query_port(ctx, static_cast<uint8_t>(port), &pa) == 0) {
    out.active_mtu = static_cast<uint8_t>(pa.active_mtu);
    if (ibv_query_device(ctx, &da) == 0 && pa.gid_tbl_len > 0) {
      max_entries = static_cast<size_t>(pa.gid_tbl_len) * da.phys_port_cnt;
    }
  }
  absl::StatusOr<std::vector<uscm::verbs::GidTableEntry>> table =
      uscm::verbs::ReadPortGidTable(ctx, ca, port, max_entries);
  if (ctx != nullptr && ctx != verbs) ibv_close_device(ctx);
  if (!table.ok()) return table.status();
  out.v2_gids.reserve(table->size());
  for (const uscm::verbs::GidTableEntry& e : *table) {
    out.v2_gids.push_back(e.not_v2 ? uscm::mad::Gid{} : e.gid);
    out.ifindexes.push_back(e.ifindex);
  }
  return out;
}

// The IP addresses of the port's IPoIB interfaces (hardware address with
// the port's GID), as rdma_cm binds and resolves on IB.
std::vector<uscm::Address> IpoibIps(const uscm::mad::Gid& port_gid) {
  std::vector<uscm::Address> ips;
  for (const uscm::verbs::InterfaceAddress& i : uscm::verbs::IpoibAddressesOf(port_gid)) {
    uscm::Address a;
    a.family = i.ipv6 ? uscm::Address::Family::kIpv6 : uscm::Address::Family::kIpv4;
    if (i.ipv6) {
      a.ip = i.ip;
    } else {
      std::copy(i.ip.begin() + 12, i.ip.end(), a.ip.begin() + 12);  // ::ffff: dropped
    }
    ips.push_back(a);
  }
  return ips;
}

}  // namespace

namespace uscm::c_api {

uscm_device* OpenDevice(const char* ca_name, int port_num, ibv_context* verbs) {
  // The port: as given, or libibumad's default (the first ACTIVE one). On the
  // caller's context, one ibv_query_port (libibumad reads 13 sysfs files).
  const std::string no_port = absl::StrCat(
      "device_open: no RDMA port ", ca_name != nullptr ? ca_name : "(first active)", ":",
      port_num, " (is a device present in /sys/class/infiniband and ib_umad loaded? "
      "without hardware use the simulated fabric)");
  std::string ca;
  int port = port_num;
  bool ethernet = false;
  if (verbs != nullptr) {
    ibv_port_attr pa;
    if (ca_name == nullptr || ibv_query_port(verbs, static_cast<uint8_t>(port_num), &pa) != 0) {
      return Failed(ENODEV, no_port);
    }
    ca = ca_name;
    ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  } else {
    umad_port_t p;
    memset(&p, 0, sizeof(p));
    if (umad_get_port(ca_name, port_num, &p) < 0) return Failed(ENODEV, no_port);
    ca = p.ca_name;
    port = p.portnum;
    ethernet = strcmp(p.link_layer, "Ethernet") == 0;
    umad_release_port(&p);
  }
  uscm::DeviceOptions options;
  std::vector<uscm::mad::Gid> gids;
  if (ethernet) {
    // RoCE: no SA, no ARP in uscm. Addresses and paths come from the port's
    // GID table (the netdev's IPs), MADs leave from the GID of the
    // destination's family (RoceAddressing).
    absl::StatusOr<RocePort> read = ReadRocePort(ca, port, verbs);
    if (!read.ok()) {
      return Failed(ENODEV, absl::StrCat("device_open: ", read.status().message()));
    }
    gids = std::move(read->v2_gids);
    options.local_ips = IpsOfGids(gids);
    options.roce = true;
    options.roce_path_mtu = read->active_mtu;
    // Multicast without SA (api/rdma_cm/roce_multicast.h): the GID table and the
    // netdev's IP memberships.
    options.roce_gids = gids;
    options.roce_gid_ifindexes = std::move(read->ifindexes);
    options.ip_multicast = std::make_shared<uscm::cm::NetdevIpMulticast>();
  }
  uscm::mad::UmadOptions o;
  o.ca_name = ca;
  o.port_num = port;
  o.register_sa = !ethernet;  // no SA on RoCE
  // No router for the port yet: start the host's uscmd (router_on_demand.h),
  // unless told not to; then the router, or the port itself. Another process
  // owns the CM class (EINVAL from umad_register): the host's uscmd for this
  // port, as the tools do (docs/ROUTER.md).
  uscm::c_api::StartRouterOnDemand(ca, port);
  auto transport = uscm::router::OpenOwnerOrRouter(
      [&]() -> absl::StatusOr<std::unique_ptr<uscm::mad::Transport>> {
        auto u = uscm::mad::UmadTransport::Open(o);
        if (!u.ok()) return u.status();
        return std::unique_ptr<uscm::mad::Transport>(std::move(*u));
      },
      uscm::router::DefaultRouterSocket(ca, port));
  if (!transport.ok()) {
    return Failed(ErrnoFor(transport.status()),
                  absl::StrCat("device_open: ", transport.status().message()));
  }
  if (!ethernet) options.local_ips = IpoibIps((*transport)->port().gid);
  auto neighbours = std::make_shared<NeighbourResolver>(ethernet);
  options.resolve_neighbour = [neighbours](const uscm::Address& src, const uscm::Address& dst,
                                           uscm::mad::Duration timeout) {
    return neighbours->Resolve(src, dst, timeout);
  };
  options.route_to = [neighbours](const uscm::Address& dst) { return neighbours->RouteTo(dst); };
  // The kernel's validate_net_dev for a request with an IP header: on RoCE
  // on its GID entry's netdev, on InfiniBand on its IPoIB netdev.
  options.route_back_on = [neighbours](const uscm::Address& local, const uscm::Address& remote,
                                       int ifindex) {
    return neighbours->RouteBackOn(local, remote, ifindex);
  };
  if (ethernet) {
    options.netdev_of = [neighbours](const uscm::Address& local) {
      return neighbours->NetdevOf(local);
    };
  } else {
    options.ipoib_netdev_of = [neighbours, gid = (*transport)->port().gid](
                                  uint16_t pkey, const uscm::Address& local) {
      return neighbours->IpoibNetdevOf(gid, pkey, local);
    };
  }
  auto opened = std::make_unique<OpenedDevice>();
  opened->ca = ca;
  opened->port = port;
  opened->verbs = verbs;
  opened->transport = std::move(*transport);
  uscm::mad::Transport* t = opened->transport.get();
  if (ethernet) {
    opened->roce = std::make_unique<uscm::verbs::RoceAddressing>(*t, gids);
    t = opened->roce.get();
  }
  auto device = uscm::Device::Create(*t, options);
  if (!device.ok()) {
    return Failed(ErrnoFor(device.status()),
                  absl::StrCat("device_open: ", device.status().message()));
  }
  opened->device = std::move(*device);
  if (absl::Status s = opened->device->StartProgressThread(); !s.ok()) {
    return Failed(EIO, absl::StrCat("device_open: progress thread: ", s.message()));
  }
  uscm_device* handle = uscm_device_wrap(opened->device.get());
  std::lock_guard<std::mutex> lock(g_opened_mu);
  Opened()[handle] = std::move(opened);
  return handle;
}

// The opened devices' lock (this file's), then the handle tables' (the C
// API's, c_api_internal.h); neither is taken under the other.
void LockHandlesForFork() {
  g_opened_mu.lock();
  uscm::c_api::g_mu.lock();
}

void UnlockHandlesAfterFork() {
  uscm::c_api::g_mu.unlock();
  g_opened_mu.unlock();
}

uscm_device* OpenDeviceOn(ibv_context* verbs, int port_num) {
  if (verbs == nullptr) return Failed(EINVAL, "device_open: no device context");
  return OpenDevice(ibv_get_device_name(verbs->device), port_num, verbs);
}

}  // namespace uscm::c_api

extern "C" struct uscm_device* uscm_device_open(const char* ca_name, int port_num) {
  return uscm::c_api::OpenDevice(ca_name, port_num, nullptr);
}

extern "C" int uscm_device_add_neighbor(struct uscm_device* dev, const struct uscm_addr* ip,
                                        const uint8_t gid[16]) {
  if (ip == nullptr || gid == nullptr ||
      (ip->family != USCM_AF_INET && ip->family != USCM_AF_INET6)) {
    return uscm_fail_with(EINVAL, "device_add_neighbor: needs an IPv4 / IPv6 address and a GID");
  }
  uscm::Address a;
  a.family = ip->family == USCM_AF_INET ? uscm::Address::Family::kIpv4
                                        : uscm::Address::Family::kIpv6;
  memcpy(a.ip.data(), ip->ip, 16);
  uscm::mad::Gid g;
  memcpy(g.raw.data(), gid, 16);
  std::lock_guard<std::mutex> lock(g_opened_mu);
  auto it = Opened().find(dev);
  if (dev == nullptr || it == Opened().end()) {
    return uscm_fail_with(EINVAL,
                          "device_add_neighbor: unknown device (not from uscm_device_open)");
  }
  absl::Status s = it->second->device->AddNeighbor(a, g, 0);
  if (!s.ok()) return uscm_fail_with(EINVAL, std::string(s.message()).c_str());
  return 0;
}

extern "C" int uscm_device_set_progress_hook(struct uscm_device* dev, void (*hook)(void*),
                                             void* arg) {
  std::lock_guard<std::mutex> lock(g_opened_mu);
  auto it = Opened().find(dev);
  if (dev == nullptr || it == Opened().end()) {
    return uscm_fail_with(EINVAL,
                          "device_set_progress_hook: unknown device (not from uscm_device_open)");
  }
  it->second->device->SetAfterProgress(hook, arg);
  return 0;
}

extern "C" int uscm_device_transport_lost(struct uscm_device* dev, char* why, size_t len) {
  if (dev == nullptr || dev->dev == nullptr) {
    return uscm_fail_with(EINVAL, "device_transport_lost: NULL device");
  }
  const absl::Status lost = dev->dev->node().TransportStatus();
  if (lost.ok()) return 0;
  if (why != nullptr && len > 0) {
    const size_t n = std::min(len - 1, lost.message().size());
    memcpy(why, lost.message().data(), n);
    why[n] = '\0';
  }
  return 1;
}

extern "C" int uscm_device_reread_addresses(struct uscm_device* dev) {
  OpenedDevice* opened = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_opened_mu);
    auto it = Opened().find(dev);
    if (dev == nullptr || it == Opened().end()) {
      return uscm_fail_with(EINVAL,
                            "device_reread_addresses: unknown device (not from uscm_device_open)");
    }
    opened = it->second.get();  // stays until uscm_device_close, which the caller does not race
  }
  // Read without a lock (the GID table, getifaddrs), set under the device's.
  if (opened->roce == nullptr) {
    opened->device->SetPortAddresses(IpoibIps(opened->transport->port().gid), {});
    return 0;
  }
  absl::StatusOr<RocePort> read = ReadRocePort(opened->ca, opened->port, opened->verbs);
  if (!read.ok()) {
    return uscm_fail_with(ENODEV,
                          absl::StrCat("device_reread_addresses: ", read.status().message()).c_str());
  }
  opened->device->SetPortAddresses(IpsOfGids(read->v2_gids), read->v2_gids,
                                   std::move(read->ifindexes));
  opened->roce->SetGids(std::move(read->v2_gids));
  return 0;
}

extern "C" int uscm_device_close(struct uscm_device* dev) {
  std::unique_ptr<OpenedDevice> opened;
  {
    std::lock_guard<std::mutex> lock(g_opened_mu);
    auto it = Opened().find(dev);
    if (dev == nullptr || it == Opened().end()) {
      return uscm_fail_with(EINVAL, "device_close: unknown device (NULL, already closed, or "
                                    "not from uscm_device_open)");
    }
    if (const size_t ids = it->second->device->id_count(); ids != 0) {
      return uscm_fail_with(EBUSY, absl::StrCat("device_close: ", ids,
                                                " id(s) of this device still exist; destroy "
                                                "them (and its event channels) first")
                                       .c_str());
    }
    opened = std::move(it->second);
    Opened().erase(it);
  }
  opened->device->StopProgressThread();
  uscm_device_unwrap_free(dev);
  return 0;  // `opened` goes: the Device, then its transport
}
