// Fabric construction: LID assignment, routing, path queries and link state.
// The per-MAD datapath is in datapath.cc.
#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/sim/fabric.h"

namespace uscm::sim {
namespace {

constexpr uint16_t kMaxUnicastLid = 0xBFFF;
constexpr uint16_t kNoPort = 0xFFFF;

int Lanes(uint8_t width) {
  if (width & kWidth12x) return 12;
  if (width & kWidth8x) return 8;
  if (width & kWidth4x) return 4;
  return 1;
}

// Per-lane signalling rate in units of 0.1 Gb/s.
int LaneTenths(uint8_t speed) {
  if (speed & kSpeedQdr) return 100;
  if (speed & kSpeedDdr) return 50;
  return 25;
}

// IBA rate enum for a signalling rate in 0.1 Gb/s.
uint8_t RateEnum(int tenths) {
  switch (tenths) {
    case 25: return 2;
    case 50: return 5;
    case 100: return 3;
    case 200: return 6;
    case 300: return 4;
    case 400: return 7;
    case 600: return 8;
    case 800: return 9;
    default: return 10;  // 1200
  }
}

}  // namespace

absl::string_view DropReasonName(DropReason r) {
  switch (r) {
    case DropReason::kLoss: return "loss";
    case DropReason::kLinkDown: return "link-down";
    case DropReason::kNoRoute: return "no-route";
    case DropReason::kHopLimit: return "hop-limit";
    case DropReason::kNoQp: return "no-qp";
    case DropReason::kQkey: return "qkey";
    case DropReason::kPkey: return "pkey";
    case DropReason::kGid: return "gid";
    case DropReason::kQueueFull: return "queue-full";
  }
  return "unknown";
}

uint64_t FabricCounters::total_dropped() const {
  uint64_t n = 0;
  for (uint64_t d : dropped) n += d;
  return n;
}

Fabric::Fabric(Scheduler& scheduler, Topology topo, FabricOptions options)
    : scheduler_(scheduler), topo_(std::move(topo)), options_(std::move(options)) {
  for (size_t n = 0; n < topo_.nodes.size(); ++n) {
    node_by_id_.emplace(topo_.nodes[n].id, static_cast<int>(n));
  }
}

int Fabric::NodeIndex(absl::string_view node_id) const {
  auto it = node_by_id_.find(node_id);
  return it == node_by_id_.end() ? -1 : it->second;
}

Fabric::~Fabric() = default;

absl::StatusOr<std::unique_ptr<Fabric>> Fabric::Create(Scheduler& scheduler, const Topology& topo,
                                                       FabricOptions options) {
  if (topo.nodes.empty()) return absl::InvalidArgumentError("topology has no nodes");
  if (options.pkeys.empty()) return absl::InvalidArgumentError("P_Key table is empty");
  if (options.mtu < 1 || options.mtu > 5) {
    return absl::InvalidArgumentError("mtu must be an IBA MTU enum 1 (256) .. 5 (4096)");
  }
  if (absl::Status s = ValidateLinkParams(options.link); !s.ok()) return s;
  // A hand-made Topology gets the checks the parser and builder make.
  for (const TopoNode& n : topo.nodes) {
    if (n.num_ports < 1 || n.num_ports > 255 || n.ports.size() != static_cast<size_t>(n.num_ports) + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("node \"", n.id, "\": needs 1..255 ports and num_ports + 1 port entries"));
    }
    for (const TopoPort& p : n.ports) {
      if (p.remote_node < 0) continue;
      if (p.remote_node >= static_cast<int>(topo.nodes.size()) || p.remote_port < 1 ||
          p.remote_port > topo.nodes[p.remote_node].num_ports) {
        return absl::InvalidArgumentError(
            absl::StrCat("node \"", n.id, "\": a port links to a node or port that does not exist"));
      }
    }
  }
  std::unique_ptr<Fabric> f(new Fabric(scheduler, topo, std::move(options)));
  const auto& nodes = f->topo_.nodes;
  f->attach_.resize(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) f->attach_[n].resize(nodes[n].num_ports + 1);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int p = 1; p <= nodes[n].num_ports; ++p) {
      const TopoPort& tp = nodes[n].ports[p];
      if (tp.remote_node < 0 || f->attach_[n][p].link >= 0) continue;
      const TopoPort& rp = nodes[tp.remote_node].ports[tp.remote_port];
      if (rp.remote_node != static_cast<int>(n) || rp.remote_port != p) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", nodes[n].id, "\"[", p, "] links to a port that does not link back"));
      }
      Link l;
      l.node[0] = static_cast<int>(n);
      l.port[0] = p;
      l.node[1] = tp.remote_node;
      l.port[1] = tp.remote_port;
      l.params = f->options_.link;
      const uint8_t w = tp.width_enabled & rp.width_enabled;
      const uint8_t s = tp.speed_enabled & rp.speed_enabled;
      if (w == 0 || s == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("\"", nodes[n].id, "\"[", p, "]: ends share no width or speed"));
      }
      const int tenths = Lanes(w) * LaneTenths(s);
      l.rate_enum = RateEnum(tenths);
      l.rate_bytes_per_s = static_cast<uint64_t>(tenths) * 10'000'000;  // 8b/10b, bits->bytes
      const int id = static_cast<int>(f->links_.size());
      f->links_.push_back(l);
      f->attach_[n][p] = Attach{id, 0};
      f->attach_[tp.remote_node][tp.remote_port] = Attach{id, 1};
    }
  }
  if (absl::Status s = f->AssignLids(); !s.ok()) return s;
  f->ComputeRoutes(/*up_only=*/false);
  f->qp1_of_endpoint_.assign(f->endpoints_.size(), nullptr);
  f->warmer_of_endpoint_.assign(f->endpoints_.size(), ArrivalWarmer{});
  f->attach_of_endpoint_.reserve(f->endpoints_.size());
  for (const Endpoint& ep : f->endpoints_) f->attach_of_endpoint_.push_back(f->attach_[ep.node][ep.port]);
  f->is_switch_.resize(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) f->is_switch_[n] = nodes[n].type == NodeType::kSwitch;
  return f;
}

// Hinted LIDs first; then breadth-first from node 0 (ports in ascending
// order), the next free LID from 1 to each switch and each connected CA port.
absl::Status Fabric::AssignLids() {
  const auto& nodes = topo_.nodes;
  std::vector<int> lid_of_ep;
  endpoint_of_.assign(nodes.size(), {});
  std::vector<bool> taken(kMaxUnicastLid + 1, false);
  for (size_t n = 0; n < nodes.size(); ++n) {
    endpoint_of_[n].assign(nodes[n].num_ports + 1, -1);
    for (int p = 0; p <= nodes[n].num_ports; ++p) {
      const uint16_t hint = nodes[n].ports[p].lid_hint;
      if (hint == 0) continue;
      if (taken[hint]) {
        return absl::InvalidArgumentError(
            absl::StrCat("LID ", hint, " is given twice (again at \"", nodes[n].id, "\")"));
      }
      taken[hint] = true;
    }
  }
  uint16_t next = 1;
  auto assign = [&](int n, int p) -> absl::Status {
    uint16_t lid = nodes[n].ports[p].lid_hint;
    if (lid == 0) {
      while (next <= kMaxUnicastLid && taken[next]) ++next;
      if (next > kMaxUnicastLid) return absl::ResourceExhaustedError("out of unicast LIDs");
      lid = next;
      taken[next] = true;
    }
    const TopoNode& node = nodes[n];
    Endpoint ep;
    ep.node = n;
    ep.port = p;
    ep.node_id = node.id;
    ep.desc = node.desc;
    ep.type = node.type;
    ep.node_guid = node.node_guid;
    ep.port_guid = node.PortGuid(p);
    ep.lid = lid;
    ep.gid = mad::Gid::FromParts(options_.subnet_prefix, ep.port_guid);
    endpoint_of_[n][p] = static_cast<int>(endpoints_.size());
    endpoints_.push_back(std::move(ep));
    return absl::OkStatus();
  };
  std::vector<bool> seen(nodes.size(), false);
  for (size_t root = 0; root < nodes.size(); ++root) {
    if (seen[root]) continue;
    std::deque<int> queue = {static_cast<int>(root)};
    seen[root] = true;
    while (!queue.empty()) {
      const int n = queue.front();
      queue.pop_front();
      if (nodes[n].type == NodeType::kSwitch) {
        if (absl::Status s = assign(n, 0); !s.ok()) return s;
      }
      for (int p = 1; p <= nodes[n].num_ports; ++p) {
        if (attach_[n][p].link < 0) continue;
        if (nodes[n].type == NodeType::kCa) {
          if (absl::Status s = assign(n, p); !s.ok()) return s;
        }
        const int r = nodes[n].ports[p].remote_node;
        if (!seen[r]) {
          seen[r] = true;
          queue.push_back(r);
        }
      }
    }
  }
  uint16_t max_lid = 0;
  for (const Endpoint& ep : endpoints_) max_lid = std::max(max_lid, ep.lid);
  endpoint_by_lid_.assign(max_lid + 1, -1);
  for (size_t i = 0; i < endpoints_.size(); ++i) endpoint_by_lid_[endpoints_[i].lid] = static_cast<int>(i);
  endpoint_by_gid_.clear();
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const mad::Gid& g = endpoints_[i].gid;  // the first endpoint wins, as a scan finds it
    endpoint_by_gid_.emplace(std::make_pair(g.subnet_prefix(), g.interface_id()),
                             static_cast<int>(i));
  }

  const int sm_node = options_.sm_node.empty() ? 0 : NodeIndex(options_.sm_node);
  if (sm_node < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sm_node \"", options_.sm_node, "\" is not in the topology"));
  }
  for (int p = 0; p <= nodes[sm_node].num_ports && sm_lid_ == 0; ++p) {
    if (endpoint_of_[sm_node][p] >= 0) sm_lid_ = endpoints_[endpoint_of_[sm_node][p]].lid;
  }
  if (sm_lid_ == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SM node \"", nodes[sm_node].id, "\" has no connected port"));
  }
  return absl::OkStatus();
}

// For every destination, a breadth-first search outward from it over switches
// gives each switch its port toward the destination (the first discovery
// wins: fewest hops, then lowest port numbers).
// Shortest paths by breadth-first search over the switches, once per switch
// that has endpoints: every endpoint reached through switch S (S's own port
// 0, CAs cabled to S) is routed along the same search from S, so the cost is
// O(switches x links + switches x LIDs), not a search per LID. (The result
// is the search per LID's: a search from a CA starts at its switch.)
void Fabric::ComputeRoutes(bool up_only) {
  const auto& nodes = topo_.nodes;
  const uint16_t lid_space = static_cast<uint16_t>(endpoint_by_lid_.size());
  std::vector<std::vector<uint16_t>> table(nodes.size());  // [switch][lid] -> out port
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n].type == NodeType::kSwitch) table[n].assign(lid_space, kNoPort);
  }
  auto usable = [&](int n, int p) {
    const int l = attach_[n][p].link;
    return l >= 0 && (!up_only || links_[l].up);
  };
  std::vector<std::vector<uint16_t>> lids_at(nodes.size());  // by the switch they hang off
  for (const Endpoint& ep : endpoints_) {
    if (ep.type == NodeType::kSwitch) {
      lids_at[ep.node].push_back(ep.lid);
    } else if (usable(ep.node, ep.port)) {
      const TopoPort& tp = nodes[ep.node].ports[ep.port];
      if (nodes[tp.remote_node].type == NodeType::kSwitch) {
        table[tp.remote_node][ep.lid] = static_cast<uint16_t>(tp.remote_port);
        lids_at[tp.remote_node].push_back(ep.lid);
      }
    }
  }
  std::vector<int> dist(nodes.size());
  std::vector<uint16_t> toward(nodes.size());  // the port leading back to the source
  std::vector<int> queue;
  queue.reserve(nodes.size());
  for (size_t source = 0; source < nodes.size(); ++source) {
    if (lids_at[source].empty()) continue;
    std::fill(dist.begin(), dist.end(), -1);
    queue.clear();
    dist[source] = 0;
    queue.push_back(static_cast<int>(source));
    for (size_t head = 0; head < queue.size(); ++head) {
      const int n = queue[head];
      for (int p = 1; p <= nodes[n].num_ports; ++p) {
        if (!usable(n, p)) continue;
        const TopoPort& tp = nodes[n].ports[p];
        const int r = tp.remote_node;
        if (nodes[r].type != NodeType::kSwitch || dist[r] >= 0) continue;
        dist[r] = dist[n] + 1;
        toward[r] = static_cast<uint16_t>(tp.remote_port);
        queue.push_back(r);
      }
    }
    for (size_t k = 1; k < queue.size(); ++k) {
      std::vector<uint16_t>& fwd = table[queue[k]];
      const uint16_t port = toward[queue[k]];
      for (uint16_t lid : lids_at[source]) fwd[lid] = port;
    }
  }
  lid_space_ = lid_space;
  route_runs_.clear();
  route_first_.assign(nodes.size() + 1, 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    route_first_[n] = static_cast<uint32_t>(route_runs_.size());
    const std::vector<uint16_t>& fwd = table[n];
    for (size_t lid = 0; lid < fwd.size(); ++lid) {
      if (lid == 0 || fwd[lid] != fwd[lid - 1]) {
        route_runs_.push_back(RouteRun{static_cast<uint16_t>(lid), fwd[lid]});
      }
    }
  }
  route_first_[nodes.size()] = static_cast<uint32_t>(route_runs_.size());
}

uint16_t Fabric::OutPort(int sw, uint16_t dlid) const {
  if (dlid >= lid_space_) return kNoPort;
  const RouteRun* first = route_runs_.data() + route_first_[sw];
  const RouteRun* last = route_runs_.data() + route_first_[sw + 1];
  if (first == last) return kNoPort;  // not a switch
  // The last run starting at or before dlid (the first run starts at LID 0).
  const RouteRun* it = std::upper_bound(
      first, last, dlid, [](uint16_t lid, const RouteRun& r) { return lid < r.first_lid; });
  return (it - 1)->port;
}

void Fabric::Reroute() { ComputeRoutes(/*up_only=*/true); }

const Endpoint* Fabric::FindEndpoint(absl::string_view node_id, int port) const {
  const int n = NodeIndex(node_id);
  if (n < 0 || port < 0 || port > topo_.nodes[n].num_ports) return nullptr;
  const int e = endpoint_of_[n][port];
  return e < 0 ? nullptr : &endpoints_[e];
}

const Endpoint* Fabric::FindByLid(uint16_t lid) const {
  if (lid >= endpoint_by_lid_.size() || endpoint_by_lid_[lid] < 0) return nullptr;
  return &endpoints_[endpoint_by_lid_[lid]];
}

const Endpoint* Fabric::FindByGid(const mad::Gid& gid) const {
  auto it = endpoint_by_gid_.find(std::make_pair(gid.subnet_prefix(), gid.interface_id()));
  return it == endpoint_by_gid_.end() ? nullptr : &endpoints_[it->second];
}

mad::LocalPort Fabric::LocalPortOf(const Endpoint& ep) const {
  mad::LocalPort lp;
  lp.ca_name = absl::StrCat("sim:", ep.node_id);
  lp.port_num = static_cast<uint8_t>(ep.port);
  lp.link_layer = mad::LinkLayer::kInfiniBand;
  lp.lid = ep.lid;
  lp.lmc = 0;
  lp.sm_lid = sm_lid_;
  lp.sm_sl = 0;
  lp.gid = ep.gid;
  lp.node_guid = ep.node_guid;
  lp.pkeys = options_.pkeys;
  return lp;
}

absl::StatusOr<PathInfo> Fabric::Path(uint16_t slid, uint16_t dlid) const {
  const Endpoint* src = FindByLid(slid);
  const Endpoint* dst = FindByLid(dlid);
  if (src == nullptr || dst == nullptr) {
    return absl::NotFoundError(absl::StrCat("no port has LID ", src == nullptr ? slid : dlid));
  }
  PathInfo path;
  path.slid = slid;
  path.dlid = dlid;
  path.sgid = src->gid;
  path.dgid = dst->gid;
  path.mtu = options_.mtu;
  path.rate = 0;
  if (src == dst) {
    path.rate = 10;  // loopback: no link, the fastest rate
    return path;
  }
  auto unreachable = [&] {
    return absl::NotFoundError(absl::StrCat("no route from LID ", slid, " to LID ", dlid));
  };
  int node = src->node;
  Attach a = attach_of_endpoint_[src - endpoints_.data()];
  if (src->type == NodeType::kSwitch) {
    const int out = OutPort(node, dlid);
    if (out == kNoPort) return unreachable();
    a = attach_[node][out];
  }
  int slowest = -1;
  for (int hop = 0; hop < 64; ++hop) {
    if (a.link < 0) return unreachable();
    const Link& l = links_[a.link];
    path.hops++;
    path.all_links_up = path.all_links_up && l.up;
    // Compare rates by speed, not by enum value (the enum is not ordered).
    if (slowest < 0 || l.rate_bytes_per_s < links_[slowest].rate_bytes_per_s) slowest = a.link;
    const int next = l.node[1 - a.dir];
    const int in = l.port[1 - a.dir];
    if (next == dst->node && (in == dst->port || dst->type == NodeType::kSwitch)) {
      path.rate = links_[slowest].rate_enum;
      return path;
    }
    if (topo_.nodes[next].type != NodeType::kSwitch) return unreachable();
    node = next;
    const int out = OutPort(node, dlid);
    if (out == kNoPort) return unreachable();
    a = attach_[node][out];
  }
  return unreachable();
}

absl::StatusOr<int> Fabric::LinkOf(absl::string_view node_id, int port) const {
  const int n = NodeIndex(node_id);
  if (n < 0) return absl::NotFoundError(absl::StrCat("no node \"", node_id, "\""));
  if (port < 1 || port > topo_.nodes[n].num_ports || attach_[n][port].link < 0) {
    return absl::NotFoundError(absl::StrCat("\"", node_id, "\" port ", port, " has no link"));
  }
  return attach_[n][port].link;
}

absl::Status ValidateLinkParams(const LinkParams& params) {
  for (double p : {params.loss, params.duplicate, params.reorder}) {
    if (!(p >= 0 && p <= 1)) return absl::InvalidArgumentError("probabilities must be in [0, 1]");
  }
  if (params.latency < Duration::Zero() || params.jitter < Duration::Zero() ||
      params.reorder_delay < Duration::Zero()) {
    return absl::InvalidArgumentError("latency, jitter and reorder_delay must not be negative");
  }
  if (params.bandwidth_bytes_per_s.has_value() && *params.bandwidth_bytes_per_s == 0) {
    return absl::InvalidArgumentError("bandwidth must be positive (nullopt = the link's rate)");
  }
  return absl::OkStatus();
}

absl::Status Fabric::SetLinkParams(absl::string_view node_id, int port, const LinkParams& params) {
  absl::StatusOr<int> l = LinkOf(node_id, port);
  if (!l.ok()) return l.status();
  if (absl::Status s = ValidateLinkParams(params); !s.ok()) return s;
  links_[*l].params = params;
  return absl::OkStatus();
}

absl::Status Fabric::SetLinkUp(absl::string_view node_id, int port, bool up) {
  absl::StatusOr<int> l = LinkOf(node_id, port);
  if (!l.ok()) return l.status();
  Link& link = links_[*l];
  if (link.up && !up) link.generation++;  // MADs on the wire are lost
  link.up = up;
  return absl::OkStatus();
}

absl::Status Fabric::ScheduleLinkUp(TimePoint at, absl::string_view node_id, int port, bool up) {
  absl::StatusOr<int> l = LinkOf(node_id, port);
  if (!l.ok()) return l.status();
  scheduler_.Schedule(at, [this, link = *l, up] {
    Link& k = links_[link];
    if (k.up && !up) k.generation++;
    k.up = up;
  });
  return absl::OkStatus();
}

}  // namespace uscm::sim
