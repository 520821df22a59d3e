// One side of uscm connections on an ibsim node while a test cuts and
// restores links with ibsim's console (tests/ibsim/cm_link_test). The real
// umad transport, runtime (uscm::Device::Create) and rdma_cm-style API.
//
//   cm_link_peer server [--connections N] [--timeout-ms N]
//       Listens on --service-id, accepts every CONNECT_REQUEST, answers each
//       peer DREQ; exits after N connections were disconnected.
//   cm_link_peer client --dgid G --dlid L --gate-dir D [--attempts N]
//                       [--first-timeout-ms T --first-retries R] [--timeout-ms N]
//       Resolves the route once through OpenSM's SA, then up to N connect
//       attempts (later attempts reuse that route, so they do not need the SA
//       while a link is being restored), then disconnects. Before each
//       connect and before the disconnect it prints "gate=K" and waits for the
//       file D/gate-K: the test changes the fabric in between. Attempt 1 uses
//       --first-timeout-ms / --first-retries (default 1000 ms, 15); later
//       attempts 1000 ms, 15. While it waits for an answer it prints
//       "req_sent=N" / "dreq_sent=N" each time the CM sends one more REQ/DREQ
//       (first sends and retransmissions).
//   common: [--service-id X] [--timeout-ms N] (longest wait for any event or
//           gate, default 60000)
//
// Output: key=value lines. Errors: "error=..." and exit status 3; usage 2;
// set-up 1.
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"
#include "mad/gid.h"
#include "mad/time.h"
#include "mad/umad_transport.h"

namespace uscm::tests {
namespace {

using mad::Duration;

constexpr int kReq = 0;   // index of REQ in cm::CmCounters arrays
constexpr int kDreq = 5;  // DREQ

void Put(const std::string& key, const std::string& value) {
  printf("%s=%s\n", key.c_str(), value.c_str());
  fflush(stdout);
}
void Put(const std::string& key, int64_t value) { Put(key, absl::StrCat(value)); }

// A data QP that only exists as a number: with a QP attached the runtime
// sends the RTU itself and the active side sees ESTABLISHED (without one it
// would be CONNECT_RESPONSE and an Establish call, as in librdmacm).
class NumberOnlyQp final : public QpTransitioner {
 public:
  explicit NumberOnlyQp(uint32_t qpn) : qpn_(qpn) {}
  uint32_t qp_num() const override { return qpn_; }
  absl::Status Modify(const cm::QpAttributes&) override { return absl::OkStatus(); }
  absl::Status ToError() override { return absl::OkStatus(); }

 private:
  uint32_t qpn_;
};

struct Options {
  std::string role;
  uint64_t service_id = 0x0000000001ce5e02;
  mad::Gid dgid;
  uint16_t dlid = 0;
  std::string gate_dir;
  int attempts = 1;
  int first_timeout_ms = 1000;
  int first_retries = 15;
  int connections = 1;
  int timeout_ms = 60000;
};

class Peer {
 public:
  explicit Peer(Options o) : o_(std::move(o)) {}
  ~Peer() {
    if (channel_ != nullptr && conn_ != nullptr) (void)channel_->DestroyId(conn_);
    if (channel_ != nullptr && listener_ != nullptr) (void)channel_->DestroyId(listener_);
    channel_.reset();
    device_.reset();
    transport_.reset();
  }

  absl::Status Open() {
    mad::UmadOptions u;
    u.sim_claim_issm = true;  // ibsim hands unsolicited CM MADs only to IsSM clients
    auto t = mad::UmadTransport::Open(u);
    if (!t.ok()) return t.status();
    transport_ = std::move(*t);
    DeviceOptions d;
    d.node.seed = o_.role == "server" ? 11 : 12;
    d.node.agent.base_timeout = Duration::Millis(1000);
    d.node.agent.max_retries = 5;
    auto dev = Device::Create(*transport_, d);
    if (!dev.ok()) return dev.status();
    device_ = std::move(*dev);
    auto ch = device_->CreateEventChannel();
    if (!ch.ok()) return ch.status();
    channel_ = std::move(*ch);
    Put("port.lid", device_->port().lid);
    Put("port.gid", device_->port().gid.ToString());
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
    int requests = 0, established = 0, disconnected = 0;
    while (disconnected < o_.connections) {
      auto e = Next();
      if (!e.ok()) return e.status();
      switch (e->type) {
        case EventType::kConnectRequest: {
          Put("connect_request", ++requests);
          ConnParam cp;
          cp.responder_resources = 4;
          cp.initiator_depth = 4;
          if (auto s = e->id->Accept(cp); !s.ok()) return s;
          break;
        }
        case EventType::kEstablished:
          Put("established", ++established);
          break;
        case EventType::kDisconnected:
          if (auto s = e->id->Disconnect(); !s.ok()) return s;  // the DREP
          Put("disconnected", ++disconnected);
          Put("disconnected.status", e->status);
          if (auto s = channel_->DestroyId(e->id); !s.ok()) return s;
          break;
        default:
          return absl::FailedPreconditionError(
              absl::StrCat("server got ", EventTypeName(e->type), " status ", e->status));
      }
    }
    return Finish();
  }

  absl::Status Client() {
    absl::optional<cm::PathInfo> route;
    int gate = 0;
    bool connected = false;
    for (int attempt = 1; attempt <= o_.attempts && !connected; ++attempt) {
      auto c = channel_->CreateId(nullptr, PortSpace::kIb);
      if (!c.ok()) return c.status();
      conn_ = *c;
      IdOptions opt = conn_->options();
      opt.response_timeout = Duration::Millis(attempt == 1 ? o_.first_timeout_ms : 1000);
      opt.max_cm_retries = static_cast<uint8_t>(attempt == 1 ? o_.first_retries : 15);
      opt.ib_path = route;  // attempts after the first: no SA query
      if (auto s = conn_->SetOption(opt); !s.ok()) return s;
      const Address dst = Address::Ib(o_.dgid, o_.dlid, o_.service_id);
      if (auto s = conn_->ResolveAddr(absl::nullopt, dst); !s.ok()) return s;
      if (auto s = Expect(EventType::kAddrResolved); !s.ok()) return s;
      if (auto s = conn_->ResolveRoute(); !s.ok()) return s;
      if (auto s = Expect(EventType::kRouteResolved); !s.ok()) return s;
      route = conn_->route();
      Put("route_resolved", attempt);
      if (auto s = WaitGate(++gate); !s.ok()) return s;

      qp_ = std::make_unique<NumberOnlyQp>(0x100 + static_cast<uint32_t>(attempt));
      if (auto s = conn_->SetQp(qp_.get()); !s.ok()) return s;
      ConnParam cp;
      cp.responder_resources = 4;
      cp.initiator_depth = 4;
      const mad::TimePoint t0 = device_->node().Now();
      if (auto s = conn_->Connect(cp); !s.ok()) return s;
      auto e = NextReporting(kReq, "req_sent");
      if (!e.ok()) return e.status();
      const std::string key = absl::StrCat("attempt", attempt);
      Put(key + ".event", EventTypeName(e->type));
      Put(key + ".status", e->status);
      Put(key + ".ms", (device_->node().Now() - t0).millis());
      if (e->type == EventType::kEstablished) {
        connected = true;
      } else if (e->type == EventType::kUnreachable || e->type == EventType::kRejected) {
        if (auto s = channel_->DestroyId(conn_); !s.ok()) return s;
        conn_ = nullptr;
      } else {
        return absl::FailedPreconditionError(
            absl::StrCat("connect ended with ", EventTypeName(e->type)));
      }
    }
    if (!connected) return Finish();
    if (auto s = WaitGate(++gate); !s.ok()) return s;
    const mad::TimePoint t0 = device_->node().Now();
    if (auto s = conn_->Disconnect(); !s.ok()) return s;
    auto e = NextReporting(kDreq, "dreq_sent");
    if (!e.ok()) return e.status();
    if (e->type != EventType::kDisconnected) {
      return absl::FailedPreconditionError(
          absl::StrCat("expected DISCONNECTED, got ", EventTypeName(e->type)));
    }
    Put("disconnect.status", e->status);
    Put("disconnect.ms", (device_->node().Now() - t0).millis());
    return Finish();
  }

 private:
  struct Got {
    EventType type = EventType::kAddrResolved;
    int status = 0;
    CmId* id = nullptr;
  };

  absl::StatusOr<Got> Next() { return NextReporting(-1, ""); }

  // The next event; meanwhile reports every change of counters().sent[attr].
  absl::StatusOr<Got> NextReporting(int attr, const std::string& key) {
    const mad::TimePoint deadline = device_->node().Now() + Duration::Millis(o_.timeout_ms);
    uint64_t reported = 0;
    for (;;) {
      if (attr >= 0 && SentIncludingRetries(attr) != reported) {
        Put(key, static_cast<int64_t>(reported = SentIncludingRetries(attr)));
      }
      auto e = channel_->WaitEvent(Duration::Millis(20));
      if (e.ok()) {
        Got g{(*e)->event, (*e)->status, (*e)->id};
        if (auto s = channel_->AckEvent(*e); !s.ok()) return s;
        if (attr >= 0) Put(key, static_cast<int64_t>(SentIncludingRetries(attr)));
        return g;
      }
      if (device_->node().Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("no event within ", o_.timeout_ms, " ms (", e.status().message(), ")"));
      }
    }
  }

  // First sends and retransmissions of one message type.
  uint64_t SentIncludingRetries(int attr) {
    const cm::CmCounters& c = device_->node().cm().counters();
    return c.sent[attr] + c.retransmitted[attr];
  }

  absl::Status Expect(EventType want) {
    auto e = Next();
    if (!e.ok()) return e.status();
    if (e->type != want) {
      return absl::FailedPreconditionError(absl::StrCat(
          "expected ", EventTypeName(want), ", got ", EventTypeName(e->type), " ", e->status));
    }
    return absl::OkStatus();
  }

  // Waits for the test to create gate-K (it changes the fabric first).
  absl::Status WaitGate(int k) {
    Put("gate", k);
    const std::string path = absl::StrCat(o_.gate_dir, "/gate-", k);
    const mad::TimePoint deadline = device_->node().Now() + Duration::Millis(o_.timeout_ms);
    while (access(path.c_str(), F_OK) != 0) {
      if (device_->node().Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("no ", path, " within ", o_.timeout_ms,
                                                        " ms"));
      }
      // Keeps the CM running (answers, timers) while it waits.
      auto e = channel_->WaitEvent(Duration::Millis(10));
      if (e.ok()) {
        const EventType t = (*e)->event;
        (void)channel_->AckEvent(*e);
        return absl::FailedPreconditionError(
            absl::StrCat("unexpected ", EventTypeName(t), " while waiting for gate ", k));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Finish() {
    const cm::CmCounters& c = device_->node().cm().counters();
    Put("cm.sent.req", static_cast<int64_t>(c.sent[kReq]));
    Put("cm.retransmitted.req", static_cast<int64_t>(c.retransmitted[kReq]));
    Put("cm.sent.dreq", static_cast<int64_t>(c.sent[kDreq]));
    Put("cm.retransmitted.dreq", static_cast<int64_t>(c.retransmitted[kDreq]));
    Put("cm.timeouts", static_cast<int64_t>(c.timeouts));
    Put("cm.malformed", static_cast<int64_t>(c.malformed));
    const mad::UmadStats& u = transport_->stats();
    Put("umad.answered_sminfo", static_cast<int64_t>(u.answered_sminfo));
    Put("umad.sminfo_answer_bounces", static_cast<int64_t>(u.sminfo_answer_bounces));
    Put("umad.receive_status_errors", static_cast<int64_t>(u.receive_status_errors));
    Put("done", 1);
    return absl::OkStatus();
  }

  Options o_;
  std::unique_ptr<mad::UmadTransport> transport_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<EventChannel> channel_;
  CmId* listener_ = nullptr;
  CmId* conn_ = nullptr;
  std::unique_ptr<NumberOnlyQp> qp_;  // the client's, for the current attempt
};

int Usage(const std::string& why) {
  fprintf(stderr,
          "cm_link_peer: %s\nusage: cm_link_peer server [--connections N] | client --dgid G "
          "--dlid L --gate-dir D [--attempts N] [--first-timeout-ms T] [--first-retries R]; "
          "common: [--service-id X] [--timeout-ms N]\n",
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
    if (k == "--service-id") {
      ok = absl::SimpleHexAtoi(v, &o.service_id);
    } else if (k == "--dlid") {
      ok = absl::SimpleAtoi(v, &n) && n > 0 && n < 0xC000;
      o.dlid = static_cast<uint16_t>(n);
    } else if (k == "--dgid") {
      auto g = mad::Gid::Parse(v);
      ok = g.ok();
      if (ok) o.dgid = *g;
    } else if (k == "--gate-dir") {
      o.gate_dir = v;
    } else if (k == "--attempts") {
      ok = absl::SimpleAtoi(v, &o.attempts) && o.attempts >= 1 && o.attempts <= 8;
    } else if (k == "--first-timeout-ms") {
      ok = absl::SimpleAtoi(v, &o.first_timeout_ms) && o.first_timeout_ms > 0;
    } else if (k == "--first-retries") {
      ok = absl::SimpleAtoi(v, &o.first_retries) && o.first_retries >= 0 && o.first_retries <= 15;
    } else if (k == "--connections") {
      ok = absl::SimpleAtoi(v, &o.connections) && o.connections >= 1;
    } else if (k == "--timeout-ms") {
      ok = absl::SimpleAtoi(v, &o.timeout_ms) && o.timeout_ms > 0;
    } else {
      return Usage("unknown option " + k);
    }
    if (!ok) return Usage(absl::StrCat("bad value for ", k, ": ", v));
  }
  if (o.role == "client" && (o.dlid == 0 || o.dgid.is_zero() || o.gate_dir.empty())) {
    return Usage("a client needs --dgid, --dlid and --gate-dir");
  }
  Put("role", o.role);
  Peer peer(o);
  if (absl::Status s = peer.Open(); !s.ok()) {
    fprintf(stderr, "cm_link_peer: %s\n", s.ToString().c_str());
    return 1;
  }
  absl::Status s = o.role == "server" ? peer.Server() : peer.Client();
  if (!s.ok()) {
    Put("error", std::string(s.message()));
    fprintf(stderr, "cm_link_peer %s: %s\n", o.role.c_str(), s.ToString().c_str());
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
  // umad2sim's exit handler can deadlock on a MAD arriving during exit
  // (docs/TRANSPORTS.md): leave after 2 s regardless; the output is flushed.
  exit_code = rc;
  signal(SIGALRM, ExitNow);
  alarm(2);
  return rc;
}
