// One side of a uscm connection on an ibsim node (LD_PRELOAD=libumad2sim.so):
// the real umad transport, the real runtime (cm::RealNode through
// uscm::Device::Create) and the rdma_cm-style API, AF_IB addressing, the
// route from OpenSM's SA through uscm's SA client. tests/ibsim/cm_ibsim_test
// runs a server on one node and a client on another and checks what each
// printed.
//
//   cm_peer server --scenario S [--seed N] [--service-id X] [--disconnect-by server|client]
//   cm_peer client --scenario S --dgid G --dlid L [--seed N] [--service-id X]
//                  [--disconnect-by server|client]
//   common: [--timeout-ms N] (per awaited event, default 20000)
//           [--router SOCKET] (through uscmd on this node instead of umad)
//
// Scenarios (both sides must be given the same one):
//   accept      REQ and REP carry private data, RTU, ESTABLISHED on both,
//               then DREQ/DREP from the --disconnect-by side, DISCONNECTED on both
//   reject      the server rejects with private data (REJ reason 28)
//   ece         the client sets a local ECE; the server reads it, answers with
//               its own (vendor echoed, options masked) and accepts; the client
//               reads the server's; then disconnect as in "accept"
//   reject-ece  the client sets a local ECE; the server rejects with
//               rdma_reject_ece (REJ reason 35) and private data
//
// Output: "key=value" lines, one fact per line (private data as the whole
// received field in hex). The server prints "listening=1" once it listens.
// Errors: "error=<what>" on stdout and the message on stderr, exit status 3;
// usage errors exit 2, set-up errors 1.
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/router/router_transport.h"
#include "mad/gid.h"
#include "mad/time.h"
#include "mad/umad_transport.h"
#include "tests/ibsim/cm_peer_data.h"

namespace uscm::tests {
namespace {

using mad::Duration;

constexpr uint32_t kServerQpn = 0x5e5e01;
constexpr uint32_t kClientQpn = 0xc1c101;
// ECE: the client offers options 0x1F of vendor 0x02c9 (Mellanox's OUI); the
// server supports 0x05 of them and answers with the intersection.
constexpr uint32_t kEceVendor = 0x0002c9;
constexpr uint32_t kClientEceOptions = 0x1f;
constexpr uint32_t kServerEceMask = 0x05;

void Put(const std::string& key, const std::string& value) {
  printf("%s=%s\n", key.c_str(), value.c_str());
  fflush(stdout);
}
void Put(const std::string& key, uint64_t value) { Put(key, absl::StrCat(value)); }
std::string HexNum(uint64_t v) { return absl::StrCat("0x", absl::Hex(v)); }

// A data QP for a fabric without a data path: it records the transitions the
// runtime makes (the attributes come from the real REQ/REP exchange).
class RecordingQp final : public QpTransitioner {
 public:
  explicit RecordingQp(uint32_t qpn) : qpn_(qpn) {}
  uint32_t qp_num() const override { return qpn_; }
  absl::Status Modify(const cm::QpAttributes& a) override {
    states_.push_back(a.state == cm::QpState::kInit  ? "INIT"
                      : a.state == cm::QpState::kRtr ? "RTR"
                      : a.state == cm::QpState::kRts ? "RTS"
                                                     : "OTHER");
    if (a.state == cm::QpState::kRtr) {
      rtr_dest_qpn_ = a.dest_qpn;
      rtr_dlid_ = a.av.dlid;
    }
    return absl::OkStatus();
  }
  absl::Status ToError() override {
    ++errors_;
    return absl::OkStatus();
  }
  void Print() const {
    Put("qp.states", absl::StrJoin(states_, ","));
    Put("qp.rtr.dest_qpn", HexNum(rtr_dest_qpn_));
    Put("qp.rtr.dlid", rtr_dlid_);
    Put("qp.to_error", errors_);
  }

 private:
  uint32_t qpn_;
  std::vector<std::string> states_;
  uint32_t rtr_dest_qpn_ = 0;
  uint16_t rtr_dlid_ = 0;
  int errors_ = 0;
};

struct Options {
  std::string role;
  std::string scenario;
  std::string disconnect_by = "client";
  uint32_t seed = 1;
  uint64_t service_id = 0x0000000001ce5e01;
  mad::Gid dgid;
  uint16_t dlid = 0;
  int timeout_ms = 20000;
  std::string router;  // uscmd's socket: use the router instead of umad
};

// The event the peer expects next, copied out and acked.
struct Got {
  EventType type = EventType::kAddrResolved;
  int status = 0;
  CmId* id = nullptr;
  std::vector<uint8_t> private_data;
  uint32_t qp_num = 0;
  cm::Ece remote_ece;
};

class Peer {
 public:
  explicit Peer(Options o) : o_(std::move(o)) {}
  ~Peer() {
    // Ids before the channel, the channel before the device, the device
    // before the transport (main's order of destruction).
    if (channel_ != nullptr) {
      for (CmId* id : {conn_, listener_}) {
        if (id != nullptr) (void)channel_->DestroyId(id);
      }
    }
    channel_.reset();
    device_.reset();
    transport_.reset();
  }

  absl::Status Open() {
    if (!o_.router.empty()) {  // through uscmd: the router owns the port
      auto r = router::RouterTransport::Connect(o_.router);
      if (!r.ok()) return r.status();
      transport_ = std::move(*r);
      return OpenDevice();
    }
    mad::UmadOptions u;
    // ibsim hands unsolicited QP1 MADs (REQ, REP, RTU, DREQ ...) only to a
    // client flagged IsSM: both sides receive requests, so both claim it.
    u.sim_claim_issm = true;
    auto t = mad::UmadTransport::Open(u);
    if (!t.ok()) return t.status();
    umad_ = t->get();
    transport_ = std::move(*t);
    return OpenDevice();
  }

  absl::Status OpenDevice() {
    DeviceOptions d;
    d.node.seed = o_.seed * 2 + (o_.role == "server" ? 1 : 0);
    d.node.agent.base_timeout = Duration::Millis(1000);
    d.node.agent.max_retries = 5;
    auto dev = Device::Create(*transport_, d);
    if (!dev.ok()) return dev.status();
    device_ = std::move(*dev);
    auto ch = device_->CreateEventChannel();
    if (!ch.ok()) return ch.status();
    channel_ = std::move(*ch);
    const mad::LocalPort& p = device_->port();
    Put("transport", transport_->caps().name);
    Put("port.lid", p.lid);
    Put("port.gid", p.gid.ToString());
    Put("port.node_guid", HexNum(p.node_guid));
    return absl::OkStatus();
  }

  absl::Status Server() {
    auto l = channel_->CreateId(nullptr, PortSpace::kIb);
    if (!l.ok()) return l.status();
    listener_ = *l;
    const mad::LocalPort& p = device_->port();
    if (auto s = listener_->BindAddr(Address::Ib(p.gid, p.lid, o_.service_id)); !s.ok()) return s;
    if (auto s = listener_->Listen(4); !s.ok()) return s;
    Put("listening", 1);

    auto req = Expect(EventType::kConnectRequest);
    if (!req.ok()) return req.status();
    conn_ = req->id;
    Put("req.private_data", Hex(req->private_data));
    Put("req.qp_num", HexNum(req->qp_num));
    Put("req.remote_ece.vendor_id", HexNum(req->remote_ece.vendor_id));
    Put("req.remote_ece.options", HexNum(req->remote_ece.options));
    Put("req.peer_gid", conn_->GetPeerAddr().gid.ToString());
    Put("req.service_id", HexNum(conn_->GetLocalAddr().service_id));

    if (o_.scenario == "reject" || o_.scenario == "reject-ece") {
      const auto pd = PeerData(o_.seed, DataTag::kRej, kRejDataSent);
      absl::Status s = o_.scenario == "reject" ? conn_->Reject(pd) : conn_->RejectEce(pd);
      if (!s.ok()) return s;
      Put("rejected", 1);
      return Finish();
    }
    if (auto s = Robust(conn_); !s.ok()) return s;
    if (o_.scenario == "ece") {
      auto remote = conn_->GetRemoteEce();
      if (!remote.ok()) return remote.status();
      Put("get_remote_ece.vendor_id", HexNum(remote->vendor_id));
      Put("get_remote_ece.options", HexNum(remote->options));
      // The answer: the vendor echoed, the options we also support.
      const cm::Ece answer{remote->vendor_id, remote->options & kServerEceMask};
      if (auto s = conn_->SetLocalEce(answer); !s.ok()) return s;
    }
    qp_ = std::make_unique<RecordingQp>(kServerQpn);
    if (auto s = conn_->SetQp(qp_.get()); !s.ok()) return s;
    ConnParam cp;
    cp.private_data = PeerData(o_.seed, DataTag::kRep, kRepDataSent);
    cp.responder_resources = 4;
    cp.initiator_depth = 4;
    if (auto s = conn_->Accept(cp); !s.ok()) return s;
    Put("accepted", 1);
    auto est = Expect(EventType::kEstablished);
    if (!est.ok()) return est.status();
    Put("established", 1);
    if (auto s = Disconnect(); !s.ok()) return s;
    qp_->Print();
    return Finish();
  }

  absl::Status Client() {
    auto c = channel_->CreateId(nullptr, PortSpace::kIb);
    if (!c.ok()) return c.status();
    conn_ = *c;
    if (auto s = Robust(conn_); !s.ok()) return s;
    if (o_.scenario == "ece" || o_.scenario == "reject-ece") {
      if (auto s = conn_->SetLocalEce(cm::Ece{kEceVendor, kClientEceOptions}); !s.ok()) return s;
    }
    const Address dst = Address::Ib(o_.dgid, o_.dlid, o_.service_id);
    if (auto s = conn_->ResolveAddr(absl::nullopt, dst); !s.ok()) return s;
    if (auto e = Expect(EventType::kAddrResolved); !e.ok()) return e.status();
    if (auto s = conn_->ResolveRoute(); !s.ok()) return s;
    if (auto e = Expect(EventType::kRouteResolved); !e.ok()) return e.status();
    const absl::optional<cm::PathInfo> r = conn_->route();
    if (!r.has_value()) return absl::InternalError("ROUTE_RESOLVED without a route");
    Put("route.slid", r->local_lid);
    Put("route.dlid", r->remote_lid);
    Put("route.sgid", r->local_gid.ToString());
    Put("route.dgid", r->remote_gid.ToString());
    Put("route.sl", r->sl);
    Put("route.packet_life_time", r->packet_life_time);
    Put("route.subnet_local", r->subnet_local ? 1 : 0);
    Put("sa.sent", device_->node().agent().counters().sent);

    qp_ = std::make_unique<RecordingQp>(kClientQpn);
    if (auto s = conn_->SetQp(qp_.get()); !s.ok()) return s;
    ConnParam cp;
    cp.private_data = PeerData(o_.seed, DataTag::kReq, kReqDataSent);
    cp.responder_resources = 4;
    cp.initiator_depth = 4;
    const mad::TimePoint t0 = device_->node().Now();
    if (auto s = conn_->Connect(cp); !s.ok()) return s;
    Put("connecting", 1);

    const bool rejected = o_.scenario == "reject" || o_.scenario == "reject-ece";
    auto ev = Expect(rejected ? EventType::kRejected : EventType::kEstablished);
    if (!ev.ok()) return ev.status();
    Put("connect_ms", static_cast<uint64_t>((device_->node().Now() - t0).millis()));
    if (rejected) {
      Put("rej.status", ev->status);
      Put("rej.private_data", Hex(ev->private_data));
      return Finish();
    }
    Put("established", 1);
    Put("rep.private_data", Hex(ev->private_data));
    Put("est.remote_ece.vendor_id", HexNum(ev->remote_ece.vendor_id));
    Put("est.remote_ece.options", HexNum(ev->remote_ece.options));
    if (o_.scenario == "ece") {
      auto remote = conn_->GetRemoteEce();
      if (!remote.ok()) return remote.status();
      Put("get_remote_ece.vendor_id", HexNum(remote->vendor_id));
      Put("get_remote_ece.options", HexNum(remote->options));
    }
    if (auto s = Disconnect(); !s.ok()) return s;
    qp_->Print();
    return Finish();
  }

 private:
  // Generous CM retransmission: the peer process may be starved for seconds
  // on a loaded 2-core machine; duplicates are answered by the CM.
  static absl::Status Robust(CmId* id) {
    IdOptions opt = id->options();
    opt.response_timeout = Duration::Millis(1000);
    opt.max_cm_retries = 15;
    return id->SetOption(opt);
  }

  // DREQ from the --disconnect-by side; the other side answers (DREP) when
  // it sees DISCONNECTED. Both end with DISCONNECTED.
  absl::Status Disconnect() {
    if (o_.disconnect_by == o_.role) {
      if (auto s = conn_->Disconnect(); !s.ok()) return s;
      Put("disconnect_called", 1);
      if (auto e = Expect(EventType::kDisconnected); !e.ok()) return e.status();
    } else {
      if (auto e = Expect(EventType::kDisconnected); !e.ok()) return e.status();
      if (auto s = conn_->Disconnect(); !s.ok()) return s;  // sends the DREP
    }
    Put("disconnected", 1);
    return absl::OkStatus();
  }

  absl::Status Finish() {
    const cm::CmCounters& c = device_->node().cm().counters();
    static constexpr const char* kNames[cm::kCmAttrCount] = {
        "req", "mra", "rej", "rep", "rtu", "dreq", "drep", "sidr_req", "sidr_rep", "lap", "apr"};
    for (int i = 0; i < cm::kCmAttrCount; ++i) {
      if (c.sent[i] != 0) Put(absl::StrCat("cm.sent.", kNames[i]), c.sent[i]);
      if (c.received[i] != 0) Put(absl::StrCat("cm.received.", kNames[i]), c.received[i]);
    }
    Put("cm.malformed", c.malformed);
    if (umad_ != nullptr) Put("umad.sim_tail_zeroed", umad_->stats().sim_tail_zeroed);
    Put("done", 1);
    return absl::OkStatus();
  }

  absl::StatusOr<Got> Expect(EventType want) {
    auto e = channel_->WaitEvent(Duration::Millis(o_.timeout_ms));
    if (!e.ok()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no ", EventTypeName(want), " within ", o_.timeout_ms, " ms (", e.status().message(),
          ")"));
    }
    Got g;
    g.type = (*e)->event;
    g.status = (*e)->status;
    g.id = (*e)->id;
    g.private_data = (*e)->conn.private_data;
    g.qp_num = (*e)->conn.qp_num;
    g.remote_ece = (*e)->remote_ece;
    const std::string detail = (*e)->detail;
    if (auto s = channel_->AckEvent(*e); !s.ok()) return s;
    if (g.type != want) {
      return absl::FailedPreconditionError(absl::StrCat(
          "expected ", EventTypeName(want), ", got ", EventTypeName(g.type), " status ",
          g.status, detail.empty() ? "" : " ", detail));
    }
    return g;
  }

  Options o_;
  std::unique_ptr<mad::Transport> transport_;
  mad::UmadTransport* umad_ = nullptr;  // transport_ when it is umad
  std::unique_ptr<Device> device_;
  std::unique_ptr<EventChannel> channel_;
  std::unique_ptr<RecordingQp> qp_;
  CmId* listener_ = nullptr;
  CmId* conn_ = nullptr;
};

int Usage(const std::string& why) {
  fprintf(stderr,
          "cm_peer: %s\nusage: cm_peer server|client --scenario accept|reject|ece|reject-ece "
          "[--dgid G --dlid L] [--seed N] [--service-id X] [--disconnect-by server|client] "
          "[--timeout-ms N] [--router SOCKET]\n",
          why.c_str());
  return 2;
}

int Main(int argc, char** argv) {
  if (argc < 2) return Usage("no role");
  Options o;
  o.role = argv[1];
  if (o.role != "server" && o.role != "client") return Usage("role must be server or client");
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return Usage(k + " needs a value");
    const std::string v = argv[i + 1];
    bool ok = true;
    uint32_t n = 0;
    if (k == "--scenario") {
      o.scenario = v;
    } else if (k == "--disconnect-by") {
      o.disconnect_by = v;
      ok = v == "server" || v == "client";
    } else if (k == "--seed") {
      ok = absl::SimpleAtoi(v, &o.seed);
    } else if (k == "--service-id") {
      ok = absl::SimpleHexAtoi(v, &o.service_id);
    } else if (k == "--dlid") {
      ok = absl::SimpleAtoi(v, &n) && n > 0 && n < 0xC000;  // a unicast LID
      o.dlid = static_cast<uint16_t>(n);
    } else if (k == "--timeout-ms") {
      ok = absl::SimpleAtoi(v, &o.timeout_ms) && o.timeout_ms > 0;
    } else if (k == "--router") {
      o.router = v;
    } else if (k == "--dgid") {
      auto g = mad::Gid::Parse(v);
      ok = g.ok();
      if (ok) o.dgid = *g;
    } else {
      return Usage("unknown option " + k);
    }
    if (!ok) return Usage(absl::StrCat("bad value for ", k, ": ", v));
  }
  if (o.scenario != "accept" && o.scenario != "reject" && o.scenario != "ece" &&
      o.scenario != "reject-ece") {
    return Usage("--scenario must be accept, reject, ece or reject-ece");
  }
  if (o.role == "client" && (o.dlid == 0 || o.dgid.is_zero())) {
    return Usage("a client needs --dgid and --dlid");
  }
  Put("role", o.role);
  Put("scenario", o.scenario);

  Peer peer(o);
  if (absl::Status s = peer.Open(); !s.ok()) {
    fprintf(stderr, "cm_peer: %s\n", s.ToString().c_str());
    return 1;
  }
  absl::Status s = o.role == "server" ? peer.Server() : peer.Client();
  if (!s.ok()) {
    Put("error", std::string(s.message()));
    fprintf(stderr, "cm_peer %s: %s\n", o.role.c_str(), s.ToString().c_str());
    return 3;
  }
  return 0;
}

}  // namespace
}  // namespace uscm::tests

namespace {
volatile sig_atomic_t exit_code = 0;
void ExitNow(int) { _exit(exit_code); }
}  // namespace

int main(int argc, char** argv) {
  const int rc = uscm::tests::Main(argc, argv);
  fflush(stdout);
  fflush(stderr);
  // umad2sim's exit handler joins its receive thread while holding the lock
  // that thread takes for every packet: a MAD arriving during exit deadlocks
  // the process (docs/TRANSPORTS.md). Leave after 2 s regardless; the output
  // is flushed.
  exit_code = rc;
  signal(SIGALRM, ExitNow);
  alarm(2);
  return rc;
}
