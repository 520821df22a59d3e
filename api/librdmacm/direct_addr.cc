// rdma_resolve_addr where the address resolves within the call (RoCE with no
// neighbour resolution to wait for, AF_IB). See ids.h AddrResolvedDirect.
//
// Through the port's channel, uscm queued ADDR_RESOLVED there and the pump
// moved it to the program's (Forward: the id's lookups by uscm id, the
// translation of its param); cmtime's resolve-addr step was 1.2-1.4x the
// kernel's warm one in a TCG VM (docs/API.md "The direct paths of
// rdma_resolve_addr and rdma_resolve_route"). Here uscm only sets the id's
// address (uscm_resolve_addr_now) and the event goes straight onto the
// program's channel, as ROUTE_RESOLVED does (direct_route.cc).
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"

namespace uscm::librdmacm {
namespace {

std::atomic<bool> g_direct{true};  // SetDirectAddrsForTesting
std::atomic<uint64_t> g_direct_addrs{0};

}  // namespace

bool DirectAddrsOn() { return g_direct.load(std::memory_order_relaxed); }

void AddrResolvedDirect(rdma_cm_id* pub) {
  using namespace internal;
  std::lock_guard<std::mutex> lock(g_mu);
  Id* id = FindLocked(pub);
  if (id == nullptr) return;  // destroyed by another thread meanwhile: no event
  // What librdmacm's ucma_process_addr reads back on ADDR_RESOLVED (as the
  // pump's Forward): the device, port and PD, the two addresses and GIDs.
  AttachDevice(id);
  FillAddrs(id);
  // As the kernel's addr_handler: status 0, no listen_id, param all zero.
  rdma_cm_event ev = {};
  ev.id = pub;
  ev.event = RDMA_CM_EVENT_ADDR_RESOLVED;
  QueueForId(id, pub->channel, ev, nullptr, 0);
  g_direct_addrs.fetch_add(1, std::memory_order_relaxed);
}

uint64_t DirectAddrs() { return g_direct_addrs.load(std::memory_order_relaxed); }

void SetDirectAddrsForTesting(bool on) { g_direct.store(on, std::memory_order_relaxed); }

}  // namespace uscm::librdmacm
