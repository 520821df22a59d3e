// uscm rdma_cm API: addresses, the device, and the id's addressing calls
// (bind, route, the getters of its address, route and state). The event
// channel is in event_channel.cc; the id's options, QP, ECE and channel
// (set_option, set_qp_type, init_qp_attr, set_qp, migrate, ECE) in
// rdma_cm_options.cc; the ports in rdma_cm_ports.cc, resolve in
// rdma_cm_resolve.cc, connections in rdma_cm_conn.cc.
// What the runtime does with CM / SA events is in rdma_cm_events.cc.
#include "api/rdma_cm/rdma_cm.h"

#include <cstdio>

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/rdma_cm/call_errors.h"
#include "mad/status_errno.h"
#include "mad/wire/cma_header.h"
#include "sa/client.h"

namespace uscm {

namespace {

using internal::Prefix;
using internal::WrongState;

using mad::TimePoint;

uint64_t Pack(uint32_t index, uint32_t generation) {
  return uint64_t{index} << 32 | generation;
}

}  // namespace

// ---------------------------------------------------------------- names

const char* EventTypeName(EventType t) {
  static const char* const kNames[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",
      "RDMA_CM_EVENT_ROUTE_RESOLVED",   "RDMA_CM_EVENT_ROUTE_ERROR",
      "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",
      "RDMA_CM_EVENT_REJECTED",         "RDMA_CM_EVENT_ESTABLISHED",
      "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",
      "RDMA_CM_EVENT_ADDR_CHANGE",      "RDMA_CM_EVENT_TIMEWAIT_EXIT",
  };
  const int i = static_cast<int>(t);
  return i >= 0 && i < 16 ? kNames[i] : "UNKNOWN EVENT";
}

const char* IdStateName(IdState s) {
  switch (s) {
    case IdState::kIdle: return "IDLE";
    case IdState::kAddrQuery: return "ADDR_QUERY";
    case IdState::kAddrResolved: return "ADDR_RESOLVED";
    case IdState::kRouteQuery: return "ROUTE_QUERY";
    case IdState::kRouteResolved: return "ROUTE_RESOLVED";
    case IdState::kConnect: return "CONNECT";
    case IdState::kConnectResponse: return "CONNECT_RESPONSE";
    case IdState::kListen: return "LISTEN";
    case IdState::kConnectRequest: return "CONNECT_REQUEST";
    case IdState::kAccepted: return "ACCEPTED";
    case IdState::kEstablished: return "ESTABLISHED";
    case IdState::kDisconnect: return "DISCONNECT";
    case IdState::kDestroying: return "DESTROYING";
  }
  return "?";
}

// ---------------------------------------------------------------- Address

Address Address::Ipv4(uint32_t host_order, uint16_t port) {
  Address a;
  a.family = Family::kIpv4;
  a.ip[12] = host_order >> 24;
  a.ip[13] = host_order >> 16;
  a.ip[14] = host_order >> 8;
  a.ip[15] = host_order;
  a.port = port;
  return a;
}

Address Address::Ipv6(const std::array<uint8_t, 16>& ip, uint16_t port) {
  Address a;
  a.family = Family::kIpv6;
  a.ip = ip;
  a.port = port;
  return a;
}

Address Address::Ib(const mad::Gid& gid, uint16_t lid, uint64_t service_id, uint16_t pkey) {
  Address a;
  a.family = Family::kIb;
  a.gid = gid;
  a.lid = lid;
  a.service_id = service_id;
  a.pkey = pkey;
  return a;
}

absl::StatusOr<Address> Address::Parse(absl::string_view text) {
  std::string host(text);
  uint16_t port = 0;
  auto parse_port = [&](absl::string_view p) -> absl::Status {
    uint32_t v = 0;
    if (!absl::SimpleAtoi(p, &v) || v > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("address '", text, "': bad port '", p, "'"));
    }
    port = static_cast<uint16_t>(v);
    return absl::OkStatus();
  };
  if (!host.empty() && host[0] == '[') {
    const size_t close = host.find(']');
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("address '", text, "': missing ']'"));
    }
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') {
        return absl::InvalidArgumentError(absl::StrCat("address '", text, "': expected ':port'"));
      }
      absl::Status s = parse_port(absl::string_view(host).substr(close + 2));
      if (!s.ok()) return s;
    }
    host = host.substr(1, close - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    const size_t colon = host.find(':');
    absl::Status s = parse_port(absl::string_view(host).substr(colon + 1));
    if (!s.ok()) return s;
    host = host.substr(0, colon);
  }
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return Ipv4(ntohl(v4.s_addr), port);
  std::array<uint8_t, 16> v6;
  if (inet_pton(AF_INET6, host.c_str(), v6.data()) == 1) return Ipv6(v6, port);
  return absl::InvalidArgumentError(
      absl::StrCat("address '", text, "' is neither IPv4 nor IPv6 (AF_IB: use Address::Ib)"));
}

bool Address::is_any() const {
  if (family == Family::kIb) return gid.is_zero();
  return std::all_of(ip.begin(), ip.end(), [](uint8_t b) { return b == 0; });
}

bool Address::is_loopback() const {
  if (family == Family::kIpv4) return ip[12] == 127;
  if (family == Family::kIpv6) {
    return std::all_of(ip.begin(), ip.end() - 1, [](uint8_t b) { return b == 0; }) && ip[15] == 1;
  }
  return false;
}

bool Address::is_multicast() const {
  if (family == Family::kIpv4) return (ip[12] & 0xF0) == 0xE0;
  if (family == Family::kIpv6) return ip[0] == 0xFF;
  if (family == Family::kIb) return gid.raw[0] == 0xFF;
  return false;
}

uint32_t Address::ipv4() const {
  return uint32_t{ip[12]} << 24 | uint32_t{ip[13]} << 16 | uint32_t{ip[14]} << 8 | ip[15];
}

std::string Address::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  switch (family) {
    case Family::kIpv4: {
      in_addr a;
      a.s_addr = htonl(ipv4());
      inet_ntop(AF_INET, &a, buf, sizeof buf);
      return absl::StrCat(buf, ":", port);
    }
    case Family::kIpv6:
      inet_ntop(AF_INET6, ip.data(), buf, sizeof buf);
      if (scope_id != 0) return absl::StrCat("[", buf, "%", scope_id, "]:", port);
      return absl::StrCat("[", buf, "]:", port);
    case Family::kIb:
      return absl::StrCat("ib:", gid.ToString(), "/lid ", lid, "/sid 0x",
                          absl::Hex(service_id), "/pkey 0x", absl::Hex(pkey));
    case Family::kUnspec:
      break;
  }
  return "unspecified";
}

bool Address::is_link_local() const {
  return family == Family::kIpv6 && ip[0] == 0xFE && (ip[1] & 0xC0) == 0x80;
}

bool Address::SameHost(const Address& o) const {
  if (family != o.family) return false;
  if (family == Family::kIb) return gid == o.gid;
  return ip == o.ip;
}

// ---------------------------------------------------------------- Device


Device::Device(std::unique_ptr<cm::Node> node, cm::RealNode* real, DeviceOptions options)
    : node_(std::move(node)), real_(real), options_(std::move(options)) {
  rng_state_ = options_.node.seed.value_or(1) * 0x9e3779b97f4a7c15ULL + 1;
  if (options_.ephemeral_low == 0 || options_.ephemeral_low > options_.ephemeral_high) {
    options_.ephemeral_low = 32768;
    options_.ephemeral_high = 60999;
  }
  const uint32_t span = uint32_t{options_.ephemeral_high} - options_.ephemeral_low + 1;
  // A start of its own for every process, without drawing from rng_state_
  // (the PSNs stay as they were for a seed).
  next_port_ = options_.ephemeral_start.value_or(
      static_cast<uint16_t>(options_.ephemeral_low + (rng_state_ >> 17) % span));
  node_->set_observer(this);
}

absl::StatusOr<std::unique_ptr<Device>> Device::CreateSimulated(sim::Scheduler& scheduler,
                                                                mad::Transport& transport,
                                                                std::function<bool()> has_input,
                                                                DeviceOptions options) {
  options.node.cm.rep_for_duplicate_req = false;  // as the kernel's cm_dup_req_handler
  auto node = std::make_unique<cm::SimNode>(scheduler, transport, std::move(has_input),
                                            options.node);
  return std::unique_ptr<Device>(new Device(std::move(node), nullptr, std::move(options)));
}

absl::StatusOr<std::unique_ptr<Device>> Device::Create(mad::Transport& transport,
                                                       DeviceOptions options) {
  if (!options.node.seed.has_value()) options.node.seed = cm::RandomSeed();
  options.node.cm.rep_for_duplicate_req = false;  // as the kernel's cm_dup_req_handler
  if (options.ephemeral_low == 32768 && options.ephemeral_high == 60999) {
    mad::ReadLocalPortRange(&options.ephemeral_low, &options.ephemeral_high);
  }
  if (!options.bindv6only) options.bindv6only = ReadBindV6Only();
  auto node = cm::RealNode::Create(transport, options.node);
  if (!node.ok()) return node.status();
  cm::RealNode* real = node->get();
  return std::unique_ptr<Device>(new Device(std::move(*node), real, std::move(options)));
}

Device::~Device() {
  StopResolver();
  if (real_ != nullptr) real_->StopProgressThread();
  node_->set_observer(nullptr);
}

absl::StatusOr<std::unique_ptr<EventChannel>> Device::CreateEventChannel() {
  return std::unique_ptr<EventChannel>(new EventChannel(this));
}

Device::IpKeyBytes Device::IpKey(const Address& a) {
  IpKeyBytes k;
  std::copy(a.ip.begin(), a.ip.end(), k.begin());
  k[16] = a.family == Address::Family::kIpv4 ? 4 : 6;
  return k;
}

mad::Gid RoceGidOf(const Address& ip) {
  mad::Gid g;
  if (ip.family == Address::Family::kIpv6) {
    g.raw = ip.ip;
    return g;
  }
  g.raw[10] = 0xFF;
  g.raw[11] = 0xFF;
  for (int i = 12; i < 16; ++i) g.raw[i] = ip.ip[i];
  return g;
}

int RoceSourceGidIndex(const DeviceOptions& o, const Address& local, int netdev) {
  const mad::Gid gid = RoceGidOf(local);
  const int on = netdev != 0 ? netdev : static_cast<int>(local.scope_id);
  int first = -1;
  for (size_t i = 0; i < o.roce_gids.size(); ++i) {
    if (o.roce_gids[i] != gid) continue;
    if (on != 0 && i < o.roce_gid_ifindexes.size() && o.roce_gid_ifindexes[i] == on) {
      return static_cast<int>(i);
    }
    if (first < 0) first = static_cast<int>(i);
  }
  return first;
}

cm::PathInfo RocePath(const Address& local, const Address& remote, uint8_t mtu, uint8_t tos) {
  cm::PathInfo p;
  p.local_lid = mad::kPermissiveLid;
  p.remote_lid = mad::kPermissiveLid;
  p.local_gid = RoceGidOf(local);
  p.remote_gid = RoceGidOf(remote);
  const bool link_local = remote.family == Address::Family::kIpv6 && remote.ip[0] == 0xFE &&
                          (remote.ip[1] & 0xC0) == 0x80;
  p.hop_limit = link_local ? 1 : 64;
  p.subnet_local = true;  // the GRH comes from the Ethernet link layer
  p.traffic_class = tos;
  p.local_ack_timeout = 19;
  p.packet_life_time = 18;
  p.mtu = mtu >= 1 && mtu <= 5 ? mtu : 3;
  p.flow_label = RoceFlowLabel(local, remote);
  return p;
}

uint32_t RoceFlowLabel(const Address& local, const Address& remote) {
  const uint32_t given = local.family == Address::Family::kIpv6 ? local.flowinfo & 0xFFFFF : 0;
  return given != 0 ? given : RoceFlowLabel(local.port, remote.port);
}

uint32_t RoceFlowLabel(uint16_t source_port, uint16_t destination_port) {
  return (uint32_t{source_port} * 31 + destination_port) & 0xFFFFF;
}

absl::Status Device::AddNeighbor(const Address& ip, const mad::Gid& gid, uint16_t lid) {
  if (!ip.is_ip()) return absl::InvalidArgumentError("add_neighbor: not an IP address");
  std::lock_guard<std::mutex> lock(node_->mutex());
  neighbors_[IpKey(ip)] = Neighbor{gid, lid};
  return absl::OkStatus();
}

absl::Status Device::AddLocalAddress(const Address& ip) {
  if (!ip.is_ip()) return absl::InvalidArgumentError("add_local_address: not an IP address");
  std::lock_guard<std::mutex> lock(node_->mutex());
  options_.local_ips.push_back(ip);
  neighbors_[IpKey(ip)] = Neighbor{node_->port().gid, node_->port().lid};
  return absl::OkStatus();
}

void Device::SetPortAddresses(std::vector<Address> local_ips, std::vector<mad::Gid> roce_gids,
                              std::vector<int> roce_gid_ifindexes) {
  std::lock_guard<std::mutex> lock(node_->mutex());
  options_.local_ips = std::move(local_ips);
  options_.roce_gids = std::move(roce_gids);
  options_.roce_gid_ifindexes = std::move(roce_gid_ifindexes);
}

absl::StatusOr<int> Device::Poll(mad::Duration timeout) {
  if (real_ == nullptr) {
    return absl::FailedPreconditionError("poll: a simulated device is driven by the scheduler");
  }
  return real_->Poll(timeout);
}

void Device::SetAfterProgress(void (*fn)(void*), void* arg) {
  if (real_ != nullptr) real_->SetAfterStep(fn, arg);
}

absl::Status Device::StartProgressThread() {
  if (real_ == nullptr) {
    return absl::FailedPreconditionError(
        "progress thread: a simulated device is driven by the scheduler");
  }
  return real_->StartProgressThread();
}

void Device::StopProgressThread() {
  if (real_ != nullptr) real_->StopProgressThread();
}

size_t Device::id_count() const {
  std::lock_guard<std::mutex> lock(node_->mutex());
  return ids_.size();
}

CmId* Device::NewId(EventChannel* ch, void* ctx, PortSpace ps) {
  auto id = std::unique_ptr<CmId>(new CmId(this, ch, ctx, ps));
  CmId* raw = id.get();
  ids_.emplace(raw, std::move(id));
  return raw;
}

void Device::FreeId(CmId* id) {
  if (id->conn_.valid()) {
    (void)node_->cm().Destroy(node_->Now(), id->conn_);
    by_conn_.Erase(id->conn_);
  }
  if (id->listen_.valid()) {
    (void)node_->cm().StopListening(id->listen_);
    Release(id->listen_sid_, id->listen_mask_, id->listen_address_);
    by_listen_.erase(Pack(id->listen_.index, id->listen_.generation));
  }
  if (id->sa_query_ != 0) by_query_.erase(id->sa_query_);
  for (const CmId::McJoinState& j : id->joins_) {
    if (!j.roce) (void)node_->mc().Leave(node_->Now(), j.ticket);
    if (j.attached && id->qp_ != nullptr) (void)id->qp_->DetachMulticast(j.mgid, j.mlid);  // [fabric]
    by_ticket_.erase(j.ticket);
  }
  if (id->bound_ && id->local_.is_ip()) {
    ReleaseBind(id);
    FreePort(id);
  }
  ids_.erase(id);
}

void Device::PostEvent(CmId* id, std::unique_ptr<Event> e) {
  e->id = id;
  id->channel_->Push(std::move(e));
}

void Device::Post(CmId* id, EventType t, int status, std::string detail) {
  std::unique_ptr<Event> e = id->channel_->NewEvent();
  e->event = t;
  e->status = status;
  e->detail = std::move(detail);
  PostEvent(id, std::move(e));
}


// ---------------------------------------------------------------- CmId: addressing

absl::Status CmId::BindAddr(const Address& addr) { return Bind(addr, /*reserve=*/true); }

int CmId::NetdevOfSource(const Address& addr) const {
  const DeviceOptions& o = device_->options_;
  // A link-local address's scope id names its netdev (RoceSourceGidIndex),
  // as the kernel's cma_check_linklocal sets the id's bound_dev_if.
  if (!o.netdev_of || !addr.is_ip() || addr.is_any() || addr.is_loopback() ||
      addr.is_link_local()) {
    return 0;
  }
  {
    std::lock_guard<std::mutex> lock(device_->node_->mutex());
    if (!o.roce) return 0;
    const mad::Gid gid = RoceGidOf(addr);
    int first = 0;
    bool two = false;
    for (size_t i = 0; i < o.roce_gids.size() && i < o.roce_gid_ifindexes.size(); ++i) {
      if (o.roce_gids[i] != gid || o.roce_gid_ifindexes[i] <= 0) continue;
      if (first == 0) first = o.roce_gid_ifindexes[i];
      two |= o.roce_gid_ifindexes[i] != first;
    }
    if (!two) return 0;
  }
  return o.netdev_of(addr);
}

absl::Status CmId::Bind(const Address& addr, bool reserve) {
  // The kernel's rdma_bind_addr puts the id on the address's netdev
  // (rdma_translate_ip: IPv4's added last, IPv6's first in the kernel's
  // list); asked before the lock (netlink).
  const int netdev = NetdevOfSource(addr);
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kIdle || bound_) return WrongState("bind_addr", state_, "IDLE, unbound");
  const mad::LocalPort& port = device_->port();
  if (addr.family == Address::Family::kIb) {
    if (absl::Status fits = internal::IbAddressFits("bind_addr", ps_, addr); !fits.ok()) {
      return fits;
    }
    local_ = addr;
    if (local_.gid.is_zero()) local_.gid = port.gid;
    if (local_.lid == 0) local_.lid = port.lid;
    bound_ = true;
    return absl::OkStatus();
  }
  if (!addr.is_ip()) return absl::InvalidArgumentError("bind_addr: address family unspecified");
  // Loopback counts as the wildcard, as the kernel's cma_any_addr: bound, no
  // device of its own, and a listener on it takes any destination
  // (libfabric's verbs provider binds "localhost" while it picks a passive
  // endpoint's address).
  // A link-local address names its interface (the kernel's
  // cma_check_linklocal: EINVAL without sin6_scope_id).
  if (addr.is_link_local() && addr.scope_id == 0) {
    return mad::WithErrno(
        absl::InvalidArgumentError(absl::StrCat(
            "bind_addr: ", addr.ToString(),
            " is link-local and names no interface (sin6_scope_id 0)")),
        EINVAL);
  }
  if (!addr.is_any() && !addr.is_loopback()) {
    bool mine = false;
    for (const Address& a : device_->options_.local_ips) mine |= a.SameHost(addr);
    if (!mine) {
      std::vector<std::string> have;
      for (const Address& a : device_->options_.local_ips) have.push_back(a.ToString());
      // The kernel's rdma_translate_ip finds no netdev: EADDRNOTAVAIL.
      return mad::WithErrno(
          absl::InvalidArgumentError(absl::StrCat(
              "bind_addr: ", addr.ToString(), " is not an address of ", port.ca_name,
              " (it has: ", have.empty() ? "none" : absl::StrJoin(have, ", "),
              ") (errno EADDRNOTAVAIL)")),
          EADDRNOTAVAIL);
    }
  }
  local_ = addr;
  // As the kernel's rdma_bind_addr: AF_INET is always AF-only, AF_INET6
  // follows the AFONLY option, else net.ipv6.bindv6only.
  af_only_ = addr.family == Address::Family::kIpv4 ||
             opts().af_only.value_or(device_->options_.bindv6only);
  // A bind to port 0 on a shared port takes a port of a leased block: no
  // claim, no round trip (REUSEADDR ids claim, so the router can share).
  const bool leased =
      addr.port == 0 && reserve && !opts().reuse_addr && device_->AllocLeasedPort(this);
  absl::Status s = leased           ? absl::OkStatus()
                   : addr.port == 0 ? device_->AllocPort(this)
                                    : device_->UsePort(this);
  if (!s.ok()) {
    local_ = Address();
    return addr.port == 0 ? s : Prefix("bind_addr", s);
  }
  if (reserve && !leased) {
    if (s = device_->ClaimBind(this); !s.ok()) {
      device_->FreePort(this);
      local_ = Address();
      return Prefix("bind_addr", s);
    }
  }
  local_.gid = port.gid;
  local_.lid = port.lid;
  netdev_ = netdev;
  bound_ = true;
  return absl::OkStatus();
}

bool CmId::RouteWithoutQueryLocked() {
  if (opts().ib_path.has_value()) {
    path_ = *opts().ib_path;
    path_from_sa_ = false;
    if (path_->mtu >= 1 && path_->mtu <= 5) path_mtu_ = path_->mtu;  // IB_PATH with an MTU
    if (opts().tos) path_->traffic_class = *opts().tos;
    state_ = IdState::kRouteResolved;
    return true;
  }
  if (device_->options_.roce && local_.is_ip() && peer_.is_ip()) {
    // No SA on RoCE: the path from the two IPs.
    path_ = RocePath(local_, peer_, device_->options_.roce_path_mtu, opts().tos.value_or(0));
    path_from_sa_ = false;
    path_mtu_ = path_->mtu;
    state_ = IdState::kRouteResolved;
    return true;
  }
  return false;
}

absl::StatusOr<bool> CmId::ResolveRouteNow(cm::PathInfo* path, uint16_t* peer_pkey) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kAddrResolved) {
    return WrongState("resolve_route", state_, "ADDR_RESOLVED");
  }
  if (!RouteWithoutQueryLocked()) return false;
  *path = *path_;
  *peer_pkey = peer_.pkey;
  return true;
}

absl::Status CmId::ResolveRoute(mad::Duration timeout) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kAddrResolved) {
    return WrongState("resolve_route", state_, "ADDR_RESOLVED");
  }
  if (RouteWithoutQueryLocked()) {
    device_->Post(this, EventType::kRouteResolved, 0);
    return absl::OkStatus();
  }
  const uint64_t sid = local_.family == Address::Family::kIb
                           ? peer_.service_id
                           : mad::wire::ServiceIdFor(
                                 static_cast<mad::wire::PortSpace>(ps_), peer_.port);
  sa::PathQuery q = sa::PathQuery::RdmaCm(local_.gid, peer_.gid, peer_.pkey, sid);
  if (opts().tos && peer_.family == Address::Family::kIpv6) q.TClass(*opts().tos);
  cm::Node& node = *device_->node_;
  const TimePoint now = node.Now();
  // As the kernel's cma_query_ib_route: the SA query ends at timeout_ms
  // (ib_sa_path_rec_get; ROUTE_ERROR -ETIMEDOUT), not after the agent's own
  // retries. A negative timeout is the kernel's huge unsigned one: the
  // agent's retries then.
  absl::optional<TimePoint> deadline;
  if (timeout >= mad::Duration()) deadline = now + std::max(timeout, mad::Duration::Millis(1));
  // A path cache hit is answered at once: ROUTE_RESOLVED is queued before
  // this call returns, with no step of the node and no SaResult queued and
  // polled for it. A query that went to the SA is answered by its MAD.
  absl::optional<mad::wire::PathRecord> hit;
  absl::StatusOr<uint64_t> qid = node.sa().GetPathOrCached(now, q, &hit, deadline);
  if (!qid.ok()) return Prefix("resolve_route", qid.status());
  if (hit.has_value()) {
    device_->RouteResolved(this, *hit);
  } else {
    sa_query_ = *qid;
    device_->by_query_[*qid] = this;
    state_ = IdState::kRouteQuery;
    node.FlushLocked();
  }
  node.RearmIfOutput();
  return absl::OkStatus();
}

Address CmId::GetLocalAddr() const {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  return local_;
}

int CmId::SourceGidIndex() const {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  const DeviceOptions& o = device_->options_;
  return o.roce && !o.roce_gids.empty() ? RoceSourceGidIndex(o, local_, netdev_) : -1;
}

Address CmId::GetPeerAddr() const {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  return peer_;
}

absl::optional<cm::PathInfo> CmId::route() const {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  return path_;
}

IdState CmId::state() const {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  return state_;
}

IdOptions CmId::options() const {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  return opts();
}

}  // namespace uscm
