// The API connection pairs of cm_bench: two simulated hosts (10.0.0.1,
// 10.0.0.2) with a listener on host 1, connected through the rdma_cm-style
// C++ API (ApiPair) or the uscm C API (CApiPair). Shared by the
// one-at-a-time benches (cm_bench.cc) and the burst benches
// (api_burst_bench.cc), which live in the same binary so that every figure
// has the endpoint baseline of the same process.
#ifndef USCM_TESTS_BENCH_API_PAIRS_H_
#define USCM_TESTS_BENCH_API_PAIRS_H_

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "api/rdma_cm/rdma_cm_testing.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"

namespace uscm::bench {

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
  // The next event on host h's channel (must be `want`), taken as a C++
  // user takes it: GetEvent, read, AckEvent (the event goes back to the
  // channel with its buffers; moving it out would leave the channel's
  // recycled events without capacity and charge the API an allocation).
  CmId* Next(int h, EventType want) {
    sim::Scheduler& s = f->scheduler();
    EventChannel* c = f->host(h).channel.get();
    (void)s.RunUntil([c] { return c->queued() > 0; }, s.Now() + mad::Duration::Seconds(120));
    absl::StatusOr<Event*> e = c->GetEvent();
    if (!e.ok() || (*e)->event != want) {
      fprintf(stderr, "host %d: wanted %s: %s\n", h, EventTypeName(want),
              e.ok() ? EventTypeName((*e)->event) : std::string(e.status().message()).c_str());
      abort();
    }
    CmId* id = (*e)->id;
    (void)c->AckEvent(*e);
    return id;
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
    Next(0, EventType::kAddrResolved);
    (void)id->ResolveRoute();
    Next(0, EventType::kRouteResolved);
    ConnParam cp;
    cp.qp_num = qpn;
    (void)id->Connect(cp);
    CmId* passive = Next(1, EventType::kConnectRequest);
    ConnParam ap;
    ap.qp_num = qpn + 0x100000;
    (void)passive->Accept(ap);
    Next(0, EventType::kConnectResponse);
    (void)id->Establish();
    Next(1, EventType::kEstablished);
    return {id, passive};
  }
  PortSpace ps;
  std::unique_ptr<testing::SimFabric> f;
  CmId* listener;
  Address dst;
};


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


}  // namespace uscm::bench

#endif  // USCM_TESTS_BENCH_API_PAIRS_H_
