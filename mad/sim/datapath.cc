// The per-MAD datapath of the simulated fabric and SimTransport. A MAD is one
// slot in a pool; each hop is one scheduler event carrying the slot index.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mad/sim/fabric.h"

namespace uscm::sim {
namespace {

constexpr uint16_t kMaxUnicastLid = 0xBFFF;
constexpr uint16_t kNoPort = 0xFFFF;
constexpr int kMaxHops = 64;
constexpr uint32_t kMaxQpn = 0xFFFFFF;
// LRH 8 + BTH 12 + DETH 8 + ICRC 4 + VCRC 2 around every UD MAD; GRH 40.
constexpr size_t kUdHeaderBytes = 34;
constexpr size_t kGrhBytes = 40;

uint64_t QpKey(int endpoint, uint32_t qpn) {
  return (static_cast<uint64_t>(endpoint) << 24) | qpn;
}

// FNV-1a over `bytes` little-endian bytes of `v`, the same on every host.
void Mix(uint64_t& h, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    h ^= (v >> (8 * i)) & 0xFF;
    h *= 0x100000001b3ULL;
  }
}

// FNV-1a step over one 64-bit word: 8x fewer multiplies for the payload.
void MixWord(uint64_t& h, uint64_t w) {
  h ^= w;
  h *= 0x100000001b3ULL;
}

// A P_Key matches when the low 15 bits agree and at least one side is a full member.
bool PkeyMatch(uint16_t a, uint16_t b) {
  return (a & 0x7FFF) == (b & 0x7FFF) && ((a | b) & 0x8000) != 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SimTransport>> Fabric::Open(absl::string_view node_id, int port,
                                                           uint32_t qpn, uint32_t qkey) {
  const Endpoint* ep = FindEndpoint(node_id, port);
  if (ep == nullptr) {
    return absl::NotFoundError(absl::StrCat("\"", node_id, "\" port ", port,
                                            " is not a connected port (a switch opens port 0)"));
  }
  if (qpn == 0) return absl::InvalidArgumentError("QP0 (SMI) is not simulated");
  if (qpn > kMaxQpn) return absl::InvalidArgumentError("QPN exceeds 24 bits");
  if (qpn == mad::kQp1 && qkey != mad::kQp1Qkey) {
    return absl::InvalidArgumentError("QP1 uses Q_Key 0x80010000");
  }
  const int e = static_cast<int>(ep - endpoints_.data());
  if (qps_.contains(QpKey(e, qpn))) {
    return absl::AlreadyExistsError(absl::StrCat("QPN ", qpn, " is already open on \"", node_id,
                                                 "\" port ", port));
  }
  std::unique_ptr<SimTransport> t(new SimTransport(this, e, qpn, qkey, LocalPortOf(*ep)));
  qps_[QpKey(e, qpn)] = t.get();
  if (qpn == mad::kQp1) qp1_of_endpoint_[e] = t.get();
  return t;
}

void Fabric::Unregister(SimTransport* t) {
  qps_.erase(QpKey(t->endpoint_, t->qpn_));
  if (t->qpn_ == mad::kQp1) {
    qp1_of_endpoint_[t->endpoint_] = nullptr;
    warmer_of_endpoint_[t->endpoint_] = ArrivalWarmer{};
  }
}

uint32_t Fabric::AllocSlot() {
  if (free_slots_.empty()) {
    slots_.emplace_back();
    return static_cast<uint32_t>(slots_.size() - 1);
  }
  const uint32_t s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

void Fabric::FreeSlot(uint32_t slot) { free_slots_.push_back(slot); }

absl::Status Fabric::Send(SimTransport& from, const mad::MadAddress& to,
                          std::span<const uint8_t> mad) {
  if (mad.empty() || mad.size() > mad::kMadSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("MAD is ", mad.size(), " bytes; the simulated fabric carries 1..256"));
  }
  uint16_t dlid = to.lid;
  if (dlid == 0 && to.has_grh) {
    const Endpoint* by_gid = FindByGid(to.gid);
    if (by_gid == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("no port has DGID ", to.gid.ToString()));
    }
    dlid = by_gid->lid;
  }
  if (dlid == 0) return absl::InvalidArgumentError("DLID 0 is reserved; give a LID or a GRH DGID");
  if (dlid == mad::kPermissiveLid) {
    return absl::InvalidArgumentError("the permissive LID is for directed-route SMPs (not simulated)");
  }
  if (dlid > kMaxUnicastLid) return absl::InvalidArgumentError("multicast LIDs are not simulated");
  if (to.qpn > kMaxQpn) return absl::InvalidArgumentError("destination QPN exceeds 24 bits");
  if (to.pkey_index >= options_.pkeys.size()) {
    return absl::InvalidArgumentError(absl::StrCat("P_Key index ", to.pkey_index, " is outside the ",
                                                   options_.pkeys.size(), "-entry P_Key table"));
  }
  const int e = from.endpoint_;
  const Endpoint& ep = endpoints_[e];
  const uint32_t slot = AllocSlot();
  Packet& p = slots_[slot];
  p.id = next_packet_++;
  p.slid = ep.lid;
  p.dlid = dlid;
  p.src_qpn = from.qpn_;
  p.dst_qpn = to.qpn;
  // IBA: a Q_Key with the high bit set means "use the QP's own Q_Key".
  p.qkey = (to.qkey & 0x80000000u) ? from.qkey_ : to.qkey;
  p.pkey = options_.pkeys[to.pkey_index];
  p.sl = to.sl;
  p.has_grh = to.has_grh;
  p.sgid = ep.gid;
  p.dgid = to.gid;
  p.hop_limit = to.hop_limit;
  p.traffic_class = to.traffic_class;
  p.flow_label = to.flow_label;
  p.link = -1;
  p.hops = 0;
  p.len = static_cast<uint16_t>(mad.size());
  std::memcpy(p.data.data(), mad.data(), mad.size());
  counters_.sent++;
  if (p.dst_qpn == mad::kQp1) Warm(dlid, WarmStage::kObject);  // kParts on the last hop
  if (dlid == ep.lid) {  // loopback inside the CA: no link, but never synchronous
    scheduler_.Schedule(scheduler_.Now(), [this, slot, e] { Deliver(slot, e); });
  } else if (ep.type == NodeType::kSwitch) {
    Forward(slot, ep.node);
  } else {
    Transmit(slot, attach_of_endpoint_[e]);
  }
  return absl::OkStatus();
}

void Fabric::Transmit(uint32_t slot, int node, int port) { Transmit(slot, attach_[node][port]); }

void Fabric::Transmit(uint32_t slot, Attach a) {
  if (a.link < 0) return Drop(slot, DropReason::kNoRoute);
  Link& l = links_[a.link];
  if (!l.up) return Drop(slot, DropReason::kLinkDown);
  Rng& rng = scheduler_.rng();
  if (rng.Bernoulli(l.params.loss)) return Drop(slot, DropReason::kLoss);
  const bool dup = rng.Bernoulli(l.params.duplicate);
  uint32_t copies[2] = {slot, slot};
  if (dup) {
    counters_.duplicated++;
    copies[1] = AllocSlot();
    slots_[copies[1]] = slots_[slot];
  }
  const uint64_t bw = l.params.bandwidth_bytes_per_s.value_or(l.rate_bytes_per_s);
  for (int c = 0; c < (dup ? 2 : 1); ++c) {
    Packet& p = slots_[copies[c]];
    const uint64_t bytes = p.len + kUdHeaderBytes + (p.has_grh ? kGrhBytes : 0);
    const Duration serialize = Duration::Nanos(static_cast<int64_t>((bytes * 1'000'000'000 + bw - 1) / bw));
    const TimePoint start = std::max(scheduler_.Now(), l.busy_until[a.dir]);
    l.busy_until[a.dir] = start + serialize;
    TimePoint arrive = l.busy_until[a.dir] + l.params.latency + rng.UpTo(l.params.jitter);
    if (rng.Bernoulli(l.params.reorder)) {
      counters_.reordered++;
      arrive += l.params.reorder_delay;
    }
    p.node = l.node[1 - a.dir];
    p.port = l.port[1 - a.dir];
    p.link = a.link;
    p.link_generation = l.generation;
    if (c == 0 && p.dst_qpn == mad::kQp1 && !is_switch_[p.node]) Warm(p.dlid, WarmStage::kParts);
    scheduler_.Schedule(arrive, [this, s = copies[c]] { Arrive(s); });
  }
}

void Fabric::Arrive(uint32_t slot) {
  const Packet& p = slots_[slot];
  const Link& l = links_[p.link];
  if (!l.up || l.generation != p.link_generation) return Drop(slot, DropReason::kLinkDown);
  if (is_switch_[p.node]) return Forward(slot, p.node);
  const int e = endpoint_of_[p.node][p.port];
  if (e < 0 || endpoints_[e].lid != p.dlid) return Drop(slot, DropReason::kNoRoute);
  Deliver(slot, e);
}

void Fabric::Forward(uint32_t slot, int sw) {
  Packet& p = slots_[slot];
  const int own = endpoint_of_[sw][0];
  if (own >= 0 && endpoints_[own].lid == p.dlid) return Deliver(slot, own);
  if (++p.hops > kMaxHops) return Drop(slot, DropReason::kHopLimit);
  const uint16_t out = OutPort(sw, p.dlid);
  if (out == kNoPort) return Drop(slot, DropReason::kNoRoute);
  Transmit(slot, sw, out);
}

void Fabric::Deliver(uint32_t slot, int endpoint) {
  const Packet& p = slots_[slot];
  const Endpoint& ep = endpoints_[endpoint];
  if (p.has_grh && p.dgid != ep.gid) return Drop(slot, DropReason::kGid);
  SimTransport* t = nullptr;
  if (p.dst_qpn == mad::kQp1) {
    t = qp1_of_endpoint_[endpoint];
  } else if (auto it = qps_.find(QpKey(endpoint, p.dst_qpn)); it != qps_.end()) {
    t = it->second;
  }
  if (t == nullptr) return Drop(slot, DropReason::kNoQp);
  if (p.qkey != t->qkey_) return Drop(slot, DropReason::kQkey);
  size_t pkey_index = 0;
  while (pkey_index < options_.pkeys.size() && !PkeyMatch(options_.pkeys[pkey_index], p.pkey)) {
    ++pkey_index;
  }
  if (pkey_index == options_.pkeys.size()) return Drop(slot, DropReason::kPkey);
  if (t->rx_count_ >= options_.receive_queue_depth) return Drop(slot, DropReason::kQueueFull);

  t->PushRx() = SimTransport::Rx{slot, static_cast<uint16_t>(pkey_index)};
  counters_.delivered++;
  Record(p, /*delivered=*/true, DropReason::kLoss);
  if (t->on_arrival_) t->on_arrival_();  // the slot is freed when the MAD is drained
}

// The destination QP's two hot lines (SimTransport's layout) are the
// fabric's to fetch; its owner's are the warmer's.
void Fabric::Warm(uint16_t dlid, WarmStage stage) const {
  if (!options_.warm_arrivals || dlid >= endpoint_by_lid_.size()) return;
  const int e = endpoint_by_lid_[dlid];
  if (e < 0) return;
  if (stage == WarmStage::kObject && qp1_of_endpoint_[e] != nullptr) {
    const char* qp = reinterpret_cast<const char*>(qp1_of_endpoint_[e]);
    __builtin_prefetch(qp);
    __builtin_prefetch(qp + 64);
  }
  const ArrivalWarmer& w = warmer_of_endpoint_[e];
  if (w.warm != nullptr) w.warm(w.owner, stage);
}

void Fabric::Drop(uint32_t slot, DropReason reason) {
  counters_.dropped[static_cast<int>(reason)]++;
  Record(slots_[slot], /*delivered=*/false, reason);
  FreeSlot(slot);
}

uint64_t Fabric::trace_digest() const {
  if (!options_.trace_digest) {
    fprintf(stderr, "sim::Fabric::trace_digest: FabricOptions::trace_digest is false\n");
    abort();
  }
  return digest_;
}

void Fabric::Record(const Packet& p, bool delivered, DropReason reason) {
  const TimePoint now = scheduler_.Now();
  if (options_.trace_digest) MixIntoDigest(p, now, delivered, reason);
  if (trace_) {
    trace_(TraceEvent{now, delivered, reason, p.slid, p.dlid, p.src_qpn, p.dst_qpn, p.len});
  }
}

void Fabric::MixIntoDigest(const Packet& p, TimePoint now, bool delivered, DropReason reason) {
  Mix(digest_, delivered ? 0xFF : static_cast<uint64_t>(reason), 1);
  Mix(digest_, static_cast<uint64_t>(now.nanos()), 8);
  Mix(digest_, p.slid, 2);
  Mix(digest_, p.dlid, 2);
  Mix(digest_, p.src_qpn, 4);
  Mix(digest_, p.dst_qpn, 4);
  Mix(digest_, p.len, 2);
  if (delivered) {  // the payload as little-endian 64-bit words, then the tail
    size_t i = 0;
    for (; i + 8 <= p.len; i += 8) {
      uint64_t w = 0;
      for (int k = 7; k >= 0; --k) w = (w << 8) | p.data[i + k];
      MixWord(digest_, w);
    }
    for (; i < p.len; ++i) Mix(digest_, p.data[i], 1);
  }
}

SimTransport::SimTransport(Fabric* fabric, int endpoint, uint32_t qpn, uint32_t qkey,
                           mad::LocalPort port)
    : fabric_(fabric), endpoint_(endpoint), qpn_(qpn), qkey_(qkey), port_(std::move(port)) {
  caps_.name = "sim";
  caps_.kernel_rmpp = false;
  caps_.can_reach_qp1 = true;
  caps_.max_receive_size = mad::kMadSize;
}

void SimTransport::set_arrival_warmer(ArrivalWarmer warmer) {
  if (qpn_ == mad::kQp1) fabric_->warmer_of_endpoint_[endpoint_] = warmer;
}

SimTransport::~SimTransport() {
  for (size_t i = 0; i < rx_count_; ++i) fabric_->FreeSlot(rx_[(rx_head_ + i) % rx_.size()].slot);
  fabric_->Unregister(this);
}

absl::Status SimTransport::Send(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  return fabric_->Send(*this, to, mad);
}

SimTransport::Rx& SimTransport::PushRx() {
  if (rx_count_ == rx_.size()) {
    std::vector<Rx> bigger(std::max<size_t>(16, rx_.size() * 2));
    for (size_t i = 0; i < rx_count_; ++i) bigger[i] = rx_[(rx_head_ + i) % rx_.size()];
    rx_ = std::move(bigger);
    rx_head_ = 0;
  }
  return rx_[(rx_head_ + rx_count_++) % rx_.size()];
}

size_t SimTransport::Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) {
  size_t n = 0;
  mad::MadAddress from;
  std::array<uint8_t, mad::kMadSize> data;
  while (n < max && rx_count_ > 0) {
    // Copied out of the pool first: the sink may send, which can grow the
    // pool and move its slots.
    const Rx rx = rx_[rx_head_];
    const Fabric::Packet& p = fabric_->slots_[rx.slot];
    from.lid = p.slid;
    from.qpn = p.src_qpn;
    from.qkey = p.qkey;
    from.pkey_index = rx.pkey_index;
    from.sl = p.sl;
    from.path_bits = 0;
    from.has_grh = p.has_grh;
    from.gid = p.has_grh ? p.sgid : mad::Gid{};
    from.hop_limit = p.has_grh ? p.hop_limit : 0;
    from.traffic_class = p.has_grh ? p.traffic_class : 0;
    from.flow_label = p.has_grh ? p.flow_label : 0;
    from.sgid_index = 0;
    const uint16_t len = p.len;
    std::memcpy(data.data(), p.data.data(), len);
    sink(mad::ReceivedMad{from, std::span<const uint8_t>(data.data(), len)});
    // Popped after the sink: if the sink ran the scheduler and the ring grew,
    // the MAD just handed out is again at rx_head_.
    rx_head_ = static_cast<uint32_t>((rx_head_ + 1) % rx_.size());
    rx_count_--;
    fabric_->FreeSlot(rx.slot);
    ++n;
  }
  return n;
}

}  // namespace uscm::sim
