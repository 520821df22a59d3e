// Client -> wire: the ownership checks, the connection tracking that the
// crash cleanup needs, SA TID rewriting, and service ID claims.
#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "cm/router/listen_address.h"
#include "cm/router/router.h"
#include "mad/status_errno.h"
#include "mad/wire/cm_message.h"

namespace uscm::router {

namespace w = mad::wire;

namespace {

absl::Status NotOwned(const char* what, uint32_t id, uint8_t slot, uint8_t owner) {
  return absl::PermissionDeniedError(absl::StrCat(
      "router: ", what, " comm ID 0x", absl::Hex(id), " belongs to slot ", owner,
      "; this client is slot ", slot, " and may only send for its own IDs"));
}

}  // namespace

void Router::HandleClientMad(uint8_t slot, Client& c, const MadFrame& m) {
  if (m.mad[1] == static_cast<uint8_t>(w::MgmtClass::kCommMgt)) {
    if (absl::Status s = CheckAndTrackCm(slot, c, m.address, m.mad); !s.ok()) {
      Refuse(slot, std::move(s));
      return;
    }
    ToWire(m.address, m.mad);
    return;
  }
  HandleClientOther(slot, c, m);
}

absl::Status Router::CheckAndTrackCm(uint8_t slot, Client& c, const mad::MadAddress& to,
                                     std::span<const uint8_t> mad) {
  auto msg = w::ParseAnyCm(mad);
  if (!msg.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("router: CM MAD from the client does not parse: ", msg.status().message()));
  }
  auto own = [&](const char* what, uint32_t id) -> absl::Status {
    const uint8_t owner = slot_of(id);
    if (owner != slot) return NotOwned(what, id, slot, owner);
    return absl::OkStatus();
  };
  auto track = [&](uint32_t local) -> Track* {
    auto it = c.conns.find(local);
    if (it != c.conns.end()) return &it->second;
    if (c.conns.size() >= options_.max_tracked_per_client) {
      ++counters_.untracked;
      return nullptr;
    }
    return &c.conns[local];
  };

  if (const auto* req = std::get_if<w::ReqRepr>(&*msg)) {
    if (auto s = own("REQ.LocalCommID", req->local_comm_id); !s.ok()) return s;
    if (Track* t = track(req->local_comm_id)) {
      *t = Track{Phase::kReqSent, 0, 0, req->envelope.transaction_id, to};
    }
    return absl::OkStatus();
  }
  if (const auto* sreq = std::get_if<w::SidrReqRepr>(&*msg)) {
    return own("SIDR_REQ.RequestID", sreq->request_id);
  }
  if (const auto* srep = std::get_if<w::SidrRepRepr>(&*msg)) {
    if (c.pending_sidr.erase(KeyOf(srep->request_id, to)) == 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "router: SIDR_REP for request 0x", absl::Hex(srep->request_id), " of LID ", to.lid,
          ", which the router did not hand to this client"));
    }
    return absl::OkStatus();
  }
  if (const auto* rej = std::get_if<w::RejRepr>(&*msg)) {
    const PeerKey key = KeyOf(rej->remote_comm_id, to);
    if (rej->local_comm_id == 0) {
      // Rejecting a REQ before giving it an ID: it must be one we delivered.
      if (c.pending_reqs.erase(key) == 0) {
        return absl::PermissionDeniedError(absl::StrCat(
            "router: REJ with LocalCommID 0 for REQ 0x", absl::Hex(rej->remote_comm_id),
            " of LID ", to.lid, ", which the router did not hand to this client"));
      }
      return absl::OkStatus();
    }
    if (auto s = own("REJ.LocalCommID", rej->local_comm_id); !s.ok()) return s;
    c.pending_reqs.erase(key);
    ForgetConn(c, rej->local_comm_id);
    return absl::OkStatus();
  }
  uint32_t local = 0, remote = 0;
  w::CmAttr attr = w::AttrOf(*msg);
  std::visit(
      [&](const auto& r) {
        if constexpr (requires { r.local_comm_id; r.remote_comm_id; }) {
          local = r.local_comm_id;
          remote = r.remote_comm_id;
        }
      },
      *msg);
  if (auto s = own(w::CmAttrName(attr) ? w::CmAttrName(attr) : "CM", local); !s.ok()) return s;
  const PeerKey key = KeyOf(remote, to);
  switch (attr) {
    case w::CmAttr::kRep:
    case w::CmAttr::kMra: {
      auto p = c.pending_reqs.find(key);
      if (p != c.pending_reqs.end()) {
        if (Track* t = track(local)) {
          *t = Track{Phase::kPassive, remote, p->second.remote_qpn, p->second.tid, p->second.peer};
          c.answered_reqs[key] = local;
        }
        c.pending_reqs.erase(p);
      }
      break;
    }
    case w::CmAttr::kRtu: {
      auto it = c.conns.find(local);
      if (it != c.conns.end()) it->second.phase = Phase::kEstablished;
      break;
    }
    case w::CmAttr::kDreq:
    case w::CmAttr::kDrep:
      ForgetConn(c, local);
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

void Router::ForgetConn(Client& c, uint32_t local) {
  auto it = c.conns.find(local);
  if (it == c.conns.end()) return;
  const PeerKey key = KeyOf(it->second.remote_comm_id, it->second.peer);
  auto a = c.answered_reqs.find(key);
  if (a != c.answered_reqs.end() && a->second == local) c.answered_reqs.erase(a);
  c.conns.erase(it);
}

void Router::HandleClientOther(uint8_t slot, Client& c, const MadFrame& m) {
  uint64_t client_tid = 0;
  for (int i = 0; i < 8; ++i) client_tid = client_tid << 8 | m.mad[8 + i];
  uint32_t router_tid = 0;
  auto it = tid_by_client_.find({slot, client_tid});
  if (it != tid_by_client_.end()) {
    router_tid = it->second;
  } else {
    if (tid_by_router_.size() >= options_.tid_capacity && !tid_order_.empty()) {
      const uint32_t old = tid_order_.front();
      tid_order_.pop_front();
      auto o = tid_by_router_.find(old);
      if (o != tid_by_router_.end()) {
        tid_by_client_.erase({o->second.slot, o->second.client_tid});
        tid_by_router_.erase(o);
      }
    }
    do {
      router_tid = next_tid_++;
    } while (router_tid == 0 || tid_by_router_.contains(router_tid));
    tid_by_router_[router_tid] = TidEntry{slot, client_tid};
    tid_by_client_[{slot, client_tid}] = router_tid;
    tid_order_.push_back(router_tid);
    c.tids.push_back(router_tid);
    if (c.tids.size() > 2 * options_.tid_capacity) {
      std::erase_if(c.tids, [&](uint32_t t) {
        auto e = tid_by_router_.find(t);
        return e == tid_by_router_.end() || e->second.slot != slot;
      });
    }
  }
  mad_buf_.assign(m.mad.begin(), m.mad.end());
  for (int i = 0; i < 8; ++i) mad_buf_[8 + i] = 0;
  for (int i = 0; i < 4; ++i) mad_buf_[12 + i] = static_cast<uint8_t>(router_tid >> (24 - 8 * i));
  if (IsMcMemberChange(m.mad) &&
      HandleClientMcMember(slot, client_tid, router_tid, m, mad_buf_) == McVerdict::kHandled) {
    return;
  }
  if (CoalescePathQuery(slot, client_tid, router_tid, m.address, mad_buf_)) return;
  ToWire(m.address, mad_buf_);
}

absl::Status Router::HandleClaim(uint8_t slot, const ClaimFrame& claim) {
  ++counters_.claims;
  if ((claim.service_id & ~claim.mask) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("router: service ID 0x",
                                                   absl::Hex(claim.service_id),
                                                   " has bits outside mask 0x",
                                                   absl::Hex(claim.mask)));
  }
  const bool bind = claim.kind == mad::ClaimKind::kBind;
  // An rdma_cm IP port space service ID: 0x0000000001 | port space (8 bits)
  // << 16 | port (IBA A3.2.2, rdma_cm's RDMA_IB_IP_PS_MASK).
  constexpr uint64_t kIpPsMask = 0xFFFFFFFFFF000000ULL;
  constexpr uint64_t kIpPs = 0x0000000001000000ULL;
  const uint16_t port = static_cast<uint16_t>(claim.service_id);
  if ((claim.service_id & kIpPsMask) == kIpPs && (claim.mask & 0xFFFF) == 0xFFFF &&
      port != 0 && port < 1024 && !clients_[slot].creds.may_bind_privileged_ports) {
    ++counters_.claims_denied;
    return absl::PermissionDeniedError(absl::StrCat(
        "router: ", bind ? "binding" : "listening on", " port ", port,
        " (below 1024) needs CAP_NET_BIND_SERVICE, as in the kernel's rdma_cm; uid ",
        clients_[slot].creds.uid, " (pid ", clients_[slot].creds.pid,
        ") does not have it (errno EACCES)"));
  }
  // A claim the client holds already (same service, mask, address and kind)
  // is a re-claim: it changes the REUSEADDR bit (rdma_set_option after
  // rdma_bind_addr; the client counts its own ids per claim). Turned on it
  // meets no conflict: the flag only lets later binds of others share.
  Claim* held = nullptr;
  for (Claim& c : claims_) {
    if (c.slot == slot && c.service_id == claim.service_id && c.mask == claim.mask &&
        c.address == claim.address && c.kind == claim.kind) {
      held = &c;
      break;
    }
  }
  if (held != nullptr && (claim.reuse || !held->reuse)) {
    ++counters_.claim_updates;
    held->reuse = claim.reuse;
    return absl::OkStatus();
  }
  // A port of another client's block is taken from it first (or, claimed
  // there, is a conflict); given back when this claim fails after all.
  std::vector<LeasedPort> taken;
  if (held == nullptr) {
    if (absl::Status s = TakeLeased(claim, LeasedPortsCovered(slot, claim), &taken); !s.ok()) {
      return s;
    }
  }
  auto give_back = [&] {
    for (const LeasedPort& t : taken) t.block->page->GiveBack(t.index);
  };
  // The first conflict, a listener's before a bind's (the message names a
  // listener when there is one: REUSEADDR would not help against it).
  const Claim* conflict = nullptr;
  ListenOverlap overlap = ListenOverlap::kNone;
  for (const Claim& c : claims_) {
    const uint64_t common = claim.mask & c.mask;
    if ((claim.service_id & common) != (c.service_id & common)) continue;
    if (c.slot == slot) continue;  // the process's own endpoint checks its own overlaps
    // As the kernel's cma_check_port: two binds that both set REUSEADDR share
    // an address; a listen checks without it (rdma_listen), and a listener
    // no longer shares (the kernel clears its reuseaddr), so a listen claim
    // is never skipped.
    const bool shared = bind && claim.reuse && c.kind == mad::ClaimKind::kBind && c.reuse;
    if (shared) continue;
    const ListenOverlap o = Overlap(claim.address, c.address);
    if (o == ListenOverlap::kNone) continue;
    if (conflict == nullptr || (conflict->kind == mad::ClaimKind::kBind &&
                                c.kind == mad::ClaimKind::kListen)) {
      conflict = &c;
      overlap = o;
    }
  }
  if (conflict != nullptr) {
    give_back();
    const Claim& c = *conflict;
    ++counters_.claim_conflicts;
    const bool wildcard = overlap == ListenOverlap::kWildcard;
    const char* how = c.kind == mad::ClaimKind::kListen ? "a listener shares it with no one"
                      : !bind ? "a listen shares it with no one, REUSEADDR or not"
                              : "REUSEADDR on both binds shares it";
    return mad::WithErrno(
        absl::AlreadyExistsError(absl::StrCat(
            "router: service ID 0x", absl::Hex(claim.service_id), "/0x", absl::Hex(claim.mask),
            " on ", ListenAddressString(claim.address), " overlaps 0x", absl::Hex(c.service_id),
            "/0x", absl::Hex(c.mask), " on ", ListenAddressString(c.address),
            " that another process ", c.kind == mad::ClaimKind::kBind ? "has bound" : "listens on",
            " (slot ", c.slot, "); ",
            wildcard ? "a wildcard takes every address of its family"
                     : "an address has one owner per port",
            "; ", how, " (errno ", wildcard ? "EADDRNOTAVAIL" : "EADDRINUSE", ")")),
        wildcard ? EADDRNOTAVAIL : EADDRINUSE);
  }
  if (held != nullptr) {  // REUSEADDR off, and no other process shares the address
    ++counters_.claim_updates;
    held->reuse = false;
    return absl::OkStatus();
  }
  // Any local user may send claims to this root daemon: each client's are
  // bounded (RouterOptions::max_claims_per_client).
  const size_t held_by_client = static_cast<size_t>(
      std::count_if(claims_.begin(), claims_.end(), [slot](const Claim& c) { return c.slot == slot; }));
  if (held_by_client >= options_.max_claims_per_client) {
    give_back();
    ++counters_.claims_over_limit;
    return mad::WithErrno(
        absl::ResourceExhaustedError(absl::StrCat(
            "router: this process holds ", held_by_client,
            " claims (bound or listening ids) on the port, the most uscmd allows one process "
            "(uscmd --max-claims-per-client); destroy ids it no longer uses (errno ENOMEM)")),
        ENOMEM);
  }
  claims_.push_back(
      Claim{slot, claim.service_id, claim.mask, claim.reuse, claim.address, claim.kind});
  return absl::OkStatus();
}

void Router::HandleRelease(uint8_t slot, const ClaimFrame& claim) {
  auto it = std::find_if(claims_.begin(), claims_.end(), [&](const Claim& c) {
    return c.slot == slot && c.service_id == claim.service_id && c.mask == claim.mask &&
           c.address == claim.address && c.kind == claim.kind;
  });
  if (it == claims_.end()) return;
  claims_.erase(it);
  GiveBackLeased(slot, claim);
}

void Router::Cleanup(uint8_t slot, Client& c) {
  const uint64_t guid = wire_.port().node_guid;
  std::array<uint8_t, mad::kMadSize> buf{};
  for (const auto& [local, t] : c.conns) {
    absl::Status s;
    if (t.phase == Phase::kDreqRcvd) {
      // cm_destroy_id from DREQ_RCVD: the DREP, under the DREQ's TID.
      w::DrepRepr d;
      d.envelope.transaction_id = t.tid;
      d.local_comm_id = local;
      d.remote_comm_id = t.remote_comm_id;
      s = d.Emit(buf);
      if (s.ok()) ++counters_.cleanup_drep;
    } else if (t.phase == Phase::kEstablished) {
      w::DreqRepr d;
      d.envelope.transaction_id = t.tid;
      d.local_comm_id = local;
      d.remote_comm_id = t.remote_comm_id;
      d.remote_qpn = t.remote_qpn & 0xFFFFFF;
      s = d.Emit(buf);
      if (s.ok()) ++counters_.cleanup_dreq;
    } else {
      w::RejRepr r;
      r.envelope.transaction_id = t.tid;
      r.local_comm_id = local;
      r.remote_comm_id = t.remote_comm_id;
      if (t.phase == Phase::kReqSent) {
        // As cm_destroy_id from REQ_SENT: "timeout" with our CA GUID.
        r.message_rejected = w::RejMessage::kReq;
        r.reason = w::RejReason::kTimeout;
        (void)r.SetAriValue(guid);
      } else {
        r.message_rejected =
            t.phase == Phase::kRepRcvd ? w::RejMessage::kRep : w::RejMessage::kReq;
        r.reason = w::RejReason::kConsumerReject;
      }
      s = r.Emit(buf);
      if (s.ok()) ++counters_.cleanup_rej;
    }
    assert(s.ok());
    if (s.ok()) ToWire(t.peer, buf);
  }
  for (const auto& [key, p] : c.pending_reqs) {
    w::RejRepr r;
    r.envelope.transaction_id = p.tid;
    r.local_comm_id = 0;
    r.remote_comm_id = key.id;
    r.message_rejected = w::RejMessage::kReq;
    r.reason = w::RejReason::kConsumerReject;
    if (r.Emit(buf).ok()) {
      ++counters_.cleanup_rej;
      ToWire(p.peer, buf);
    }
  }
}

}  // namespace uscm::router
