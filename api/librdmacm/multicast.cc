// The drop-in's multicast joins (librdmacm's struct cma_multicast): the join
// list of each id, the translation of a join's events and
// rdma_leave_multicast's wait for their acks. See ids.h JoinMulticast /
// LeaveMulticast.
#include <errno.h>
#include <infiniband/ib.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"

namespace uscm::librdmacm {

using internal::FindLocked;
using internal::g_mu;
using internal::Id;
using internal::IdState;
using internal::McJoin;

namespace {

// uscm's context of each join: never reused, so an event of a join already
// left that the pump finds later never names a newer one.
std::atomic<uint64_t> g_next_handle{1};

std::atomic<void (*)(void*)> g_leave_wait_hook{nullptr};
std::atomic<void*> g_leave_wait_hook_arg{nullptr};

// librdmacm's ucma_addrlen (the family was checked by ToUscmAddr).
size_t AddrLen(const sockaddr* addr) {
  switch (addr->sa_family) {
    case AF_INET:
      return sizeof(sockaddr_in);
    case AF_INET6:
      return sizeof(sockaddr_in6);
    default:
      return sizeof(sockaddr_ib);
  }
}

// librdmacm's ucma_complete_mc_event: the id's count and the join's.
void OnJoinAck(void* arg) {
  auto* join = static_cast<McJoin*>(arg);
  IdState* state = join->state;
  std::lock_guard<std::mutex> lock(state->mu);
  --state->unacked;
  --join->unacked;
  state->acked.notify_all();
}

bool OfJoin(const rdma_cm_event& e, const void* join) { return AckArgOf(e) == join; }

// Takes the join of `addr` off `id`'s list (NULL: none).
std::unique_ptr<McJoin> TakeJoinLocked(Id* id, const sockaddr* addr) {
  const size_t len = AddrLen(addr);
  auto& joins = id->state->joins;
  for (auto it = joins.begin(); it != joins.end(); ++it) {
    if ((*it)->addr_len != len || memcmp(&(*it)->addr, addr, len) != 0) continue;
    std::unique_ptr<McJoin> join = std::move(*it);
    joins.erase(it);
    return join;
  }
  return nullptr;
}

}  // namespace

namespace internal {

McJoin* JoinOfLocked(Id* id, const void* handle) {
  for (const auto& join : id->state->joins) {
    if (reinterpret_cast<const void*>(join->handle) == handle) return join.get();
  }
  return nullptr;
}

void QueueForJoin(McJoin* join, rdma_event_channel* target, const rdma_cm_event& ev) {
  {
    std::lock_guard<std::mutex> lock(join->state->mu);
    ++join->state->unacked;
    ++join->unacked;
  }
  if (QueueEventWithAck(target, ev, nullptr, 0, OnJoinAck, join) != 0) {
    OnJoinAck(join);  // not queued (errno and USCM_DEBUG said why)
  }
}

}  // namespace internal

int JoinMulticast(const char* call, rdma_cm_id* pub, const sockaddr* addr, void* context,
                  const std::function<int(uscm_cm_id*, void* handle)>& join) {
  if (addr == nullptr) {  // rdma_join_multicast_ex without one: uscm refuses it (EINVAL)
    return ForId(call, pub, [&](uscm_cm_id* uid) { return join(uid, nullptr); }) != 0
               ? -1
               : CompleteCall(pub, call);
  }
  const uint64_t handle = g_next_handle.fetch_add(1);
  {
    // Listed before uscm's join, as librdmacm links its mc first: the pump
    // may move the join's event before the call returns.
    std::lock_guard<std::mutex> lock(g_mu);
    Id* id = FindLocked(pub);
    if (id == nullptr) return internal::NotAnIdLocked(call, pub);
    auto j = std::make_unique<McJoin>();
    j->state = id->state;
    j->handle = handle;
    j->context = context;
    j->addr_len = AddrLen(addr);
    memcpy(&j->addr, addr, j->addr_len);
    id->state->joins.push_back(std::move(j));
  }
  void* uscm_context = reinterpret_cast<void*>(handle);
  if (ForId(call, pub, [&](uscm_cm_id* uid) { return join(uid, uscm_context); }) != 0) {
    const int err = errno;
    std::lock_guard<std::mutex> lock(g_mu);
    if (Id* id = FindLocked(pub); id != nullptr) {
      std::erase_if(id->state->joins, [&](const auto& j) { return j->handle == handle; });
    }
    errno = err;
    return -1;
  }
  return CompleteCall(pub, call);
}

int LeaveMulticast(rdma_cm_id* pub, const sockaddr* addr, const uscm_addr& group) {
  std::unique_ptr<McJoin> join;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Id* id = FindLocked(pub);
    if (id == nullptr) return internal::NotAnIdLocked("rdma_leave_multicast", pub);
    // Off the list first: an event of the join the pump finds from now on
    // is dropped (JoinOfLocked), none is queued for it any more.
    join = TakeJoinLocked(id, addr);
  }
  if (join == nullptr) {
    return Fail(EADDRNOTAVAIL, "rdma_leave_multicast", "the id has not joined that address");
  }
  // uscm leaves the group and detaches the id's QP (librdmacm's
  // ibv_detach_mcast, the kernel's rdma_leave_multicast).
  const int rc = ForId("rdma_leave_multicast", pub,
                       [&](uscm_cm_id* uid) { return uscm_leave_multicast(uid, &group); });
  const int err = errno;
  // Synchronous mode keeps the join's event in id->event, unacked: librdmacm
  // would wait for it forever; the drop-in acks it, as rdma_destroy_id does.
  if (pub->event != nullptr && AckArgOf(*pub->event) == join.get()) {
    rdma_ack_cm_event(pub->event);
    pub->event = nullptr;
  }
  // The kernel's ucma_cleanup_mc_events: the join's undelivered events go;
  // then, as librdmacm (events_completed < events_reported), the wait for
  // the ones the program took, even when uscm's leave failed (they point at
  // the join).
  DropEvents(pub->channel, OfJoin, join.get());
  std::unique_lock<std::mutex> lock(join->state->mu);
  if (join->unacked != 0) {
    if (auto* hook = g_leave_wait_hook.load()) {
      lock.unlock();
      hook(g_leave_wait_hook_arg.load());
      lock.lock();
    }
    join->state->acked.wait(lock, [&] { return join->unacked == 0; });
  }
  lock.unlock();
  errno = err;
  return rc;
}

void SetLeaveWaitHookForTesting(void (*fn)(void* arg), void* arg) {
  g_leave_wait_hook_arg.store(arg);
  g_leave_wait_hook.store(fn);
}

}  // namespace uscm::librdmacm
