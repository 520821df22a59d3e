// Heap allocations counted in a test binary: a replacement operator new
// (alloc_counter.cc, linked into the binary by this library) counts while
// counting is on. What the API layers allocate per connection or per event
// (steady_state_test, c_api_allocs_test) is measured with it.
#ifndef USCM_API_RDMA_CM_ALLOC_COUNTER_H_
#define USCM_API_RDMA_CM_ALLOC_COUNTER_H_

namespace uscm::testing {

// operator new calls while counting was on, since the program started.
unsigned long long Allocations();

// Runs `f` with counting on; its result is returned.
void SetCountingAllocations(bool on);
template <typename F>
auto Counted(F f) {
  struct Off {
    ~Off() { SetCountingAllocations(false); }
  } off;
  SetCountingAllocations(true);
  return f();
}

}  // namespace uscm::testing

#endif  // USCM_API_RDMA_CM_ALLOC_COUNTER_H_
