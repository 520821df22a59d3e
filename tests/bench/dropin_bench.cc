// The drop-in librdmacm's own layer (api/librdmacm) on the simulated fabric:
// both hosts of the API pairs are the process's two ports (10.0.0.1 and
// 10.0.0.2, UseDevicesForTesting), and the connection is made with the
// librdmacm calls a program makes (rdma_create_id, rdma_resolve_addr, ...,
// rdma_get_cm_event / rdma_ack_cm_event on a channel of its own). The
// ports' events reach the program's channels through PumpEvents once the
// fabric has run, as the device's progress hook moves them after each step
// on a real port. Part of cm_bench (same process as the endpoint baseline).
//
//   BM_DropInSimFabric        one connection at a time, each event taken as
//                             it comes (as BM_CApiSimFabric)
//   BM_DropInSimFabricBurst/N N in flight, each batch taken as an epoll
//                             program takes it (as BM_CApiSimFabricBurst)
//   BM_DropInResolveRoute/N   cmtime's resolve-route step alone: N calls on
//                             ids with their address resolved, then the N
//                             ROUTE_RESOLVED events taken and acked (a path
//                             cache hit here; RoCE's RocePath on a device);
//                             per id, against tests/vm/bench/route_floor
//   BM_DropInResolveRouteRoce/N/D  the same on a RoCE port (the path from
//                             the two IPs, no SA): D=1 the direct path
//                             (api/librdmacm/direct_route.cc), D=0 the
//                             calls through the C API and the pump as
//                             before it, in the same process
//   BM_DropInResolveAddrRoce/N/D  cmtime's resolve-addr step alone on the
//                             RoCE port: D=1 the direct path
//                             (api/librdmacm/direct_addr.cc), D=0 the event
//                             through the port's channel and the pump
//   BM_DropInBindRoce/N/R/B   cmtime -b's bind step alone: N binds to port
//                             0, R=1 through a LocalRouter (leased blocks);
//                             B=1 with a thread taking the node's lock in a
//                             loop, as a busy progress thread's steps do
//   BM_DropInTransportLostCheck/B  the lost-port check each id placement
//                             makes (uscm_device_transport_lost of a serving
//                             port, lost_ports.cc OpenPortForIdLocked), B as
//                             above
//   BM_DropInResolveRouteRoceThreaded/N/D/B  the same driven as cmtime
//                             drives it: an event thread blocked in
//                             rdma_get_cm_event, the caller in a sched_yield
//                             loop (fd_syscalls/id: the channel's eventfd);
//                             B=1 the wait as SCHED_BATCH (batch_wait.h),
//                             B=0 as before it (run under `taskset -c 0`)
//
// `syscalls/conn`: the eventfd syscalls of the program's channels
// (ChannelFdSyscalls) and of the ports' uscm channels (fd_syscalls), and
// the program's polls.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <thread>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_device.h"
#include "api/librdmacm/batch_wait.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/ids.h"
#include "api/rdma_cm/rdma_cm.h"
#include "benchmark/benchmark.h"
#include "cm/router/local_router.h"
#include "tests/bench/api_pairs.h"

namespace uscm {
namespace {

using librdmacm::Addr16;

Addr16 V4(const char* ip) {
  Addr16 a{};
  a[10] = a[11] = 0xff;
  inet_pton(AF_INET, ip, &a[12]);
  return a;
}

sockaddr_in Ipv4(const char* ip, uint16_t port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

[[noreturn]] void Die(const char* what, int h, const char* detail) {
  fprintf(stderr, "drop-in host %d: %s: %s\n", h, what, detail);
  abort();
}

// The drop-in with the two simulated hosts as its ports; a listener on
// 10.0.0.2:7471 (port 2) and the program's two channels (non-blocking),
// ch[0] for the active ids, ch[1] for the listener and its passive ids.
struct DropInPair {
  std::unique_ptr<testing::SimFabric> f;
  uscm_device* dev[2];
  EventChannel* port_channel[2];  // the ports' uscm channels, C++ side
  rdma_event_channel* ch[2];
  rdma_cm_id* listener = nullptr;
  uint64_t polls = 0;

  DropInPair() {
    f = std::move(*testing::SimFabric::Create(3, nullptr, bench::ApiPair::NodeOptions(),
                                              bench::ApiPair::FabricOptions()));
    for (int h = 0; h < 2; ++h) dev[h] = uscm_device_wrap(f->host(h).device.get());
    if (librdmacm::UseDevicesForTesting({dev[0], dev[1]}, {{V4("10.0.0.1")}, {V4("10.0.0.2")}}) !=
        0) {
      Die("ports", 0, strerror(errno));
    }
    std::vector<uscm_event_channel*> ports = librdmacm::PortChannelsForTesting();
    for (int h = 0; h < 2; ++h) {
      // The C++ channel under the port's C channel: waiting reads its queue
      // (no poll(2) per scheduler step charged to the layer).
      uscm_cm_id* probe;
      uscm_create_id(ports[h], &probe, nullptr, USCM_PS_TCP);
      port_channel[h] = static_cast<CmId*>(probe->impl)->channel();
      uscm_destroy_id(probe);
      ch[h] = librdmacm::NewEventChannel();
      fcntl(ch[h]->fd, F_SETFL, fcntl(ch[h]->fd, F_GETFL) | O_NONBLOCK);
    }
    sockaddr_in a = Ipv4("10.0.0.2", 7471);
    if (rdma_create_id(ch[1], &listener, nullptr, RDMA_PS_TCP) != 0 ||
        rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&a)) != 0 ||
        rdma_listen(listener, 1 << 30) != 0) {
      Die("listen", 1, strerror(errno));
    }
  }
  ~DropInPair() {
    rdma_destroy_id(listener);
    for (int h = 0; h < 2; ++h) rdma_destroy_event_channel(ch[h]);
    librdmacm::ResetBackendForTesting();
    for (int h = 0; h < 2; ++h) uscm_device_unwrap_free(dev[h]);
  }
  // Runs the fabric until `n` events wait for host h's program channel
  // (counting what the pump moved already), pumping as the progress hook.
  void RunUntil(int h, size_t n) {
    sim::Scheduler& s = f->scheduler();
    EventChannel* pc = port_channel[h];
    rdma_event_channel* c = ch[h];
    for (int round = 0; static_cast<size_t>(librdmacm::QueuedEvents(c)) < n; ++round) {
      if (round > 1000) Die("wait", h, "events did not arrive");
      (void)s.RunUntil([pc, c, n] { return pc->queued() + librdmacm::QueuedEvents(c) >= n; },
                       s.Now() + mad::Duration::Seconds(120));
      librdmacm::PumpEvents();
    }
  }
  // The next event on host h's channel (must be `want`), acked; its id.
  rdma_cm_id* Next(int h, rdma_cm_event_type want) {
    RunUntil(h, 1);
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(ch[h], &e) != 0 || e->event != want) {
      Die("wanted", h, e != nullptr ? rdma_event_str(e->event) : strerror(errno));
    }
    rdma_cm_id* id = e->id;
    rdma_ack_cm_event(e);
    return id;
  }
  // n events of one kind on host h, taken as an epoll program: one poll of
  // the channel's fd, then rdma_get_cm_event until EAGAIN.
  void Drain(int h, size_t n, rdma_cm_event_type want, std::vector<rdma_cm_id*>* ids) {
    RunUntil(h, n);
    pollfd p{ch[h]->fd, POLLIN, 0};
    ++polls;
    if (poll(&p, 1, 0) != 1) Die("poll", h, "the channel's fd is not readable with events queued");
    size_t got = 0;
    for (;;) {
      rdma_cm_event* e = nullptr;
      if (rdma_get_cm_event(ch[h], &e) != 0) {
        if (errno != EAGAIN) Die("get", h, strerror(errno));
        break;
      }
      if (e->event != want) Die("wanted", h, rdma_event_str(e->event));
      if (ids != nullptr) ids->push_back(e->id);
      rdma_ack_cm_event(e);
      ++got;
    }
    if (got != n) Die("burst", h, "fewer events than connections");
  }
  rdma_cm_id* Create() {
    rdma_cm_id* id = nullptr;
    sockaddr_in s = Ipv4("10.0.0.1", 0), d = Ipv4("10.0.0.2", 7471);
    if (rdma_create_id(ch[0], &id, nullptr, RDMA_PS_TCP) != 0 ||
        rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&s), reinterpret_cast<sockaddr*>(&d),
                          2000) != 0) {
      Die("resolve_addr", 0, strerror(errno));
    }
    return id;
  }
  static rdma_conn_param Param(uint32_t qpn) {
    rdma_conn_param p = {};
    p.qp_num = qpn;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    return p;
  }
  uint64_t syscalls() const {
    return librdmacm::ChannelFdSyscalls(ch[0]) + librdmacm::ChannelFdSyscalls(ch[1]) +
           port_channel[0]->fd_syscalls() + port_channel[1]->fd_syscalls() + polls;
  }
  size_t records() {
    return f->host(0).device->node().cm().connection_count() +
           f->host(1).device->node().cm().connection_count();
  }
};

void BM_DropInSimFabric(benchmark::State& state) {
  DropInPair p;
  uint32_t qpn = 1;
  for (auto _ : state) {
    rdma_cm_id* a = p.Create();
    p.Next(0, RDMA_CM_EVENT_ADDR_RESOLVED);
    rdma_resolve_route(a, 2000);
    p.Next(0, RDMA_CM_EVENT_ROUTE_RESOLVED);
    rdma_conn_param cp = DropInPair::Param(qpn);
    rdma_connect(a, &cp);
    rdma_cm_id* b = p.Next(1, RDMA_CM_EVENT_CONNECT_REQUEST);
    cp.qp_num = qpn + 0x100000;
    qpn = (qpn + 1) & 0xFFFFF;
    rdma_accept(b, &cp);
    p.Next(0, RDMA_CM_EVENT_CONNECT_RESPONSE);
    rdma_establish(a);
    p.Next(1, RDMA_CM_EVENT_ESTABLISHED);
    rdma_disconnect(a);
    p.Next(1, RDMA_CM_EVENT_DISCONNECTED);
    rdma_disconnect(b);
    p.Next(0, RDMA_CM_EVENT_DISCONNECTED);
    rdma_destroy_id(a);
    rdma_destroy_id(b);
  }
  const double conns = static_cast<double>(state.iterations());
  state.counters["conn/s"] = benchmark::Counter(conns, benchmark::Counter::kIsRate);
  state.counters["records"] = static_cast<double>(p.records());
  state.counters["steps/conn"] = static_cast<double>(p.f->scheduler().steps()) / conns;
  state.counters["syscalls/conn"] = static_cast<double>(p.syscalls()) / conns;
}
BENCHMARK(BM_DropInSimFabric);

void BM_DropInSimFabricBurst(benchmark::State& state) {
  DropInPair p;
  const size_t n = static_cast<size_t>(state.range(0));
  uint32_t qpn = 1;
  std::vector<rdma_cm_id*> active(n), passive;
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) active[i] = p.Create();
    p.Drain(0, n, RDMA_CM_EVENT_ADDR_RESOLVED, nullptr);
    for (rdma_cm_id* id : active) rdma_resolve_route(id, 2000);
    p.Drain(0, n, RDMA_CM_EVENT_ROUTE_RESOLVED, nullptr);
    for (rdma_cm_id* id : active) {
      rdma_conn_param cp = DropInPair::Param(qpn);
      qpn = (qpn + 1) & 0xFFFFF;
      rdma_connect(id, &cp);
    }
    passive.clear();
    p.Drain(1, n, RDMA_CM_EVENT_CONNECT_REQUEST, &passive);
    for (rdma_cm_id* id : passive) {
      rdma_conn_param cp = DropInPair::Param(qpn | 0x100000);
      qpn = (qpn + 1) & 0xFFFFF;
      rdma_accept(id, &cp);
    }
    p.Drain(0, n, RDMA_CM_EVENT_CONNECT_RESPONSE, nullptr);
    for (rdma_cm_id* id : active) rdma_establish(id);
    p.Drain(1, n, RDMA_CM_EVENT_ESTABLISHED, nullptr);
    for (rdma_cm_id* id : active) rdma_disconnect(id);
    p.Drain(1, n, RDMA_CM_EVENT_DISCONNECTED, nullptr);
    for (rdma_cm_id* id : passive) rdma_disconnect(id);
    p.Drain(0, n, RDMA_CM_EVENT_DISCONNECTED, nullptr);
    for (size_t i = 0; i < n; ++i) {
      rdma_destroy_id(active[i]);
      rdma_destroy_id(passive[i]);
    }
  }
  const double conns = static_cast<double>(state.iterations() * n);
  state.counters["conn/s"] = benchmark::Counter(conns, benchmark::Counter::kIsRate);
  state.counters["steps/conn"] = static_cast<double>(p.f->scheduler().steps()) / conns;
  state.counters["syscalls/conn"] = static_cast<double>(p.syscalls()) / conns;
}
BENCHMARK(BM_DropInSimFabricBurst)->Arg(16)->Arg(64)->Arg(256);

void BM_DropInResolveRoute(benchmark::State& state) {
  DropInPair p;
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<rdma_cm_id*> ids(n);
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < n; ++i) ids[i] = p.Create();
    p.Drain(0, n, RDMA_CM_EVENT_ADDR_RESOLVED, nullptr);
    state.ResumeTiming();
    for (rdma_cm_id* id : ids) rdma_resolve_route(id, 2000);
    p.Drain(0, n, RDMA_CM_EVENT_ROUTE_RESOLVED, nullptr);
    state.PauseTiming();
    for (rdma_cm_id* id : ids) rdma_destroy_id(id);
    state.ResumeTiming();
  }
  const double calls = static_cast<double>(state.iterations() * n);
  state.counters["ids/s"] = benchmark::Counter(calls, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DropInResolveRoute)->Arg(1000);

// The drop-in's one port a RoCE device (10.0.0.1, no SA: DeviceOptions::roce)
// on the simulated fabric's host 0, and a non-blocking channel.
struct RocePort {
  std::unique_ptr<testing::SimFabric> f;
  std::unique_ptr<router::LocalRouter> router;  // routed: the port shared as through uscmd
  std::unique_ptr<router::LocalRouterClient> client;
  std::unique_ptr<Device> roce;
  uscm_device* dev;
  rdma_event_channel* ch;

  // table: a neighbour table that answers at once with the IP's GID (a
  // real RoCE port's resolve_neighbour, reused for a second as there).
  // routed: the device is a client of a LocalRouter on the port (a program
  // behind uscmd: its binds to port 0 take ports of leased blocks).
  explicit RocePort(bool table = false, bool routed = false) {
    f = std::move(*testing::SimFabric::Create(5));
    DeviceOptions o;
    o.roce = true;
    o.local_ips = {*Address::Parse("10.0.0.1")};
    if (table) {
      o.resolve_neighbour = [](const Address&, const Address&, mad::Duration) {
        return absl::StatusOr<absl::optional<mad::Gid>>(absl::nullopt);
      };
    }
    if (routed) {
      router = std::make_unique<router::LocalRouter>(*f->host(0).qp1);
      client = std::move(*router->Connect());
      router::LocalRouterClient* raw = client.get();
      roce = std::move(*Device::CreateSimulated(
          f->scheduler(), *client, [raw] { return raw->pending() > 0; }, o));
    } else {
      roce = std::move(*Device::CreateSimulated(f->scheduler(), *f->host(0).qp1,
                                                [] { return false; }, o));
    }
    dev = uscm_device_wrap(roce.get());
    if (librdmacm::UseDevicesForTesting({dev}, {{V4("10.0.0.1")}}) != 0) {
      Die("ports", 0, strerror(errno));
    }
    ch = librdmacm::NewEventChannel();
    fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  }
  ~RocePort() {
    rdma_destroy_event_channel(ch);
    librdmacm::ResetBackendForTesting();
    uscm_device_unwrap_free(dev);
    roce.reset();  // before the client and router it uses
  }
  // n events of one kind, all queued already: one poll, then get and ack each.
  void Drain(size_t n, rdma_cm_event_type want) {
    pollfd p{ch->fd, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) Die("poll", 0, "the channel's fd is not readable");
    size_t got = 0;
    rdma_cm_event* e = nullptr;
    while (rdma_get_cm_event(ch, &e) == 0) {
      if (e->event != want) Die("wanted", 0, rdma_event_str(e->event));
      rdma_ack_cm_event(e);
      ++got;
    }
    if (got != n) Die("drain", 0, "fewer events than ids");
  }
};

void BM_DropInResolveRouteRoce(benchmark::State& state) {
  RocePort p;
  const size_t n = static_cast<size_t>(state.range(0));
  librdmacm::SetDirectRoutesForTesting(state.range(1) == 1);
  const uint64_t direct_before = librdmacm::DirectRoutes();
  std::vector<rdma_cm_id*> ids(n);
  sockaddr_in d = Ipv4("10.0.0.2", 7471);
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < n; ++i) {
      if (rdma_create_id(p.ch, &ids[i], nullptr, RDMA_PS_TCP) != 0 ||
          rdma_resolve_addr(ids[i], nullptr, reinterpret_cast<sockaddr*>(&d), 2000) != 0) {
        Die("resolve_addr", 0, strerror(errno));
      }
    }
    p.Drain(n, RDMA_CM_EVENT_ADDR_RESOLVED);
    state.ResumeTiming();
    for (rdma_cm_id* id : ids) rdma_resolve_route(id, 2000);
    p.Drain(n, RDMA_CM_EVENT_ROUTE_RESOLVED);
    state.PauseTiming();
    for (rdma_cm_id* id : ids) rdma_destroy_id(id);
    state.ResumeTiming();
  }
  const double calls = static_cast<double>(state.iterations() * n);
  state.counters["ids/s"] = benchmark::Counter(calls, benchmark::Counter::kIsRate);
  state.counters["direct"] = static_cast<double>(librdmacm::DirectRoutes() - direct_before) / calls;
  librdmacm::SetDirectRoutesForTesting(true);
}
BENCHMARK(BM_DropInResolveRouteRoce)
    ->ArgNames({"ids", "direct"})
    ->Args({1000, 0})
    ->Args({1000, 1})
    ->Args({1000, 0})
    ->Args({1000, 1});

// cmtime's resolve-addr step alone on the RoCE port: N rdma_resolve_addr of
// bound ids (the destination's GID is its IP: no neighbour to wait for), then the N
// ADDR_RESOLVED taken and acked. D=1 the direct path (direct_addr.cc), D=0
// through the port's channel and the pump, in the same process. T=1 as on a
// real port with cmtime's -b: a neighbour table (its answer reused) and the
// bound address given again as the source.
void BM_DropInResolveAddrRoce(benchmark::State& state) {
  const bool table = state.range(2) == 1;
  RocePort p(table);
  const size_t n = static_cast<size_t>(state.range(0));
  librdmacm::SetDirectAddrsForTesting(state.range(1) == 1);
  const uint64_t direct_before = librdmacm::DirectAddrs();
  std::vector<rdma_cm_id*> ids(n);
  sockaddr_in d = Ipv4("10.0.0.2", 7471);
  for (auto _ : state) {
    state.PauseTiming();
    sockaddr_in here = Ipv4("10.0.0.1", 0);  // bound first, as cmtime's -b
    for (size_t i = 0; i < n; ++i) {
      if (rdma_create_id(p.ch, &ids[i], nullptr, RDMA_PS_TCP) != 0 ||
          rdma_bind_addr(ids[i], reinterpret_cast<sockaddr*>(&here)) != 0) {
        Die("create and bind", 0, strerror(errno));
      }
    }
    state.ResumeTiming();
    sockaddr* src = table ? reinterpret_cast<sockaddr*>(&here) : nullptr;
    for (rdma_cm_id* id : ids) {
      if (rdma_resolve_addr(id, src, reinterpret_cast<sockaddr*>(&d), 2000) != 0) {
        Die("resolve_addr", 0, strerror(errno));
      }
    }
    p.Drain(n, RDMA_CM_EVENT_ADDR_RESOLVED);
    state.PauseTiming();
    for (rdma_cm_id* id : ids) rdma_destroy_id(id);
    state.ResumeTiming();
  }
  const double calls = static_cast<double>(state.iterations() * n);
  state.counters["ids/s"] = benchmark::Counter(calls, benchmark::Counter::kIsRate);
  state.counters["direct"] = static_cast<double>(librdmacm::DirectAddrs() - direct_before) / calls;
  librdmacm::SetDirectAddrsForTesting(true);
}
BENCHMARK(BM_DropInResolveAddrRoce)
    ->ArgNames({"ids", "direct", "table"})
    ->Args({1000, 0, 0})
    ->Args({1000, 1, 0})
    ->Args({1000, 1, 1});

// cmtime -b's bind step alone: N rdma_bind_addr to 10.0.0.1 port 0 on new
// ids (the ids made and destroyed outside the timing). R=1 through a
// LocalRouter, as a program behind uscmd (the port from a leased block,
// docs/ROUTER.md "Port blocks"); R=0 the port owned (AllocPort).
// A thread that takes the node's lock in a loop while it lives, as the
// port's progress thread does for each step (here with no work inside).
class BusyNode {
 public:
  BusyNode(cm::Node& node, bool on) {
    if (!on) return;
    thread_ = std::thread([this, &node] {
      while (!stop_.load(std::memory_order_relaxed)) {
        std::lock_guard<std::mutex> lock(node.mutex());
        benchmark::DoNotOptimize(++held_);
      }
    });
  }
  ~BusyNode() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  uint64_t held_ = 0;
  std::thread thread_;
};

void BM_DropInBindRoce(benchmark::State& state) {
  RocePort p(/*table=*/false, /*routed=*/state.range(1) == 1);
  BusyNode busy(p.roce->node(), state.range(2) == 1);
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<rdma_cm_id*> ids(n);
  sockaddr_in here = Ipv4("10.0.0.1", 0);
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < n; ++i) {
      if (rdma_create_id(p.ch, &ids[i], nullptr, RDMA_PS_TCP) != 0) Die("create", 0, strerror(errno));
    }
    state.ResumeTiming();
    for (rdma_cm_id* id : ids) {
      if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&here)) != 0) {
        Die("bind", 0, strerror(errno));
      }
    }
    state.PauseTiming();
    for (rdma_cm_id* id : ids) rdma_destroy_id(id);
    state.ResumeTiming();
  }
  state.counters["ids/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
  state.counters["blocks"] = static_cast<double>(p.roce->leased_blocks());
}
BENCHMARK(BM_DropInBindRoce)
    ->ArgNames({"ids", "router", "busy"})
    ->Args({1000, 0, 0})
    ->Args({1000, 1, 0})
    ->Args({1000, 0, 1})
    ->UseRealTime();

// The check each id placement makes of its port (OpenPortForIdLocked's
// uscm_device_transport_lost), N times on the serving RoCE port.
void BM_DropInTransportLostCheck(benchmark::State& state) {
  RocePort p;
  BusyNode busy(p.roce->node(), state.range(1) == 1);
  const size_t n = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      if (uscm_device_transport_lost(p.dev, nullptr, 0) != 0) Die("transport_lost", 0, "lost");
    }
  }
  state.counters["checks/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DropInTransportLostCheck)
    ->ArgNames({"checks", "busy"})
    ->Args({1000, 0})
    ->Args({1000, 1})
    ->UseRealTime();

// As cmtime drives the step: the calls from this thread, the events taken
// and acked by an event thread blocked in rdma_get_cm_event on a blocking
// channel, this thread waiting for them in a sched_yield loop.
void BM_DropInResolveRouteRoceThreaded(benchmark::State& state) {
  RocePort p;
  const size_t n = static_cast<size_t>(state.range(0));
  librdmacm::SetDirectRoutesForTesting(state.range(1) == 1);
  librdmacm::SetBatchWaitsForTesting(state.range(2) == 1);
  rdma_event_channel* ch = librdmacm::NewEventChannel();  // blocking
  std::atomic<size_t> addr{0}, route{0};
  std::thread events([&] {
    for (;;) {
      rdma_cm_event* e = nullptr;
      if (rdma_get_cm_event(ch, &e) != 0) Die("get", 0, strerror(errno));
      const rdma_cm_event_type t = e->event;
      rdma_ack_cm_event(e);
      if (t == RDMA_CM_EVENT_ADDR_RESOLVED) addr.fetch_add(1);
      else if (t == RDMA_CM_EVENT_ROUTE_RESOLVED) route.fetch_add(1);
      else return;  // DEVICE_REMOVAL: the end
    }
  });
  std::vector<rdma_cm_id*> ids(n);
  sockaddr_in d = Ipv4("10.0.0.2", 7471);
  uint64_t fd_syscalls = 0;  // the channel's eventfd reads and writes in the step
  for (auto _ : state) {
    state.PauseTiming();
    addr = 0;
    route = 0;
    for (size_t i = 0; i < n; ++i) {
      if (rdma_create_id(ch, &ids[i], nullptr, RDMA_PS_TCP) != 0 ||
          rdma_resolve_addr(ids[i], nullptr, reinterpret_cast<sockaddr*>(&d), 2000) != 0) {
        Die("resolve_addr", 0, strerror(errno));
      }
    }
    while (addr.load() < n) sched_yield();
    const uint64_t before = librdmacm::ChannelFdSyscalls(ch);
    state.ResumeTiming();
    for (rdma_cm_id* id : ids) rdma_resolve_route(id, 2000);
    while (route.load() < n) sched_yield();
    state.PauseTiming();
    fd_syscalls += librdmacm::ChannelFdSyscalls(ch) - before;
    for (rdma_cm_id* id : ids) rdma_destroy_id(id);
    state.ResumeTiming();
  }
  rdma_cm_event stop = {};
  stop.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
  librdmacm::QueueEvent(ch, stop, nullptr, 0);
  events.join();
  rdma_destroy_event_channel(ch);
  const double calls = static_cast<double>(state.iterations() * n);
  state.counters["ids/s"] = benchmark::Counter(calls, benchmark::Counter::kIsRate);
  state.counters["fd_syscalls/id"] = static_cast<double>(fd_syscalls) / calls;
  librdmacm::SetDirectRoutesForTesting(true);
  librdmacm::SetBatchWaitsForTesting(true);
}
BENCHMARK(BM_DropInResolveRouteRoceThreaded)
    ->ArgNames({"ids", "direct", "batch"})
    ->Args({1000, 0, 0})
    ->Args({1000, 1, 0})
    ->Args({1000, 0, 1})
    ->Args({1000, 1, 1})
    ->UseRealTime();

}  // namespace
}  // namespace uscm
