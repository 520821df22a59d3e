// The in-process simulated InfiniBand fabric: CAs and switches from a
// Topology, links with latency / jitter / loss / duplication / reordering /
// bandwidth, link up/down, shortest-path LID routing, and a SimTransport per
// (port, QPN) that behaves like a UD QP. Everything runs on one Scheduler's
// virtual time and RNG, so a seed reproduces every delivery byte for byte
// (trace_digest() proves it). See docs/SIMULATOR.md.
#ifndef USCM_MAD_SIM_FABRIC_H_
#define USCM_MAD_SIM_FABRIC_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "mad/gid.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/time.h"
#include "mad/transport.h"

namespace uscm::sim {

// Per link and direction. A MAD crossing a link waits for the link to be
// free (queueing), takes bytes / bandwidth to serialize, then `latency` plus
// a uniform [0, jitter] to arrive; with probability `reorder` it is held
// `reorder_delay` longer so later MADs overtake it.
struct LinkParams {
  Duration latency = Duration::Nanos(500);
  Duration jitter = Duration::Zero();
  double loss = 0;       // probability a MAD is lost on this hop
  double duplicate = 0;  // probability it arrives twice
  double reorder = 0;
  Duration reorder_delay = Duration::Micros(10);
  // Data bytes per second; nullopt = the link's rate from the topology
  // (width x speed, 8b/10b: 4x SDR = 1 GB/s).
  absl::optional<uint64_t> bandwidth_bytes_per_s;
};

// InvalidArgument for a probability outside [0, 1], a negative duration or a
// zero bandwidth.
absl::Status ValidateLinkParams(const LinkParams& params);

struct FabricOptions {
  LinkParams link;  // every link starts with these
  uint64_t subnet_prefix = 0xfe80000000000000ULL;
  std::string sm_node;  // node id hosting the SM; "" = the first node (as ibsim)
  std::vector<uint16_t> pkeys = {0xFFFF};  // every port's P_Key table
  uint8_t mtu = 4;                         // IBA MTU enum (4 = 2048) of every port
  size_t receive_queue_depth = 4096;       // per QP; more is dropped and counted
  // false: no trace digest (a bench that never reads it saves an FNV pass
  // over every delivered MAD); trace_digest() then aborts, as a caller bug.
  bool trace_digest = true;
  // false: MADs in flight do not warm their destination (SimTransport::
  // set_arrival_warmer); results are the same either way, only the time to
  // compute them differs (sim_scale_bench --warm-arrivals=0 measures it).
  bool warm_arrivals = true;
};

// Two steps of warming a cold object before it is used: kObject prefetches
// the object's own hot lines without reading them (they are not in yet);
// kParts, a step later, reads them and prefetches what they point to. The
// fabric asks a QP's warmer for kObject when a MAD for it is sent and for
// kParts on the MAD's last hop (onto the link into the CA; a loopback MAD
// has no last hop).
enum class WarmStage : uint8_t { kObject, kParts };

// Fetches into the cache what the owner of a QP reads when a MAD wakes it,
// while the MAD crosses the fabric: with thousands of simulated hosts each
// wake finds its host cold, and a miss found one step at a time costs the
// whole memory latency. `warm` must only prefetch (no effect on results).
struct ArrivalWarmer {
  void (*warm)(const void* owner, WarmStage stage) = nullptr;
  const void* owner = nullptr;
};

enum class DropReason : uint8_t {
  kLoss,        // link loss probability
  kLinkDown,    // sent onto a down link, or the link went down in flight
  kNoRoute,     // no forwarding entry / DLID not at the port it reached
  kHopLimit,    // routing loop guard
  kNoQp,        // destination QPN not open at that port
  kQkey,        // Q_Key does not match the destination QP
  kPkey,        // P_Key not in the destination port's table
  kGid,         // GRH DGID is not the destination port's GID
  kQueueFull,   // destination receive queue full
};
inline constexpr int kNumDropReasons = 9;
absl::string_view DropReasonName(DropReason r);

struct FabricCounters {
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  std::array<uint64_t, kNumDropReasons> dropped{};
  uint64_t drops(DropReason r) const { return dropped[static_cast<int>(r)]; }
  uint64_t total_dropped() const;
};

// A port that can send and receive: a connected CA port or a switch's port 0.
//
// Layout: with thousands of hosts an endpoint is cold when a MAD leaves or
// reaches it and when the SA walks a path from or to it, and those read
// only where it is, its LID, type and GID: they come first, in 27 bytes
// that alignas(32) keeps inside one cache line (the GUIDs and names, read at
// set-up and by the tools, come after).
struct alignas(32) Endpoint {
  int node = 0;  // index into the topology's nodes
  int port = 0;
  uint16_t lid = 0;
  NodeType type = NodeType::kCa;
  mad::Gid gid;
  uint64_t node_guid = 0;
  uint64_t port_guid = 0;
  std::string node_id;
  std::string desc;
};
static_assert(offsetof(Endpoint, gid) + sizeof(mad::Gid) <= 32,
              "Endpoint's hot fields no longer fit its first 32 bytes");

// What a future SA answers in a PathRecord.
struct PathInfo {
  uint16_t slid = 0, dlid = 0;
  mad::Gid sgid, dgid;
  int hops = 0;      // links crossed
  uint8_t mtu = 0;   // IBA MTU enum
  uint8_t rate = 0;  // IBA rate enum, the slowest link
  uint8_t sl = 0;
  bool all_links_up = true;
};

struct TraceEvent {
  TimePoint at;
  bool delivered = false;
  DropReason reason = DropReason::kLoss;  // when !delivered
  uint16_t slid = 0, dlid = 0;
  uint32_t src_qpn = 0, dst_qpn = 0;
  size_t bytes = 0;
};

class SimTransport;

class Fabric {
 public:
  // The topology is copied; LIDs are assigned here (docs/SIMULATOR.md).
  static absl::StatusOr<std::unique_ptr<Fabric>> Create(Scheduler& scheduler, const Topology& topo,
                                                        FabricOptions options = {});
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  // Opens a QP on `node_id`'s `port` (a switch uses port 0). QP1 takes
  // Q_Key 0x80010000; QPN 0 (SMI) is not simulated. The transport must not
  // outlive the fabric.
  absl::StatusOr<std::unique_ptr<SimTransport>> Open(absl::string_view node_id, int port = 1,
                                                     uint32_t qpn = mad::kQp1,
                                                     uint32_t qkey = mad::kQp1Qkey);

  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  const Endpoint* FindEndpoint(absl::string_view node_id, int port) const;
  const Endpoint* FindByLid(uint16_t lid) const;
  const Endpoint* FindByGid(const mad::Gid& gid) const;
  uint16_t sm_lid() const { return sm_lid_; }
  mad::LocalPort LocalPortOf(const Endpoint& ep) const;

  // The route the fabric would use now between two LIDs.
  absl::StatusOr<PathInfo> Path(uint16_t slid, uint16_t dlid) const;

  // Links are named by either end.
  absl::Status SetLinkParams(absl::string_view node_id, int port, const LinkParams& params);
  absl::Status SetLinkUp(absl::string_view node_id, int port, bool up);
  absl::Status ScheduleLinkUp(TimePoint at, absl::string_view node_id, int port, bool up);
  // Recomputes forwarding over the links that are up (what an SM sweep does).
  void Reroute();

  const FabricCounters& counters() const { return counters_; }
  // FNV-1a over every delivery and drop (time, addresses, QPNs, bytes).
  // FabricOptions::warm_arrivals, changed during a run (a bench's A/B).
  void set_warm_arrivals(bool on) { options_.warm_arrivals = on; }
  bool warm_arrivals() const { return options_.warm_arrivals; }
  uint64_t trace_digest() const;
  void set_trace_sink(std::function<void(const TraceEvent&)> sink) { trace_ = std::move(sink); }
  Scheduler& scheduler() { return scheduler_; }

 private:
  friend class SimTransport;
  // A MAD in flight, kept in a slot pool so events carry only an index.
  struct Packet {
    uint64_t id = 0;
    uint16_t slid = 0, dlid = 0;
    uint32_t src_qpn = 0, dst_qpn = 0, qkey = 0;
    uint16_t pkey = 0;
    uint8_t sl = 0;
    bool has_grh = false;
    mad::Gid sgid, dgid;
    uint8_t hop_limit = 0, traffic_class = 0;
    uint32_t flow_label = 0;
    int node = 0, port = 0;  // where the current hop lands
    int link = -1;           // the link of the current hop
    uint64_t link_generation = 0;
    int hops = 0;
    uint16_t len = 0;
    std::array<uint8_t, mad::kMadSize> data;
  };
  // Layout: a host's link is cold each time a MAD crosses it or the SA walks
  // a path over it; the ends, state, rate and queue (56 bytes) come first, in
  // the first cache line (alignas(64)): all a path walk reads. The
  // parameters (read by Transmit) follow.
  struct alignas(64) Link {
    int node[2] = {0, 0};
    int port[2] = {0, 0};
    bool up = true;
    uint8_t rate_enum = 0;
    uint64_t rate_bytes_per_s = 0;  // from width x speed
    uint64_t generation = 0;  // bumped when the link goes down
    TimePoint busy_until[2];  // per direction (0: a->b)
    LinkParams params;
  };
  struct Attach {
    int link = -1;  // -1: not connected
    int dir = 0;    // 0: this port is the link's end a
  };

  Fabric(Scheduler& scheduler, Topology topo, FabricOptions options);
  absl::Status AssignLids();
  void ComputeRoutes(bool up_only);
  absl::StatusOr<int> LinkOf(absl::string_view node_id, int port) const;

  // The datapath (fabric.cc).
  absl::Status Send(SimTransport& from, const mad::MadAddress& to, std::span<const uint8_t> mad);
  void Transmit(uint32_t slot, int node, int port);
  void Transmit(uint32_t slot, Attach a);  // onto the link `a` names (from its end a.dir)
  void Arrive(uint32_t slot);
  void Forward(uint32_t slot, int sw);
  void Deliver(uint32_t slot, int endpoint);
  void Drop(uint32_t slot, DropReason reason);
  void Record(const Packet& p, bool delivered, DropReason reason);
  void MixIntoDigest(const Packet& p, TimePoint now, bool delivered, DropReason reason);
  uint32_t AllocSlot();
  void FreeSlot(uint32_t slot);
  void Register(SimTransport* t);
  void Unregister(SimTransport* t);

  int NodeIndex(absl::string_view node_id) const;  // -1 if absent

  Scheduler& scheduler_;
  Topology topo_;
  absl::flat_hash_map<std::string, int> node_by_id_;
  FabricOptions options_;
  std::vector<std::vector<Attach>> attach_;   // [node][port]
  // attach_[node][port] of each endpoint, dense: a CA's first hop (a send,
  // a path walk) reads one entry shared with its neighbours' instead of a
  // cold outer and inner vector.
  std::vector<Attach> attach_of_endpoint_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> endpoint_of_;  // [node][port] -> endpoint index or -1
  std::vector<Endpoint> endpoints_;
  std::vector<int> endpoint_by_lid_;           // LID -> endpoint index or -1
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, int> endpoint_by_gid_;  // (prefix, id)
  // Forwarding tables, run-length coded: switch n's table is the runs
  // route_runs_[route_first_[n] .. route_first_[n + 1]), each the first LID
  // of a stretch of LIDs that leave by the same port. Routes send whole
  // subtrees of consecutive LIDs one way, so a 10,240-host fat tree needs
  // about 0.3 MB instead of 20 MB of switches x LIDs, and a hop's lookup
  // stays in cache.
  struct RouteRun {
    uint16_t first_lid;
    uint16_t port;  // kNoPort: no route
  };
  std::vector<RouteRun> route_runs_;
  std::vector<uint32_t> route_first_;  // [node], one past the end at [nodes]
  uint16_t lid_space_ = 0;
  // Switch `sw`'s output port toward `dlid`, kNoPort if none.
  uint16_t OutPort(int sw, uint16_t dlid) const;
  uint16_t sm_lid_ = 0;
  absl::flat_hash_map<uint64_t, SimTransport*> qps_;  // (endpoint << 24 | qpn)
  // The datapath's per-hop lookups, dense: qps_'s QP1 entries by endpoint
  // (almost every MAD goes to QP1) and whether a node is a switch.
  std::vector<SimTransport*> qp1_of_endpoint_;
  std::vector<ArrivalWarmer> warmer_of_endpoint_;  // QP1's owner, by endpoint
  // Calls the warmer of the endpoint at `dlid`, if any (options_.warm_arrivals).
  void Warm(uint16_t dlid, WarmStage stage) const;
  std::vector<uint8_t> is_switch_;
  std::vector<Packet> slots_;
  std::vector<uint32_t> free_slots_;
  FabricCounters counters_;
  uint64_t digest_ = 0xcbf29ce484222325ULL;
  uint64_t next_packet_ = 0;
  std::function<void(const TraceEvent&)> trace_;
};

// One UD QP on a simulated port. fd() is -1: a simulation polls through the
// scheduler (pending() / set_on_arrival), not epoll.
//
// Layout: with thousands of hosts a QP is cold at each MAD that reaches it,
// so what a send, a delivery and a drain read (the fabric, the QP's numbers,
// the receive ring and the arrival callback) fills its first two cache lines
// and the port and capabilities, read at set-up, come after them.
class alignas(64) SimTransport final : public mad::Transport {
 public:
  ~SimTransport() override;

  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override;
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max = SIZE_MAX) override;
  int fd() const override { return -1; }
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }

  uint32_t qpn() const { return qpn_; }
  uint32_t qkey() const { return qkey_; }
  size_t pending() const { return rx_count_; }
  // Called (from inside the scheduler) each time a MAD lands in the queue.
  void set_on_arrival(absl::AnyInvocable<void()> cb) { on_arrival_ = std::move(cb); }
  // Called as a MAD for this QP crosses the fabric (QP1 only: the QP almost
  // every MAD goes to); see ArrivalWarmer.
  void set_arrival_warmer(ArrivalWarmer warmer);

 private:
  friend class Fabric;
  // A received MAD waiting in the queue: it stays in the fabric's packet
  // pool (whose few slots in flight stay in cache) until Drain copies it
  // out, instead of being copied into a per-QP ring that is cold again at
  // every arrival when the fabric has thousands of hosts.
  struct Rx {
    uint32_t slot;
    uint16_t pkey_index;
  };
  SimTransport(Fabric* fabric, int endpoint, uint32_t qpn, uint32_t qkey, mad::LocalPort port);
  // The receive queue is a ring that only grows: no allocation per MAD once warm.
  Rx& PushRx();

  // Hot (see the class comment).
  Fabric* fabric_;
  int endpoint_;
  uint32_t qpn_;
  uint32_t qkey_;
  uint32_t rx_head_ = 0;
  size_t rx_count_ = 0;
  std::vector<Rx> rx_;
  absl::AnyInvocable<void()> on_arrival_;
  // Cold.
  mad::LocalPort port_;
  mad::TransportCaps caps_;
};

}  // namespace uscm::sim

#endif  // USCM_MAD_SIM_FABRIC_H_
