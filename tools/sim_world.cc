#include "tools/sim_world.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/agent_pump.h"
#include "mad/sim/topology.h"
#include "mad/wire/printer.h"
#include "tools/sim_router_host.h"

namespace uscm::tools {

namespace {
constexpr uint8_t kCmClass = 0x07;
}  // namespace

// ---------------------------------------------------------------- Timeline

std::string FormatTime(TimePoint t) {
  return absl::StrFormat("[%12.3f us]", static_cast<double>(t.nanos()) / 1e3);
}

std::string Timeline::NameOf(uint16_t lid) const {
  auto it = names_.find(lid);
  return it != names_.end() ? it->second : absl::StrCat("lid ", lid);
}

void Timeline::Mad(TimePoint t, uint16_t from_lid, uint16_t to_lid, std::span<const uint8_t> mad,
                   const mad::capture::UdHeaders& headers) {
  ++mads_;
  std::string route = absl::StrCat(NameOf(from_lid), " -> ", NameOf(to_lid));
  absl::FPrintF(out_, "%s %-18s %s\n", FormatTime(t), route, mad::wire::Summary(mad));
  if (dump_) std::fputs(mad::wire::Dump(mad).c_str(), out_);
  if (pcap_ == nullptr) return;
  auto packet = mad::capture::WrapMad(headers, mad);
  absl::Status s = packet.ok() ? pcap_->WritePacket(t, *packet) : packet.status();
  if (!s.ok() && capture_status_.ok()) capture_status_ = s;
}

void Timeline::Event(TimePoint t, const std::string& who, const std::string& what) {
  ++events_;
  absl::FPrintF(out_, "%s %-18s * %s\n", FormatTime(t), who, what);
}

// ---------------------------------------------------------------- TapTransport

absl::Status TapTransport::Send(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  absl::Status s = inner_.Send(to, mad);
  if (s.ok()) {
    timeline_.Mad(clock_.Now(), port().lid, to.lid, mad,
                  mad::capture::OutgoingHeaders(port(), to));
  }
  return s;
}

size_t TapTransport::Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) {
  return inner_.Drain(
      [&](const mad::ReceivedMad& m) {
        if (m.from.lid == from_) {
          timeline_.Mad(clock_.Now(), m.from.lid, port().lid, m.data,
                        mad::capture::IncomingHeaders(port(), m.from));
        }
        sink(m);
      },
      max);
}

// ---------------------------------------------------------------- SimHost

absl::StatusOr<std::unique_ptr<SimHost>> SimHost::Create(sim::Fabric& fabric,
                                                         const std::string& node,
                                                         Timeline* timeline, uint64_t seed,
                                                         cm::CmConfig cm_config,
                                                         bool path_cache) {
  std::unique_ptr<SimHost> h(new SimHost(fabric.scheduler(), node));
  auto qp1 = fabric.Open(node);
  if (!qp1.ok()) return qp1.status();
  h->qp1_ = std::move(*qp1);
  h->transport_ = h->qp1_.get();
  if (timeline != nullptr) {
    h->tap_ = std::make_unique<TapTransport>(*h->qp1_, *timeline, fabric.scheduler().clock(),
                                             fabric.sm_lid());
    h->transport_ = h->tap_.get();
  }
  h->Build(fabric.scheduler().Now(), seed, cm_config, path_cache);
  SimHost* raw = h.get();
  h->qp1_->set_on_arrival([raw] { raw->scheduler_.DeadlineChanged(raw); });
  h->qp1_->set_arrival_warmer({&SimHost::WarmForArrival, raw});
  fabric.scheduler().AddActor(raw, sim::DeadlineUpdates::kNotified);
  return h;
}

absl::StatusOr<std::unique_ptr<SimHost>> SimHost::CreateProcess(
    sim::Scheduler& scheduler, router::LocalRouter& router, const std::string& name,
    uint64_t seed, cm::CmConfig cm_config, bool path_cache) {
  std::unique_ptr<SimHost> h(new SimHost(scheduler, name));
  auto client = router.Connect();
  if (!client.ok()) return client.status();
  h->routed_ = std::move(*client);
  h->transport_ = h->routed_.get();
  // The comm ID range the router gave this process, as cm::Node does.
  cm_config.comm_id_prefix_bits = h->routed_->caps().comm_id_prefix_bits;
  cm_config.comm_id_prefix = h->routed_->caps().comm_id_prefix;
  h->Build(scheduler.Now(), seed, cm_config, path_cache);
  SimHost* raw = h.get();
  h->routed_->set_on_arrival([raw] { raw->scheduler_.DeadlineChanged(raw); });
  scheduler.AddActor(raw, sim::DeadlineUpdates::kNotified);
  return h;
}

void SimHost::Build(TimePoint now, uint64_t seed, cm::CmConfig cm_config, bool path_cache) {
  cm_ = std::make_unique<cm::CmEndpoint>(transport_->port(), cm_config, seed);
  mad::AgentConfig ac = mad::ConfigFor(*transport_);
  ac.first_tid = static_cast<uint32_t>(seed * 0x10000 + 1);
  agent_ = std::make_unique<mad::Agent>(ac, now);
  sa::SaClientConfig sc;
  sc.sa = sa::SaAddressFor(transport_->port());
  if (path_cache) {
    path_cache_ = std::make_unique<sa::PathCache>();
    sc.path_cache = path_cache_.get();
  }
  sa_ = std::make_unique<sa::SaClient>(agent_.get(), sc);
}

// The hot part is the first three lines (see the class comment).
static_assert(sizeof(sim::Actor) + sizeof(void*) * 6 + 3 * sizeof(uint64_t) +
                      3 * sizeof(std::function<void()>) ==
                  192,
              "SimHost's hot members no longer fill exactly three cache lines");

SimHost::~SimHost() {
  scheduler_.RemoveActor(this);
  sa_.reset();  // before path_cache_, declared after it
}

absl::optional<TimePoint> SimHost::NextDeadline() const {
  const size_t pending = qp1_ != nullptr ? qp1_->pending() : routed_->pending();
  if (dirty_ || pending > 0 || agent_->has_output() || sa_->pending_results() > 0) {
    return TimePoint::Epoch();
  }
  absl::optional<TimePoint> d = cm_->NextDeadline();
  absl::optional<TimePoint> a = agent_->NextDeadline();
  if (a && (!d || *a < *d)) d = a;
  return d;
}

void SimHost::Wake(TimePoint now) {
  dirty_ = false;
  ++wakes_;
  const size_t drained = transport_->Drain([&](const mad::ReceivedMad& m) {
    if (m.data.size() > 1 && m.data[1] == kCmClass) {
      cm_->HandleMad(now, m.from, m.data);
    } else {
      agent_->OnReceive(now, m);
    }
  });
  agent_->OnTimeout(now);
  cm_->HandleTimeout(now);
  if (!Flush(now) && drained == 0) ++idle_wakes_;
}

// kObject: this object's hot lines (nothing of it may be read yet).
// kParts: they are in, so the endpoints' hot lines can be found. Fetching
// the whole of each endpoint finds more of what a wake reads than its
// pointers' targets would (hash tables, slot maps: those depend on the MAD),
// for few lines.
void SimHost::Warm(sim::WarmStage stage) const {
  if (stage == sim::WarmStage::kObject) {
    const char* self = reinterpret_cast<const char*>(this);
    for (size_t i = 0; i < kHotBytes; i += 64) __builtin_prefetch(self + i);
    return;
  }
  cm_->PrefetchForWake();
  agent_->PrefetchForWake();
  sa_->PrefetchForWake();
}

bool SimHost::Flush(TimePoint now) {
  bool any = false;
  for (bool moved = true; moved;) {
    moved = false;
    cm::OutgoingMad out;
    while (cm_->PollTransmit(&out)) {
      moved = true;
      if (!transport_->Send(out.to, out.mad).ok()) {
        ++send_errors_;
      } else if (on_cm_sent) {
        on_cm_sent(out.mad);
      }
    }
    any = any || agent_->has_output();
    if (!mad::FlushTransmit(*transport_, *agent_).ok()) ++send_errors_;
    cm::CmEvent ev;
    while (cm_->PollEvent(&ev)) {
      moved = true;
      if (on_cm_event) on_cm_event(*this, now, ev);
    }
    while (absl::optional<sa::SaResult> r = sa_->PollResult()) {
      moved = true;
      if (on_sa_result) on_sa_result(*this, now, std::move(*r));
    }
    if (agent_->has_output()) moved = true;
    any = any || moved;
  }
  return any;
}

// ---------------------------------------------------------------- SimWorld

absl::StatusOr<std::unique_ptr<SimWorld>> SimWorld::Create(const SimWorldOptions& options,
                                                           Timeline* timeline) {
  if (absl::Status s = sim::ValidateLinkParams(options.link); !s.ok()) return s;
  sim::Topology topo;
  if (options.topology_file.empty()) {
    topo = options.topology.has_value() ? *options.topology : sim::TwoHostsOneSwitch();
  } else {
    auto loaded = sim::LoadNetFile(options.topology_file);
    if (!loaded.ok()) return loaded.status();
    topo = std::move(*loaded);
  }
  std::unique_ptr<SimWorld> w(new SimWorld());
  w->scheduler_ = std::make_unique<sim::Scheduler>(options.seed);
  sim::FabricOptions fo;
  fo.link = options.link;
  auto fabric = sim::Fabric::Create(*w->scheduler_, topo, fo);
  if (!fabric.ok()) return fabric.status();
  w->fabric_ = std::move(*fabric);
  auto sa = sa::SimSa::Create(*w->fabric_, options.sa);
  if (!sa.ok()) return sa.status();
  w->sa_ = std::move(*sa);
  if (timeline != nullptr) timeline->Name(w->fabric_->sm_lid(), w->sa_name());
  if (options.procs_per_host < 1 || options.procs_per_host > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "procs_per_host is ", options.procs_per_host,
        "; a host's router has slots for 1..255 processes"));
  }
  w->procs_per_host_ = options.procs_per_host;

  uint64_t seed = options.seed * 1000;
  size_t ports = 0;
  for (const sim::Endpoint& ep : w->fabric_->endpoints()) {
    if (ep.type != sim::NodeType::kCa || ep.lid == w->fabric_->sm_lid()) continue;
    if (options.max_hosts != 0 && ports >= options.max_hosts) break;
    ++ports;
    if (timeline != nullptr) timeline->Name(ep.lid, ep.node_id);
    if (options.procs_per_host == 1) {
      auto host = SimHost::Create(*w->fabric_, ep.node_id, timeline, ++seed, options.cm,
                                  options.path_cache);
      if (!host.ok()) return host.status();
      w->hosts_.push_back(std::move(*host));
      continue;
    }
    auto router = SimRouterHost::Create(*w->fabric_, ep.node_id, timeline);
    if (!router.ok()) return router.status();
    for (size_t p = 0; p < options.procs_per_host; ++p) {
      auto proc = SimHost::CreateProcess(*w->scheduler_, (*router)->router(),
                                         absl::StrCat(ep.node_id, "/p", p), ++seed, options.cm,
                                         options.path_cache);
      if (!proc.ok()) return proc.status();
      w->hosts_.push_back(std::move(*proc));
    }
    w->routers_.push_back(std::move(*router));
  }
  if (w->hosts_.empty()) {
    return absl::InvalidArgumentError("the topology has no CA port besides the SM's");
  }
  w->set_warm_hosts(options.warm_hosts.value_or(w->hosts_.size() >= kWarmHostsFrom));
  return w;
}

SimWorld::~SimWorld() {
  hosts_.clear();
  routers_.clear();
  sa_.reset();
}

std::string SimWorld::sa_name() const {
  const sim::Endpoint* sm = fabric_->FindByLid(fabric_->sm_lid());
  return sm == nullptr ? "SA" : absl::StrCat(sm->node_id, "(SA)");
}

// ---------------------------------------------------------------- helpers

std::string Printable(std::span<const uint8_t> bytes) {
  size_t n = bytes.size();
  while (n > 0 && bytes[n - 1] == 0) --n;
  bool text = n > 0;
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] < 0x20 || bytes[i] > 0x7e) text = false;
  }
  if (n == 0) return "(none)";
  if (text) return absl::StrCat("\"", std::string(bytes.begin(), bytes.begin() + n), "\"");
  std::string hex;
  for (size_t i = 0; i < n; ++i) absl::StrAppendFormat(&hex, "%02x", bytes[i]);
  return hex;
}

}  // namespace uscm::tools
