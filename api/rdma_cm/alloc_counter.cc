#include "api/rdma_cm/alloc_counter.h"

#include <cstdlib>
#include <new>

namespace {
bool g_counting = false;
unsigned long long g_allocations = 0;
}  // namespace

void* operator new(size_t n) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// The nothrow form too: natively libstdc++'s calls the one above, but under
// ASan the runtime's own would allocate what ours then frees (a mismatch).
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (g_counting) ++g_allocations;
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace uscm::testing {

unsigned long long Allocations() { return g_allocations; }
void SetCountingAllocations(bool on) { g_counting = on; }

}  // namespace uscm::testing
