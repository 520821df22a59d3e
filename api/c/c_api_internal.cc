// State and helpers the C API's files share (api/c/c_api_internal.h).
#include "api/c/c_api_internal.h"

#include <cerrno>
#include <cstring>

#include "mad/status_errno.h"

namespace uscm::c_api {

thread_local std::string g_last_error;
std::mutex g_mu;
const verbs::VerbsOps* g_verbs_ops = nullptr;

absl::flat_hash_map<CmId*, uscm_cm_id*>& Handles() {
  static auto* m = new absl::flat_hash_map<CmId*, uscm_cm_id*>();
  return *m;
}

absl::flat_hash_map<CmId*, QpSlot>& Qps() {
  static auto* m = new absl::flat_hash_map<CmId*, QpSlot>();
  return *m;
}

int Fail(int err, std::string msg) {
  g_last_error = std::move(msg);
  errno = err;
  return -1;
}

int Fail(const absl::Status& s) {
  int err = EINVAL;
  if (const int carried = mad::ErrnoOf(s); carried != 0) {
    return Fail(carried, std::string(s.message()));  // as the kernel reports it
  }
  switch (s.code()) {
    case absl::StatusCode::kFailedPrecondition:
      err = s.message().find("not acked") != absl::string_view::npos ? EBUSY : EINVAL;
      break;
    case absl::StatusCode::kAlreadyExists: err = EADDRINUSE; break;
    case absl::StatusCode::kPermissionDenied: err = EACCES; break;  // uscmd: port < 1024
    case absl::StatusCode::kNotFound: err = s.message().find("leave") == 0 ? EADDRNOTAVAIL : ENOENT; break;
    case absl::StatusCode::kUnavailable: err = EAGAIN; break;
    case absl::StatusCode::kResourceExhausted: err = ENOMEM; break;
    case absl::StatusCode::kDeadlineExceeded: err = ETIMEDOUT; break;
    case absl::StatusCode::kUnimplemented: err = 524; break;  // the kernel's ENOTSUPP (RoCE v2 IPv6 group)
    default: break;
  }
  return Fail(err, std::string(s.message()));
}

int Result(const absl::Status& s) {
  if (!s.ok()) return Fail(s);
  return 0;
}

CmId* IdOf(uscm_cm_id* id, const char* call) {
  if (id == nullptr) {
    Fail(EINVAL, std::string(call) + ": id is NULL");
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  CmId* impl = static_cast<CmId*>(id->impl);
  auto it = Handles().find(impl);
  if (it == Handles().end() || it->second != id) {
    Fail(EINVAL, std::string(call) + ": unknown id (destroyed, or not from uscm_create_id)");
    return nullptr;
  }
  return impl;
}

void FromAh(const AhAttr& in, uscm_ah_attr* a) {
  std::memcpy(a->dgid, in.dgid.raw.data(), 16);
  a->flow_label = in.flow_label;
  a->hop_limit = in.hop_limit;
  a->traffic_class = in.traffic_class;
  a->is_global = in.is_global;
  a->dlid = in.dlid;
  a->sl = in.sl;
  a->static_rate = in.static_rate;
  a->port_num = in.port_num;
  a->sgid_index = in.sgid_index;
}

}  // namespace uscm::c_api
