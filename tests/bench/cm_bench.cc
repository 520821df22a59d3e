// Connections per second and bytes per established connection, on one core,
// both sides in one process:
//
//   BM_EndpointPair   two sans-IO CmEndpoints, MADs handed across directly:
//                     REQ -> REP -> RTU -> ESTABLISHED, then DREQ / DREP.
//   BM_EndpointPairSimFabric
//                     the same two endpoints, every MAD sent through the
//                     simulated fabric (host - switch - host, virtual time).
//   BM_ApiSimFabric   the same through the rdma_cm-style API (uscm::CmId,
//                     event channels) over the simulated fabric, including
//                     resolve_addr / resolve_route (path cache) per connection.
//   BM_CApiSimFabric  the same through the uscm C API (uscm_cma.h), the layer
//                     the drop-in librdmacm calls: uscm_get_cm_event /
//                     uscm_ack_cm_event, C handles.
//   BM_MemoryEndpoint / BM_MemoryApi / BM_MemoryCApi
//                     100k connections held ESTABLISHED; heap delta
//                     (HeapBytes()) divided by 100k.
//
// The API pairs use the endpoint pairs' TimeWait (1 ms), so records in
// TimeWait stay bounded as virtual time goes on (`records`), and report the
// scheduler steps and event channel syscalls per connection.
//   BM_EventfdWriteRead  one eventfd write + read: what an event costs an
//                     API channel whose fd is in use.
//
// Targets (issue 5): >= 200,000 connections/s, <= 1 KiB per connection.
#include <malloc.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "benchmark/benchmark.h"
#include "cm/endpoint.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"

namespace uscm {
namespace {

using cm::CmEndpoint;
using cm::CmEvent;
using cm::CmEventType;
using cm::ConnId;
using cm::OutgoingMad;

mad::LocalPort Port(uint16_t lid, uint64_t guid) {
  mad::LocalPort p;
  p.ca_name = "bench";
  p.lid = lid;
  p.node_guid = guid;
  p.gid = mad::Gid::FromParts(0xfe80000000000000ull, guid);
  p.pkeys = {0xFFFF};
  return p;
}

struct EndpointPair {
  EndpointPair()
      : pa(Port(1, 0xa)), pb(Port(2, 0xb)), a(pa, Config(), 1), b(pb, Config(), 2) {
    from_a.lid = 1;
    from_b.lid = 2;
    listen = *b.Listen(0x1060000 | 7471, ~uint64_t{0}, 1u << 30, false);
  }
  static cm::CmConfig Config() {
    cm::CmConfig c;
    c.timewait = mad::Duration::Millis(1);
    return c;
  }
  void Shuttle() {
    OutgoingMad m;
    for (bool moved = true; moved;) {
      moved = false;
      while (a.PollTransmit(&m)) moved = true, b.HandleMad(now, from_a, m.mad);
      while (b.PollTransmit(&m)) moved = true, a.HandleMad(now, from_b, m.mad);
      CmEvent e;
      while (a.PollEvent(&e)) {
        moved = true;
        if (e.type == CmEventType::kConnectResponse) (void)a.Rtu(now, e.conn);
        if (e.type == CmEventType::kEstablished) ++established;
        if (e.type == CmEventType::kDisconnected) ++disconnected;
      }
      while (b.PollEvent(&e)) {
        moved = true;
        if (e.type == CmEventType::kConnectRequest) {
          cm::AcceptParams ap;
          ap.qpn = e.req.remote_qpn + 0x100000;
          (void)b.Accept(now, e.conn, ap);
        }
        if (e.type == CmEventType::kDisconnected) {
          // DREP, then release the id (rdma_disconnect + rdma_destroy_id):
          // the record is freed when its TimeWait ends.
          (void)b.Disconnect(now, e.conn);
          (void)b.Destroy(now, e.conn);
        }
      }
    }
  }
  ConnId Connect(uint32_t qpn) {
    cm::ConnectParams p;
    p.service_id = 0x1060000 | 7471;
    p.primary.local_lid = 1;
    p.primary.remote_lid = 2;
    p.primary.local_gid = pa.gid;
    p.primary.remote_gid = pb.gid;
    p.primary.local_ack_timeout = 14;
    p.qpn = qpn;
    return *a.Connect(now, p);
  }
  mad::LocalPort pa, pb;
  CmEndpoint a, b;
  mad::MadAddress from_a, from_b;
  cm::ListenId listen;
  mad::TimePoint now = mad::TimePoint::Epoch() + mad::Duration::Seconds(1);
  uint64_t established = 0, disconnected = 0;
};

void BM_EndpointPair(benchmark::State& state) {
  EndpointPair p;
  uint32_t qpn = 1;
  for (auto _ : state) {
    ConnId id = p.Connect(qpn);
    qpn = (qpn + 1) & 0xFFFFF;
    p.Shuttle();
    (void)p.a.Disconnect(p.now, id);
    p.Shuttle();
    (void)p.a.Destroy(p.now, id);
    p.now += mad::Duration::Micros(10);  // TimeWait (1 ms) frees records as time goes on
    p.a.HandleTimeout(p.now);
    p.b.HandleTimeout(p.now);
    p.Shuttle();
  }
  if (p.established != static_cast<uint64_t>(state.iterations())) {
    state.SkipWithError("a connection did not establish");
  }
  state.counters["conn/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  // Records still held at the end (those inside TimeWait): stays bounded
  // (~2 x TimeWait / step), it must not grow with the iteration count.
  state.counters["records"] =
      static_cast<double>(p.a.connection_count() + p.b.connection_count());
}
BENCHMARK(BM_EndpointPair);

// The pair above with the simulated fabric between the endpoints: each MAD
// is sent on host1's or host2's QP1, switched, delivered in virtual time and
// drained on the other side.
struct FabricPair {
  FabricPair() : sched(7) {
    sim::FabricOptions o;
    o.trace_digest = false;  // as the API pairs: nothing reads it
    fabric = std::move(*sim::Fabric::Create(sched, sim::TwoHostsOneSwitch(), o));
    ta = std::move(*fabric->Open("host1"));
    tb = std::move(*fabric->Open("host2"));
    a = std::make_unique<CmEndpoint>(ta->port(), EndpointPair::Config(), 1);
    b = std::make_unique<CmEndpoint>(tb->port(), EndpointPair::Config(), 2);
    (void)*b->Listen(0x1060000 | 7471, ~uint64_t{0}, 1u << 30, false);
  }
  void Shuttle() {
    OutgoingMad m;
    for (bool moved = true; moved;) {
      moved = false;
      while (a->PollTransmit(&m)) moved = true, (void)ta->Send(m.to, m.mad);
      while (b->PollTransmit(&m)) moved = true, (void)tb->Send(m.to, m.mad);
      (void)sched.RunUntilIdle();
      const mad::TimePoint now = sched.Now();
      tb->Drain([&](const mad::ReceivedMad& r) { moved = true, b->HandleMad(now, r.from, r.data); });
      ta->Drain([&](const mad::ReceivedMad& r) { moved = true, a->HandleMad(now, r.from, r.data); });
      CmEvent e;
      while (a->PollEvent(&e)) {
        moved = true;
        if (e.type == CmEventType::kConnectResponse) (void)a->Rtu(now, e.conn);
        if (e.type == CmEventType::kEstablished) ++established;
      }
      while (b->PollEvent(&e)) {
        moved = true;
        if (e.type == CmEventType::kConnectRequest) {
          cm::AcceptParams ap;
          ap.qpn = e.req.remote_qpn + 0x100000;
          (void)b->Accept(now, e.conn, ap);
        }
        if (e.type == CmEventType::kDisconnected) {
          (void)b->Disconnect(now, e.conn);
          (void)b->Destroy(now, e.conn);
        }
      }
    }
  }
  ConnId Connect(uint32_t qpn) {
    cm::ConnectParams p;
    p.service_id = 0x1060000 | 7471;
    p.primary.local_lid = ta->port().lid;
    p.primary.remote_lid = tb->port().lid;
    p.primary.local_gid = ta->port().gid;
    p.primary.remote_gid = tb->port().gid;
    p.primary.local_ack_timeout = 14;
    p.qpn = qpn;
    return *a->Connect(sched.Now(), p);
  }
  sim::Scheduler sched;
  std::unique_ptr<sim::Fabric> fabric;
  std::unique_ptr<sim::SimTransport> ta, tb;
  std::unique_ptr<CmEndpoint> a, b;
  uint64_t established = 0;
};

void BM_EndpointPairSimFabric(benchmark::State& state) {
  FabricPair p;
  uint32_t qpn = 1;
  for (auto _ : state) {
    ConnId id = p.Connect(qpn);
    qpn = (qpn + 1) & 0xFFFFF;
    p.Shuttle();
    (void)p.a->Disconnect(p.sched.Now(), id);
    p.Shuttle();
    (void)p.a->Destroy(p.sched.Now(), id);
    (void)p.sched.RunFor(mad::Duration::Micros(10));  // TimeWait (1 ms) ends as time goes on
    p.a->HandleTimeout(p.sched.Now());
    p.b->HandleTimeout(p.sched.Now());
    p.Shuttle();
  }
  if (p.established != static_cast<uint64_t>(state.iterations())) {
    state.SkipWithError("a connection did not establish");
  }
  state.counters["conn/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["records"] =
      static_cast<double>(p.a->connection_count() + p.b->connection_count());
  state.counters["fabric_drops"] = static_cast<double>(p.fabric->counters().total_dropped());
}
BENCHMARK(BM_EndpointPairSimFabric);

struct ApiPair {
  // ib: RDMA_PS_IB with AF_IB addresses (no IP port per id: 100k ids would
  // exhaust the 25,536 ephemeral ports of an IP port space).
  explicit ApiPair(bool ib = false) : ps(ib ? PortSpace::kIb : PortSpace::kTcp) {
    f = std::move(*testing::SimFabric::Create(3, nullptr, NodeOptions(), FabricOptions()));
    listener = *f->host(1).channel->CreateId(nullptr, ps);
    Address a = f->host(1).ip;
    a.port = 7471;
    if (ib) {
      const mad::LocalPort& port = f->host(1).device->port();
      a = Address::Ib(port.gid, port.lid, 0x13F0000 | 7471);
    }
    (void)listener->BindAddr(a);
    (void)listener->Listen(1 << 30);
    dst = a;
  }
  Event Next(int h) {
    absl::StatusOr<Event> e = f->Next(*f->host(h).channel);
    if (!e.ok()) {
      fprintf(stderr, "host %d: %s\n", h, std::string(e.status().message()).c_str());
      abort();
    }
    return *e;
  }
  // Nothing here reads the fabric's trace digest.
  static sim::FabricOptions FabricOptions() {
    sim::FabricOptions o;
    o.trace_digest = false;
    return o;
  }
  static cm::NodeOptions NodeOptions() {
    cm::NodeOptions o;
    o.cm.timewait = mad::Duration::Millis(1);
    return o;
  }
  size_t records() {
    return f->host(0).device->node().cm().connection_count() +
           f->host(1).device->node().cm().connection_count();
  }
  // One connection to ESTABLISHED on both sides; returns (active, passive).
  std::pair<CmId*, CmId*> Establish(uint32_t qpn) {
    CmId* id = *f->host(0).channel->CreateId(nullptr, ps);
    (void)id->ResolveAddr(absl::nullopt, dst);
    Next(0);
    (void)id->ResolveRoute();
    Next(0);
    ConnParam cp;
    cp.qp_num = qpn;
    (void)id->Connect(cp);
    Event req = Next(1);
    ConnParam ap;
    ap.qp_num = qpn + 0x100000;
    (void)req.id->Accept(ap);
    Next(0);  // CONNECT_RESPONSE
    (void)id->Establish();
    Next(1);  // ESTABLISHED
    return {id, req.id};
  }
  PortSpace ps;
  std::unique_ptr<testing::SimFabric> f;
  CmId* listener;
  Address dst;
};

// Arg 0: nobody asks for the channels' fds (a C++ user polling GetEvent);
// arg 1: both fds made first, so every event costs its eventfd syscalls as in
// the drop-in.
void BM_ApiSimFabric(benchmark::State& state) {
  ApiPair p;
  if (state.range(0) != 0) {
    for (int h = 0; h < 2; ++h) (void)p.f->host(h).channel->fd();
  }
  uint32_t qpn = 1;
  uint64_t ok = 0;
  for (auto _ : state) {
    auto [a, b] = p.Establish(qpn);
    qpn = (qpn + 1) & 0xFFFFF;
    ok += b->state() == IdState::kEstablished;
    (void)a->Disconnect();
    p.Next(1);  // DISCONNECTED
    (void)b->Disconnect();
    p.Next(0);  // DISCONNECTED
    (void)p.f->host(0).channel->DestroyId(a);
    (void)p.f->host(1).channel->DestroyId(b);
  }
  if (ok != static_cast<uint64_t>(state.iterations())) {
    state.SkipWithError("a connection did not establish");
  }
  state.counters["conn/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["records"] = static_cast<double>(p.records());
  state.counters["steps/conn"] = benchmark::Counter(
      static_cast<double>(p.f->scheduler().steps()), benchmark::Counter::kAvgIterations);
  state.counters["fd_syscalls/conn"] = benchmark::Counter(
      static_cast<double>(p.f->host(0).channel->fd_syscalls() +
                          p.f->host(1).channel->fd_syscalls()),
      benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_ApiSimFabric)->ArgName("fd")->Arg(0)->Arg(1);

// What one event costs in eventfd syscalls when the application takes each
// event as it comes: the write that makes the fd readable and the read that
// clears it (the floor of an API connection with its fd in use is the
// connection without the fd plus fd_syscalls/conn / 2 of these).
void BM_EventfdWriteRead(benchmark::State& state) {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_SEMAPHORE | EFD_CLOEXEC);
  uint64_t v = 1, bad = 0;
  for (auto _ : state) {
    bad += write(fd, &v, sizeof v) != sizeof v;
    bad += read(fd, &v, sizeof v) != sizeof v;
  }
  close(fd);
  if (bad != 0) state.SkipWithError("eventfd write/read failed");
}
BENCHMARK(BM_EventfdWriteRead);

// The same connection through the uscm C API, as the drop-in librdmacm makes
// it: C ids and events (uscm_get_cm_event / uscm_ack_cm_event), the passive
// id's C handle made on its CONNECT_REQUEST.
struct CApiPair {
  explicit CApiPair(bool ib = false) : ps(ib ? USCM_PS_IB : USCM_PS_TCP) {
    f = std::move(*testing::SimFabric::Create(3, nullptr, ApiPair::NodeOptions(),
                                              ApiPair::FabricOptions()));
    for (int h = 0; h < 2; ++h) {
      dev[h] = uscm_device_wrap(f->host(h).device.get());
      ch[h] = uscm_create_event_channel_on(dev[h]);
    }
    uscm_create_id(ch[1], &listener, nullptr, ps);
    if (ib) {
      const mad::LocalPort& port = f->host(1).device->port();
      dst.family = USCM_AF_IB;
      std::copy(port.gid.raw.begin(), port.gid.raw.end(), dst.gid);
      dst.lid = port.lid;
      dst.service_id = 0x13F0000 | 7471;
    } else {
      uscm_parse_addr("10.0.0.2:7471", &dst);
    }
    if (uscm_bind_addr(listener, &dst) != 0 || uscm_listen(listener, 1 << 30) != 0) {
      fprintf(stderr, "listen: %s\n", uscm_last_error());
      abort();
    }
    // Waiting reads the C++ channel under the C one (queued()), as
    // ApiPair does: no poll(2) per scheduler step charged to the API.
    for (int h = 0; h < 2; ++h) {
      uscm_cm_id* probe;
      uscm_create_id(ch[h], &probe, nullptr, ps);
      cpp[h] = static_cast<CmId*>(probe->impl)->channel();
      uscm_destroy_id(probe);
    }
  }
  ~CApiPair() {
    uscm_destroy_id(listener);
    for (int h = 0; h < 2; ++h) {
      uscm_destroy_event_channel(ch[h]);
      uscm_device_unwrap_free(dev[h]);
    }
  }
  // The next event on host h's channel (must be `want`), acked; its id.
  uscm_cm_id* Next(int h, uscm_cm_event_type want) {
    sim::Scheduler& s = f->scheduler();
    EventChannel* c = cpp[h];
    (void)s.RunUntil([c] { return c->queued() > 0; }, s.Now() + mad::Duration::Seconds(120));
    uscm_cm_event* e = nullptr;
    if (uscm_get_cm_event(ch[h], &e) != 0 || e->event != want) {
      fprintf(stderr, "host %d: wanted %s: %s\n", h, uscm_event_str(want),
              e != nullptr ? uscm_event_str(e->event) : uscm_last_error());
      abort();
    }
    uscm_cm_id* id = e->id;
    uscm_ack_cm_event(e);
    return id;
  }
  // Runs until `n` events wait on host h, then takes them (each must be
  // `want`); their ids in `ids` (if given).
  void Drain(int h, size_t n, uscm_cm_event_type want, std::vector<uscm_cm_id*>* ids) {
    sim::Scheduler& s = f->scheduler();
    EventChannel* c = cpp[h];
    (void)s.RunUntil([c, n] { return c->queued() >= n; }, s.Now() + mad::Duration::Seconds(120));
    for (size_t i = 0; i < n; ++i) {
      uscm_cm_id* id = Next(h, want);
      if (ids != nullptr) ids->push_back(id);
    }
  }
  std::pair<uscm_cm_id*, uscm_cm_id*> Establish(uint32_t qpn) {
    uscm_cm_id* id;
    uscm_create_id(ch[0], &id, nullptr, ps);
    uscm_resolve_addr(id, nullptr, &dst, 2000);
    Next(0, USCM_CM_EVENT_ADDR_RESOLVED);
    uscm_resolve_route(id, 2000);
    Next(0, USCM_CM_EVENT_ROUTE_RESOLVED);
    uscm_conn_param cp{};
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    cp.qp_num = qpn;
    uscm_connect(id, &cp);
    uscm_cm_id* passive = Next(1, USCM_CM_EVENT_CONNECT_REQUEST);
    cp.qp_num = qpn + 0x100000;
    uscm_accept(passive, &cp);
    Next(0, USCM_CM_EVENT_CONNECT_RESPONSE);
    uscm_establish(id);
    Next(1, USCM_CM_EVENT_ESTABLISHED);
    return {id, passive};
  }
  uscm_port_space ps;
  std::unique_ptr<testing::SimFabric> f;
  uscm_device* dev[2];
  uscm_event_channel* ch[2];
  EventChannel* cpp[2];
  uscm_cm_id* listener;
  uscm_addr dst{};
};

void BM_CApiSimFabric(benchmark::State& state) {
  CApiPair p;
  uint32_t qpn = 1;
  for (auto _ : state) {
    auto [a, b] = p.Establish(qpn);
    qpn = (qpn + 1) & 0xFFFFF;
    uscm_disconnect(a);
    p.Next(1, USCM_CM_EVENT_DISCONNECTED);
    uscm_disconnect(b);
    p.Next(0, USCM_CM_EVENT_DISCONNECTED);
    uscm_destroy_id(a);
    uscm_destroy_id(b);
  }
  state.counters["conn/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["records"] = static_cast<double>(
      p.f->host(0).device->node().cm().connection_count() +
      p.f->host(1).device->node().cm().connection_count());
  state.counters["steps/conn"] = benchmark::Counter(
      static_cast<double>(p.f->scheduler().steps()), benchmark::Counter::kAvgIterations);
  state.counters["fd_syscalls/conn"] = benchmark::Counter(
      static_cast<double>(p.cpp[0]->fd_syscalls() + p.cpp[1]->fd_syscalls()),
      benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_CApiSimFabric);

// N connections in flight at once, each step taken for all of them before
// the events are read (a busy server): events that queue up while the
// application works cost no eventfd syscall (the fd is written on the empty
// -> non-empty transition and read when the queue drains).
void BM_CApiSimFabricBurst(benchmark::State& state) {
  CApiPair p;
  const size_t n = static_cast<size_t>(state.range(0));
  uint32_t qpn = 1;
  std::vector<uscm_cm_id*> active(n), passive;
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      uscm_create_id(p.ch[0], &active[i], nullptr, p.ps);
      uscm_resolve_addr(active[i], nullptr, &p.dst, 2000);
    }
    p.Drain(0, n, USCM_CM_EVENT_ADDR_RESOLVED, nullptr);
    for (uscm_cm_id* id : active) uscm_resolve_route(id, 2000);
    p.Drain(0, n, USCM_CM_EVENT_ROUTE_RESOLVED, nullptr);
    uscm_conn_param cp{};
    cp.retry_count = cp.rnr_retry_count = 7;
    for (uscm_cm_id* id : active) {
      cp.qp_num = qpn;
      qpn = (qpn + 1) & 0xFFFFF;
      uscm_connect(id, &cp);
    }
    passive.clear();
    p.Drain(1, n, USCM_CM_EVENT_CONNECT_REQUEST, &passive);
    for (uscm_cm_id* id : passive) {
      cp.qp_num = qpn | 0x100000;  // every data QP its own QPN
      qpn = (qpn + 1) & 0xFFFFF;
      uscm_accept(id, &cp);
    }
    p.Drain(0, n, USCM_CM_EVENT_CONNECT_RESPONSE, nullptr);
    for (uscm_cm_id* id : active) uscm_establish(id);
    p.Drain(1, n, USCM_CM_EVENT_ESTABLISHED, nullptr);
    for (uscm_cm_id* id : active) uscm_disconnect(id);
    p.Drain(1, n, USCM_CM_EVENT_DISCONNECTED, nullptr);
    for (uscm_cm_id* id : passive) uscm_disconnect(id);
    p.Drain(0, n, USCM_CM_EVENT_DISCONNECTED, nullptr);
    for (size_t i = 0; i < n; ++i) {
      uscm_destroy_id(active[i]);
      uscm_destroy_id(passive[i]);
    }
  }
  state.counters["conn/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n),
                                                benchmark::Counter::kIsRate);
  state.counters["steps/conn"] = benchmark::Counter(
      static_cast<double>(p.f->scheduler().steps()) / static_cast<double>(n),
      benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_CApiSimFabricBurst)->Arg(16);

constexpr int kHeld = 100000;

// Heap in use, including large blocks malloc served with mmap (the slot
// maps' vectors).
size_t HeapBytes() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

void BM_MemoryEndpoint(benchmark::State& state) {
  for (auto _ : state) {
    auto p = std::make_unique<EndpointPair>();
    const size_t before = HeapBytes();
    for (int i = 0; i < kHeld; ++i) {
      p->Connect(static_cast<uint32_t>(i + 1));
      p->Shuttle();
    }
    const size_t after = HeapBytes();
    if (p->established != kHeld) state.SkipWithError("not all connections established");
    state.counters["bytes/conn(both ends)"] = static_cast<double>(after - before) / kHeld;
    state.counters["bytes/conn(one end)"] = static_cast<double>(after - before) / kHeld / 2;
  }
}
BENCHMARK(BM_MemoryEndpoint)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_MemoryApi(benchmark::State& state) {
  for (auto _ : state) {
    ApiPair p(/*ib=*/true);
    p.Establish(0x7FFFF);  // warm the path cache and the queues
    const size_t before = HeapBytes();
    for (int i = 0; i < kHeld; ++i) {
      p.Establish(static_cast<uint32_t>(i + 1));
    }
    const size_t after = HeapBytes();
    state.counters["bytes/conn(both ends)"] = static_cast<double>(after - before) / kHeld;
    state.counters["bytes/conn(one end)"] = static_cast<double>(after - before) / kHeld / 2;
  }
}
BENCHMARK(BM_MemoryApi)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_MemoryCApi(benchmark::State& state) {
  for (auto _ : state) {
    CApiPair p(/*ib=*/true);
    p.Establish(0x7FFFF);  // warm the path cache and the queues
    const size_t before = HeapBytes();
    for (int i = 0; i < kHeld; ++i) {
      p.Establish(static_cast<uint32_t>(i + 1));
    }
    const size_t after = HeapBytes();
    state.counters["bytes/conn(both ends)"] = static_cast<double>(after - before) / kHeld;
    state.counters["bytes/conn(one end)"] = static_cast<double>(after - before) / kHeld / 2;
  }
}
BENCHMARK(BM_MemoryCApi)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace uscm
