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
// api_burst_bench.cc: N connections in flight, events taken as an epoll
// program takes them (BM_ApiSimFabricBurst, BM_CApiSimFabricBurst).
// dropin_bench.cc: the same through the drop-in librdmacm's own layer
// (BM_DropInSimFabric, BM_DropInSimFabricBurst).
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
#include "benchmark/benchmark.h"
#include "cm/endpoint.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/sim/topology.h"
#include "tests/bench/api_pairs.h"

namespace uscm {
namespace {

using bench::ApiPair;
using bench::CApiPair;
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
    p.Next(1, EventType::kDisconnected);
    (void)b->Disconnect();
    p.Next(0, EventType::kDisconnected);
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
