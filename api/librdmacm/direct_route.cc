// rdma_resolve_route where the route needs no SA query (RoCE: the path from
// the two IPs; the IB_PATH option). See ids.h ResolveRouteDirect.
//
// Through ForId the call took the library's lock twice, the C API's lookup
// five times (resolve, getname, getpeer, get_route, the event's handle), the
// device's lock five times, and the event went through the port's uscm
// channel before the pump copied it to the program's: ~0.8 us of CPU per id
// natively, ~50 us under TCG (docs/API.md "The floor under the
// resolve-route step"). Here: one lookup under the library's lock, one C API
// call under the device's lock, one event onto the program's channel.
#include <errno.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"

namespace uscm::librdmacm {
namespace {

std::atomic<bool> g_direct{true};      // SetDirectRoutesForTesting
std::atomic<uint64_t> g_direct_routes{0};

}  // namespace

int ResolveRouteDirect(rdma_cm_id* pub, bool* done, bool* sync) {
  using namespace internal;
  *done = false;
  if (!g_direct.load(std::memory_order_relaxed)) return 0;
  std::lock_guard<std::mutex> lock(g_mu);
  Id* id = FindLocked(pub);
  // No port yet (never resolved: EINVAL), or not an id of ours: ForId's
  // path says so.
  if (id == nullptr || id->state->uid == nullptr) return 0;
  uscm_path path;
  const int r = uscm_resolve_route_now(id->state->uid, &path);
  if (r < 0) return UscmFailed("rdma_resolve_route");
  if (r == 0) return 0;  // the SA's: through ForId
  // An event of the id still on its port's channel (an ADDR_RESOLVED that
  // the resolver thread queued after the neighbour answered) goes first.
  if (AnyOpenChannelQueued() && PumpEventsLocked() < 0) return -1;
  // What librdmacm's ucma_query_route reads back on ROUTE_RESOLVED: the
  // path; the addresses are ADDR_RESOLVED's (its Forward filled them, pumped
  // just above if it was still queued), which resolve_route leaves as they are.
  FillRouteFrom(id, path);
  // As the kernel's (cma_resolve_iboe_route's work item is zeroed): no
  // listen_id, status 0, param all zero.
  rdma_cm_event ev = {};
  ev.id = pub;
  ev.event = RDMA_CM_EVENT_ROUTE_RESOLVED;
  QueueForId(id, pub->channel, ev, nullptr, 0);
  g_direct_routes.fetch_add(1, std::memory_order_relaxed);
  *done = true;
  *sync = id->state->sync;
  return 0;
}

uint64_t DirectRoutes() { return g_direct_routes.load(std::memory_order_relaxed); }

void SetDirectRoutesForTesting(bool on) { g_direct.store(on, std::memory_order_relaxed); }

}  // namespace uscm::librdmacm
