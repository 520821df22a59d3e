// Heap allocations per connection through the rdma_cm-style C++ API on the
// simulated fabric (the shape of BM_ApiSimFabric/fd:0, the same ApiPair):
// every operator new of the process is counted (a replacement operator new
// here: the CM, the simulator and the harness too), after a warm-up that
// fills the channels' spare events, the slot maps and the scheduler's
// buffers. api/rdma_cm:steady_state_test counts the API layer's alone.
//
//   bazel run -c opt //tests/bench:api_allocs -- [connections]
#include <cstdio>
#include <cstdlib>
#include <new>

#include "tests/bench/api_pairs.h"

namespace {
unsigned long long g_allocs = 0;
}

void* operator new(size_t n) {
  ++g_allocs;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 10000;
  uscm::bench::ApiPair p;
  auto one = [&p](uint32_t qpn) {
    auto [a, b] = p.Establish(qpn);
    (void)a->Disconnect();
    p.Next(1, uscm::EventType::kDisconnected);
    (void)b->Disconnect();
    p.Next(0, uscm::EventType::kDisconnected);
    (void)p.f->host(0).channel->DestroyId(a);
    (void)p.f->host(1).channel->DestroyId(b);
  };
  for (int i = 0; i < 2000; ++i) one(static_cast<uint32_t>(i + 1));
  const unsigned long long before = g_allocs;
  const uint64_t steps_before = p.f->scheduler().steps();
  for (int i = 0; i < n; ++i) one(static_cast<uint32_t>(i + 1));
  printf("connections %d: %.2f allocations, %.2f steps per connection\n", n,
         static_cast<double>(g_allocs - before) / n,
         static_cast<double>(p.f->scheduler().steps() - steps_before) / n);
  return 0;
}
