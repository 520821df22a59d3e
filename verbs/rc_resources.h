// The verbs resources of one RC connection: device context, PD, one CQ with a
// completion channel, one registered buffer and an RC QP (left in RESET: the
// CM moves it through INIT/RTR/RTS, see RcQpTransitioner), plus post/poll.
//
// Errors name the cause and the fix: no RDMA device (NotFound: load a driver,
// Soft-RoCE `rdma link add`), no permission on /dev/infiniband/uverbs*
// (PermissionDenied: root, the rdma group or a udev rule), memory registration
// refused (ResourceExhausted: `ulimit -l`). The verbs calls go through a small
// function table so those paths are tested without a device.
#ifndef USCM_VERBS_RC_RESOURCES_H_
#define USCM_VERBS_RC_RESOURCES_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cm/qp_transitioner.h"
#include "mad/time.h"
#include "verbs/qp_transitions.h"

namespace uscm::verbs {

struct RcOptions {
  std::string device;          // "" = the first device
  uint8_t port_num = 1;
  size_t buffer_bytes = 64 * 1024;
  uint32_t queue_depth = 16;   // send and receive queue, CQ twice that
};

// The device-finding verbs calls of RcResources::Open; tests replace them to
// reach the "no device" and "no permission" paths without a device.
struct RcVerbs {
  ibv_device** (*get_device_list)(int*) = &ibv_get_device_list;
  void (*free_device_list)(ibv_device**) = &ibv_free_device_list;
  const char* (*device_name)(ibv_device*) = &ibv_get_device_name;
  ibv_context* (*open_device)(ibv_device*) = &ibv_open_device;
};

struct Completion {
  uint64_t wr_id = 0;
  ibv_wc_opcode opcode = IBV_WC_SEND;
  uint32_t byte_len = 0;
};

class RcResources {
 public:
  static absl::StatusOr<std::unique_ptr<RcResources>> Open(const RcOptions& options,
                                                           const RcVerbs& verbs = {});
  ~RcResources();
  RcResources(const RcResources&) = delete;
  RcResources& operator=(const RcResources&) = delete;

  ibv_qp* qp() const { return qp_; }
  uint32_t qp_num() const { return qp_->qp_num; }
  const std::string& device_name() const { return device_name_; }
  uint8_t port_num() const { return port_num_; }
  ibv_mtu active_mtu() const { return active_mtu_; }
  std::span<uint8_t> buffer() { return buffer_; }
  uint64_t buffer_addr() const { return reinterpret_cast<uintptr_t>(buffer_.data()); }
  uint32_t rkey() const;

  // Work requests on [offset, offset + length) of the buffer. InvalidArgument
  // when the range is outside it.
  absl::Status PostRecv(size_t offset, size_t length, uint64_t wr_id);
  absl::Status PostSend(size_t offset, size_t length, uint64_t wr_id);
  absl::Status PostWrite(size_t offset, size_t length, uint64_t remote_addr, uint32_t rkey,
                         uint64_t wr_id);
  // The next completion, waiting up to `timeout` on the completion channel.
  // An error completion is returned as an error naming the status and wr_id;
  // DeadlineExceeded when none arrived.
  absl::StatusOr<Completion> WaitCompletion(mad::Duration timeout);
  // ibv_query_qp: the QP's current state.
  absl::StatusOr<ibv_qp_state> State() const;

 private:
  RcResources() = default;
  absl::Status CheckRange(size_t offset, size_t length) const;

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::vector<uint8_t> buffer_;
  std::string device_name_;
  uint8_t port_num_ = 1;
  ibv_mtu active_mtu_ = IBV_MTU_1024;
};

// The QpTransitioner the CM drives (CmId::SetQp) for an RcResources QP: a
// VerbsQp (the CM's attributes mapped by ToIbvQpAttr) with the path MTU capped
// to the port's active MTU, as the kernel's rdma_cm does on RoCE (the netdev's
// MTU bounds the packets; a REQ may carry a larger MTU).
class RcQpTransitioner final : public QpTransitioner {
 public:
  static absl::StatusOr<std::unique_ptr<RcQpTransitioner>> Create(ibv_qp* qp, uint8_t sgid_index,
                                                                  ibv_mtu active_mtu,
                                                                  VerbsOps ops = {});
  uint32_t qp_num() const override { return qp_.qp_num(); }
  absl::Status Modify(const cm::QpAttributes& attr) override;
  absl::Status ToError() override { return qp_.ToError(); }

  uint64_t mtu_capped() const { return mtu_capped_; }
  const VerbsQpCounters& counters() const { return qp_.counters(); }

 private:
  RcQpTransitioner(VerbsQp qp, ibv_mtu active_mtu) : qp_(std::move(qp)), active_mtu_(active_mtu) {}
  VerbsQp qp_;
  ibv_mtu active_mtu_;
  uint64_t mtu_capped_ = 0;
};

}  // namespace uscm::verbs

#endif  // USCM_VERBS_RC_RESOURCES_H_
