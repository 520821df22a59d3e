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
// with --sa-rmpp the umad transport also registers an SA agent that way and
// prints the mode it got (RoCE has no SA, but the registration is the kernel's).
// RoCE path: no SA; GIDs are the IPv4-mapped addresses (verbs/roce_addressing.h).
// Prints "ok <step>" lines; on an error "uscm_peer: <message>" and exit 1.
#include <stdio.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cm/rdma_cm.h"
#include "mad/time.h"
#include "mad/umad_transport.h"
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
  uint32_t ip = 0, peer_ip = 0, peer_ud_qpn = 0;
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
    else return absl::InvalidArgumentError(absl::StrCat("unknown flag ", k));
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value for ", k, ": ", v));
  }
  if (f.role != "server" && f.role != "client" && f.role != "open") {
    return absl::InvalidArgumentError("--role server|client|open");
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

absl::Status Run(const Flags& f) {
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
    ASSIGN_OR_RETURN(sc, res->WaitCompletion(timeout));
    if (sc.opcode != IBV_WC_SEND) return absl::DataLossError("expected the reply's SEND completion");
    printf("ok reply-sent\n");
    fflush(stdout);
    RETURN_IF_ERROR(Expect(*ch, EventType::kDisconnected, timeout).status());
    printf("ok disconnected\n");
    RETURN_IF_ERROR(ch->DestroyId(child));
  } else {
    RETURN_IF_ERROR(dev->AddNeighbor(Address::Ipv4(f.peer_ip),
                                     uscm::verbs::Ipv4MappedGid(f.peer_ip), 0));
    uscm::IdOptions io;
    io.ib_path = uscm::verbs::RocePathFromIps(f.ip, f.peer_ip);
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
