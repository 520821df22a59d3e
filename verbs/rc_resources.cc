#include "verbs/rc_resources.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace uscm::verbs {
namespace {

std::string ErrnoText(int err) { return absl::StrCat(strerror(err), " (errno ", err, ")"); }

}  // namespace

absl::StatusOr<std::unique_ptr<RcResources>> RcResources::Open(const RcOptions& o,
                                                               const RcVerbs& v) {
  if (o.buffer_bytes == 0 || o.buffer_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RcOptions.buffer_bytes is ", o.buffer_bytes, "; must be 1..1 GiB"));
  }
  if (o.queue_depth == 0 || o.queue_depth > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("RcOptions.queue_depth is ", o.queue_depth, "; must be 1..4096"));
  }
  std::unique_ptr<RcResources> r(new RcResources());
  errno = 0;
  int n = 0;
  ibv_device** list = v.get_device_list(&n);
  const int list_err = errno;
  ibv_device* dev = nullptr;
  for (int i = 0; list != nullptr && i < n && dev == nullptr; ++i) {
    if (o.device.empty() || o.device == v.device_name(list[i])) dev = list[i];
  }
  if (dev == nullptr) {
    const std::string which = o.device.empty() ? "" : absl::StrCat(" named ", o.device);
    if (list != nullptr) v.free_device_list(list);
    return absl::NotFoundError(absl::StrCat(
        "no RDMA device", which, " (", n, " found",
        list == nullptr ? absl::StrCat(": ", ErrnoText(list_err)) : std::string(),
        "): load the driver, or for Soft-RoCE: modprobe rdma_rxe && "
        "rdma link add rxe0 type rxe netdev <interface>"));
  }
  r->device_name_ = v.device_name(dev);
  errno = 0;
  r->ctx_ = v.open_device(dev);
  int open_err = errno;
  // libibverbs may report ENOENT when the device node exists but is not ours
  // to open (it then tries a private node of its own); ask the node itself.
  const std::string node = absl::StrCat("/dev/infiniband/", dev->dev_name);
  if (r->ctx_ == nullptr && open_err != EACCES && access(node.c_str(), R_OK | W_OK) != 0 &&
      errno == EACCES) {
    open_err = EACCES;
  }
  v.free_device_list(list);
  if (r->ctx_ == nullptr) {
    if (open_err == EACCES || open_err == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot open ", r->device_name_, ": no permission on /dev/infiniband/uverbs* (", node,
          ": ", ErrnoText(open_err), "); run as root, join the rdma group, or add a udev rule"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot open ", r->device_name_, ": ", ErrnoText(open_err)));
  }
  r->port_num_ = o.port_num;
  ibv_port_attr pa{};
  if (int err = ibv_query_port(r->ctx_, o.port_num, &pa); err != 0) {
    return absl::InvalidArgumentError(absl::StrCat(r->device_name_, " has no port ",
                                                   o.port_num, ": ", ErrnoText(err)));
  }
  r->active_mtu_ = pa.active_mtu;
  r->pd_ = ibv_alloc_pd(r->ctx_);
  if (r->pd_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ibv_alloc_pd on ", r->device_name_, ": ", ErrnoText(errno)));
  }
  r->buffer_.assign(o.buffer_bytes, 0);
  errno = 0;
  r->mr_ = ibv_reg_mr(r->pd_, r->buffer_.data(), r->buffer_.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (r->mr_ == nullptr) {
    const int err = errno;
    return absl::ResourceExhaustedError(absl::StrCat(
        "ibv_reg_mr of ", o.buffer_bytes, " bytes on ", r->device_name_, " refused: ",
        ErrnoText(err), "; the locked-memory limit (ulimit -l) may be too low"));
  }
  r->channel_ = ibv_create_comp_channel(r->ctx_);
  if (r->channel_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ibv_create_comp_channel: ", ErrnoText(errno)));
  }
  r->cq_ = ibv_create_cq(r->ctx_, static_cast<int>(2 * o.queue_depth), nullptr, r->channel_, 0);
  if (r->cq_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("ibv_create_cq: ", ErrnoText(errno)));
  }
  if (int err = ibv_req_notify_cq(r->cq_, 0); err != 0) {
    return absl::UnavailableError(absl::StrCat("ibv_req_notify_cq: ", ErrnoText(err)));
  }
  ibv_qp_init_attr qa{};
  qa.send_cq = r->cq_;
  qa.recv_cq = r->cq_;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = o.queue_depth;
  qa.cap.max_recv_wr = o.queue_depth;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  errno = 0;
  r->qp_ = ibv_create_qp(r->pd_, &qa);
  if (r->qp_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ibv_create_qp (RC, depth ", o.queue_depth, ") on ", r->device_name_, ": ",
                     ErrnoText(errno)));
  }
  return r;
}

RcResources::~RcResources() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

uint32_t RcResources::rkey() const { return mr_->rkey; }

absl::Status RcResources::CheckRange(size_t offset, size_t length) const {
  if (length == 0 || offset > buffer_.size() || length > buffer_.size() - offset) {
    return absl::InvalidArgumentError(absl::StrCat("range [", offset, ", +", length,
                                                   ") is outside the ", buffer_.size(),
                                                   "-byte buffer"));
  }
  return absl::OkStatus();
}

absl::Status RcResources::PostRecv(size_t offset, size_t length, uint64_t wr_id) {
  if (absl::Status s = CheckRange(offset, length); !s.ok()) return s;
  ibv_sge sge{buffer_addr() + offset, static_cast<uint32_t>(length), mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int err = ibv_post_recv(qp_, &wr, &bad); err != 0) {
    return absl::UnavailableError(absl::StrCat("ibv_post_recv: ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::Status RcResources::PostSend(size_t offset, size_t length, uint64_t wr_id) {
  return PostWrite(offset, length, 0, 0, wr_id | (uint64_t{1} << 63));
}

absl::Status RcResources::PostWrite(size_t offset, size_t length, uint64_t remote_addr,
                                    uint32_t rkey, uint64_t wr_id) {
  // Bit 63 of wr_id (set by PostSend) selects a SEND; the caller never sees it.
  const bool send = (wr_id >> 63) != 0;
  if (absl::Status s = CheckRange(offset, length); !s.ok()) return s;
  ibv_sge sge{buffer_addr() + offset, static_cast<uint32_t>(length), mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id & ~(uint64_t{1} << 63);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (!send) {
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
  }
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(qp_, &wr, &bad); err != 0) {
    return absl::UnavailableError(absl::StrCat(send ? "ibv_post_send (SEND): "
                                                    : "ibv_post_send (RDMA WRITE): ",
                                               ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Completion> RcResources::WaitCompletion(mad::Duration timeout) {
  const mad::TimePoint end = mad::RealClock().Now() + timeout;
  for (;;) {
    ibv_wc wc{};
    const int got = ibv_poll_cq(cq_, 1, &wc);
    if (got < 0) return absl::UnavailableError("ibv_poll_cq failed");
    if (got == 1) {
      if (wc.status != IBV_WC_SUCCESS) {
        return absl::AbortedError(absl::StrCat("work request ", wc.wr_id, " completed with ",
                                               ibv_wc_status_str(wc.status), " (vendor error ",
                                               wc.vendor_err, ")"));
      }
      return Completion{wc.wr_id, wc.opcode, wc.byte_len};
    }
    const mad::Duration left = end - mad::RealClock().Now();
    if (left <= mad::Duration::Zero()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no completion within ", timeout.nanos() / 1000000, " ms"));
    }
    // Sleep on the channel; the CQ is armed, and re-armed after each event
    // before the next poll so a completion between poll and wait is not lost.
    pollfd p{channel_->fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left.nanos() / 1000000, 1))) > 0) {
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      if (ibv_get_cq_event(channel_, &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        ibv_req_notify_cq(cq_, 0);
      }
    }
  }
}

absl::StatusOr<ibv_qp_state> RcResources::State() const {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (int err = ibv_query_qp(qp_, &a, IBV_QP_STATE, &ia); err != 0) {
    return absl::UnavailableError(absl::StrCat("ibv_query_qp: ", ErrnoText(err)));
  }
  return a.qp_state;
}

absl::StatusOr<std::unique_ptr<RcQpTransitioner>> RcQpTransitioner::Create(ibv_qp* qp,
                                                                           uint8_t sgid_index,
                                                                           ibv_mtu active_mtu,
                                                                           VerbsOps ops) {
  IbvMapOptions m;
  m.sgid_index = sgid_index;
  absl::StatusOr<VerbsQp> v = VerbsQp::Wrap(qp, m, ops);
  if (!v.ok()) return v.status();
  return std::unique_ptr<RcQpTransitioner>(new RcQpTransitioner(std::move(*v), active_mtu));
}

absl::Status RcQpTransitioner::Modify(const cm::QpAttributes& attr) {
  if ((attr.mask & cm::kQpPathMtu) && attr.path_mtu > static_cast<uint8_t>(active_mtu_)) {
    cm::QpAttributes capped = attr;
    capped.path_mtu = static_cast<uint8_t>(active_mtu_);
    ++mtu_capped_;
    return qp_.Modify(capped);
  }
  return qp_.Modify(attr);
}

}  // namespace uscm::verbs
