// The simulated fabric as the uscm command uses it: a scheduler, a fabric
// (two hosts behind a switch, or an ibsim net file), the simulated SA, and
// one SimHost per CA port driving a sans-IO CmEndpoint and an SA client from
// the scheduler. A Timeline, when given, prints every MAD (one line, from
// the wire printer) and every event at its virtual time, and writes each MAD
// to a pcap file.
#ifndef USCM_TOOLS_SIM_WORLD_H_
#define USCM_TOOLS_SIM_WORLD_H_

#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "cm/endpoint.h"
#include "cm/path_from_record.h"
#include "cm/router/local_router.h"
#include "mad/agent.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_writer.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "mad/transport.h"
#include "mad/wire/path_record.h"
#include "sa/client.h"
#include "sa/path_cache.h"
#include "sa/sim_sa.h"

namespace uscm::tools {

using mad::Duration;
using mad::TimePoint;

class Timeline {
 public:
  // `out` receives the text; `pcap` (may be null) every MAD; `dump` adds the
  // field-by-field dump under each MAD line.
  Timeline(std::FILE* out, mad::capture::PcapWriter* pcap, bool dump)
      : out_(out), pcap_(pcap), dump_(dump) {}

  void Name(uint16_t lid, std::string name) { names_[lid] = std::move(name); }
  void Mad(TimePoint t, uint16_t from_lid, uint16_t to_lid, std::span<const uint8_t> mad,
           const mad::capture::UdHeaders& headers);
  void Event(TimePoint t, const std::string& who, const std::string& what);

  uint64_t mads() const { return mads_; }
  uint64_t events() const { return events_; }
  // The first capture error, if any (the timeline goes on without it).
  const absl::Status& capture_status() const { return capture_status_; }

 private:
  std::string NameOf(uint16_t lid) const;

  std::FILE* out_;
  mad::capture::PcapWriter* pcap_;
  bool dump_;
  absl::flat_hash_map<uint16_t, std::string> names_;
  uint64_t mads_ = 0;
  uint64_t events_ = 0;
  absl::Status capture_status_;
};

// "[   12.345 us]" style: virtual time since the start of the run.
std::string FormatTime(TimePoint t);

// A transport that shows what crosses it on a Timeline: every MAD it sends,
// and the MADs it receives from `show_received_from` (the SA, whose own
// transport is not tapped), so each MAD appears once.
class TapTransport final : public mad::ForwardingTransport {
 public:
  TapTransport(mad::Transport& inner, Timeline& timeline, const mad::Clock& clock,
               uint16_t show_received_from)
      : ForwardingTransport(inner), timeline_(timeline), clock_(clock), from_(show_received_from) {}

  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override;
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink,
               size_t max = SIZE_MAX) override;

 private:
  Timeline& timeline_;
  const mad::Clock& clock_;
  uint16_t from_;
};

// One CA port of the simulated fabric: QP1, a CM endpoint, a MAD agent with
// an SA client, all woken by the scheduler. CM MADs (class 0x07) go to the
// endpoint, everything else to the agent. Callbacks run inside Wake and may
// make user calls on their own host; a user call made from anywhere else
// (an event, another host's callback) must be followed by Touch() so the
// host runs and sends what the call queued. The host is a kNotified actor:
// its deadline changes only in Wake, on a MAD's arrival and by Touch, so the
// scheduler never polls it (the cost of a step does not grow with hosts).
//
// With several processes per host (SimWorldOptions::procs_per_host) a SimHost
// is one process: CreateProcess puts it behind the host's router (a
// SimRouterHost) on a LocalRouterClient, with the comm ID range the router
// gave it; the router owns QP1.
//
// Layout: at 10,240 hosts a host's wake finds all of this object cold, so
// what Wake, Flush and NextDeadline read (the Actor base, the pointers to the
// transport and the endpoints, the dirty flag and wake counters, the three
// callbacks: 192 bytes) fills its first three cache lines and the rest (send
// errors, name, tap, router client, path cache) comes after them.
class alignas(64) SimHost : public sim::Actor {
 public:
  static absl::StatusOr<std::unique_ptr<SimHost>> Create(sim::Fabric& fabric,
                                                         const std::string& node,
                                                         Timeline* timeline, uint64_t seed,
                                                         cm::CmConfig cm_config = {},
                                                         bool path_cache = false);
  // A process named `name` behind `router` (which must outlive it).
  static absl::StatusOr<std::unique_ptr<SimHost>> CreateProcess(
      sim::Scheduler& scheduler, router::LocalRouter& router, const std::string& name,
      uint64_t seed, cm::CmConfig cm_config = {}, bool path_cache = false);
  ~SimHost() override;
  // Prefetches what a wake reads (sim::WarmStage: the object, then its
  // endpoints); no effect on results. The fabric calls it (WarmForArrival,
  // `owner` the SimHost) as a MAD for this host crosses it; a caller about
  // to use a cold host can too.
  void Warm(sim::WarmStage stage) const;
  static void WarmForArrival(const void* owner, sim::WarmStage stage) {
    static_cast<const SimHost*>(owner)->Warm(stage);
  }

  absl::optional<TimePoint> NextDeadline() const override;
  void Wake(TimePoint now) override;
  void Touch() {
    dirty_ = true;
    scheduler_.DeadlineChanged(this);
  }

  const std::string& name() const { return name_; }
  const mad::LocalPort& port() const { return transport_->port(); }
  // Asks the port's router for the REQs of `service_id` (a no-op when the
  // host owns its QP1); AlreadyExists when another process has it.
  absl::Status ClaimService(uint64_t service_id) {
    return transport_->ClaimService(service_id, ~uint64_t{0}, false);
  }
  // This process's side of the host's router, or null when it owns QP1.
  const router::LocalRouterClient* router_client() const { return routed_.get(); }
  cm::CmEndpoint& cm() { return *cm_; }
  sa::SaClient& sa() { return *sa_; }
  mad::Agent& agent() { return *agent_; }
  // The SA client's PathRecord cache (Create's `path_cache`), or null.
  const sa::PathCache* path_cache() const { return path_cache_.get(); }
  uint64_t send_errors() const { return send_errors_; }
  // Wakes, and those in which nothing happened: no MAD drained, nothing sent,
  // no event or SA result (a timer wheel's cascade, for instance).
  uint64_t wakes() const { return wakes_; }
  uint64_t idle_wakes() const { return idle_wakes_; }

  // Hot: read by every wake (declared before the callbacks below).
 private:
  sim::Scheduler& scheduler_;
  mad::Transport* transport_ = nullptr;  // tap_, qp1_ or routed_
  std::unique_ptr<sim::SimTransport> qp1_;
  std::unique_ptr<cm::CmEndpoint> cm_;
  std::unique_ptr<mad::Agent> agent_;
  std::unique_ptr<sa::SaClient> sa_;
  bool dirty_ = false;
  uint64_t wakes_ = 0;
  uint64_t idle_wakes_ = 0;

 public:
  std::function<void(SimHost&, TimePoint, const cm::CmEvent&)> on_cm_event;
  std::function<void(SimHost&, TimePoint, sa::SaResult)> on_sa_result;
  // Every CM MAD this host sends (after the transport accepted it).
  std::function<void(std::span<const uint8_t>)> on_cm_sent;
  // The end of what a wake reads (see the class comment).
  static constexpr size_t kHotBytes = 192;

 private:
  SimHost(sim::Scheduler& scheduler, std::string name) : scheduler_(scheduler), name_(name) {}
  // The endpoint, agent and SA client over transport_.
  void Build(TimePoint now, uint64_t seed, cm::CmConfig cm_config, bool path_cache);
  // True if anything was sent or delivered to the callbacks.
  bool Flush(TimePoint now);

  // Cold: set up once, or used by the router and the timeline only.
  uint64_t send_errors_ = 0;
  std::string name_;
  std::unique_ptr<TapTransport> tap_;
  std::unique_ptr<router::LocalRouterClient> routed_;  // instead of qp1_ behind a router
  std::unique_ptr<sa::PathCache> path_cache_;
};

struct SimWorldOptions {
  uint64_t seed = 1;
  sim::LinkParams link;
  std::string topology_file;  // ibsim net file; "" = `topology`, or two hosts behind one switch
  absl::optional<sim::Topology> topology;  // used when topology_file is ""
  size_t max_hosts = 2;       // SimHosts on the first CA ports (0 = all)
  sa::SimSaConfig sa;
  cm::CmConfig cm;
  bool path_cache = false;  // each host's SA client caches PathRecords
  // uscm processes per CA port. 1: the host's one process owns QP1 (no
  // router). More: a SimRouterHost owns QP1 and each process is a SimHost
  // behind it; hosts() lists the processes host by host.
  size_t procs_per_host = 1;
  // Prefetch a host before it is used (SimHost::Warm): as a MAD for it
  // crosses the fabric (sim::FabricOptions::warm_arrivals) and, in a
  // workload, the clients of the next connections. Results are the same
  // either way (warm_hosts_test). Unset: on from kWarmHostsFrom hosts, where
  // the hosts' state no longer stays in the cache between two uses (below
  // it a prefetch finds its line in and only costs its instruction;
  // sim_scale_bench --warm-hosts=ab measures both, docs/SIMULATOR.md).
  absl::optional<bool> warm_hosts;
};

inline constexpr size_t kWarmHostsFrom = 512;

class SimRouterHost;

class SimWorld {
 public:
  static absl::StatusOr<std::unique_ptr<SimWorld>> Create(const SimWorldOptions& options,
                                                          Timeline* timeline);
  ~SimWorld();

  sim::Scheduler& scheduler() { return *scheduler_; }
  sim::Fabric& fabric() { return *fabric_; }
  sa::SimSa& sa() { return *sa_; }
  // The processes: one per CA port, or procs_per_host() of each, in order.
  std::vector<std::unique_ptr<SimHost>>& hosts() { return hosts_; }
  size_t procs_per_host() const { return procs_per_host_; }
  // SimWorldOptions::warm_hosts: the fabric's warm_arrivals holds it.
  bool warm_hosts() const { return fabric_->warm_arrivals(); }
  // Changed during a run (a bench's A/B).
  void set_warm_hosts(bool on) { fabric_->set_warm_arrivals(on); }
  // The routers, one per CA port, when procs_per_host() > 1.
  std::vector<std::unique_ptr<SimRouterHost>>& routers() { return routers_; }
  std::string sa_name() const;

 private:
  SimWorld() = default;
  std::unique_ptr<sim::Scheduler> scheduler_;
  std::unique_ptr<sim::Fabric> fabric_;
  std::unique_ptr<sa::SimSa> sa_;
  std::vector<std::unique_ptr<SimRouterHost>> routers_;  // before hosts_: outlive them
  std::vector<std::unique_ptr<SimHost>> hosts_;
  size_t procs_per_host_ = 1;
};

// The CM's view of a path the SA returned (cm/path_from_record.h).
using cm::PathFromRecord;

// Private data / bytes as text: printable ASCII quoted (trailing zeros cut),
// anything else as hex.
std::string Printable(std::span<const uint8_t> bytes);

}  // namespace uscm::tools

#endif  // USCM_TOOLS_SIM_WORLD_H_
