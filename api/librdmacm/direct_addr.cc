// rdma_resolve_addr where the address resolves within the call (RoCE with no
// neighbour resolution to wait for, AF_IB). See ids.h ResolveAddrDirect.
//
// Through ForId the call took the library's lock four times (the backend,
// the id's place, the call, CompleteCall), uscm queued ADDR_RESOLVED on the
// port's channel and the pump moved it to the program's (Forward: the id's
// lookups by uscm id, two more C API calls for the addresses, the
// translation of its param). Here, under the library's lock taken once: the
// id looked up, one C API call (the addresses come back with it), the id
// filled and ADDR_RESOLVED queued straight onto the program's channel, as
// ROUTE_RESOLVED is (direct_route.cc).
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/convert.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"

namespace uscm::librdmacm {
namespace {

std::atomic<bool> g_direct{true};  // SetDirectAddrsForTesting
std::atomic<uint64_t> g_direct_addrs{0};

}  // namespace

int ResolveAddrDirect(rdma_cm_id* pub, const uscm_addr* src, const uscm_addr& dst, int timeout_ms,
                      bool* done, bool* sync) {
  using namespace internal;
  *done = false;
  if (!g_direct.load(std::memory_order_relaxed)) return 0;
  // The library's lock is held across uscm's call, as ResolveRouteDirect
  // holds it (the same order: the library's, the C API's, the device's):
  // one look-up of the id, and none of it can change meanwhile. uscm asks
  // the kernel's neighbour table without waiting (a zero timeout), and at
  // most once a second for one source and destination.
  std::lock_guard<std::mutex> lock(g_mu);
  Id* id = FindLocked(pub);
  // Not on a device yet (created, or bound to a wildcard): the old path
  // places it on the port of its source first. Not an id of ours: it says so.
  if (id == nullptr || id->state->uid == nullptr || pub->port_num == 0) return 0;
  uscm_addr local, peer;
  const int r = uscm_resolve_addr_now(id->state->uid, src, &dst, timeout_ms, &local, &peer);
  if (r < 0) return UscmFailed("rdma_resolve_addr");
  *done = true;
  *sync = id->state->sync;
  // An event of the call (ADDR_ERROR at once) or of other ids on the port's
  // channel: to the programs' channels first, as ForId does.
  if (r == 0 || AnyOpenChannelQueued()) PumpEventsLocked();
  if (r == 0) {
    // uscm's event follows. As librdmacm: the destination shows in
    // id->route when the call returns.
    ToSockaddr(dst, &pub->route.addr.dst_storage);
    return 0;
  }
  // What librdmacm's ucma_process_addr reads back on ADDR_RESOLVED (as the
  // pump's Forward): the device, port and PD, the two addresses (the
  // destination's with it) and GIDs.
  AttachDevice(id);
  FillAddrsFrom(id, &local, &peer);
  // As the kernel's addr_handler: status 0, no listen_id, param all zero.
  rdma_cm_event ev = {};
  ev.id = pub;
  ev.event = RDMA_CM_EVENT_ADDR_RESOLVED;
  QueueForId(id, pub->channel, ev, nullptr, 0);
  g_direct_addrs.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

uint64_t DirectAddrs() { return g_direct_addrs.load(std::memory_order_relaxed); }

void SetDirectAddrsForTesting(bool on) { g_direct.store(on, std::memory_order_relaxed); }

}  // namespace uscm::librdmacm
