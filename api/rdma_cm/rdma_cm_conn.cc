// uscm rdma_cm API: connect / listen / accept / reject / establish /
// disconnect / multicast calls of CmId.
#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "api/rdma_cm/call_errors.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/status_errno.h"
#include "mad/wire/cma_header.h"

namespace uscm {

namespace {

using internal::Prefix;
using internal::WrongState;

uint64_t Pack(uint32_t index, uint32_t generation) {
  return uint64_t{index} << 32 | generation;
}

absl::Status TooLong(const char* call, size_t got, const char* msg, size_t limit) {
  return absl::InvalidArgumentError(absl::StrCat(call, ": private data is ", got, " bytes; ",
                                                 msg, " carries at most ", limit));
}

mad::wire::CmaHeader HeaderFor(const Address& src, const Address& dst) {
  if (src.family == Address::Family::kIpv4) {
    return mad::wire::CmaHeader::Ipv4(src.ipv4(), src.port, dst.ipv4());
  }
  return mad::wire::CmaHeader::Ipv6(src.ip, src.port, dst.ip);
}

// Builds REQ / SIDR_REQ private data into `pd` (CMA header + user bytes for
// IP ids), reusing its capacity.
absl::Status RequestData(const char* call, bool ip, bool sidr, const Address& src,
                         const Address& dst, std::span<const uint8_t> user,
                         std::vector<uint8_t>& pd) {
  const size_t ip_limit = sidr ? kSidrReqPrivateDataIp : kReqPrivateDataIp;
  const size_t ib_limit = sidr ? kSidrReqPrivateDataIb : kReqPrivateDataIb;
  if (!ip) {
    if (user.size() > ib_limit) {
      return TooLong(call, user.size(), sidr ? "SIDR_REQ (AF_IB)" : "REQ (AF_IB)", ib_limit);
    }
    pd.assign(user.begin(), user.end());
    return absl::OkStatus();
  }
  if (user.size() > ip_limit) {
    return TooLong(call, user.size(),
                   sidr ? "SIDR_REQ with the 36-byte CMA header"
                        : "REQ with the 36-byte CMA header",
                   ip_limit);
  }
  pd.assign(mad::wire::cma::kHeaderBytes + user.size(), 0);
  absl::Status s = HeaderFor(src, dst).Emit(pd);
  if (!s.ok()) return s;
  std::copy(user.begin(), user.end(), pd.begin() + mad::wire::cma::kHeaderBytes);
  return absl::OkStatus();
}

}  // namespace

absl::Status CmId::Connect(const ConnParam& param) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kRouteResolved || !path_.has_value()) {
    return WrongState("connect", state_, "ROUTE_RESOLVED");
  }
  cm::Node& node = *device_->node_;
  const mad::TimePoint now = node.Now();
  const bool ip = local_.is_ip();
  const uint64_t sid =
      ip ? mad::wire::ServiceIdFor(static_cast<mad::wire::PortSpace>(ps_), peer_.port)
         : peer_.service_id;
  // The device's buffer, lent to the request and taken back after it (no
  // allocation per connect once it has the capacity).
  std::vector<uint8_t>& pd = device_->request_data_;
  absl::Status built = RequestData("connect", ip, is_ud(), local_, peer_, param.private_data, pd);
  if (!built.ok()) return built;
  cm::RetryPolicy retry;
  retry.response_timeout = opts().response_timeout;
  retry.backoff_factor = opts().backoff_factor;

  if (is_ud()) {
    cm::SidrRequestParams p;
    p.service_id = sid;
    p.pkey = peer_.pkey;
    p.peer.lid = path_->remote_lid;
    p.peer.sl = path_->sl;
    p.peer.has_grh = !path_->subnet_local;
    p.peer.gid = path_->remote_gid;
    if (opts().max_cm_retries) p.max_retries = *opts().max_cm_retries;
    p.private_data = std::move(pd);
    p.retry = retry;
    absl::StatusOr<cm::ConnId> c = node.cm().SidrRequest(now, p);
    pd = std::move(p.private_data);
    if (!c.ok()) return Prefix("connect", c.status());
    conn_ = *c;
  } else {
    const uint32_t qpn = qp_ != nullptr ? qp_->qp_num() : param.qp_num;
    if (qpn > 0xFFFFFF) {
      return absl::InvalidArgumentError(
          absl::StrCat("connect: qp_num 0x", absl::Hex(qpn), " does not fit 24 bits"));
    }
    cm::ConnectParams p;
    p.service_id = sid;
    p.primary = *path_;
    p.pkey = peer_.pkey;
    p.path_mtu = path_mtu_;
    p.qpn = qpn;
    device_->rng_state_ ^= device_->rng_state_ << 13;
    device_->rng_state_ ^= device_->rng_state_ >> 7;
    device_->rng_state_ ^= device_->rng_state_ << 17;
    p.starting_psn = static_cast<uint32_t>(device_->rng_state_) & 0xFFFFFF;
    // 0xFF = "device maximum" (RDMA_MAX_RESP_RES); the simulated device has 16.
    p.responder_resources = param.responder_resources == 0xFF ? 16 : param.responder_resources;
    p.initiator_depth = param.initiator_depth == 0xFF ? 16 : param.initiator_depth;
    p.retry_count = std::min<uint8_t>(param.retry_count, 7);
    p.rnr_retry_count = std::min<uint8_t>(param.rnr_retry_count, 7);
    p.srq = param.srq != 0;
    if (opts().max_cm_retries) p.max_cm_retries = *opts().max_cm_retries;
    p.ece = local_ece_;
    p.retry = retry;
    // RoCE: the REQ leaves from the id's own GID entry, on its netdev (a
    // VLAN's address is only in the VLAN's entry; the link-local one in both).
    if (const DeviceOptions& o = device_->options_; o.roce) {
      p.sgid_index = static_cast<uint8_t>(std::max(0, RoceSourceGidIndex(o, local_, netdev_)));
    }
    if (qp_ != nullptr) {
      cm::QpAttributes init;
      init.state = cm::QpState::kInit;
      init.mask = cm::kQpState | cm::kQpAccessFlags | cm::kQpPkeyIndex | cm::kQpPort;
      init.access_flags = cm::kAccessRemoteWrite | cm::kAccessRemoteRead;
      init.port_num = device_->port().port_num;
      absl::Status s = qp_->Modify(init);
      if (!s.ok()) return Prefix("connect: QP to INIT", s);
    }
    p.private_data = std::move(pd);
    absl::StatusOr<cm::ConnId> c = node.cm().Connect(now, p);
    pd = std::move(p.private_data);
    if (!c.ok()) return Prefix("connect", c.status());
    conn_ = *c;
    qpn_ = qpn;
  }
  device_->by_conn_.Set(conn_, this);
  state_ = IdState::kConnect;
  node.FlushLocked();
  node.RearmIfOutput();
  return absl::OkStatus();
}

absl::Status CmId::Listen(int backlog) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kIdle || !bound_) {
    return WrongState("listen", state_, "IDLE and bound (bind_addr first)");
  }
  // As the kernel's rdma_listen: a listener holds its address alone, so an
  // id bound with REUSEADDR checks again without it, and loses REUSEADDR.
  if (local_.is_ip() && opts().reuse_addr) {
    if (absl::Status s = device_->CheckPort(this, /*reuse=*/false); !s.ok()) {
      return Prefix("listen", s);
    }
    options_->reuse_addr = false;
  }
  uint64_t sid, mask;
  if (local_.is_ip()) {
    sid = mad::wire::ServiceIdFor(static_cast<mad::wire::PortSpace>(ps_), local_.port);
    mask = ~uint64_t{0};
  } else {
    sid = local_.service_id & local_.service_mask;
    mask = local_.service_mask;
  }
  // IP listeners on one port (on different addresses) share the service
  // ID: the port table above decided, and a request goes to the listener
  // of its destination address (Device::ListenerFor).
  const uint32_t b = backlog <= 0 ? 1024 : static_cast<uint32_t>(backlog);
  absl::StatusOr<cm::ListenId> l =
      device_->node_->cm().Listen(sid, mask, b, local_.is_ip() || opts().reuse_addr);
  if (!l.ok()) return Prefix("listen", l.status());
  // On a port shared through uscmd the router must route this service's
  // REQs here (OK at once when the process owns the port). The router also
  // applies the kernel's address rules between processes (the bind claimed
  // the address already: this checks it again without REUSEADDR, as
  // rdma_listen) and routes by the request's destination address
  // (cm/router/listen_address.h).
  listen_address_ = ListenAddressOf(local_, af_only_);
  if (absl::Status claim = device_->Claim(sid, mask, opts().reuse_addr, listen_address_);
      !claim.ok()) {
    (void)device_->node_->cm().StopListening(*l);
    return Prefix("listen", claim);
  }
  listen_sid_ = sid;
  listen_mask_ = mask;
  listen_ = *l;
  device_->by_listen_[Pack(listen_.index, listen_.generation)] = this;
  state_ = IdState::kListen;
  return absl::OkStatus();
}

absl::Status CmId::SetBacklog(int backlog) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kListen) return WrongState("set_backlog", state_, "LISTEN");
  const uint32_t b = backlog <= 0 ? 1024 : static_cast<uint32_t>(backlog);
  return Prefix("set_backlog", device_->node_->cm().SetBacklog(listen_, b));
}

absl::Status CmId::Accept(const ConnParam& param) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kConnectRequest) return WrongState("accept", state_, "CONNECT_REQUEST");
  cm::Node& node = *device_->node_;
  const mad::TimePoint now = node.Now();
  if (is_ud()) {
    if (param.private_data.size() > kSidrRepPrivateData) {
      return TooLong("accept", param.private_data.size(), "SIDR_REP", kSidrRepPrivateData);
    }
    cm::SidrReplyParams p;
    p.status = 0;
    p.qpn = qp_ != nullptr ? qp_->qp_num() : param.qp_num;
    p.qkey = kUdpQkey;
    p.ece = local_ece_;
    p.private_data = param.private_data;
    absl::Status s = node.cm().SidrReply(now, conn_, p);
    if (!s.ok()) return Prefix("accept", s);
    device_->by_conn_.Erase(conn_);
      state_ = IdState::kEstablished;
    node.FlushLocked();
    node.RearmIfOutput();
    return absl::OkStatus();
  }
  if (param.private_data.size() > kRepPrivateData) {
    return TooLong("accept", param.private_data.size(), "REP", kRepPrivateData);
  }
  cm::AcceptParams p;
  p.qpn = qp_ != nullptr ? qp_->qp_num() : param.qp_num;
  if (p.qpn > 0xFFFFFF) {
    return absl::InvalidArgumentError(
        absl::StrCat("accept: qp_num 0x", absl::Hex(p.qpn), " does not fit 24 bits"));
  }
  device_->rng_state_ ^= device_->rng_state_ << 13;
  device_->rng_state_ ^= device_->rng_state_ >> 7;
  device_->rng_state_ ^= device_->rng_state_ << 17;
  p.starting_psn = static_cast<uint32_t>(device_->rng_state_) & 0xFFFFFF;
  p.responder_resources = param.responder_resources == 0xFF ? 16 : param.responder_resources;
  p.initiator_depth = param.initiator_depth == 0xFF ? 16 : param.initiator_depth;
  p.rnr_retry_count = std::min<uint8_t>(param.rnr_retry_count, 7);
  p.srq = param.srq != 0;
  p.failover_accepted = false;  // as rdma_cm
  if (local_ece_) p.ece_options = local_ece_->options;
  p.private_data = param.private_data;
  p.retry.response_timeout = opts().response_timeout;
  p.retry.backoff_factor = opts().backoff_factor;
  qpn_ = p.qpn;
  absl::Status s = node.cm().Accept(now, conn_, p);
  if (!s.ok()) return Prefix("accept", s);
  if (qp_ != nullptr) {
    // librdmacm moves the QP to RTR and RTS as part of rdma_accept.
    for (cm::QpState st : {cm::QpState::kInit, cm::QpState::kRtr, cm::QpState::kRts}) {
      absl::StatusOr<cm::QpAttributes> a = node.cm().GetQpAttributes(conn_, st);
      if (a.ok() && st == cm::QpState::kRts && opts().ack_timeout) {
        a->timeout = *opts().ack_timeout;
      }
      absl::Status m = a.ok() ? qp_->Modify(*a) : a.status();
      if (!m.ok()) {
        (void)node.cm().Reject(now, conn_, cm::RejReason::kConsumerReject, {});
        node.FlushLocked();
        return Prefix("accept: QP transition", m);
      }
    }
  }
  state_ = IdState::kAccepted;
  node.FlushLocked();
  node.RearmIfOutput();
  return absl::OkStatus();
}

static absl::Status RejectWith(CmId* id, cm::Node& node, cm::ConnId conn, bool ud,
                               cm::RejReason reason, std::span<const uint8_t> pd,
                               const char* call) {
  const mad::TimePoint now = node.Now();
  if (ud) {
    if (pd.size() > kSidrRepPrivateData) {
      return TooLong(call, pd.size(), "SIDR_REP", kSidrRepPrivateData);
    }
    cm::SidrReplyParams p;
    p.status = 2;  // SIDR "rejected" (as rdma_reject on a UD id)
    p.private_data.assign(pd.begin(), pd.end());
    return Prefix(call, node.cm().SidrReply(now, conn, p));
  }
  if (pd.size() > kRejPrivateData) return TooLong(call, pd.size(), "REJ", kRejPrivateData);
  (void)id;
  return Prefix(call, node.cm().Reject(now, conn, reason, pd));
}

absl::Status CmId::Reject(std::span<const uint8_t> private_data) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kConnectRequest && state_ != IdState::kConnectResponse) {
    return WrongState("reject", state_, "CONNECT_REQUEST or CONNECT_RESPONSE");
  }
  absl::Status s = RejectWith(this, *device_->node_, conn_, is_ud(),
                              cm::RejReason::kConsumerReject, private_data, "reject");
  if (!s.ok()) return s;
  device_->by_conn_.Erase(conn_);
  state_ = IdState::kIdle;
  device_->node_->FlushLocked();
  device_->node_->RearmIfOutput();
  return absl::OkStatus();
}

absl::Status CmId::RejectEce(std::span<const uint8_t> private_data) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kConnectRequest || is_ud()) {
    return WrongState("reject_ece", state_, "CONNECT_REQUEST on an RC id");
  }
  absl::Status s =
      RejectWith(this, *device_->node_, conn_, false, cm::RejReason::kVendorOptionNotSupported,
                 private_data, "reject_ece");
  if (!s.ok()) return s;
  device_->by_conn_.Erase(conn_);
  state_ = IdState::kIdle;
  device_->node_->FlushLocked();
  device_->node_->RearmIfOutput();
  return absl::OkStatus();
}

absl::Status CmId::Establish() {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (state_ != IdState::kConnectResponse) {
    return WrongState("establish", state_, "CONNECT_RESPONSE (an id without an attached QP)");
  }
  swallow_established_ = true;
  absl::Status s = device_->node_->cm().Rtu(device_->node_->Now(), conn_);
  if (!s.ok()) {
    swallow_established_ = false;
    return Prefix("establish", s);
  }
  state_ = IdState::kEstablished;
  // Rtu reported ESTABLISHED, which this id swallows: taken here instead of
  // by a step run for it alone (one node step less per active connection).
  device_->TakeCmEventsLocked(device_->node_->Now());
  device_->node_->FlushLocked();
  device_->node_->RearmIfOutput();
  return absl::OkStatus();
}

absl::Status CmId::NotifyCommEst() {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  // The kernel's cm_establish: EISCONN once established, EINVAL before.
  if (state_ == IdState::kEstablished) {
    return mad::WithErrno(absl::FailedPreconditionError(
                              "notify: the connection is established already (errno EISCONN)"),
                          EISCONN);
  }
  if (state_ != IdState::kAccepted) return WrongState("notify", state_, "ACCEPTED");
  absl::Status s = device_->node_->cm().NotifyCommEstablished(device_->node_->Now(), conn_);
  device_->node_->FlushLocked();
  // The ESTABLISHED it emits is delivered by the next step: ask for one now.
  // (It used to wait for the next MAD or timer; once the active side's CM no
  // longer sent its own MRA for the REP, nothing came.)
  device_->node_->RearmIfOutput();
  return Prefix("notify", s);
}

absl::Status CmId::Disconnect() {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  // Before ESTABLISHED the kernel's rdma_disconnect finds no DREQ or DREP to
  // send (ib_cm in REQ_RCVD / REP_RCVD), returns 0 and the REJ goes out when
  // the id is destroyed. UCX disconnects in CONNECT_RESPONSE when its QP
  // fails; the REJ is sent now so the peer learns at once, and 0 is returned.
  if (!is_ud() && conn_.valid() &&
      (state_ == IdState::kConnectResponse || state_ == IdState::kConnectRequest)) {
    if (qp_ != nullptr) (void)qp_->ToError();
    absl::Status s = RejectWith(this, *device_->node_, conn_, false,
                                cm::RejReason::kConsumerReject, {}, "disconnect");
    if (!s.ok()) return s;
    device_->by_conn_.Erase(conn_);
    state_ = IdState::kDisconnect;
    device_->node_->FlushLocked();
    device_->node_->RearmIfOutput();
    return absl::OkStatus();
  }
  // A second rdma_disconnect after that: nothing left to send, 0 as the kernel.
  if (state_ == IdState::kDisconnect && !device_->by_conn_.contains(conn_)) {
    return absl::OkStatus();
  }
  if (is_ud() || !conn_.valid() ||
      (state_ != IdState::kEstablished && state_ != IdState::kAccepted &&
       state_ != IdState::kDisconnect)) {
    return WrongState("disconnect", state_, "ESTABLISHED (RC), or DISCONNECT after a DREQ");
  }
  if (qp_ != nullptr) (void)qp_->ToError();
  absl::Status s = device_->node_->cm().Disconnect(device_->node_->Now(), conn_);
  if (!s.ok()) return Prefix("disconnect", s);
  state_ = IdState::kDisconnect;
  device_->node_->FlushLocked();
  device_->node_->RearmIfOutput();
  return absl::OkStatus();
}

namespace {
// Linux cma_set_mgid: IPv4 -> ff12:401b:<pkey>::<ip & 0x0fffffff>, with the
// rdma_cm signature (byte 3 = 0x01) for RDMA_PS_UDP; IPv6 / AF_IB = the bytes.
mad::Gid MgidFor(const Address& group, uint16_t pkey, PortSpace ps) {
  mad::Gid g;
  if (group.family == Address::Family::kIb) return group.gid;
  if (group.family == Address::Family::kIpv6) {
    std::copy(group.ip.begin(), group.ip.end(), g.raw.begin());
    return g;
  }
  g.raw[0] = 0xFF;
  g.raw[1] = 0x12;
  g.raw[2] = 0x40;
  g.raw[3] = ps == PortSpace::kUdp ? 0x01 : 0x1B;
  g.raw[4] = pkey >> 8;
  g.raw[5] = pkey & 0xFF;
  g.raw[12] = group.ip[12] & 0x0F;
  g.raw[13] = group.ip[13];
  g.raw[14] = group.ip[14];
  g.raw[15] = group.ip[15];
  return g;
}
}  // namespace

absl::Status CmId::JoinMulticast(const Address& group, void* context) {
  return JoinMulticastEx(group, context, McJoinFlags::kFullMember);
}

absl::Status CmId::JoinMulticastEx(const Address& group, void* context, McJoinFlags flags) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  if (!is_ud()) {
    return absl::InvalidArgumentError(
        "join_multicast: only UD ids (RDMA_PS_UDP, RDMA_PS_IPOIB, a UD RDMA_PS_IB id) "
        "join groups");
  }
  if (!bound_) {  // [fabric] bound is enough, as the kernel (ADDR_BOUND or ADDR_RESOLVED)
    return WrongState("join_multicast", state_, "ADDR_RESOLVED or later (bound to a port)");
  }
  if (group.is_ip() && !group.is_multicast()) {
    return absl::InvalidArgumentError(
        absl::StrCat("join_multicast: ", group.ToString(), " is not a multicast address"));
  }
  for (const McJoinState& j : joins_) {
    if (j.group.SameHost(group)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "join_multicast: already joined to ", group.ToString(), " (errno EADDRINUSE)"));
    }
  }
  if (device_->options_.roce) return JoinRoceLocked(group, context, flags);
  sa::McJoin j;
  j.mgid = MgidFor(group, peer_.pkey, ps_);
  j.port_gid = device_->port().gid;
  j.qkey = kUdpQkey;
  j.pkey = peer_.pkey;
  if (flags == McJoinFlags::kSendOnlyFullMember) {
    j.join_state = mad::wire::JoinState(mad::wire::JoinState::kSendOnlyFullMember);
  }
  if (opts().tos) j.tclass = *opts().tos;
  absl::StatusOr<uint64_t> t = device_->node_->mc().Join(device_->node_->Now(), j);
  if (!t.ok()) return Prefix("join_multicast", t.status());
  McJoinState js;
  js.group = group;
  js.context = context;
  js.ticket = *t;
  js.send_only = flags == McJoinFlags::kSendOnlyFullMember;
  joins_.push_back(js);
  device_->by_ticket_[*t] = this;
  device_->node_->FlushLocked();
  device_->node_->Rearm();
  return absl::OkStatus();
}

// RoCE has no SA: the join completes at once, as cma_iboe_join_multicast
// (api/rdma_cm/roce_multicast.h): MGID from the IP, the netdev joins the IP group
// (full member of an IPv4 group), the QP is attached (unless send-only, as
// librdmacm's ucma_process_join), and MULTICAST_JOIN carries the group's AH.
absl::Status CmId::JoinRoceLocked(const Address& group, void* context, McJoinFlags flags) {
  const DeviceOptions& o = device_->options_;
  if (!group.is_ip()) {
    return absl::InvalidArgumentError("join_multicast: a RoCE port joins IP groups only");
  }
  const bool ipv4 = group.family == Address::Family::kIpv4;
  const bool send_only = flags == McJoinFlags::kSendOnlyFullMember;
  absl::StatusOr<mad::Gid> mgid = cm::RoceMgid(ipv4, group.ip, /*roce_v2=*/true);
  if (!mgid.ok()) return mgid.status();
  // The AH's source GID: the id's own IP in the port's GID table.
  const mad::Gid sgid = RoceGidOf(local_);
  const int sgid_index = o.roce_gids.empty() ? 0 : RoceSourceGidIndex(o, local_, netdev_);
  if (sgid_index < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "join_multicast: the id's address ", local_.ToString(), " (GID ", sgid.ToString(),
        ") is not in the RoCE v2 GID table of ", device_->port().ca_name));
  }
  McJoinState js;
  js.group = group;
  js.context = context;
  js.send_only = send_only;
  js.roce = true;
  js.mgid = *mgid;
  if (!send_only && ipv4 && o.ip_multicast != nullptr) {  // cma_igmp_send
    absl::StatusOr<std::unique_ptr<cm::IpMembership>> m =
        o.ip_multicast->Join(ipv4, group.ip, local_.ip);
    if (!m.ok()) return m.status();
    js.ip_membership = std::move(*m);
  }
  std::unique_ptr<Event> e = channel_->NewEvent();
  e->mc_context = context;
  e->event = EventType::kMulticastJoin;
  if (qp_ != nullptr && !send_only) {
    if (absl::Status a = qp_->AttachMulticast(js.mgid, 0); a.ok()) {
      js.attached = true;
    } else {
      // librdmacm: status = rdma_seterrno(ibv_attach_mcast(...)) = -1.
      e->event = EventType::kMulticastError;
      e->status = -1;
      e->detail = std::string(a.message());
    }
  }
  if (e->event == EventType::kMulticastJoin) {
    AhAttr& a = e->ud.ah_attr;
    a.is_global = true;
    a.dgid = js.mgid;
    a.hop_limit = cm::RoceMcHopLimit(ipv4, /*roce_v2=*/true);
    a.static_rate = 0;  // IB_RATE_PORT_CURRENT, as the 6.1 kernel (67-dropin-behaviour)
    a.sgid_index = static_cast<uint8_t>(sgid_index);
    a.port_num = device_->port().port_num;
    e->ud.qp_num = kMulticastQpn;
    // The id's Q_Key, as cma_make_mc_event: the join gave an id without one
    // its default (cma_set_default_qkey: RDMA_UDP_QKEY for RDMA_PS_UDP and a
    // UD RDMA_PS_IB id; RDMA_PS_IPOIB's would be the IPoIB broadcast group's,
    // from an SA that RoCE has not: none).
    e->ud.qkey = ps_ == PortSpace::kIpoib ? 0 : kUdpQkey;
  }
  joins_.push_back(std::move(js));
  device_->PostEvent(this, std::move(e));
  return absl::OkStatus();
}

absl::Status CmId::LeaveMulticast(const Address& group) {
  std::lock_guard<std::mutex> lock(device_->node_->mutex());
  for (auto it = joins_.begin(); it != joins_.end(); ++it) {
    if (!it->group.SameHost(group)) continue;
    // After MULTICAST_ERROR (the SA refused) there is no membership to leave;
    // as librdmacm, leave_multicast just frees the join.
    absl::Status s = it->refused || it->roce ? absl::OkStatus()
                                 : device_->node_->mc().Leave(device_->node_->Now(), it->ticket);
    if (it->attached && qp_ != nullptr) {  // [fabric] ibv_detach_mcast
      absl::Status d = qp_->DetachMulticast(it->mgid, it->mlid);
      if (s.ok()) s = d;
    }
    device_->by_ticket_.erase(it->ticket);
    joins_.erase(it);
    device_->node_->FlushLocked();
    device_->node_->Rearm();
    return Prefix("leave_multicast", s);
  }
  return absl::NotFoundError(absl::StrCat("leave_multicast: not joined to ", group.ToString(),
                                          " (errno EADDRNOTAVAIL)"));
}

}  // namespace uscm
