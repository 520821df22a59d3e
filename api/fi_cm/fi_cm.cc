// fi_cm semantics over the rdma_cm-style API (digest §8). See api/fi_cm/fi_cm.h.
#include "api/fi_cm/fi_cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace uscm::fi {
namespace {

constexpr uint16_t kAfIb = 27;  // AF_IB
constexpr size_t kSockaddrIbSize = 48;

std::vector<uint8_t> Encode(const Address& a) {
  std::vector<uint8_t> out(SockaddrSize(a), 0);
  if (a.family == Address::Family::kIpv4) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(a.port);
    std::memcpy(&sin.sin_addr, a.ip.data() + 12, 4);
    std::memcpy(out.data(), &sin, sizeof sin);
  } else if (a.family == Address::Family::kIpv6) {
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(a.port);
    std::memcpy(&sin6.sin6_addr, a.ip.data(), 16);
    std::memcpy(out.data(), &sin6, sizeof sin6);
  } else if (a.family == Address::Family::kIb) {
    // struct sockaddr_ib: family, pkey (be16), flowinfo (be32), GID, sid, sid_mask, scope_id.
    std::memcpy(out.data(), &kAfIb, 2);
    out[2] = a.pkey >> 8;
    out[3] = a.pkey & 0xFF;
    std::memcpy(out.data() + 8, a.gid.raw.data(), 16);
    for (int i = 0; i < 8; ++i) {
      out[24 + i] = static_cast<uint8_t>(a.service_id >> (56 - 8 * i));
      out[32 + i] = static_cast<uint8_t>(a.service_mask >> (56 - 8 * i));
    }
  }
  return out;
}

absl::Status CopyOut(const char* call, const Address& a, void* addr, size_t* addrlen) {
  if (addrlen == nullptr) return absl::InvalidArgumentError(absl::StrCat(call, ": addrlen is null"));
  if (a.family == Address::Family::kUnspec) {
    return absl::FailedPreconditionError(
        absl::StrCat(call, ": the endpoint has no address yet (setname or connect first)"));
  }
  const std::vector<uint8_t> bytes = Encode(a);
  const size_t have = *addrlen;
  if (addr != nullptr) std::memcpy(addr, bytes.data(), std::min(have, bytes.size()));
  *addrlen = bytes.size();
  if (have < bytes.size()) {
    return absl::OutOfRangeError(absl::StrCat(call, ": buffer is ", have,
                                              " bytes; the address needs ", bytes.size(),
                                              " (-FI_ETOOSMALL, addrlen set to the size)"));
  }
  return absl::OkStatus();
}

std::vector<uint8_t> Bytes(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

}  // namespace

const char* EqEventName(EqEvent e) {
  switch (e) {
    case EqEvent::kConnReq: return "FI_CONNREQ";
    case EqEvent::kConnected: return "FI_CONNECTED";
    case EqEvent::kShutdown: return "FI_SHUTDOWN";
    case EqEvent::kJoinComplete: return "FI_JOIN_COMPLETE";
  }
  return "?";
}

int ToFiErrno(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk: return 0;
    case absl::StatusCode::kOutOfRange: return -kFiEtoosmall;
    case absl::StatusCode::kFailedPrecondition: return -kFiEopbadstate;
    case absl::StatusCode::kUnavailable: return -EAGAIN;
    case absl::StatusCode::kAborted: return -kFiEavail;
    case absl::StatusCode::kNotFound: return -ENOENT;
    case absl::StatusCode::kAlreadyExists: return -EADDRINUSE;
    case absl::StatusCode::kInvalidArgument:
      return absl::StrContains(s.message(), "FI_EBADFLAGS") ? -kFiEbadflags : -EINVAL;
    default: return -EIO;
  }
}

size_t CmDataSizeFor(CmStep step, PortSpace ps) {
  switch (step) {
    case CmStep::kConnect: return ps == PortSpace::kIb ? kReqPrivateDataIb : kReqPrivateDataIp;
    case CmStep::kAccept: return kRepPrivateData;
    case CmStep::kReject: return kRejPrivateData;
    case CmStep::kShutdown: return 0;
  }
  return 0;
}

size_t SockaddrSize(const Address& a) {
  switch (a.family) {
    case Address::Family::kIpv4: return sizeof(sockaddr_in);
    case Address::Family::kIpv6: return sizeof(sockaddr_in6);
    case Address::Family::kIb: return kSockaddrIbSize;
    case Address::Family::kUnspec: return 0;
  }
  return 0;
}

absl::StatusOr<Address> DecodeSockaddr(std::span<const uint8_t> b) {
  if (b.size() < 2) return absl::InvalidArgumentError("setname: address shorter than a family");
  uint16_t family;
  std::memcpy(&family, b.data(), 2);
  if (family == AF_INET) {
    if (b.size() < sizeof(sockaddr_in)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "setname: sockaddr_in is ", sizeof(sockaddr_in), " bytes; got ", b.size()));
    }
    sockaddr_in sin;
    std::memcpy(&sin, b.data(), sizeof sin);
    return Address::Ipv4(ntohl(sin.sin_addr.s_addr), ntohs(sin.sin_port));
  }
  if (family == AF_INET6) {
    if (b.size() < sizeof(sockaddr_in6)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "setname: sockaddr_in6 is ", sizeof(sockaddr_in6), " bytes; got ", b.size()));
    }
    sockaddr_in6 sin6;
    std::memcpy(&sin6, b.data(), sizeof sin6);
    std::array<uint8_t, 16> ip;
    std::memcpy(ip.data(), &sin6.sin6_addr, 16);
    return Address::Ipv6(ip, ntohs(sin6.sin6_port));
  }
  if (family == kAfIb) {
    if (b.size() < kSockaddrIbSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("setname: sockaddr_ib is 48 bytes; got ", b.size()));
    }
    mad::Gid gid;
    std::memcpy(gid.raw.data(), b.data() + 8, 16);
    uint64_t sid = 0, mask = 0;
    for (int i = 0; i < 8; ++i) {
      sid = sid << 8 | b[24 + i];
      mask = mask << 8 | b[32 + i];
    }
    Address a = Address::Ib(gid, 0, sid, static_cast<uint16_t>(b[2] << 8 | b[3]));
    a.service_mask = mask;
    return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("setname: address family ", family, " is not AF_INET, AF_INET6 or AF_IB"));
}

// ---- EventQueue ----

absl::StatusOr<std::unique_ptr<EventQueue>> EventQueue::Create(Device& device) {
  absl::StatusOr<std::unique_ptr<EventChannel>> ch = device.CreateEventChannel();
  if (!ch.ok()) return ch.status();
  return std::unique_ptr<EventQueue>(new EventQueue(device, std::move(*ch)));
}

EventQueue::~EventQueue() {
  Pump();
  for (CmId* id : unclaimed_) (void)channel_->DestroyId(id);
}

void EventQueue::PushError(void* fid, void* ctx, int err, int prov, std::vector<uint8_t> data,
                           std::string detail) {
  Item it;
  it.error = true;
  it.err.fid = fid;
  it.err.context = ctx;
  it.err.err = err;
  it.err.prov_errno = prov;
  it.err.err_data = std::move(data);
  it.err.detail = std::move(detail);
  items_.push_back(std::move(it));
}

void EventQueue::Pump() {
  for (;;) {
    absl::StatusOr<Event*> e = channel_->GetEvent();
    if (!e.ok()) return;
    const Event copy = **e;
    (void)channel_->AckEvent(*e);
    Translate(copy);
  }
}

size_t EventQueue::pending() {
  Pump();
  return items_.size();
}

absl::StatusOr<EqEntry> EventQueue::Read() {
  Pump();
  if (items_.empty()) return absl::UnavailableError("fi_eq_read: no entry (-FI_EAGAIN)");
  if (items_.front().error) {
    return absl::AbortedError("fi_eq_read: an error entry is next; read it with ReadErr (-FI_EAVAIL)");
  }
  EqEntry out = std::move(items_.front().entry);
  items_.pop_front();
  return out;
}

absl::StatusOr<EqErrEntry> EventQueue::ReadErr() {
  Pump();
  if (items_.empty() || !items_.front().error) {
    return absl::UnavailableError("fi_eq_readerr: no error entry is next (-FI_EAGAIN)");
  }
  EqErrEntry out = std::move(items_.front().err);
  items_.pop_front();
  return out;
}

void EventQueue::Forget(void* fid) {
  for (auto it = items_.begin(); it != items_.end();) {
    if ((it->error ? it->err.fid : it->entry.fid) == fid) {
      it = items_.erase(it);
    } else {
      ++it;
    }
  }
}

void EventQueue::Translate(const Event& e) {
  if (e.event == EventType::kConnectRequest) {
    auto lit = peps_.find(e.listen_id);
    if (lit == peps_.end()) {
      (void)e.id->Reject({});
      (void)channel_->DestroyId(e.id);
      return;
    }
    Item it;
    it.entry.event = EqEvent::kConnReq;
    it.entry.fid = lit->second;
    it.entry.context = lit->second->context();
    it.entry.info.handle = e.id;
    it.entry.info.src_addr = e.id->GetPeerAddr();
    it.entry.info.dest_addr = e.id->GetLocalAddr();
    it.entry.data = e.conn.private_data;
    unclaimed_.insert(e.id);
    items_.push_back(std::move(it));
    return;
  }
  auto eit = eps_.find(e.id);
  if (eit == eps_.end()) return;  // closed endpoint or unclaimed request
  Endpoint* ep = eit->second;
  auto connected = [&](std::vector<uint8_t> data) {
    ep->connected_ = true;
    Item it;
    it.entry.event = EqEvent::kConnected;
    it.entry.fid = ep;
    it.entry.context = ep->context_;
    it.entry.data = std::move(data);
    items_.push_back(std::move(it));
  };
  switch (e.event) {
    case EventType::kAddrResolved: {
      absl::Status s = ep->id_->ResolveRoute();
      if (!s.ok()) PushError(ep, ep->context_, EHOSTUNREACH, 0, {}, std::string(s.message()));
      return;
    }
    case EventType::kRouteResolved: {
      absl::Status s = ep->id_->Connect(ep->connect_param_);
      if (!s.ok()) PushError(ep, ep->context_, ECONNABORTED, 0, {}, std::string(s.message()));
      return;
    }
    case EventType::kAddrError:
    case EventType::kRouteError:
      PushError(ep, ep->context_, e.status < 0 ? -e.status : EHOSTUNREACH, e.status, {},
                absl::StrCat(EventTypeName(e.event), " ", e.detail));
      return;
    case EventType::kConnectResponse: {
      // No QP attached: the runtime's user sends RTU now (libfabric's verbs
      // provider owns the QP; a QpTransitioner set with SetQp moves it).
      absl::Status s = ep->id_->Establish();
      if (!s.ok()) {
        PushError(ep, ep->context_, ECONNABORTED, 0, {}, std::string(s.message()));
        return;
      }
      connected(e.conn.private_data);
      return;
    }
    case EventType::kEstablished:
      connected(ep->passive_ ? std::vector<uint8_t>{} : e.conn.private_data);
      return;
    case EventType::kRejected:
      PushError(ep, ep->context_, ECONNREFUSED, -e.status, e.conn.private_data,
                absl::StrCat("REJ reason ", e.status));
      return;
    case EventType::kUnreachable:
      PushError(ep, ep->context_, e.status == -ETIMEDOUT ? ETIMEDOUT : ECONNREFUSED, e.status,
                {}, "unreachable");
      return;
    case EventType::kConnectError:
      PushError(ep, ep->context_, e.status < 0 ? -e.status : ECONNABORTED, e.status, {},
                e.detail);
      return;
    case EventType::kDisconnected:
      if (ep->shutdown_called_ || ep->shutdown_reported_) return;
      ep->shutdown_reported_ = true;
      (void)ep->id_->Disconnect();  // DREP to the peer
      {
        Item it;
        it.entry.event = EqEvent::kShutdown;
        it.entry.fid = ep;
        it.entry.context = ep->context_;
        items_.push_back(std::move(it));
      }
      return;
    case EventType::kMulticastJoin:
    case EventType::kMulticastError: {
      Multicast* mc = nullptr;
      for (auto& g : ep->groups_) {
        if (g.get() == e.mc_context && !g->closed_) mc = g.get();
      }
      if (mc == nullptr) return;
      if (e.event == EventType::kMulticastError) {
        PushError(mc, mc->context_, e.status < 0 ? -e.status : EIO, e.status, {}, e.detail);
        return;
      }
      mc->joined_ = true;
      mc->addr_.ah = e.ud.ah_attr;
      mc->addr_.qpn = e.ud.qp_num;
      mc->addr_.qkey = e.ud.qkey;
      Item it;
      it.entry.event = EqEvent::kJoinComplete;
      it.entry.fid = mc;
      it.entry.context = mc->context_;
      items_.push_back(std::move(it));
      return;
    }
    default:
      return;  // TIMEWAIT_EXIT and the rest: nothing in fi_cm
  }
}

// ---- PassiveEndpoint ----

absl::StatusOr<std::unique_ptr<PassiveEndpoint>> PassiveEndpoint::Create(EventQueue& eq,
                                                                         PortSpace ps,
                                                                         void* context) {
  absl::StatusOr<CmId*> id = eq.channel().CreateId(nullptr, ps);
  if (!id.ok()) return id.status();
  std::unique_ptr<PassiveEndpoint> p(new PassiveEndpoint(eq, *id, ps, context));
  eq.peps_[*id] = p.get();
  return p;
}

PassiveEndpoint::~PassiveEndpoint() {
  eq_.Pump();
  eq_.Forget(this);
  eq_.peps_.erase(id_);
  (void)eq_.channel().DestroyId(id_);
}

absl::Status PassiveEndpoint::SetName(const void* addr, size_t addrlen) {
  absl::StatusOr<Address> a =
      DecodeSockaddr({static_cast<const uint8_t*>(addr), addr == nullptr ? 0 : addrlen});
  if (!a.ok()) return a.status();
  return id_->BindAddr(*a);
}

absl::Status PassiveEndpoint::GetName(void* addr, size_t* addrlen) const {
  return CopyOut("getname", id_->GetLocalAddr(), addr, addrlen);
}

absl::Status PassiveEndpoint::SetBacklog(int backlog) {
  if (backlog < 0) {
    return absl::InvalidArgumentError(absl::StrCat("backlog is ", backlog, "; must be >= 0"));
  }
  if (listening_) {
    absl::Status s = id_->SetBacklog(backlog);
    if (!s.ok()) return s;
  }
  backlog_ = backlog;
  return absl::OkStatus();
}

absl::Status PassiveEndpoint::Listen() {
  if (listening_) return absl::FailedPreconditionError("listen: already listening");
  absl::Status s = id_->Listen(backlog_);
  if (s.ok()) listening_ = true;
  return s;
}

absl::Status PassiveEndpoint::Reject(const ConnReqInfo& info, std::span<const uint8_t> param) {
  if (!eq_.unclaimed_.contains(info.handle)) {
    return absl::NotFoundError("reject: unknown handle (accepted, rejected or never delivered)");
  }
  if (param.size() > kRejPrivateData) {
    return absl::InvalidArgumentError(absl::StrCat("reject: param is ", param.size(),
                                                   " bytes; REJ carries at most ",
                                                   kRejPrivateData));
  }
  absl::Status s = info.handle->Reject(param);
  if (!s.ok()) return s;
  eq_.unclaimed_.erase(info.handle);
  return eq_.channel().DestroyId(info.handle);
}

// ---- Endpoint ----

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(EventQueue& eq, PortSpace ps,
                                                           void* context) {
  absl::StatusOr<CmId*> id = eq.channel().CreateId(nullptr, ps);
  if (!id.ok()) return id.status();
  std::unique_ptr<Endpoint> e(new Endpoint(eq, *id, false, context));
  eq.eps_[*id] = e.get();
  return e;
}

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::FromConnReq(EventQueue& eq,
                                                                const ConnReqInfo& info,
                                                                void* context) {
  if (!eq.unclaimed_.contains(info.handle)) {
    return absl::NotFoundError(
        "endpoint: the FI_CONNREQ info is unknown (already used, rejected, or of another EQ)");
  }
  eq.unclaimed_.erase(info.handle);
  std::unique_ptr<Endpoint> e(new Endpoint(eq, info.handle, true, context));
  eq.eps_[info.handle] = e.get();
  return e;
}

Endpoint::~Endpoint() {
  eq_.Pump();
  for (auto& g : groups_) {
    if (!g->closed_) (void)g->Close();
    eq_.Forget(g.get());
  }
  eq_.Forget(this);
  eq_.eps_.erase(id_);
  (void)eq_.channel().DestroyId(id_);
}

absl::Status Endpoint::SetQp(QpTransitioner* qp) { return id_->SetQp(qp); }

absl::Status Endpoint::SetName(const void* addr, size_t addrlen) {
  absl::StatusOr<Address> a =
      DecodeSockaddr({static_cast<const uint8_t*>(addr), addr == nullptr ? 0 : addrlen});
  if (!a.ok()) return a.status();
  return id_->BindAddr(*a);
}

absl::Status Endpoint::GetName(void* addr, size_t* addrlen) const {
  return CopyOut("getname", id_->GetLocalAddr(), addr, addrlen);
}

absl::Status Endpoint::GetPeer(void* addr, size_t* addrlen) const {
  if (!connected_) {
    return absl::FailedPreconditionError("getpeer: valid only after FI_CONNECTED");
  }
  return CopyOut("getpeer", id_->GetPeerAddr(), addr, addrlen);
}

size_t Endpoint::CmDataSize() const {
  return CmDataSizeFor(passive_ ? CmStep::kAccept : CmStep::kConnect, id_->port_space());
}

absl::Status Endpoint::Connect(const Address& dest, std::span<const uint8_t> param) {
  if (passive_) {
    return absl::FailedPreconditionError("connect: endpoint made from a FI_CONNREQ; accept it");
  }
  if (connect_called_) {
    return absl::FailedPreconditionError(
        "connect: fi_connect may be called once per endpoint; it was already called");
  }
  if (param.size() > CmDataSize()) {
    return absl::InvalidArgumentError(absl::StrCat("connect: param is ", param.size(),
                                                   " bytes; the REQ carries at most ",
                                                   CmDataSize()));
  }
  connect_called_ = true;
  connect_param_.private_data = Bytes(param);
  return id_->ResolveAddr(absl::nullopt, dest);
}

absl::Status Endpoint::Accept(std::span<const uint8_t> param) {
  if (!passive_) return absl::FailedPreconditionError("accept: not made from a FI_CONNREQ");
  if (accepted_) return absl::FailedPreconditionError("accept: already accepted");
  if (param.size() > kRepPrivateData) {
    return absl::InvalidArgumentError(absl::StrCat("accept: param is ", param.size(),
                                                   " bytes; REP carries at most ",
                                                   kRepPrivateData));
  }
  ConnParam p;
  p.private_data = Bytes(param);
  absl::Status s = id_->Accept(p);
  if (s.ok()) accepted_ = true;
  return s;
}

absl::Status Endpoint::Shutdown(uint64_t flags) {
  if (flags != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shutdown: flags must be 0; got 0x", absl::Hex(flags), " (-FI_EBADFLAGS)"));
  }
  if (!connected_ || shutdown_called_ || shutdown_reported_) {
    return absl::FailedPreconditionError("shutdown: not connected (or already shut down)");
  }
  absl::Status s = id_->Disconnect();
  if (s.ok()) shutdown_called_ = true;
  return s;
}

absl::StatusOr<Multicast*> Endpoint::Join(const Address& group, uint32_t flags, void* context) {
  if (!id_->is_ud()) {
    return absl::InvalidArgumentError("join: only datagram endpoints (kUdp, kIpoib) join groups");
  }
  if ((flags & ~uint32_t{kJoinSend | kJoinRecv}) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "join: flags 0x", absl::Hex(flags), " other than FI_SEND / FI_RECV (-FI_EBADFLAGS)"));
  }
  const bool send_only = flags == kJoinSend;
  auto mc = std::unique_ptr<Multicast>(new Multicast(this, group, send_only, context));
  absl::Status s = id_->JoinMulticastEx(
      group, mc.get(), send_only ? McJoinFlags::kSendOnlyFullMember : McJoinFlags::kFullMember);
  if (!s.ok()) return s;
  groups_.push_back(std::move(mc));
  return groups_.back().get();
}

absl::StatusOr<McAddr> Multicast::Addr() const {
  if (closed_) return absl::FailedPreconditionError("mc_addr: the group was closed");
  if (!joined_) return absl::FailedPreconditionError("mc_addr: valid after FI_JOIN_COMPLETE");
  return addr_;
}

absl::Status Multicast::Close() {
  if (closed_) return absl::FailedPreconditionError("close: the group was already closed");
  closed_ = true;
  ep_->eq_.Forget(this);
  return ep_->id_->LeaveMulticast(group_);
}

}  // namespace uscm::fi
