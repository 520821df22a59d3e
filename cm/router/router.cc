#include "cm/router/router.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"
#include "cm/router/listen_address.h"
#include "mad/wire/cm_message.h"

namespace uscm::router {

namespace w = mad::wire;

Router::Router(mad::Transport& wire, RouterOptions options, ClientSink sink)
    : wire_(wire), options_(options), sink_(std::move(sink)) {
  assert(options_.slot_bits >= 1 && options_.slot_bits <= 16);
  clients_.resize(size_t{1} << options_.slot_bits);
}

Router::Client* Router::LiveClient(uint8_t slot) {
  if (slot == 0 || slot >= clients_.size() || !clients_[slot].live) return nullptr;
  return &clients_[slot];
}

size_t Router::tracked(uint8_t slot) const {
  if (slot == 0 || slot >= clients_.size()) return 0;
  const Client& c = clients_[slot];
  return c.conns.size() + c.pending_reqs.size() + c.pending_sidr.size();
}

absl::StatusOr<Welcome> Router::AddClient(const ClientCredentials& creds) {
  const size_t n = clients_.size();
  for (size_t i = 0; i < n - 1; ++i) {
    const size_t slot = 1 + (next_slot_ - 1 + i) % (n - 1);
    if (clients_[slot].live) continue;
    clients_[slot] = Client{};
    clients_[slot].live = true;
    clients_[slot].creds = creds;
    next_slot_ = static_cast<uint8_t>(1 + slot % (n - 1));
    ++live_clients_;
    ++counters_.clients_accepted;
    Welcome wl;
    wl.slot = static_cast<uint8_t>(slot);
    wl.comm_id_prefix_bits = options_.slot_bits;
    wl.comm_id_prefix = static_cast<uint32_t>(slot);
    wl.kernel_rmpp = wire_.caps().kernel_rmpp;
    wl.max_receive_size = static_cast<uint32_t>(wire_.caps().max_receive_size);
    wl.port = wire_.port();
    return wl;
  }
  ++counters_.clients_refused;
  return absl::ResourceExhaustedError(absl::StrCat(
      "router: all ", n - 1, " client slots are taken (slot_bits = ", options_.slot_bits, ")"));
}

void Router::RemoveClient(uint8_t slot) {
  Client* c = LiveClient(slot);
  if (c == nullptr) return;
  Cleanup(slot, *c);
  LeaveGroupsOf(slot);
  ForgetPathWaiters(slot);
  DropBlocks(slot);
  std::erase_if(claims_, [slot](const Claim& cl) { return cl.slot == slot; });
  for (uint32_t t : c->tids) {
    auto it = tid_by_router_.find(t);
    if (it == tid_by_router_.end() || it->second.slot != slot) continue;
    tid_by_client_.erase({slot, it->second.client_tid});
    tid_by_router_.erase(it);
  }
  *c = Client{};
  --live_clients_;
  ++counters_.clients_gone;
}

void Router::Refuse(uint8_t slot, absl::Status why) {
  ++counters_.refused_mads;
  auto frame = EncodeRefused(why);
  sink_(slot, frame);
}

void Router::ToClient(uint8_t slot, const mad::MadAddress& from, std::span<const uint8_t> mad) {
  EncodeMad(from, mad, &frame_buf_);
  ++counters_.to_clients;
  sink_(slot, frame_buf_);
}

size_t CmAttrIndex(std::span<const uint8_t> mad) {
  if (mad.size() < 24) return 16;
  const uint16_t attr = static_cast<uint16_t>(mad[16] << 8 | mad[17]);
  return attr >= 0x10 && attr < 0x20 ? attr - 0x10 : 16;
}

std::string CmAttrCounts(const std::array<uint64_t, 17>& counts) {
  std::string out;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    const char* name = i < 16 ? w::CmAttrName(static_cast<w::CmAttr>(0x10 + i)) : nullptr;
    absl::StrAppend(&out, out.empty() ? "" : " ", name != nullptr ? name : "other", " ",
                    counts[i]);
  }
  return out.empty() ? "none" : out;
}

void Router::ToWire(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  if (wire_.Send(to, mad).ok()) {
    ++counters_.to_wire;
    if (mad.size() >= 24 && mad[1] == static_cast<uint8_t>(w::MgmtClass::kCommMgt)) {
      ++counters_.cm_to_wire[CmAttrIndex(mad)];
    }
  } else {
    ++counters_.send_errors;
  }
}

void Router::HandleFrame(uint8_t slot, std::span<const uint8_t> frame) {
  Client* c = LiveClient(slot);
  if (c == nullptr) return;
  auto type = PeekFrame(frame);
  if (!type.ok()) {
    ++counters_.malformed_frames;
    sink_(slot, EncodeRefused(type.status()));
    return;
  }
  switch (*type) {
    case FrameType::kMad: {
      auto m = DecodeMad(frame);
      if (!m.ok()) {
        ++counters_.malformed_frames;
        sink_(slot, EncodeRefused(m.status()));
        return;
      }
      HandleClientMad(slot, *c, *m);
      return;
    }
    case FrameType::kClaim:
    case FrameType::kRelease: {
      auto claim = DecodeClaim(frame);
      if (!claim.ok()) {
        ++counters_.malformed_frames;
        sink_(slot, EncodeRefused(claim.status()));
        return;
      }
      ReplyFrame reply{claim->request, absl::OkStatus()};
      if (*type == FrameType::kClaim) {
        reply.status = HandleClaim(slot, *claim);
      } else {
        HandleRelease(slot, *claim);
      }
      sink_(slot, EncodeReply(reply));
      return;
    }
    case FrameType::kLease: {
      auto lease = DecodeLease(frame);
      if (!lease.ok()) {
        ++counters_.malformed_frames;
        sink_(slot, EncodeRefused(lease.status()));
        return;
      }
      HandleLease(slot, *lease);
      return;
    }
    default:
      ++counters_.malformed_frames;
      sink_(slot, EncodeRefused(absl::InvalidArgumentError(absl::StrCat(
                      "router: a client may not send frame type ", static_cast<int>(*type)))));
      return;
  }
}

size_t Router::PollWire(size_t max) {
  return wire_.Drain([this](const mad::ReceivedMad& m) { RouteWire(m); }, max);
}

void Router::RouteWire(const mad::ReceivedMad& m) {
  ++counters_.from_wire;
  if (m.data.size() < 24) {
    ++counters_.wire_malformed;
    return;
  }
  if (m.data[1] == static_cast<uint8_t>(w::MgmtClass::kCommMgt)) {
    ++counters_.cm_from_wire[CmAttrIndex(m.data)];
    RouteWireCm(m);
    return;
  }
  // Everything else answers a transaction a client started: by TID (the
  // low 32 bits: ib_umad overwrites the high half with its agent ID).
  const uint32_t low = static_cast<uint32_t>(m.data[12]) << 24 | m.data[13] << 16 |
                       m.data[14] << 8 | m.data[15];
  if (IsOwnTransaction(low)) {
    ++counters_.mc_own_answers;
    return;
  }
  if (!mc_txns_.empty()) RouteWireMcMember(m, low);
  const size_t waiters = sa_flight_keys_.empty() ? 0 : AnswerPathWaiters(low, m);
  auto it = tid_by_router_.find(low);
  if (it == tid_by_router_.end() || LiveClient(it->second.slot) == nullptr) {
    if (waiters == 0) ++counters_.wire_unroutable;
    return;
  }
  mad_buf_.assign(m.data.begin(), m.data.end());
  for (int i = 0; i < 8; ++i) {
    mad_buf_[8 + i] = static_cast<uint8_t>(it->second.client_tid >> (56 - 8 * i));
  }
  ToClient(it->second.slot, m.from, mad_buf_);
}

absl::optional<uint8_t> Router::ListenerFor(uint64_t service_id,
                                            const mad::ListenAddress& dst) const {
  const Claim* wildcard = nullptr;
  for (const Claim& c : claims_) {
    if (c.kind != mad::ClaimKind::kListen) continue;
    if ((service_id & c.mask) != (c.service_id & c.mask)) continue;
    switch (Match(c.address, dst)) {
      case ListenMatch::kExact:
        return c.slot;
      case ListenMatch::kWildcard:
        if (wildcard == nullptr ||
            (wildcard->address.family != dst.family && c.address.family == dst.family)) {
          wildcard = &c;
        }
        break;
      case ListenMatch::kNo:
        break;
    }
  }
  if (wildcard == nullptr) return absl::nullopt;
  return wildcard->slot;
}

Router::Track* Router::TrackFor(uint32_t local_comm_id, uint8_t* slot) {
  *slot = slot_of(local_comm_id);
  Client* c = LiveClient(*slot);
  if (c == nullptr) return nullptr;
  auto it = c->conns.find(local_comm_id);
  return it == c->conns.end() ? nullptr : &it->second;
}

void Router::RouteWireCm(const mad::ReceivedMad& m) {
  auto msg = w::ParseAnyCm(m.data);
  if (!msg.ok()) {
    ++counters_.wire_malformed;
    return;
  }
  uint8_t slot = 0;
  if (const auto* req = std::get_if<w::ReqRepr>(&*msg)) {
    auto owner = ListenerFor(req->service_id, RequestDestination(req->private_data.bytes()));
    if (!owner.has_value()) {
      ++counters_.wire_unroutable;
      return;
    }
    Client& c = clients_[*owner];
    const PeerKey key = KeyOf(req->local_comm_id, m.from);
    if (c.answered_reqs.contains(key)) {
      // A retransmission of a REQ the client answered (its REP was lost or
      // late): its CM decides (drop, or MRA / REP again, as the kernel's
      // cm_dup_req_handler); the connection is tracked already.
      ++counters_.duplicate_reqs;
    } else if (c.pending_reqs.size() < options_.max_tracked_per_client) {
      c.pending_reqs[key] = PendingReq{req->envelope.transaction_id, req->local_qpn, m.from};
    } else {
      ++counters_.untracked;
    }
    ToClient(*owner, m.from, m.data);
    return;
  }
  if (const auto* sreq = std::get_if<w::SidrReqRepr>(&*msg)) {
    auto owner = ListenerFor(sreq->service_id, RequestDestination(sreq->private_data.bytes()));
    if (!owner.has_value()) {
      ++counters_.wire_unroutable;
      return;
    }
    Client& c = clients_[*owner];
    if (c.pending_sidr.size() < options_.max_tracked_per_client) {
      c.pending_sidr.insert(KeyOf(sreq->request_id, m.from));
    } else {
      ++counters_.untracked;
    }
    ToClient(*owner, m.from, m.data);
    return;
  }
  if (const auto* srep = std::get_if<w::SidrRepRepr>(&*msg)) {
    slot = slot_of(srep->request_id);
    if (LiveClient(slot) == nullptr) {
      ++counters_.wire_unroutable;
      return;
    }
    ToClient(slot, m.from, m.data);
    return;
  }
  // Every other message names our comm ID in its RemoteCommID field.
  uint32_t ours = 0;
  std::visit(
      [&](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        if constexpr (requires { r.remote_comm_id; }) {
          if constexpr (!std::is_same_v<R, w::ReqRepr>) ours = r.remote_comm_id;
        }
      },
      *msg);
  Track* t = TrackFor(ours, &slot);
  if (ours == 0 || LiveClient(slot) == nullptr) {
    ++counters_.wire_unroutable;
    return;
  }
  if (t != nullptr) {
    if (const auto* rep = std::get_if<w::RepRepr>(&*msg)) {
      t->remote_comm_id = rep->local_comm_id;
      t->remote_qpn = rep->local_qpn;
      if (t->phase == Phase::kReqSent) t->phase = Phase::kRepRcvd;
    } else if (std::holds_alternative<w::RtuRepr>(*msg)) {
      t->phase = Phase::kEstablished;
    } else if (const auto* dreq = std::get_if<w::DreqRepr>(&*msg)) {
      // Kept until the client's DREP: a client that goes away first (qperf's
      // server exits without destroying the id) gets it sent by Cleanup.
      t->phase = Phase::kDreqRcvd;
      t->remote_comm_id = dreq->local_comm_id;
      t->tid = dreq->envelope.transaction_id;
    } else if (std::holds_alternative<w::RejRepr>(*msg) ||
               std::holds_alternative<w::DrepRepr>(*msg)) {
      ForgetConn(clients_[slot], ours);
    }
  }
  ToClient(slot, m.from, m.data);
}

}  // namespace uscm::router
