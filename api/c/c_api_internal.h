// What the C API's files share (internal to api/c): the calling thread's last
// error, the handle tables under one mutex, and the errno mapping.
#ifndef USCM_API_C_C_API_INTERNAL_H_
#define USCM_API_C_C_API_INTERNAL_H_

#include <infiniband/verbs.h>

#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "api/c/uscm_cma.h"
#include "api/rdma_cm/rdma_cm.h"
#include "verbs/qp_transitions.h"

struct uscm_device {
  uscm::Device* dev;
};

namespace uscm::c_api {

extern thread_local std::string g_last_error;
extern std::mutex g_mu;  // guards Handles() and Qps()
extern const verbs::VerbsOps* g_verbs_ops;  // tests (uscm_set_verbs_ops_for_testing)

// CmId -> its C handle (created lazily for passive ids).
absl::flat_hash_map<CmId*, uscm_cm_id*>& Handles();

// The QP attached to an id (uscm_set_qp / uscm_create_qp).
struct QpSlot {
  std::unique_ptr<QpTransitioner> transitioner;
  ibv_qp* qp = nullptr;
  bool owned = false;  // uscm_create_qp: uscm_destroy_qp destroys it
};
absl::flat_hash_map<CmId*, QpSlot>& Qps();

// -1 with errno and uscm_last_error() set.
int Fail(int err, std::string msg);
// The status's errno payload (mad/status_errno.h), else its code's errno.
int Fail(const absl::Status& s);
int Result(const absl::Status& s);
// The C++ id of a live C handle; NULL (and Fail) for NULL or a stale one.
CmId* IdOf(uscm_cm_id* id, const char* call);
void FromAh(const AhAttr& in, uscm_ah_attr* a);

}  // namespace uscm::c_api

// The first line of a call on `id`: `c` is its C++ id, or the call fails.
#define USCM_ID(call)                              \
  uscm::CmId* c = uscm::c_api::IdOf(id, call);     \
  if (c == nullptr) return -1

#endif  // USCM_API_C_C_API_INTERNAL_H_
