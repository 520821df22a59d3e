// The ids in a child of fork(): those made before the fork are the parent's
// (fork_locks.h ForkGeneration), refused with EACCES as the kernel refuses a
// child's use of its parent's rdma_cm fd, and left to the parent.
#include <rdma/rdma_cma.h>

#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm::internal {

int NotAnIdLocked(const char* call, rdma_cm_id* pub) {
  auto it = ByPublic().find(pub);
  if (it != ByPublic().end() && !it->second->state->OfThisProcess()) {
    return Fail(EACCES, call,
                "an id of the parent process, made before fork(): a child makes its own (the "
                "kernel refuses a child's use of the parent's rdma_cm fd)");
  }
  return Fail(EINVAL, call, "not an id of rdma_create_id (or destroyed)");
}

void LeaveToParentInChildLocked() {
  ByUscmId().clear();
  ForgetWildcardIdsInChildLocked();
  LeaveOpenedPortsToParentLocked();
}

}  // namespace uscm::librdmacm::internal
