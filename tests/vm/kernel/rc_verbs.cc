#include "tests/vm/kernel/rc_verbs.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace uscm::vmtest {

namespace {

absl::Status Errno(const std::string& what, int err) {
  return absl::UnavailableError(absl::StrCat(what, " failed: ", std::strerror(err), " (errno ",
                                             err, ")"));
}

}  // namespace

ibv_mtu RcVerbs::ActiveMtu(uint8_t port_num) const {
  ibv_port_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  return ibv_query_port(ctx_, port_num, &attr) == 0 ? attr.active_mtu : IBV_MTU_1024;
}

absl::StatusOr<std::unique_ptr<RcVerbs>> RcVerbs::Open(const std::string& ca_name, int depth) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return Errno("ibv_get_device_list", errno);
  std::unique_ptr<RcVerbs> v(new RcVerbs());
  for (int i = 0; i < n; ++i) {
    if (ca_name == ibv_get_device_name(list[i])) v->ctx_ = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  if (v->ctx_ == nullptr) {
    return absl::NotFoundError(absl::StrCat("RDMA device ", ca_name,
                                            " not found or cannot be opened (", n,
                                            " devices; is rdma_rxe loaded and the link added?)"));
  }
  v->pd_ = ibv_alloc_pd(v->ctx_);
  if (v->pd_ == nullptr) return Errno("ibv_alloc_pd", errno);
  v->cq_ = ibv_create_cq(v->ctx_, 4 * depth, nullptr, nullptr, 0);
  if (v->cq_ == nullptr) return Errno("ibv_create_cq", errno);
  ibv_qp_init_attr init;
  std::memset(&init, 0, sizeof(init));
  init.send_cq = v->cq_;
  init.recv_cq = v->cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = static_cast<uint32_t>(depth);
  init.cap.max_recv_wr = static_cast<uint32_t>(depth);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.sq_sig_all = 1;
  v->qp_ = ibv_create_qp(v->pd_, &init);
  if (v->qp_ == nullptr) return Errno("ibv_create_qp(RC)", errno);
  return v;
}

RcVerbs::~RcVerbs() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  for (auto& b : buffers_) {
    if (b->mr != nullptr) ibv_dereg_mr(b->mr);
  }
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

absl::StatusOr<RcBuffer*> RcVerbs::Register(size_t size, int access) {
  auto b = std::make_unique<RcBuffer>();
  b->bytes.assign(size, 0);
  b->mr = ibv_reg_mr(pd_, b->bytes.data(), size, access);
  if (b->mr == nullptr) return Errno(absl::StrCat("ibv_reg_mr(", size, " bytes)"), errno);
  buffers_.push_back(std::move(b));
  return buffers_.back().get();
}

absl::Status RcVerbs::PostRecv(const RcBuffer& b, uint32_t length, uint64_t wr_id) {
  ibv_sge sge{b.addr(), length, b.mr->lkey};
  ibv_recv_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(qp_, &wr, &bad);
  return rc == 0 ? absl::OkStatus() : Errno("ibv_post_recv", rc);
}

absl::Status RcVerbs::Post(ibv_send_wr& wr, const char* what) {
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_, &wr, &bad);
  return rc == 0 ? absl::OkStatus() : Errno(absl::StrCat("ibv_post_send(", what, ")"), rc);
}

absl::Status RcVerbs::PostSend(const RcBuffer& b, uint32_t length, uint64_t wr_id) {
  ibv_sge sge{b.addr(), length, b.mr->lkey};
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  return Post(wr, "SEND");
}

absl::Status RcVerbs::PostRdma(ibv_wr_opcode opcode, const RcBuffer& b, uint32_t length,
                               uint64_t remote_addr, uint32_t rkey, uint64_t wr_id) {
  ibv_sge sge{b.addr(), length, b.mr->lkey};
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  return Post(wr, opcode == IBV_WR_RDMA_READ ? "RDMA_READ" : "RDMA_WRITE");
}

absl::StatusOr<absl::optional<ibv_wc>> RcVerbs::PollOne() {
  ibv_wc wc;
  const int n = ibv_poll_cq(cq_, 1, &wc);
  if (n < 0) return Errno("ibv_poll_cq", -n);
  if (n == 0) return absl::optional<ibv_wc>();
  if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
    return absl::DataLossError(absl::StrCat("completion failed: ", ibv_wc_status_str(wc.status),
                                            " (opcode ", wc.opcode, ", wr_id ", wc.wr_id,
                                            ", vendor_err ", wc.vendor_err, ")"));
  }
  return absl::optional<ibv_wc>(wc);
}

}  // namespace uscm::vmtest
