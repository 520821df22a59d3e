// uscm rdma_cm API: what the device does after each runtime step. CM events
// become rdma_cm events (docs/API.md has the table), SA answers resolve routes,
// multicast answers become MULTICAST_JOIN / MULTICAST_ERROR.
#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/path_from_record.h"
#include "mad/wire/cma_header.h"

namespace uscm {

namespace {

uint64_t Pack(uint32_t index, uint32_t generation) {
  return uint64_t{index} << 32 | generation;
}

std::vector<uint8_t> Bytes(std::span<const uint8_t> s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// Into a (recycled) event's buffer: no allocation once it has the capacity.
void AssignBytes(std::vector<uint8_t>& to, std::span<const uint8_t> s) {
  to.assign(s.begin(), s.end());
}

int ErrnoFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kDeadlineExceeded: return -ETIMEDOUT;
    case absl::StatusCode::kNotFound: return -EHOSTUNREACH;
    case absl::StatusCode::kUnavailable: return -EBUSY;
    case absl::StatusCode::kFailedPrecondition: return -EOPNOTSUPP;
    default: return -EINVAL;
  }
}

// ROUTE_ERROR's status as the kernel's cma_query_handler reports it (the
// status ib_sa gives its callback): -ETIMEDOUT when the SA never answered
// (sa_query.c send_handler, IB_WC_RESP_TIMEOUT_ERR), -EINVAL for an answer
// with a non-zero MAD status (recv_handler), ERR_NO_RECORDS for a GID with no
// path among them. Any other failure (an SA that answered Busy to every
// attempt, a malformed answer) is -EINVAL too; not compared with the kernel.
int RouteErrno(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded ? -ETIMEDOUT : -EINVAL;
}

// The path from this side's point of view, from an SA PathRecord.
cm::PathInfo Reversed(const cm::PathInfo& in) {
  cm::PathInfo p = in;
  std::swap(p.local_lid, p.remote_lid);
  std::swap(p.local_gid, p.remote_gid);
  return p;
}

// REJ reasons that say the primary path itself is wrong (IBTA Table 112;
// ../shared/spec/ib-cm-sa-digest.md §3.1): 12 primary remote port GID
// rejected, 13 primary remote port LID rejected, 14 invalid primary SL,
// 15 invalid primary traffic class, 16 invalid primary hop limit, 17 invalid
// primary packet rate, 26 invalid path MTU, 32 invalid primary flow label.
// The alternate-path reasons (18..23, 33) are not among them: an rdma_cm
// REQ carries no alternate path, and the cache holds only the primary.
bool RejBlamesPath(int reason) {
  using R = cm::RejReason;
  switch (static_cast<R>(reason)) {
    case R::kInvalidPrimaryGid:
    case R::kInvalidPrimaryLid:
    case R::kInvalidPrimarySl:
    case R::kInvalidPrimaryTrafficClass:
    case R::kInvalidPrimaryHopLimit:
    case R::kInvalidPrimaryPacketRate:
    case R::kInvalidMtu:
    case R::kInvalidPrimaryFlowLabel:
      return true;
    default:
      return false;
  }
}

AhAttr AhFor(const cm::PathInfo& p) {
  AhAttr a;
  a.dlid = p.remote_lid;
  a.sl = p.sl;
  a.static_rate = p.packet_rate;
  a.is_global = !p.subnet_local;
  a.dgid = p.remote_gid;
  a.flow_label = p.flow_label;
  a.hop_limit = p.hop_limit;
  a.traffic_class = p.traffic_class;
  return a;
}

// A link-local destination is on the netdev of the GID entry the request (REQ
// or SIDR_REQ) came in on (a VLAN's or the base netdev's: one fe80:: address),
// as the kernel's new id takes the request's netdev (cma_get_net_dev,
// bound_dev_if); its QP then sends from that entry.
// The netdev (ifindex) of GID entry `sgid_index`, 0 when not known.
int EntrysNetdev(const DeviceOptions& o, uint8_t sgid_index) {
  return sgid_index < o.roce_gid_ifindexes.size() ? std::max(0, o.roce_gid_ifindexes[sgid_index])
                                                  : 0;
}

void TakeEntrysNetdev(const DeviceOptions& o, uint8_t sgid_index, Address* dst) {
  const int netdev = EntrysNetdev(o, sgid_index);
  if (dst->is_link_local() && netdev != 0) dst->scope_id = static_cast<uint32_t>(netdev);
}

}  // namespace


bool Device::RoutesBack(uint8_t sgid_index, uint16_t pkey, const Address& local,
                        const Address& remote) {
  // The kernel checks every request whose netdev it knows (on RoCE the GID
  // entry's); uscm knows it where the port's table gave the ifindexes. On
  // InfiniBand the netdev is IPoIB's of the request's P_Key (and
  // destination): none, or one that is down, refuses it
  // (cma_ib_id_from_event).
  int ifindex = EntrysNetdev(options_, sgid_index);
  if (options_.ipoib_netdev_of) {
    ifindex = options_.ipoib_netdev_of(pkey, local);
    if (ifindex < 0) return true;  // no IPoIB netdev on the port: not known
    if (ifindex == 0) {
      ++misrouted_requests_;
      return false;
    }
  }
  if (!options_.route_back_on || ifindex == 0) return true;
  absl::Status s = options_.route_back_on(local, remote, ifindex);
  if (s.ok() || s.code() != absl::StatusCode::kFailedPrecondition) return true;
  ++misrouted_requests_;
  return false;
}

uint64_t Device::qp_type_mismatches() const {
  std::lock_guard<std::mutex> lock(node_->mutex());
  return qp_type_mismatches_;
}

uint64_t Device::misrouted_requests() const {
  std::lock_guard<std::mutex> lock(node_->mutex());
  return misrouted_requests_;
}

void Device::TakeCmEventsLocked(mad::TimePoint now) {
  // In place: no copy of the ~500-byte CmEvent out of the endpoint's queue.
  node_->cm().DrainEvents([&](cm::CmEvent& e) { OnCmEvent(now, e); });
}

void Device::OnProgress(mad::TimePoint now) {
  TakeCmEventsLocked(now);
  // Most steps have no SA answer: no optional<SaResult> built to say so.
  if (node_->sa().pending_results() != 0) {
    while (auto r = node_->sa().PollResult()) OnSaResult(now, *r);
  }
  while (auto m = node_->mc().PollEvent()) OnMcEvent(*m);
  // The transport is gone for good (Transport::link_status: the uscmd router
  // exited or restarted). As librdmacm on a device removal, every id gets
  // DEVICE_REMOVAL, status -ENODEV, detail = why; the application destroys
  // its ids and the Device and connects again (docs/ROUTER.md).
  if (absl::optional<absl::Status> lost = node_->TakeTransportLossLocked()) {
    for (const auto& [id, owned] : ids_) {
      Post(id, EventType::kDeviceRemoval, -ENODEV, std::string(lost->message()));
    }
  }
}

void Device::OnSaResult(mad::TimePoint, sa::SaResult& r) {
  auto it = by_query_.find(r.id);
  if (it == by_query_.end()) return;  // the id was destroyed meanwhile
  CmId* id = it->second;
  by_query_.erase(it);
  id->sa_query_ = 0;
  if (id->state_ != IdState::kRouteQuery) return;
  if (!r.status.ok() || r.paths.empty()) {
    id->state_ = IdState::kAddrResolved;
    const absl::Status s = r.status.ok() ? absl::NotFoundError("no path") : r.status;
    Post(id, EventType::kRouteError, RouteErrno(s), std::string(s.message()));
    return;
  }
  RouteResolved(id, r.paths[0]);
}

void Device::RouteResolved(CmId* id, const mad::wire::PathRecord& record) {
  id->path_ = cm::PathFromRecord(record);
  id->path_from_sa_ = true;
  id->path_mtu_ = id->path_->mtu;
  if (id->opts().tos) id->path_->traffic_class = *id->opts().tos;
  id->state_ = IdState::kRouteResolved;
  Post(id, EventType::kRouteResolved, 0);
}

void Device::InvalidateRoute(CmId* id) {
  if (!id->path_from_sa_ || !id->path_.has_value()) return;
  // Every cached path to the destination (any SGID, ServiceID, SL, TClass).
  node_->path_cache().InvalidateGid(id->path_->remote_gid);
}

void Device::OnMcEvent(sa::McEvent& m) {
  if (m.left) return;
  auto it = by_ticket_.find(m.ticket);
  if (it == by_ticket_.end()) return;
  CmId* id = it->second;
  CmId::McJoinState* join = nullptr;
  for (CmId::McJoinState& j : id->joins_) {
    if (j.ticket == m.ticket) join = &j;
  }
  if (join == nullptr) return;
  std::unique_ptr<Event> e = id->channel_->NewEvent();
  e->mc_context = join->context;
  // The multicast manager dropped a refused join: leave_multicast only frees it.
  if (!m.status.ok()) join->refused = true;
  // [fabric] librdmacm attaches the id's QP unless the join was send-only.
  if (m.status.ok() && id->qp_ != nullptr && !join->send_only && !join->attached) {
    absl::Status a = id->qp_->AttachMulticast(m.group.mgid, m.group.mlid);
    if (a.ok()) {
      join->attached = true;
      join->mgid = m.group.mgid;
      join->mlid = m.group.mlid;
    } else {
      m.status = a;
    }
  }
  if (!m.status.ok()) {
    e->event = EventType::kMulticastError;
    e->status = ErrnoFor(m.status);
    e->detail = std::string(m.status.message());
  } else {
    e->event = EventType::kMulticastJoin;
    AhAttr& a = e->ud.ah_attr;
    a.dlid = m.group.mlid;
    a.sl = m.group.sl;
    a.static_rate = m.group.rate;
    a.is_global = true;
    a.dgid = m.group.mgid;
    a.flow_label = m.group.flow_label;
    a.hop_limit = m.group.hop_limit;
    a.traffic_class = m.group.tclass;
    a.port_num = port().port_num;
    e->ud.qp_num = kMulticastQpn;
    e->ud.qkey = m.group.qkey;
  }
  PostEvent(id, std::move(e));
}

void Device::OnCmEvent(mad::TimePoint now, cm::CmEvent& e) {
  using T = cm::CmEventType;
  if (e.type == T::kConnectRequest) return OnConnectRequest(now, e);
  if (e.type == T::kSidrRequest) return OnSidrRequest(now, e);
  CmId* id = by_conn_.Find(e.conn);
  if (id == nullptr) return;  // destroyed by the user
  // The CM events that post nothing here take no event from the channel.
  switch (e.type) {
    case T::kConnectResponse:
      return OnConnectResponse(now, id, e);
    case T::kEstablished:
      if (id->swallow_established_) {
        id->swallow_established_ = false;
        return;
      }
      break;
    case T::kRejected:
    case T::kUnreachable:
    case T::kConnectError:
    case T::kDisconnected:
    case T::kTimewaitExit:
    case T::kSidrReply:
      break;
    default:
      return;  // MRA, LAP / APR: no rdma_cm event
  }
  std::unique_ptr<Event> ev = id->channel_->NewEvent();
  ev->status = e.status;
  switch (e.type) {
    case T::kEstablished:
      id->state_ = IdState::kEstablished;
      ev->event = EventType::kEstablished;
      // The REP's data of an id with an attached QP, not needed after this.
      // A passive id has none: the recycled event keeps its empty buffer.
      if (!id->rep_private_data_.empty()) {
        ev->conn.private_data = std::move(id->rep_private_data_);
      }
      ev->conn.qp_num = id->remote_qpn_;
      ev->remote_ece = id->remote_ece_;
      break;
    case T::kRejected:
      if (RejBlamesPath(e.status)) InvalidateRoute(id);
      if (id->qp_ != nullptr) (void)id->qp_->ToError();
      id->state_ = IdState::kIdle;
      ev->event = EventType::kRejected;
      AssignBytes(ev->conn.private_data, e.private_data.bytes());
      by_conn_.Erase(e.conn);
      break;
    case T::kUnreachable:
      id->state_ = IdState::kIdle;
      ev->event = EventType::kUnreachable;
      if (ev->status == cm::kEtimedout) ev->status = -ETIMEDOUT;
      // No answer to the REQ / SIDR_REQ at all: the cached path may lead
      // nowhere (the peer moved, LIDs were reassigned); the next
      // ResolveRoute to this destination asks the SA again.
      if (ev->status == -ETIMEDOUT) InvalidateRoute(id);
      AssignBytes(ev->ud.private_data, e.private_data.bytes());
      by_conn_.Erase(e.conn);
      break;
    case T::kConnectError:
      ev->event = EventType::kConnectError;
      break;
    case T::kDisconnected:
      if (id->qp_ != nullptr) (void)id->qp_->ToError();
      id->state_ = IdState::kDisconnect;
      ev->event = EventType::kDisconnected;
      if (ev->status == cm::kEtimedout) ev->status = -ETIMEDOUT;
      break;
    case T::kTimewaitExit:
      ev->event = EventType::kTimewaitExit;
      by_conn_.Erase(e.conn);
      break;
    case T::kSidrReply:
      id->state_ = IdState::kEstablished;
      ev->event = EventType::kEstablished;
      AssignBytes(ev->ud.private_data, e.private_data.bytes());
      ev->ud.qp_num = e.sidr_qpn;
      ev->ud.qkey = e.sidr_qkey;
      if (id->path_) ev->ud.ah_attr = AhFor(*id->path_);
      ev->remote_ece = e.remote_ece;
      by_conn_.Erase(e.conn);
      break;
    default:
      break;  // not reached: the switch above returned
  }
  PostEvent(id, std::move(ev));
}

void Device::OnConnectResponse(mad::TimePoint now, CmId* id, cm::CmEvent& e) {
  id->remote_ece_ = e.remote_ece;
  absl::StatusOr<cm::QpAttributes> rtr = node_->cm().GetQpAttributes(id->conn_, cm::QpState::kRtr);
  id->remote_qpn_ = rtr.ok() ? rtr->dest_qpn : 0;  // the REP's QPN
  if (id->qp_ == nullptr) {
    // External QP: the user reads RTR / RTS attributes, moves the QP, then
    // calls Establish (librdmacm without an rdma_cm QP).
    id->state_ = IdState::kConnectResponse;
    std::unique_ptr<Event> ev = id->channel_->NewEvent();
    ev->event = EventType::kConnectResponse;
    // Establish() swallows the ESTABLISHED that follows: the data is the
    // event's alone (an established id holds no copy), copied into the
    // recycled event's buffer.
    AssignBytes(ev->conn.private_data, e.private_data.bytes());
    ev->conn.qp_num = id->remote_qpn_;
    ev->remote_ece = e.remote_ece;
    HoldMraForDuplicate(now, id->conn_);
    PostEvent(id, std::move(ev));
    return;
  }
  // Until ESTABLISHED (posted by Rtu below) takes it.
  id->rep_private_data_ = Bytes(e.private_data.bytes());
  // INIT again first, as librdmacm's ucma_modify_qp_rtr: the connection's
  // access flags (ib_cm's: REMOTE_WRITE, and REMOTE_READ | REMOTE_ATOMIC when
  // the REP's initiator depth gives responder resources), not the ones set
  // before the connection (pyverbs' QP in 68-dropin-fio lacked REMOTE_ATOMIC).
  for (cm::QpState st : {cm::QpState::kInit, cm::QpState::kRtr, cm::QpState::kRts}) {
    absl::StatusOr<cm::QpAttributes> a = node_->cm().GetQpAttributes(id->conn_, st);
    if (a.ok() && st == cm::QpState::kRts && id->opts().ack_timeout) {
      a->timeout = *id->opts().ack_timeout;
    }
    absl::Status m = a.ok() ? id->qp_->Modify(*a) : a.status();
    if (!m.ok()) {
      // librdmacm: CONNECT_ERROR and REJ 28 to the peer.
      (void)node_->cm().Reject(now, id->conn_, cm::RejReason::kConsumerReject, {});
      by_conn_.Erase(id->conn_);
      id->state_ = IdState::kIdle;
      Post(id, EventType::kConnectError, ErrnoFor(m), std::string(m.message()));
      return;
    }
  }
  // Rtu() reports kEstablished, which becomes ESTABLISHED with the REP data.
  (void)node_->cm().Rtu(now, id->conn_);
}

void Device::OnConnectRequest(mad::TimePoint now, cm::CmEvent& e) {
  auto lit = by_listen_.find(Pack(e.listen.index, e.listen.generation));
  if (lit == by_listen_.end()) {
    (void)node_->cm().Reject(now, e.conn, cm::RejReason::kConsumerReject, {});
    return;
  }
  CmId* listener = lit->second;
  std::unique_ptr<Event> ev = listener->channel_->NewEvent();
  ev->event = EventType::kConnectRequest;
  const std::span<const uint8_t> pd = e.private_data.bytes();
  Address local, peer;
  if (listener->local_.is_ip()) {
    absl::StatusOr<mad::wire::CmaHeader> h = mad::wire::CmaHeader::Parse(pd);
    const Address::Family fam = h.ok() && h->ip_version == 6 ? Address::Family::kIpv6
                                                              : Address::Family::kIpv4;
    if (h.ok()) {
      local.family = peer.family = fam;
      local.ip = h->dst_addr;
      peer.ip = h->src_addr;
      peer.port = h->src_port;
      local.port = listener->local_.port;
      TakeEntrysNetdev(options_, e.req.sgid_index, &local);
    }
    // As the kernel: a header we cannot use, a source the route back to
    // does not leave on the request's netdev (validate_net_dev, checked
    // before any listener), or a destination no listener on the port is
    // bound to, gets REJ 28 without private data. A listener on loopback
    // takes any destination, as on the wildcard (cma_any_addr).
    if (h.ok()) {
      listener = RoutesBack(e.req.sgid_index, e.req.pkey, local, peer) ? ListenerFor(listener, local) : nullptr;
    }
    if (!h.ok() || listener == nullptr) {
      (void)node_->cm().Reject(now, e.conn, cm::RejReason::kConsumerReject, {});
      return;
    }
    AssignBytes(ev->conn.private_data, mad::wire::CmaUserData(pd));
  } else {
    local = Address::Ib(port().gid, port().lid, e.req.service_id, e.req.pkey);
    peer = Address::Ib(e.req.primary.local_gid, e.req.primary.local_lid, e.req.service_id,
                       e.req.pkey);
    AssignBytes(ev->conn.private_data, pd);
  }
  local.gid = port().gid;
  local.lid = port().lid;
  local.pkey = peer.pkey = e.req.pkey;
  peer.gid = e.req.primary.local_gid;
  peer.lid = e.req.primary.local_lid;
  // As the kernel's cma_ib_check_req_qp_type: a UD listener (an RDMA_PS_IB
  // id made UD) takes no REQ; its handler fails and ib_cm sends REJ 28.
  if (listener->ud_) {
    ++qp_type_mismatches_;
    (void)node_->cm().Reject(now, e.conn, cm::RejReason::kConsumerReject, {});
    return;
  }
  CmId* child = NewId(listener->channel_, listener->context_, listener->ps_);
  child->ud_ = false;  // the listener's type, RC (cma_ib_new_conn_id)
  child->local_ = local;
  // As the kernel's new id takes the request's netdev (bound_dev_if), whose
  // entry its QP sends from: one global address on two netdevs too.
  child->netdev_ = EntrysNetdev(options_, e.req.sgid_index);
  child->peer_ = peer;
  child->bound_ = false;  // shares the listener's port; nothing to release
  child->conn_ = e.conn;
  child->path_ = Reversed(e.req.primary);
  child->path_mtu_ = e.req.path_mtu;
  child->remote_ece_ = e.remote_ece;
  if (listener->options_ != nullptr) {
    child->options_ = std::make_unique<IdOptions>();
    child->options_->ack_timeout = listener->options_->ack_timeout;
    child->options_->response_timeout = listener->options_->response_timeout;
    child->options_->backoff_factor = listener->options_->backoff_factor;
  }
  child->state_ = IdState::kConnectRequest;
  by_conn_.Set(e.conn, child);
  ev->listen_id = listener;
  ev->conn.responder_resources = e.req.responder_resources;
  ev->conn.initiator_depth = e.req.initiator_depth;
  ev->conn.retry_count = e.req.retry_count;
  ev->conn.rnr_retry_count = e.req.rnr_retry_count;
  ev->conn.srq = e.req.srq;
  ev->conn.qp_num = e.req.remote_qpn;
  ev->remote_ece = e.remote_ece;
  HoldMraForDuplicate(now, e.conn);
  PostEvent(child, std::move(ev));
}

// As the kernel's rdma_cm (cma_ib_req_handler, cma_ib_handler on a REP):
// once a REQ or REP waits for the user, a duplicate of it is answered with
// an MRA of ~68 s (IB_CM_MRA_FLAG_DELAY | 24), and nothing is sent before.
// Without it the CM's auto-MRA went out at half the peer's timeout counted
// from our receipt, too late for a REQ that had waited in queues (cmtime
// -c 1000: 1,366 REQs, 1,162 MRAs, 1,335 REPs for 1,000 connections).
void Device::HoldMraForDuplicate(mad::TimePoint now, cm::ConnId conn) {
  constexpr uint8_t kRdmaCmMraTimeout = 24;  // 4.096 us * 2^24 = 68.7 s
  (void)node_->cm().SendMra(now, conn, kRdmaCmMraTimeout, {}, cm::MraTiming::kOnDuplicate);
}

void Device::OnSidrRequest(mad::TimePoint now, cm::CmEvent& e) {
  auto lit = by_listen_.find(Pack(e.listen.index, e.listen.generation));
  if (lit == by_listen_.end()) {
    cm::SidrReplyParams p;
    p.status = 2;
    (void)node_->cm().SidrReply(now, e.conn, p);
    return;
  }
  CmId* listener = lit->second;
  std::unique_ptr<Event> ev = listener->channel_->NewEvent();
  ev->event = EventType::kConnectRequest;
  const std::span<const uint8_t> pd = e.private_data.bytes();
  Address local = listener->local_, peer;
  if (listener->local_.is_ip()) {
    absl::StatusOr<mad::wire::CmaHeader> h = mad::wire::CmaHeader::Parse(pd);
    if (!h.ok()) {
      cm::SidrReplyParams p;
      p.status = 2;
      (void)node_->cm().SidrReply(now, e.conn, p);
      return;
    }
    peer.family = h->ip_version == 6 ? Address::Family::kIpv6 : Address::Family::kIpv4;
    peer.ip = h->src_addr;
    peer.port = h->src_port;
    Address dst;
    dst.family = peer.family;
    dst.ip = h->dst_addr;
    // As a REQ (OnConnectRequest): the destination's netdev, the route back
    // to the source on it (validate_net_dev), and the listener of the
    // destination address (cma_find_listener, cma_match_net_dev; the kernel's
    // cma_ib_req_handler runs them for SIDR too). None: the kernel's
    // handler fails and ib_cm answers IB_SIDR_REJECT (cm_destroy_id ->
    // cm_reject_sidr_req), status 2.
    TakeEntrysNetdev(options_, e.req.sgid_index, &dst);
    listener = RoutesBack(e.req.sgid_index, e.req.pkey, dst, peer) ? ListenerFor(listener, dst) : nullptr;
    if (listener == nullptr) {
      cm::SidrReplyParams p;
      p.status = 2;  // IB_SIDR_REJECT
      (void)node_->cm().SidrReply(now, e.conn, p);
      return;
    }
    local = listener->local_;
    local.ip = h->dst_addr;
    local.scope_id = dst.scope_id;
    AssignBytes(ev->ud.private_data, mad::wire::CmaUserData(pd));
  } else {
    peer = Address::Ib(mad::Gid(), 0, e.service_id);
    AssignBytes(ev->ud.private_data, pd);
  }
  // As the kernel's cma_ib_check_req_qp_type: an RC listener (an RDMA_PS_TCP
  // id, or RDMA_PS_IB left RC) takes no SIDR_REQ: IB_SIDR_REJECT.
  if (!listener->ud_) {
    ++qp_type_mismatches_;
    cm::SidrReplyParams p;
    p.status = 2;
    (void)node_->cm().SidrReply(now, e.conn, p);
    return;
  }
  CmId* child = NewId(listener->channel_, listener->context_, listener->ps_);
  child->ud_ = true;  // cma_ib_new_udp_id: IB_QPT_UD
  child->local_ = local;
  child->netdev_ = EntrysNetdev(options_, e.req.sgid_index);
  child->peer_ = peer;
  child->conn_ = e.conn;
  child->remote_ece_ = e.remote_ece;
  child->state_ = IdState::kConnectRequest;
  by_conn_.Set(e.conn, child);
  ev->listen_id = listener;
  PostEvent(child, std::move(ev));
}

}  // namespace uscm
