// Bursts: N connections in flight at once through the API, with the event
// channel's fd in use, taken the way an epoll program takes them (cmtime,
// libfabric, UCX): the fabric runs until the N events of a step wait on the
// channel (a busy server: they queue while it works), then the program
// makes one poll(2) on the channel's fd (its epoll_wait) and gets events
// until EAGAIN. Part of cm_bench (same process as the endpoint baseline).
//
//   BM_ApiSimFabricBurst/N   the C++ API (uscm::EventChannel, fd() in use)
//   BM_CApiSimFabricBurst/N  the uscm C API (uscm_get_cm_event until EAGAIN)
//
// `syscalls/conn` counts every syscall the program and the channels make
// for the events: the channels' eventfd reads and writes (fd_syscalls) and
// the program's polls. Two per batch when the layers add nothing per event.
#include <poll.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "benchmark/benchmark.h"
#include "tests/bench/api_pairs.h"

namespace uscm {
namespace {

using bench::ApiPair;
using bench::CApiPair;

[[noreturn]] void Die(const char* what, int h, const char* detail) {
  fprintf(stderr, "host %d: %s: %s\n", h, what, detail);
  abort();
}

// The program's epoll_wait: one poll(2) on `fd`, which must be readable.
void PollReadable(int fd, int h, uint64_t* polls) {
  pollfd p{fd, POLLIN, 0};
  ++*polls;
  if (poll(&p, 1, 0) != 1 || (p.revents & POLLIN) == 0) {
    Die("poll", h, "the channel's fd is not readable with events queued");
  }
}

struct CppBurst {
  ApiPair p;
  int fd[2];
  uint64_t polls = 0;

  CppBurst() {
    for (int h = 0; h < 2; ++h) fd[h] = p.f->host(h).channel->fd();
  }
  // Runs until n events wait on host h, then takes them all (each must be
  // `want`): poll, then GetEvent until it says none is queued.
  void Drain(int h, size_t n, EventType want, std::vector<CmId*>* ids) {
    sim::Scheduler& s = p.f->scheduler();
    EventChannel* c = p.f->host(h).channel.get();
    (void)s.RunUntil([c, n] { return c->queued() >= n; }, s.Now() + mad::Duration::Seconds(120));
    PollReadable(fd[h], h, &polls);
    size_t got = 0;
    for (;;) {
      absl::StatusOr<Event*> e = c->GetEvent();
      if (!e.ok()) break;
      if ((*e)->event != want) Die("wanted", h, EventTypeName((*e)->event));
      if (ids != nullptr) ids->push_back((*e)->id);
      (void)c->AckEvent(*e);
      ++got;
    }
    if (got != n) Die("burst", h, "fewer events than connections");
  }
  uint64_t syscalls() const {
    return p.f->host(0).channel->fd_syscalls() + p.f->host(1).channel->fd_syscalls() + polls;
  }
};

void BM_ApiSimFabricBurst(benchmark::State& state) {
  CppBurst b;
  ApiPair& p = b.p;
  const size_t n = static_cast<size_t>(state.range(0));
  EventChannel& c0 = *p.f->host(0).channel;
  EventChannel& c1 = *p.f->host(1).channel;
  uint32_t qpn = 1;
  std::vector<CmId*> active(n), passive;
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      active[i] = *c0.CreateId(nullptr, p.ps);
      (void)active[i]->ResolveAddr(absl::nullopt, p.dst);
    }
    b.Drain(0, n, EventType::kAddrResolved, nullptr);
    for (CmId* id : active) (void)id->ResolveRoute();
    b.Drain(0, n, EventType::kRouteResolved, nullptr);
    ConnParam cp;
    for (CmId* id : active) {
      cp.qp_num = qpn;
      qpn = (qpn + 1) & 0xFFFFF;
      (void)id->Connect(cp);
    }
    passive.clear();
    b.Drain(1, n, EventType::kConnectRequest, &passive);
    for (CmId* id : passive) {
      cp.qp_num = qpn | 0x100000;  // every data QP its own QPN
      qpn = (qpn + 1) & 0xFFFFF;
      (void)id->Accept(cp);
    }
    b.Drain(0, n, EventType::kConnectResponse, nullptr);
    for (CmId* id : active) (void)id->Establish();
    b.Drain(1, n, EventType::kEstablished, nullptr);
    for (CmId* id : active) (void)id->Disconnect();
    b.Drain(1, n, EventType::kDisconnected, nullptr);
    for (CmId* id : passive) (void)id->Disconnect();
    b.Drain(0, n, EventType::kDisconnected, nullptr);
    for (size_t i = 0; i < n; ++i) {
      (void)c0.DestroyId(active[i]);
      (void)c1.DestroyId(passive[i]);
    }
  }
  const double conns = static_cast<double>(state.iterations() * n);
  state.counters["conn/s"] = benchmark::Counter(conns, benchmark::Counter::kIsRate);
  state.counters["steps/conn"] = static_cast<double>(p.f->scheduler().steps()) / conns;
  state.counters["syscalls/conn"] = static_cast<double>(b.syscalls()) / conns;
}
BENCHMARK(BM_ApiSimFabricBurst)->Arg(16)->Arg(64)->Arg(256);

struct CBurst {
  CApiPair p;
  uint64_t polls = 0;

  // As CppBurst::Drain, through the C API: uscm_get_cm_event until EAGAIN.
  void Drain(int h, size_t n, uscm_cm_event_type want, std::vector<uscm_cm_id*>* ids) {
    sim::Scheduler& s = p.f->scheduler();
    EventChannel* c = p.cpp[h];
    (void)s.RunUntil([c, n] { return c->queued() >= n; }, s.Now() + mad::Duration::Seconds(120));
    PollReadable(p.ch[h]->fd, h, &polls);
    size_t got = 0;
    for (;;) {
      uscm_cm_event* e = nullptr;
      if (uscm_get_cm_event(p.ch[h], &e) != 0) {
        if (errno != EAGAIN) Die("get_cm_event", h, uscm_last_error());
        break;
      }
      if (e->event != want) Die("wanted", h, uscm_event_str(e->event));
      if (ids != nullptr) ids->push_back(e->id);
      uscm_ack_cm_event(e);
      ++got;
    }
    if (got != n) Die("burst", h, "fewer events than connections");
  }
  uint64_t syscalls() const { return p.cpp[0]->fd_syscalls() + p.cpp[1]->fd_syscalls() + polls; }
};

void BM_CApiSimFabricBurst(benchmark::State& state) {
  CBurst b;
  CApiPair& p = b.p;
  const size_t n = static_cast<size_t>(state.range(0));
  uint32_t qpn = 1;
  std::vector<uscm_cm_id*> active(n), passive;
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      uscm_create_id(p.ch[0], &active[i], nullptr, p.ps);
      uscm_resolve_addr(active[i], nullptr, &p.dst, 2000);
    }
    b.Drain(0, n, USCM_CM_EVENT_ADDR_RESOLVED, nullptr);
    for (uscm_cm_id* id : active) uscm_resolve_route(id, 2000);
    b.Drain(0, n, USCM_CM_EVENT_ROUTE_RESOLVED, nullptr);
    uscm_conn_param cp{};
    cp.retry_count = cp.rnr_retry_count = 7;
    for (uscm_cm_id* id : active) {
      cp.qp_num = qpn;
      qpn = (qpn + 1) & 0xFFFFF;
      uscm_connect(id, &cp);
    }
    passive.clear();
    b.Drain(1, n, USCM_CM_EVENT_CONNECT_REQUEST, &passive);
    for (uscm_cm_id* id : passive) {
      cp.qp_num = qpn | 0x100000;
      qpn = (qpn + 1) & 0xFFFFF;
      uscm_accept(id, &cp);
    }
    b.Drain(0, n, USCM_CM_EVENT_CONNECT_RESPONSE, nullptr);
    for (uscm_cm_id* id : active) uscm_establish(id);
    b.Drain(1, n, USCM_CM_EVENT_ESTABLISHED, nullptr);
    for (uscm_cm_id* id : active) uscm_disconnect(id);
    b.Drain(1, n, USCM_CM_EVENT_DISCONNECTED, nullptr);
    for (uscm_cm_id* id : passive) uscm_disconnect(id);
    b.Drain(0, n, USCM_CM_EVENT_DISCONNECTED, nullptr);
    for (size_t i = 0; i < n; ++i) {
      uscm_destroy_id(active[i]);
      uscm_destroy_id(passive[i]);
    }
  }
  const double conns = static_cast<double>(state.iterations() * n);
  state.counters["conn/s"] = benchmark::Counter(conns, benchmark::Counter::kIsRate);
  state.counters["steps/conn"] = static_cast<double>(p.f->scheduler().steps()) / conns;
  state.counters["syscalls/conn"] = static_cast<double>(b.syscalls()) / conns;
}
BENCHMARK(BM_CApiSimFabricBurst)->Arg(16)->Arg(64)->Arg(256);

}  // namespace
}  // namespace uscm
