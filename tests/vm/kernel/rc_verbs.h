// The verbs side of the kernel-interop driver: one device context, PD, CQ and
// RC QP, registered buffers, posting and polling with readable errors.
// Written here because verbs/ had no RC resource helper when this lane was
// built; it holds only what the rping / ucmatose data protocols need.
#ifndef USCM_TESTS_VM_KERNEL_RC_VERBS_H_
#define USCM_TESTS_VM_KERNEL_RC_VERBS_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"

namespace uscm::vmtest {

struct RcBuffer {
  std::vector<uint8_t> bytes;
  ibv_mr* mr = nullptr;
  uint64_t addr() const { return reinterpret_cast<uintptr_t>(bytes.data()); }
};

class RcVerbs {
 public:
  // Opens `ca_name` and creates a PD, one CQ for sends and receives, and an
  // RC QP in RESET with `depth` send and receive work requests.
  static absl::StatusOr<std::unique_ptr<RcVerbs>> Open(const std::string& ca_name, int depth);
  ~RcVerbs();
  RcVerbs(const RcVerbs&) = delete;
  RcVerbs& operator=(const RcVerbs&) = delete;

  ibv_qp* qp() const { return qp_; }
  // The active MTU of port `port_num` (ibv_query_port); IBV_MTU_1024 if the
  // query fails.
  ibv_mtu ActiveMtu(uint8_t port_num) const;
  // Registers a zeroed buffer of `size` bytes with `access` (IBV_ACCESS_*).
  absl::StatusOr<RcBuffer*> Register(size_t size, int access);

  absl::Status PostRecv(const RcBuffer& b, uint32_t length, uint64_t wr_id);
  absl::Status PostSend(const RcBuffer& b, uint32_t length, uint64_t wr_id);
  // IBV_WR_RDMA_READ / IBV_WR_RDMA_WRITE between `b` and (remote_addr, rkey).
  absl::Status PostRdma(ibv_wr_opcode opcode, const RcBuffer& b, uint32_t length,
                        uint64_t remote_addr, uint32_t rkey, uint64_t wr_id);
  // One completion if there is one. A failed completion is an error naming
  // its status and opcode, except IBV_WC_WR_FLUSH_ERR (the QP went to ERROR,
  // e.g. at disconnect): that one is returned for the caller to count.
  absl::StatusOr<absl::optional<ibv_wc>> PollOne();

 private:
  RcVerbs() = default;
  absl::Status Post(ibv_send_wr& wr, const char* what);

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::vector<std::unique_ptr<RcBuffer>> buffers_;
};

}  // namespace uscm::vmtest

#endif  // USCM_TESTS_VM_KERNEL_RC_VERBS_H_
