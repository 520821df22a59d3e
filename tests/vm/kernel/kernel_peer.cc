#include "tests/vm/kernel/kernel_peer.h"

#include <poll.h>

#include <cstdio>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"

namespace uscm::vmtest {

namespace {

constexpr int kQpDepth = 32;
constexpr size_t kRecvBufferBytes = 4096;

std::string OpcodeName(int op) {
  switch (op) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "RDMA_READ";
    case IBV_WC_RECV: return "RECV";
    default: return absl::StrCat("opcode ", op);
  }
}

}  // namespace

std::string Describe(const CmEvent& e) {
  std::string s = absl::StrCat(EventTypeName(e.type), " status ", e.status);
  if (!e.detail.empty()) absl::StrAppend(&s, " (", e.detail, ")");
  return s;
}

absl::StatusOr<std::unique_ptr<Peer>> Peer::Open(const PeerOptions& options) {
  std::unique_ptr<Peer> p(new Peer());
  p->options_ = options;
  if (options.local_ip.family != Address::Family::kIpv4) {
    return absl::InvalidArgumentError("local address: an IPv4 address is required (RoCE v2 "
                                      "IPv4 GIDs)");
  }
  // RoCE v2: the port's GID for an IPv4 address is ::ffff:<ip> (the kernel
  // fills the GID table from the netdev's addresses).
  p->gid_ = verbs::Ipv4MappedGid(options.local_ip.ipv4());
  absl::StatusOr<std::vector<mad::Gid>> gids =
      verbs::ReadGidTable(options.ca_name, options.port_num);
  if (!gids.ok()) return gids.status();
  absl::StatusOr<uint8_t> index = verbs::GidIndex(*gids, p->gid_);
  if (!index.ok()) return index.status();
  p->gid_index_ = *index;

  mad::UmadOptions u;
  u.ca_name = options.ca_name;
  u.port_num = options.port_num;
  u.receive_cm = true;
  u.register_sa = false;
  absl::StatusOr<std::unique_ptr<mad::UmadTransport>> umad = mad::UmadTransport::Open(u);
  if (!umad.ok()) return umad.status();
  p->umad_ = std::move(*umad);
  // Sends MADs for IPv4-mapped GIDs from our IPv4 GID (the CM leaves the
  // source GID index at 0, the fe80 GID).
  p->roce_ = std::make_unique<verbs::RoceAddressing>(*p->umad_, *gids);

  DeviceOptions d;
  d.local_ips = {options.local_ip};
  // The node's seed picks local communication IDs and starting PSNs. The
  // default (1) gives every process the same ones; a kernel peer keeps a
  // connection's (comm ID, CA GUID) in timewait and would take a restarted
  // uscm's REQ for a duplicate or a stale connection.
  d.node.seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  absl::StatusOr<std::unique_ptr<Device>> dev = Device::Create(*p->roce_, d);
  if (!dev.ok()) return dev.status();
  p->device_ = std::move(*dev);
  absl::StatusOr<std::unique_ptr<EventChannel>> ch = p->device_->CreateEventChannel();
  if (!ch.ok()) return ch.status();
  p->channel_ = std::move(*ch);
  absl::Status s = p->device_->StartProgressThread();
  if (!s.ok()) return s;

  absl::StatusOr<std::unique_ptr<RcVerbs>> rc = RcVerbs::Open(options.ca_name, kQpDepth);
  if (!rc.ok()) return rc.status();
  p->rc_ = std::move(*rc);
  absl::StatusOr<RcBuffer*> rb = p->rc_->Register(kRecvBufferBytes, IBV_ACCESS_LOCAL_WRITE);
  if (!rb.ok()) return rb.status();
  p->recv_buf_ = *rb;
  verbs::IbvMapOptions map;
  map.sgid_index = p->gid_index_;
  absl::StatusOr<verbs::VerbsQp> vqp = verbs::VerbsQp::Wrap(p->rc_->qp(), map);
  if (!vqp.ok()) return vqp.status();
  p->vqp_ = std::make_unique<verbs::VerbsQp>(std::move(*vqp));
  return p;
}

Peer::~Peer() {
  if (device_ != nullptr) device_->StopProgressThread();
}

absl::Status Peer::Pump() {
  bool any = false;
  for (;;) {
    absl::StatusOr<Event*> ev = channel_->GetEvent();
    if (!ev.ok()) break;
    CmEvent c;
    c.type = (*ev)->event;
    c.status = (*ev)->status;
    c.id = (*ev)->id;
    c.private_data = (*ev)->conn.private_data;
    c.detail = (*ev)->detail;
    absl::Status s = channel_->AckEvent(*ev);
    if (!s.ok()) return s;
    events_.push_back(std::move(c));
    any = true;
  }
  for (;;) {
    absl::StatusOr<absl::optional<ibv_wc>> wc = rc_->PollOne();
    if (!wc.ok()) return wc.status();
    if (!wc->has_value()) break;
    if ((*wc)->status == IBV_WC_WR_FLUSH_ERR) {
      ++flushed_;  // receives still posted when the QP moved to ERROR
    } else {
      completions_.push_back(**wc);
    }
    any = true;
  }
  if (!any) {
    pollfd pfd{channel_->fd(), POLLIN, 0};
    (void)poll(&pfd, 1, 2);
  }
  return absl::OkStatus();
}

absl::StatusOr<CmEvent> Peer::NextCmEvent(const char* step) {
  mad::RealClock clock;
  const mad::TimePoint deadline = clock.Now() + options_.step_timeout;
  while (events_.empty()) {
    if (clock.Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(step, ": no CM event within ",
                                                      options_.step_timeout.ToString()));
    }
    absl::Status s = Pump();
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(step, ": ", s.message()));
  }
  CmEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

absl::StatusOr<ibv_wc> Peer::NextCompletion(const char* step, ibv_wc_opcode opcode,
                                            CmEvent* cm_event) {
  mad::RealClock clock;
  const mad::TimePoint deadline = clock.Now() + options_.step_timeout;
  for (;;) {
    while (!completions_.empty()) {
      ibv_wc wc = completions_.front();
      completions_.pop_front();
      if (wc.opcode == opcode) return wc;
      if (wc.opcode == IBV_WC_SEND) {
        ++send_completions_;
        continue;
      }
      return absl::InternalError(absl::StrCat(step, ": expected a ", OpcodeName(opcode),
                                              " completion, got ", OpcodeName(wc.opcode)));
    }
    if (!events_.empty()) {
      CmEvent e = std::move(events_.front());
      events_.pop_front();
      if (cm_event != nullptr) {
        *cm_event = e;
        return absl::AbortedError(absl::StrCat(step, ": ", Describe(e)));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          step, ": CM event ", Describe(e), " while waiting for a ", OpcodeName(opcode),
          " completion"));
    }
    if (clock.Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(step, ": no ", OpcodeName(opcode),
                                                      " completion within ",
                                                      options_.step_timeout.ToString()));
    }
    absl::Status s = Pump();
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(step, ": ", s.message()));
  }
}

absl::Status Peer::AttachQp(CmId* id) { return id->SetQp(vqp_.get()); }

absl::StatusOr<CmEvent> Peer::Connect(const Address& dst, const ConnParam& param,
                                      int post_recvs, uint32_t recv_size) {
  absl::StatusOr<CmId*> id = channel_->CreateId(nullptr, PortSpace::kTcp);
  if (!id.ok()) return id.status();
  conn_ = *id;
  // RoCE v2: the peer's GID is its IPv4 address; this is uscm's ARP.
  absl::Status s =
      device_->AddNeighbor(dst, verbs::Ipv4MappedGid(dst.ipv4()), mad::kPermissiveLid);
  if (!s.ok()) return s;
  // No SA on RoCE: the path comes from the two IPs (IB_PATH option).
  IdOptions o;
  o.ib_path = verbs::RocePathFromIps(options_.local_ip.ipv4(), dst.ipv4());
  // The port's active MTU, as rdma_cm puts in its REQ on RoCE (it was 2048).
  o.ib_path->mtu = static_cast<uint8_t>(rc_->ActiveMtu(options_.port_num));
  s = conn_->SetOption(o);
  if (!s.ok()) return s;
  s = conn_->ResolveAddr(options_.local_ip, dst);
  if (!s.ok()) return s;
  absl::StatusOr<CmEvent> e = NextCmEvent("resolve_addr");
  if (!e.ok()) return e.status();
  if (e->type != EventType::kAddrResolved) {
    return absl::UnavailableError(absl::StrCat("resolve_addr: ", Describe(*e)));
  }
  s = conn_->ResolveRoute();
  if (!s.ok()) return s;
  e = NextCmEvent("resolve_route");
  if (!e.ok()) return e.status();
  if (e->type != EventType::kRouteResolved) {
    return absl::UnavailableError(absl::StrCat("resolve_route: ", Describe(*e)));
  }
  s = AttachQp(conn_);
  if (!s.ok()) return s;
  s = conn_->Connect(param);  // moves the QP to INIT, sends the REQ
  if (!s.ok()) return s;
  for (int i = 0; i < post_recvs; ++i) {
    s = rc_->PostRecv(*recv_buf_, recv_size, static_cast<uint64_t>(i));
    if (!s.ok()) return s;
  }
  return NextCmEvent("connect");
}

absl::StatusOr<CmEvent> Peer::ListenForOne(const Address& local) {
  absl::StatusOr<CmId*> id = channel_->CreateId(nullptr, PortSpace::kTcp);
  if (!id.ok()) return id.status();
  listener_ = *id;
  absl::Status s = listener_->BindAddr(local);
  if (!s.ok()) return s;
  s = listener_->Listen(4);
  if (!s.ok()) return s;
  std::printf("listening on %s\n", local.ToString().c_str());
  std::fflush(stdout);
  absl::StatusOr<CmEvent> e = NextCmEvent("listen");
  if (!e.ok()) return e.status();
  if (e->type != EventType::kConnectRequest) {
    return absl::UnavailableError(absl::StrCat("listen: expected CONNECT_REQUEST, got ",
                                               Describe(*e)));
  }
  conn_ = e->id;
  return e;
}

absl::Status Peer::Accept(const CmEvent& req, const ConnParam& param, int post_recvs,
                          uint32_t recv_size) {
  // Receives must be posted before the REP: a kernel client may send at once
  // after its RTU, and ucmatose connects with rnr_retry_count 0.
  cm::QpAttributes init;
  init.state = cm::QpState::kInit;
  init.mask = cm::kQpState | cm::kQpAccessFlags | cm::kQpPkeyIndex | cm::kQpPort;
  init.access_flags = cm::kAccessRemoteWrite | cm::kAccessRemoteRead;
  init.port_num = static_cast<uint8_t>(options_.port_num);
  absl::Status s = vqp_->Modify(init);
  if (!s.ok()) return s;
  for (int i = 0; i < post_recvs; ++i) {
    s = rc_->PostRecv(*recv_buf_, recv_size, static_cast<uint64_t>(i));
    if (!s.ok()) return s;
  }
  s = AttachQp(req.id);
  if (!s.ok()) return s;
  s = req.id->Accept(param);
  if (!s.ok()) return s;
  absl::StatusOr<CmEvent> e = NextCmEvent("accept");
  if (!e.ok()) return e.status();
  if (e->type != EventType::kEstablished) {
    return absl::UnavailableError(absl::StrCat("accept: expected ESTABLISHED, got ",
                                               Describe(*e)));
  }
  return absl::OkStatus();
}

absl::Status Peer::DisconnectAndWait() {
  absl::Status s = conn_->Disconnect();
  if (!s.ok()) return s;
  for (;;) {
    absl::StatusOr<CmEvent> e = NextCmEvent("disconnect");
    if (!e.ok()) return e.status();
    if (e->type == EventType::kDisconnected) {
      return e->status == 0 ? absl::OkStatus()
                            : absl::UnavailableError(absl::StrCat(
                                  "disconnect: DREQ not answered: ", Describe(*e)));
    }
  }
}

std::string Peer::CountersLine() {
  std::lock_guard<std::mutex> lock(device_->node().mutex());
  const cm::CmCounters& c = device_->node().cm().counters();
  uint64_t dup = 0, rtx = 0, sent = 0, received = 0;
  for (size_t i = 0; i < c.sent.size(); ++i) {
    dup += c.duplicates[i];
    rtx += c.retransmitted[i];
    sent += c.sent[i];
    received += c.received[i];
  }
  return absl::StrCat("uscm CM counters: sent ", sent, " received ", received, " malformed ",
                      c.malformed, " unknown_connection ", c.unknown_connection,
                      " unexpected_state ", c.unexpected_state, " duplicates ", dup,
                      " retransmitted ", rtx, " timeouts ", c.timeouts, "; umad send errors ",
                      umad_->stats().send_errors, "; flushed work requests ", flushed_);
}

absl::Status Peer::AnswerDisconnect() { return conn_->Disconnect(); }

}  // namespace uscm::vmtest
