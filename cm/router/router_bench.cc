// Connections per second through uscmd with 1, 8 and 32 client processes,
// against one process that owns the port itself (the baseline, run first in
// the same process on the same fabric and peer). The fabric is simulated and
// paced by the real clock; the peer accepts every REQ. A router run forks the
// clients after the socket is listening and ends when the last client has
// seen all its connections ESTABLISHED (process start-up is included).
//
//   router_bench [--connections N]   (default 2048)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "cm/endpoint.h"
#include "cm/router/router_transport.h"
#include "cm/router/server.h"
#include "cm/runtime.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"

namespace uscm::router {
namespace {

constexpr uint64_t kSid = 0x0000000001060000ull | 7471;

cm::ConnectParams Params(const mad::LocalPort& local, const mad::LocalPort& peer, uint32_t qpn) {
  cm::ConnectParams p;
  p.service_id = kSid;
  p.primary.local_lid = local.lid;
  p.primary.remote_lid = peer.lid;
  p.primary.local_gid = local.gid;
  p.primary.remote_gid = peer.gid;
  p.primary.packet_life_time = 14;
  p.primary.local_ack_timeout = 15;
  p.qpn = qpn;
  p.starting_psn = 1;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  p.remote_cm_response_timeout = 20;
  p.local_cm_response_timeout = 20;
  p.max_cm_retries = 8;
  return p;
}

// The fabric, the peer, and the real-time pump shared by both modes.
struct World {
  World() {
    sched = std::make_unique<sim::Scheduler>(1);
    fabric = std::move(*sim::Fabric::Create(*sched, sim::TwoHostsOneSwitch()));
    wire = std::move(*fabric->Open("host1"));
    peer_tx = std::move(*fabric->Open("host2"));
    peer = std::make_unique<cm::CmEndpoint>(peer_tx->port(), cm::CmConfig{}, 5);
    (void)peer->Listen(kSid, ~uint64_t{0}, 1 << 16, false);
    start = clock.Now();
  }
  mad::Duration Pump() {
    const mad::TimePoint target = mad::TimePoint::Epoch() + (clock.Now() - start);
    if (target > sched->Now()) (void)sched->RunFor(target - sched->Now());
    const mad::TimePoint now = sched->Now();
    peer_tx->Drain([&](const mad::ReceivedMad& r) { peer->HandleMad(now, r.from, r.data); });
    peer->HandleTimeout(now);
    cm::CmEvent e;
    while (peer->PollEvent(&e)) {
      if (e.type == cm::CmEventType::kConnectRequest) {
        cm::AcceptParams a;
        a.qpn = next_qpn++;
        a.starting_psn = 1;
        a.responder_resources = 1;
        a.initiator_depth = 1;
        (void)peer->Accept(now, e.conn, a);
      } else if (e.type == cm::CmEventType::kEstablished) {
        ++established;
      } else if (e.type == cm::CmEventType::kDisconnected ||
                 e.type == cm::CmEventType::kRejected) {
        (void)peer->Destroy(now, e.conn);
      }
    }
    cm::OutgoingMad m;
    while (peer->PollTransmit(&m)) (void)peer_tx->Send(m.to, m.mad);
    return mad::Duration::Millis(1);
  }
  mad::RealClock clock;
  mad::TimePoint start;
  std::unique_ptr<sim::Scheduler> sched;
  std::unique_ptr<sim::Fabric> fabric;
  std::unique_ptr<sim::SimTransport> wire, peer_tx;
  std::unique_ptr<cm::CmEndpoint> peer;
  uint32_t next_qpn = 0x10000;
  int established = 0;
};

// One process owns the port: its endpoint sits on the wire transport.
double Baseline(int n) {
  World w;
  cm::CmEndpoint client(w.wire->port(), cm::CmConfig{}, 9);
  const mad::TimePoint t0 = w.clock.Now();
  for (int i = 0; i < n; ++i) {
    (void)client.Connect(w.sched->Now(), Params(w.wire->port(), w.peer_tx->port(), 0x100 + i));
  }
  int done = 0;
  while (done < n) {
    cm::OutgoingMad m;
    while (client.PollTransmit(&m)) (void)w.wire->Send(m.to, m.mad);
    w.Pump();
    const mad::TimePoint now = w.sched->Now();
    w.wire->Drain([&](const mad::ReceivedMad& r) { client.HandleMad(now, r.from, r.data); });
    client.HandleTimeout(now);
    cm::CmEvent e;
    while (client.PollEvent(&e)) {
      if (e.type == cm::CmEventType::kConnectResponse) (void)client.Rtu(now, e.conn);
      if (e.type == cm::CmEventType::kEstablished) ++done;
      if (e.type == cm::CmEventType::kUnreachable || e.type == cm::CmEventType::kRejected) {
        std::fprintf(stderr, "baseline: connection failed\n");
        std::exit(1);
      }
    }
  }
  return n / (w.clock.Now() - t0).seconds();
}

[[noreturn]] void Child(const std::string& path, const mad::LocalPort& peer, int index, int n) {
  auto t = RouterTransport::Connect(path);
  if (!t.ok()) _exit(2);
  auto node = cm::RealNode::Create(**t, cm::NodeOptions{});
  if (!node.ok()) _exit(3);
  cm::RealNode& nd = **node;
  {
    std::lock_guard<std::mutex> lock(nd.mutex());
    for (int k = 0; k < n; ++k) {
      (void)nd.cm().Connect(nd.Now(), Params((*t)->port(), peer, (index + 1) * 0x10000 + k));
    }
    nd.FlushLocked();
  }
  int done = 0;
  mad::RealClock clock;
  const mad::TimePoint deadline = clock.Now() + mad::Duration::Seconds(300);
  while (done < n && clock.Now() < deadline) {
    (void)nd.Poll(mad::Duration::Millis(50));
    std::lock_guard<std::mutex> lock(nd.mutex());
    cm::CmEvent e;
    while (nd.cm().PollEvent(&e)) {
      if (e.type == cm::CmEventType::kConnectResponse) (void)nd.cm().Rtu(nd.Now(), e.conn);
      if (e.type == cm::CmEventType::kEstablished) ++done;
      if (e.type == cm::CmEventType::kUnreachable || e.type == cm::CmEventType::kRejected) _exit(4);
    }
    nd.FlushLocked();
  }
  _exit(done == n ? 0 : 5);
}

double ThroughRouter(int n, int procs) {
  World w;
  char dir[] = "/tmp/uscmd-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) std::exit(1);
  const std::string path = std::string(dir) + "/s";
  ServerOptions o;
  o.socket_path = path;
  o.pump = [&w] { return w.Pump(); };
  auto server = Server::Create(*w.wire, o);
  if (!server.ok()) std::exit(1);
  const mad::TimePoint t0 = w.clock.Now();
  std::vector<pid_t> pids;
  for (int i = 0; i < procs; ++i) {
    const int each = n / procs + (i < n % procs ? 1 : 0);
    const pid_t pid = fork();
    if (pid == 0) Child(path, w.peer_tx->port(), i, each);
    pids.push_back(pid);
  }
  std::thread loop([&] { (void)(*server)->Run(); });
  bool ok = true;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  const double secs = (w.clock.Now() - t0).seconds();
  (*server)->Stop();
  loop.join();
  rmdir(dir);
  if (!ok) {
    std::fprintf(stderr, "router run with %d processes: a client failed\n", procs);
    std::exit(1);
  }
  return n / secs;
}

}  // namespace
}  // namespace uscm::router

int main(int argc, char** argv) {
  int n = 2048;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--connections") == 0 && !absl::SimpleAtoi(argv[++i], &n)) return 2;
  }
  const double base = uscm::router::Baseline(n);
  std::printf("connections: %d (simulated fabric paced by the real clock)\n", n);
  std::printf("%-28s %12.0f conn/s  ratio 1.00\n", "one process owns the port", base);
  for (int procs : {1, 8, 32}) {
    const double r = uscm::router::ThroughRouter(n, procs);
    std::printf("router, %2d client processes  %12.0f conn/s  ratio %.2f\n", procs, r, r / base);
    std::fflush(stdout);
  }
  return 0;
}
