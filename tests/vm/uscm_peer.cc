// uscm_peer: one end of a uscm RC connection on a real RDMA device (the VM
// lane's Soft-RoCE), through the public API: uscm::Device::Create over the
// umad transport (QP1) or the verbs UD transport, a real RC QP (verbs/
// rc_resources) that the CM moves INIT -> RTR -> RTS, and data checked byte
// for byte: the client RDMA-writes pattern 1 into the server's buffer (address
// and rkey from the REP's private data), then SENDs pattern 2; the server
// checks both and SENDs pattern 3 back; the client checks it and disconnects.
//
//   uscm_peer --role server|client|open --device rxe0 --ip A.B.C.D
//             [--peer-ip A.B.C.D] [--port 7471] [--transport umad|ud]
//             [--bytes 4096] [--ready-file F] [--qpn-file F] [--peer-ud-qpn N]
//             [--timeout-ms 20000] [--sa-rmpp auto|user|kernel|none]
// --role open only opens the transport and the RC resources (error checks);
// --role mcast (RunMulticast below) attaches a real UD QP on --device to an
// IPv4 multicast group and sends to it from a UD QP on --peer-device:
//   uscm_peer --role mcast --device rxe0 --ip A.B.C.D --peer-device rxe1
//             --peer-ip A.B.C.D [--group 239.1.2.3] [--bytes 256]
// with --sa-rmpp the umad transport also registers an SA agent that way and
// prints the mode it got (RoCE has no SA, but the registration is the kernel's).
// RoCE path: no SA; GIDs are the IPv4-mapped addresses (verbs/roce_addressing.h).
// Prints "ok <step>" lines; on an error "uscm_peer: <message>" and exit 1.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/time.h"
#include "mad/umad_transport.h"
#include "verbs/qp_transitions.h"
#include "verbs/rc_resources.h"
#include "verbs/roce_addressing.h"
#include "verbs/ud_transport.h"

namespace {

using uscm::Address;
using uscm::Event;
using uscm::EventType;
using uscm::mad::Duration;

constexpr uint32_t kUdQkey = 0x11111;  // below 0x80000000: needs no CAP_NET_RAW

struct Flags {
  std::string role, device, transport = "umad", ready_file, qpn_file, sa_rmpp;
  std::string peer_device;  // --role mcast: the sender's device
  uint32_t ip = 0, peer_ip = 0, peer_ud_qpn = 0;
  uint32_t group = 0xEF010203;  // --role mcast: 239.1.2.3
  uint16_t port = 7471;
  size_t bytes = 4096;
  int timeout_ms = 20000;
};

bool ParseIpv4(const std::string& s, uint32_t* out) {
  auto a = Address::Parse(s);
  if (!a.ok() || a->family != Address::Family::kIpv4) return false;
  *out = a->ipv4();
  return true;
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(k, " needs a value"));
    const std::string v = argv[i + 1];
    uint32_t n = 0;
    bool ok = true;
    if (k == "--role") f.role = v;
    else if (k == "--device") f.device = v;
    else if (k == "--transport") f.transport = v;
    else if (k == "--sa-rmpp") f.sa_rmpp = v;
    else if (k == "--ip") ok = ParseIpv4(v, &f.ip);
    else if (k == "--peer-ip") ok = ParseIpv4(v, &f.peer_ip);
    else if (k == "--port") ok = absl::SimpleAtoi(v, &n) && n > 0 && n < 65536, f.port = n;
    else if (k == "--bytes") ok = absl::SimpleAtoi(v, &n) && n > 0 && n <= (1u << 20), f.bytes = n;
    else if (k == "--timeout-ms") ok = absl::SimpleAtoi(v, &f.timeout_ms) && f.timeout_ms > 0;
    else if (k == "--ready-file") f.ready_file = v;
    else if (k == "--qpn-file") f.qpn_file = v;
    else if (k == "--peer-ud-qpn") ok = absl::SimpleAtoi(v, &f.peer_ud_qpn) && f.peer_ud_qpn > 1;
    else if (k == "--peer-device") f.peer_device = v;
    else if (k == "--group") ok = ParseIpv4(v, &f.group) && (f.group >> 28) == 0xE;
    else return absl::InvalidArgumentError(absl::StrCat("unknown flag ", k));
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value for ", k, ": ", v));
  }
  if (f.role != "server" && f.role != "client" && f.role != "open" && f.role != "mcast") {
    return absl::InvalidArgumentError("--role server|client|open|mcast");
  }
  if (f.role == "mcast" && (f.peer_device.empty() || f.peer_ip == 0)) {
    return absl::InvalidArgumentError("--role mcast needs --peer-device and --peer-ip (the sender)");
  }
  if (f.transport != "umad" && f.transport != "ud") {
    return absl::InvalidArgumentError("--transport umad|ud");
  }
  if (f.device.empty() || f.ip == 0) return absl::InvalidArgumentError("--device and --ip are required");
  if (f.role == "client" && f.peer_ip == 0) return absl::InvalidArgumentError("--peer-ip is required");
  if (f.role == "client" && f.transport == "ud" && f.peer_ud_qpn == 0) {
    return absl::InvalidArgumentError("--transport ud: the client needs --peer-ud-qpn");
  }
  return f;
}

// Deterministic pattern `seed` (an xorshift stream), so both ends know it.
std::vector<uint8_t> Pattern(uint32_t seed, size_t n) {
  std::vector<uint8_t> p(n);
  uint32_t x = 0x9E3779B9u * seed + 1;
  for (auto& b : p) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x >> 24);
  }
  return p;
}

// "" when equal, else where they first differ.
std::string Compare(std::span<const uint8_t> got, const std::vector<uint8_t>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return absl::StrCat("byte ", i, " is 0x", absl::Hex(got[i]), ", expected 0x",
                          absl::Hex(want[i]));
    }
  }
  return "";
}

bool Touch(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  const std::string tmp = path + ".tmp";
  { std::ofstream(tmp) << text << "\n"; }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

absl::StatusOr<Event> Expect(uscm::EventChannel& ch, EventType want, Duration timeout) {
  absl::StatusOr<Event*> e = ch.WaitEvent(timeout);
  if (!e.ok()) {
    return absl::DeadlineExceededError(absl::StrCat("waiting for ", uscm::EventTypeName(want),
                                                    ": ", e.status().message()));
  }
  Event copy = **e;
  (void)ch.AckEvent(*e);
  if (copy.event != want) {
    return absl::AbortedError(absl::StrCat("expected ", uscm::EventTypeName(want), ", got ",
                                           uscm::EventTypeName(copy.event), " (status ",
                                           copy.status, copy.detail.empty() ? "" : ": ",
                                           copy.detail, ")"));
  }
  return copy;
}

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    absl::Status _s = (expr);                  \
    if (!_s.ok()) return _s;                   \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr)            \
  auto lhs##_or = (expr);                      \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

absl::Status ExpectRts(const uscm::verbs::RcResources& res) {
  ASSIGN_OR_RETURN(state, res.State());
  if (state != IBV_QPS_RTS) {
    return absl::InternalError(absl::StrCat("data QP is in state ", state, ", not RTS"));
  }
  printf("ok qp-rts qpn=%u\n", res.qp_num());
  return absl::OkStatus();
}

absl::Status RunMulticast(const Flags& f);

absl::Status Run(const Flags& f) {
  if (f.role == "mcast") return RunMulticast(f);
  const Duration timeout = Duration::Millis(f.timeout_ms);
  // MAD transport
  std::unique_ptr<uscm::mad::Transport> transport;
  uint32_t ud_qpn = 0;
  if (f.transport == "umad") {
    uscm::mad::UmadOptions o;
    o.ca_name = f.device;
    o.port_num = 1;
    o.register_sa = false;  // RoCE has no SA
    using Rmpp = uscm::mad::UmadOptions::Rmpp;
    if (!f.sa_rmpp.empty()) {
      o.register_sa = true;
      if (f.sa_rmpp == "auto") o.rmpp = Rmpp::kAuto;
      else if (f.sa_rmpp == "user") o.rmpp = Rmpp::kUser;
      else if (f.sa_rmpp == "kernel") o.rmpp = Rmpp::kKernel;
      else if (f.sa_rmpp == "none") o.rmpp = Rmpp::kNone;
      else return absl::InvalidArgumentError("--sa-rmpp auto|user|kernel|none");
    }
    ASSIGN_OR_RETURN(t, uscm::mad::UmadTransport::Open(o));
    printf("ok transport umad cm_agent=%d\n", t->cm_agent());
    if (o.register_sa) printf("ok sa_agent=%d sa_rmpp=%s\n", t->sa_agent(), t->sa_rmpp_mode().c_str());
    transport = std::move(t);
  } else {
    uscm::verbs::UdOptions o;
    o.device = f.device;
    o.port_num = 1;
    o.qkey = kUdQkey;
    ASSIGN_OR_RETURN(t, uscm::verbs::UdTransport::Open(o));
    ud_qpn = t->qpn();
    printf("ok transport ud qpn=%u\n", ud_qpn);
    transport = std::move(t);
  }
  ASSIGN_OR_RETURN(gids, uscm::verbs::ReadGidTable(f.device, 1));
  ASSIGN_OR_RETURN(sgid_index,
                   uscm::verbs::GidIndex(gids, uscm::verbs::Ipv4MappedGid(f.ip)));
  uscm::verbs::RoceAddressing roce(*transport, gids);
  if (f.role == "client" && f.transport == "ud") {
    roce.RedirectQp1(uscm::verbs::Ipv4MappedGid(f.peer_ip), f.peer_ud_qpn, kUdQkey);
  }

  uscm::verbs::RcOptions ro;
  ro.device = f.device;
  ro.buffer_bytes = 3 * f.bytes;  // [0,B) RDMA write target, [B,2B) receive, [2B,3B) send
  ASSIGN_OR_RETURN(res, uscm::verbs::RcResources::Open(ro));
  printf("ok rc-resources device=%s qpn=%u active_mtu=%d sgid_index=%u\n",
         res->device_name().c_str(), res->qp_num(), 128 << res->active_mtu(), sgid_index);
  if (f.role == "open") return absl::OkStatus();
  ASSIGN_OR_RETURN(qp, uscm::verbs::RcQpTransitioner::Create(res->qp(), sgid_index,
                                                             res->active_mtu()));

  uscm::DeviceOptions dopt;
  dopt.local_ips.push_back(Address::Ipv4(f.ip));
  dopt.node.seed = f.role == "server" ? 0x5E4E4 : 0xC11E47;
  ASSIGN_OR_RETURN(dev, uscm::Device::Create(roce, dopt));
  ASSIGN_OR_RETURN(ch, dev->CreateEventChannel());
  ASSIGN_OR_RETURN(id, ch->CreateId(nullptr, uscm::PortSpace::kTcp));
  const size_t b = f.bytes;
  auto buf = res->buffer();

  if (f.role == "server") {
    RETURN_IF_ERROR(id->BindAddr(Address::Ipv4(f.ip, f.port)));
    RETURN_IF_ERROR(id->Listen(4));
    if (!f.qpn_file.empty() && !Touch(f.qpn_file, std::to_string(ud_qpn))) {
      return absl::InternalError("cannot write --qpn-file");
    }
    if (!Touch(f.ready_file, "listening")) return absl::InternalError("cannot write --ready-file");
    printf("ok listening %s\n", Address::Ipv4(f.ip, f.port).ToString().c_str());
    fflush(stdout);
    ASSIGN_OR_RETURN(req, Expect(*ch, EventType::kConnectRequest, timeout));
    uscm::CmId* child = req.id;
    RETURN_IF_ERROR(child->SetQp(qp.get()));
    uscm::ConnParam p;
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.private_data.resize(12);  // buffer address (8) and rkey (4), big-endian
    for (int i = 0; i < 8; ++i) p.private_data[i] = static_cast<uint8_t>(res->buffer_addr() >> (56 - 8 * i));
    for (int i = 0; i < 4; ++i) p.private_data[8 + i] = static_cast<uint8_t>(res->rkey() >> (24 - 8 * i));
    RETURN_IF_ERROR(child->Accept(p));
    // A receive needs the QP past RESET; Accept took it to RTS. The client's
    // SEND cannot precede our REP, and RNR retries cover the gap.
    RETURN_IF_ERROR(res->PostRecv(b, b, 2));
    printf("ok accepted peer=%s\n", child->GetPeerAddr().ToString().c_str());
    RETURN_IF_ERROR(Expect(*ch, EventType::kEstablished, timeout).status());
    printf("ok established\n");
    RETURN_IF_ERROR(ExpectRts(*res));
    fflush(stdout);
    ASSIGN_OR_RETURN(c, res->WaitCompletion(timeout));
    if (c.opcode != IBV_WC_RECV || c.byte_len != b) {
      return absl::DataLossError(absl::StrCat("expected a ", b, "-byte RECV, got opcode ",
                                              c.opcode, " with ", c.byte_len, " bytes"));
    }
    // RC orders the RDMA write before the SEND that follows it.
    if (std::string d = Compare(buf.subspan(0, b), Pattern(1, b)); !d.empty()) {
      return absl::DataLossError("RDMA write target: " + d);
    }
    printf("ok rdma-write bytes=%zu\n", b);
    if (std::string d = Compare(buf.subspan(b, b), Pattern(2, b)); !d.empty()) {
      return absl::DataLossError("received message: " + d);
    }
    printf("ok send-recv bytes=%zu\n", b);
    const auto reply = Pattern(3, b);
    std::copy(reply.begin(), reply.end(), buf.begin() + 2 * b);
    RETURN_IF_ERROR(res->PostSend(2 * b, b, 3));
    // The client disconnects once it has the reply; the reply's SEND
    // completion is looked at after that, and one still waiting for its ACK
    // (rxe loses one now and then, and the client's QP in ERROR answers no
    // retry) or flushed by DISCONNECTED's move to ERROR is not a failure:
    // tests/vm/behaviour/gid_moved.c says more.
    RETURN_IF_ERROR(Expect(*ch, EventType::kDisconnected, timeout).status());
    absl::StatusOr<uscm::verbs::Completion> sc = res->WaitCompletion(Duration::Zero());
    if (sc.ok() && sc->opcode != IBV_WC_SEND) {
      return absl::DataLossError("expected the reply's SEND completion");
    }
    if (!sc.ok() && !absl::IsDeadlineExceeded(sc.status()) &&
        !absl::StrContains(sc.status().message(), ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR))) {
      return sc.status();
    }
    printf("ok reply-sent%s\n", sc.ok() ? "" : " (not acknowledged before the disconnect)");
    printf("ok disconnected\n");
    RETURN_IF_ERROR(ch->DestroyId(child));
  } else {
    RETURN_IF_ERROR(dev->AddNeighbor(Address::Ipv4(f.peer_ip),
                                     uscm::verbs::Ipv4MappedGid(f.peer_ip), 0));
    uscm::IdOptions io;
    io.ib_path = uscm::verbs::RocePathFromIps(f.ip, f.peer_ip);
    io.ib_path->mtu = static_cast<uint8_t>(res->active_mtu());  // as rdma_cm on RoCE
    RETURN_IF_ERROR(id->SetOption(io));
    RETURN_IF_ERROR(id->ResolveAddr(Address::Ipv4(f.ip), Address::Ipv4(f.peer_ip, f.port)));
    RETURN_IF_ERROR(Expect(*ch, EventType::kAddrResolved, timeout).status());
    RETURN_IF_ERROR(id->ResolveRoute());
    RETURN_IF_ERROR(Expect(*ch, EventType::kRouteResolved, timeout).status());
    RETURN_IF_ERROR(id->SetQp(qp.get()));
    uscm::ConnParam p;
    p.responder_resources = 1;
    p.initiator_depth = 1;
    RETURN_IF_ERROR(id->Connect(p));
    RETURN_IF_ERROR(res->PostRecv(b, b, 2));  // Connect took the QP to INIT
    ASSIGN_OR_RETURN(est, Expect(*ch, EventType::kEstablished, timeout));
    printf("ok established\n");
    RETURN_IF_ERROR(ExpectRts(*res));
    if (est.conn.private_data.size() < 12) {
      return absl::DataLossError(absl::StrCat("REP private data is ", est.conn.private_data.size(),
                                              " bytes; the server's address and rkey need 12"));
    }
    uint64_t raddr = 0;
    uint32_t rkey = 0;
    for (int i = 0; i < 8; ++i) raddr = raddr << 8 | est.conn.private_data[i];
    for (int i = 0; i < 4; ++i) rkey = rkey << 8 | est.conn.private_data[8 + i];
    const auto one = Pattern(1, b), two = Pattern(2, b);
    std::copy(one.begin(), one.end(), buf.begin());
    std::copy(two.begin(), two.end(), buf.begin() + 2 * b);
    RETURN_IF_ERROR(res->PostWrite(0, b, raddr, rkey, 1));
    RETURN_IF_ERROR(res->PostSend(2 * b, b, 3));
    bool wrote = false, sent = false, got = false;
    while (!(wrote && sent && got)) {
      ASSIGN_OR_RETURN(c, res->WaitCompletion(timeout));
      if (c.opcode == IBV_WC_RDMA_WRITE) wrote = true;
      else if (c.opcode == IBV_WC_SEND) sent = true;
      else if (c.opcode == IBV_WC_RECV) {
        if (c.byte_len != b) return absl::DataLossError(absl::StrCat("reply is ", c.byte_len, " bytes"));
        got = true;
      }
    }
    printf("ok rdma-write-sent bytes=%zu\nok send-sent bytes=%zu\n", b, b);
    if (std::string d = Compare(buf.subspan(b, b), Pattern(3, b)); !d.empty()) {
      return absl::DataLossError("reply: " + d);
    }
    printf("ok reply-recv bytes=%zu\n", b);
    RETURN_IF_ERROR(id->Disconnect());
    RETURN_IF_ERROR(Expect(*ch, EventType::kDisconnected, timeout).status());
    printf("ok disconnected\n");
  }
  RETURN_IF_ERROR(ch->DestroyId(id));
  printf("ok counters sgid_fixed=%llu redirected=%llu mtu_capped=%llu\n",
         static_cast<unsigned long long>(roce.counters().sgid_fixed),
         static_cast<unsigned long long>(roce.counters().redirected),
         static_cast<unsigned long long>(qp->mtu_capped()));
  return absl::OkStatus();
}

// ---- --role mcast ----------------------------------------------------------
// RoCE multicast with a real UD QP. The uscm API's JoinMulticast always asks
// the SA (MCMemberRecord Set through sa::McManager) and RoCE has no SA, so
// the API cannot join on RoCE yet (librdmacm/the kernel join RoCE groups
// without an SA: MGID = ::ffff:<IPv4 group>, an IGMP join on the netdev).
// This role does what that join would do around the attach the API performs:
// the IGMP membership on --ip (a socket's IP_ADD_MEMBERSHIP, as the kernel's
// cma_igmp_send), and the attach / detach through verbs::VerbsQp, the
// QpTransitioner the runtime calls on MULTICAST_JOIN / leave. Proof that the
// attach is real: a UD send to the group from --peer-device is not received
// before the attach, is received (byte for byte, from the sender's QPN) after
// it, and is not received after the detach.

// One UD QP (RTS, Q_Key kUdpQkey as rdma_cm multicast) with a registered buffer.
class UdEnd {
 public:
  static absl::StatusOr<std::unique_ptr<UdEnd>> Open(const std::string& device, size_t bytes) {
    std::unique_ptr<UdEnd> u(new UdEnd());
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) return absl::NotFoundError("ibv_get_device_list failed");
    for (int i = 0; i < n; ++i) {
      if (device == ibv_get_device_name(list[i])) u->ctx_ = ibv_open_device(list[i]);
    }
    ibv_free_device_list(list);
    if (u->ctx_ == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", device));
    u->buf_.resize(4 * (40 + bytes));
    if ((u->pd_ = ibv_alloc_pd(u->ctx_)) == nullptr) return absl::InternalError("ibv_alloc_pd");
    if ((u->cq_ = ibv_create_cq(u->ctx_, 32, nullptr, nullptr, 0)) == nullptr) {
      return absl::InternalError("ibv_create_cq");
    }
    u->mr_ = ibv_reg_mr(u->pd_, u->buf_.data(), u->buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (u->mr_ == nullptr) return absl::InternalError("ibv_reg_mr");
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = u->cq_;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.qp_type = IBV_QPT_UD;
    if ((u->qp_ = ibv_create_qp(u->pd_, &ia)) == nullptr) return absl::InternalError("ibv_create_qp(UD)");
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qkey = uscm::kUdpQkey;
    int rc = ibv_modify_qp(u->qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    if (rc == 0) rc = ibv_modify_qp(u->qp_, &a, IBV_QP_STATE);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    if (rc == 0) rc = ibv_modify_qp(u->qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    if (rc != 0) return absl::InternalError(absl::StrCat("UD QP to RTS: errno ", rc));
    return u;
  }
  ~UdEnd() {
    if (ah_) ibv_destroy_ah(ah_);
    if (qp_) ibv_destroy_qp(qp_);
    if (mr_) ibv_dereg_mr(mr_);
    if (cq_) ibv_destroy_cq(cq_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  ibv_qp* qp() { return qp_; }
  std::span<uint8_t> buffer() { return buf_; }

  absl::Status PostRecv(size_t offset, size_t len, uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data() + offset), static_cast<uint32_t>(len),
                mr_->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const int rc = ibv_post_recv(qp_, &wr, &bad);
    return rc == 0 ? absl::OkStatus() : absl::InternalError(absl::StrCat("ibv_post_recv: ", rc));
  }
  // The address handle of the group (RoCE v2: GRH to the IPv4-mapped MGID).
  absl::Status MakeAh(const uscm::mad::Gid& mgid, uint8_t sgid_index) {
    ibv_ah_attr a{};
    a.is_global = 1;
    std::copy(mgid.raw.begin(), mgid.raw.end(), a.grh.dgid.raw);
    a.grh.sgid_index = sgid_index;
    a.grh.hop_limit = 64;
    a.port_num = 1;
    ah_ = ibv_create_ah(pd_, &a);
    return ah_ != nullptr ? absl::OkStatus()
                          : absl::InternalError(absl::StrCat("ibv_create_ah(", mgid.ToString(),
                                                             "): errno ", errno));
  }
  absl::Status PostSend(size_t offset, size_t len, uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data() + offset), static_cast<uint32_t>(len),
                mr_->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah_;
    wr.wr.ud.remote_qpn = uscm::kMulticastQpn;
    wr.wr.ud.remote_qkey = uscm::kUdpQkey;
    const int rc = ibv_post_send(qp_, &wr, &bad);
    return rc == 0 ? absl::OkStatus() : absl::InternalError(absl::StrCat("ibv_post_send: ", rc));
  }
  // The next completion within `ms`, or nullopt.
  absl::StatusOr<absl::optional<ibv_wc>> Poll(int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      ibv_wc wc{};
      const int n = ibv_poll_cq(cq_, 1, &wc);
      if (n < 0) return absl::InternalError("ibv_poll_cq");
      if (n == 1) {
        if (wc.status != IBV_WC_SUCCESS) {
          return absl::InternalError(absl::StrCat("completion wr_id ", wc.wr_id, ": ",
                                                  ibv_wc_status_str(wc.status)));
        }
        return absl::optional<ibv_wc>(wc);
      }
      if (std::chrono::steady_clock::now() >= end) return absl::optional<ibv_wc>();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  UdEnd() = default;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_ah* ah_ = nullptr;
  std::vector<uint8_t> buf_;
};

absl::Status RunMulticast(const Flags& f) {
  const size_t b = f.bytes;
  const int kAbsentMs = 1000;  // how long "not received" waits
  const uscm::mad::Gid mgid = uscm::verbs::Ipv4MappedGid(f.group);
  auto ip4 = [](uint32_t host_order) {
    char t[INET_ADDRSTRLEN] = {0};
    in_addr a{htonl(host_order)};
    inet_ntop(AF_INET, &a, t, sizeof t);
    return std::string(t);
  };
  const std::string group = ip4(f.group);
  ASSIGN_OR_RETURN(rx, UdEnd::Open(f.device, b));
  ASSIGN_OR_RETURN(tx, UdEnd::Open(f.peer_device, b));
  ASSIGN_OR_RETURN(gids, uscm::verbs::ReadGidTable(f.peer_device, 1));
  ASSIGN_OR_RETURN(sgid_index, uscm::verbs::GidIndex(gids, uscm::verbs::Ipv4MappedGid(f.peer_ip)));
  RETURN_IF_ERROR(tx->MakeAh(mgid, sgid_index));
  printf("ok ud-qps rx=%s qpn=%u tx=%s qpn=%u mgid=%s\n", f.device.c_str(), rx->qp()->qp_num,
         f.peer_device.c_str(), tx->qp()->qp_num, mgid.ToString().c_str());
  for (int i = 0; i < 4; ++i) RETURN_IF_ERROR(rx->PostRecv(i * (40 + b), 40 + b, 100 + i));

  // IGMP membership of the receiving netdev (what the kernel's rdma_cm does
  // for a RoCE v2 join), held while the socket is open.
  const int sock = socket(AF_INET, SOCK_DGRAM, 0);
  if (sock < 0) return absl::InternalError("socket");
  ip_mreq mreq{};
  mreq.imr_multiaddr.s_addr = htonl(f.group);
  mreq.imr_interface.s_addr = htonl(f.ip);
  if (setsockopt(sock, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) != 0) {
    close(sock);
    return absl::InternalError(absl::StrCat("IP_ADD_MEMBERSHIP ", group, ": errno ", errno));
  }
  printf("ok ip-membership %s on %s\n", group.c_str(), ip4(f.ip).c_str());

  // Sends pattern `seed` to the group; the send must complete.
  auto send = [&](uint32_t seed) -> absl::Status {
    const auto p = Pattern(seed, b);
    std::copy(p.begin(), p.end(), tx->buffer().begin());
    RETURN_IF_ERROR(tx->PostSend(0, b, seed));
    ASSIGN_OR_RETURN(c, tx->Poll(f.timeout_ms));
    if (!c.has_value() || c->opcode != IBV_WC_SEND) {
      return absl::DeadlineExceededError("no send completion for the multicast send");
    }
    return absl::OkStatus();
  };
  auto expect_none = [&](const char* step) -> absl::Status {
    ASSIGN_OR_RETURN(c, rx->Poll(kAbsentMs));
    if (c.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          step, ": received ", c->byte_len, " bytes from QPN ", c->src_qp, "; expected nothing"));
    }
    printf("ok %s not-received within %d ms\n", step, kAbsentMs);
    return absl::OkStatus();
  };

  absl::Status s = [&]() -> absl::Status {
    RETURN_IF_ERROR(send(11));
    RETURN_IF_ERROR(expect_none("before-attach"));

    ASSIGN_OR_RETURN(vqp, uscm::verbs::VerbsQp::Wrap(rx->qp(), {.qkey = uscm::kUdpQkey}));
    RETURN_IF_ERROR(vqp.AttachMulticast(mgid, 0xFFFF));
    printf("ok attached attaches=%llu\n", static_cast<unsigned long long>(vqp.counters().attaches));
    RETURN_IF_ERROR(send(12));
    ASSIGN_OR_RETURN(c, rx->Poll(f.timeout_ms));
    if (!c.has_value()) return absl::DeadlineExceededError("after attach: nothing received");
    if (c->opcode != IBV_WC_RECV || c->byte_len != 40 + b) {
      return absl::DataLossError(absl::StrCat("after attach: opcode ", c->opcode, ", ",
                                              c->byte_len, " bytes (want ", 40 + b, ")"));
    }
    if (c->src_qp != tx->qp()->qp_num) {
      return absl::DataLossError(absl::StrCat("after attach: from QPN ", c->src_qp, ", sender is ",
                                              tx->qp()->qp_num));
    }
    const size_t at = (c->wr_id - 100) * (40 + b) + 40;  // after the GRH
    if (std::string d = Compare(rx->buffer().subspan(at, b), Pattern(12, b)); !d.empty()) {
      return absl::DataLossError("multicast payload: " + d);
    }
    printf("ok mcast-recv bytes=%zu src_qp=%u grh=%d\n", b, c->src_qp,
           (c->wc_flags & IBV_WC_GRH) ? 1 : 0);

    RETURN_IF_ERROR(vqp.DetachMulticast(mgid, 0xFFFF));
    printf("ok detached detaches=%llu\n", static_cast<unsigned long long>(vqp.counters().detaches));
    RETURN_IF_ERROR(send(13));
    RETURN_IF_ERROR(expect_none("after-detach"));
    return absl::OkStatus();
  }();
  close(sock);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::StatusOr<Flags> f = ParseFlags(argc, argv);
  if (!f.ok()) {
    fprintf(stderr, "uscm_peer: %s\n", std::string(f.status().message()).c_str());
    return 2;
  }
  absl::Status s = Run(*f);
  if (!s.ok()) {
    fprintf(stderr, "uscm_peer: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
