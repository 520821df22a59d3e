#include "verbs/ud_transport.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace uscm::verbs {
namespace {

constexpr size_t kGrhSize = 40;
constexpr size_t kRecvSlot = kGrhSize + mad::kMadSize;
constexpr uint64_t kSendTag = 1ull << 63;
constexpr uint32_t kControlledQkeyBit = 0x80000000u;
constexpr int kMaxPkeys = 128;

std::string ErrnoText(int err) { return absl::StrCat(strerror(err), " (errno ", err, ")"); }

absl::Status NoDeviceError(int err) {
  std::string why =
      err == ENOSYS
          ? "this kernel has no RDMA support (/sys/class/infiniband_verbs is missing)"
          : absl::StrCat("libibverbs lists none", err != 0 ? absl::StrCat(": ", ErrnoText(err)) : "");
  return absl::NotFoundError(absl::StrCat(
      "no RDMA device found (", why,
      "); load an RDMA driver (Soft-RoCE: modprobe rdma_rxe && rdma link add rxe0 type rxe "
      "netdev <eth>) or use --fabric=sim"));
}

absl::Status PermissionError(const std::string& what, int err) {
  return absl::PermissionDeniedError(absl::StrCat(
      what, ": ", ErrnoText(err),
      "; run as root, or give a group access to /dev/infiniband/uverbs* with a udev rule "
      "(KERNEL==\"uverbs*\", GROUP=\"rdma\", MODE=\"0660\"), and raise the locked-memory limit "
      "(ulimit -l)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<UdTransport>> UdTransport::Open(const UdOptions& options) {
  if (options.recv_depth <= 0 || options.send_depth <= 0 || options.recv_depth > 4096 ||
      options.send_depth > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("recv_depth ", options.recv_depth,
                                                   " / send_depth ", options.send_depth,
                                                   " out of range 1..4096"));
  }
  std::unique_ptr<UdTransport> t(new UdTransport());
  if (auto s = t->Setup(options); !s.ok()) return s;
  return t;
}

absl::Status UdTransport::Setup(const UdOptions& options) {
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return NoDeviceError(errno);
  if (n == 0) {
    ibv_free_device_list(list);
    return NoDeviceError(0);
  }

  // Pick the device and port: the named ones, or the first ACTIVE port.
  std::vector<std::string> names;
  std::string tried;
  ibv_port_attr pattr{};
  for (int i = 0; i < n && ctx_ == nullptr; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    names.push_back(name);
    if (!options.device.empty() && name != options.device) continue;
    errno = 0;
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) {
      int err = errno;
      // libibverbs may report ENOENT when the device node is there but not
      // ours to open (it then tries a private node); ask the node itself.
      const std::string node = absl::StrCat("/dev/infiniband/", list[i]->dev_name);
      if (err != EACCES && access(node.c_str(), R_OK | W_OK) != 0 && errno == EACCES) err = EACCES;
      ibv_free_device_list(list);
      if (err == EACCES || err == EPERM) return PermissionError("cannot open " + name, err);
      return absl::UnavailableError(absl::StrCat("ibv_open_device(", name, "): ", ErrnoText(err)));
    }
    ibv_device_attr dattr{};
    if (ibv_query_device(ctx, &dattr) != 0) {
      ibv_close_device(ctx);
      continue;
    }
    for (int p = 1; p <= dattr.phys_port_cnt; ++p) {
      if (options.port_num != 0 && p != options.port_num) continue;
      ibv_port_attr a{};
      if (ibv_query_port(ctx, static_cast<uint8_t>(p), &a) != 0) continue;
      if (a.state != IBV_PORT_ACTIVE) {
        absl::StrAppend(&tried, " ", name, ":", p, " state ", ibv_port_state_str(a.state), ";");
        continue;
      }
      ctx_ = ctx;
      pattr = a;
      port_.ca_name = name;
      port_.port_num = static_cast<uint8_t>(p);
      port_.node_guid = be64toh(ibv_get_device_guid(list[i]));
      break;
    }
    if (ctx_ == nullptr) ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (ctx_ == nullptr) {
    if (!options.device.empty() && std::find(names.begin(), names.end(), options.device) == names.end()) {
      return absl::NotFoundError(absl::StrCat("no RDMA device named '", options.device,
                                              "'; available: ", absl::StrJoin(names, ", ")));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "no ACTIVE port found (", tried.empty() ? std::string(" none matched") : tried,
        " ); an InfiniBand port becomes ACTIVE once a subnet manager has configured it"));
  }

  const uint8_t pn = port_.port_num;
  port_.link_layer = pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? mad::LinkLayer::kEthernet
                                                                 : mad::LinkLayer::kInfiniBand;
  port_.lid = pattr.lid;
  port_.lmc = pattr.lmc;
  port_.sm_lid = pattr.sm_lid;
  port_.sm_sl = pattr.sm_sl;
  ibv_gid gid{};
  if (ibv_query_gid(ctx_, pn, 0, &gid) == 0) std::memcpy(port_.gid.raw.data(), gid.raw, 16);
  for (int i = 0; i < std::min<int>(pattr.pkey_tbl_len, kMaxPkeys); ++i) {
    uint16_t pkey = 0;
    if (ibv_query_pkey(ctx_, pn, i, &pkey) != 0) break;
    port_.pkeys.push_back(be16toh(pkey));
  }
  const std::string label = absl::StrCat(port_.ca_name, ":", static_cast<int>(pn));

  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) return absl::UnavailableError(absl::StrCat("ibv_alloc_pd on ", label, ": ", ErrnoText(errno)));
  channel_ = ibv_create_comp_channel(ctx_);
  if (channel_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("ibv_create_comp_channel: ", ErrnoText(errno)));
  }
  const int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::UnavailableError(absl::StrCat("completion channel O_NONBLOCK: ", ErrnoText(errno)));
  }
  qkey_ = options.qkey;
  recv_depth_ = static_cast<size_t>(options.recv_depth);
  send_depth_ = static_cast<size_t>(options.send_depth);
  cq_ = ibv_create_cq(ctx_, static_cast<int>(recv_depth_ + send_depth_), nullptr, channel_, 0);
  if (cq_ == nullptr) return absl::UnavailableError(absl::StrCat("ibv_create_cq: ", ErrnoText(errno)));
  if (ibv_req_notify_cq(cq_, 0) != 0) return absl::UnavailableError("ibv_req_notify_cq failed");

  buffer_.assign(recv_depth_ * kRecvSlot + send_depth_ * mad::kMadSize, 0);
  mr_ = ibv_reg_mr(pd_, buffer_.data(), buffer_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (mr_ == nullptr) {
    const int err = errno;
    if (err == ENOMEM || err == EPERM || err == EACCES) {
      return PermissionError(absl::StrCat("ibv_reg_mr of ", buffer_.size(), " bytes"), err);
    }
    return absl::UnavailableError(absl::StrCat("ibv_reg_mr: ", ErrnoText(err)));
  }

  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = static_cast<uint32_t>(send_depth_);
  init.cap.max_recv_wr = static_cast<uint32_t>(recv_depth_);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &init);
  if (qp_ == nullptr) return absl::UnavailableError(absl::StrCat("ibv_create_qp(UD): ", ErrnoText(errno)));

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = options.pkey_index;
  attr.port_num = pn;
  attr.qkey = options.qkey;
  if (int err = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
      err != 0) {
    if ((err == EPERM || err == EACCES) && (options.qkey & kControlledQkeyBit)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "Q_Key 0x", absl::Hex(options.qkey), " has bit 31 set (a controlled Q_Key, as QP1's "
          "0x80010000); the kernel allows it only with CAP_NET_RAW since 6.4 (\"RDMA/uverbs: "
          "Restrict usage of privileged QKEYs\"): run as root or with CAP_NET_RAW, or use a Q_Key "
          "below 0x80000000 (then only peer uscm QPs, not QP1 or the SA, can be reached)"));
    }
    return absl::UnavailableError(absl::StrCat("UD QP to INIT (P_Key index ", options.pkey_index,
                                               ", Q_Key 0x", absl::Hex(options.qkey),
                                               "): ", ErrnoText(err)));
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTR;
  if (int err = ibv_modify_qp(qp_, &attr, IBV_QP_STATE); err != 0) {
    return absl::UnavailableError(absl::StrCat("UD QP to RTR: ", ErrnoText(err)));
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  if (int err = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN); err != 0) {
    return absl::UnavailableError(absl::StrCat("UD QP to RTS: ", ErrnoText(err)));
  }
  for (size_t i = 0; i < recv_depth_; ++i) {
    if (auto s = PostReceive(i); !s.ok()) return s;
  }
  for (size_t i = send_depth_; i > 0; --i) free_send_slots_.push_back(i - 1);

  caps_.name = "verbs-ud";
  caps_.kernel_rmpp = false;
  caps_.can_reach_qp1 = (options.qkey == mad::kQp1Qkey);
  caps_.max_receive_size = mad::kMadSize;
  caps_.rewrites_tid_high = false;
  return absl::OkStatus();
}

UdTransport::~UdTransport() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  for (auto& [key, ah] : ah_cache_) ibv_destroy_ah(ah);
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

int UdTransport::fd() const { return channel_ != nullptr ? channel_->fd : -1; }
uint32_t UdTransport::qpn() const { return qp_ != nullptr ? qp_->qp_num : 0; }

uint8_t* UdTransport::RecvSlot(size_t i) { return buffer_.data() + i * kRecvSlot; }
uint8_t* UdTransport::SendSlot(size_t i) {
  return buffer_.data() + recv_depth_ * kRecvSlot + i * mad::kMadSize;
}

absl::Status UdTransport::PostReceive(size_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(RecvSlot(slot));
  sge.length = static_cast<uint32_t>(kRecvSlot);
  sge.lkey = mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int err = ibv_post_recv(qp_, &wr, &bad); err != 0) {
    return absl::UnavailableError(absl::StrCat("ibv_post_recv: ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ibv_ah*> UdTransport::AddressHandle(const mad::MadAddress& to) {
  const AhKey key{to.lid, to.sl, to.path_bits, to.has_grh, to.gid, to.sgid_index, to.hop_limit,
                  to.flow_label, to.traffic_class};
  if (auto it = ah_cache_.find(key); it != ah_cache_.end()) return it->second;
  ibv_ah_attr a{};
  a.dlid = to.lid;
  a.sl = to.sl;
  a.src_path_bits = to.path_bits;
  a.port_num = port_.port_num;
  if (to.has_grh) {
    a.is_global = 1;
    std::memcpy(a.grh.dgid.raw, to.gid.raw.data(), 16);
    a.grh.sgid_index = to.sgid_index;
    a.grh.hop_limit = to.hop_limit;
    a.grh.traffic_class = to.traffic_class;
    a.grh.flow_label = to.flow_label;
  }
  errno = 0;
  ibv_ah* ah = ibv_create_ah(pd_, &a);
  if (ah == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ibv_create_ah(LID 0x", absl::Hex(to.lid), to.has_grh ? ", GID " + to.gid.ToString() : "",
        ", SGID index ", to.sgid_index, "): ", ErrnoText(errno),
        port_.link_layer == mad::LinkLayer::kEthernet && !to.has_grh
            ? "; RoCE needs a GRH (MadAddress.has_grh)"
            : ""));
  }
  ++stats_.ah_created;
  ah_cache_.emplace(key, ah);
  return ah;
}

absl::Status UdTransport::Send(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  if (mad.size() < 24 || mad.size() > mad::kMadSize) {
    ++stats_.send_errors;
    return absl::InvalidArgumentError(
        absl::StrCat("MAD is ", mad.size(), " bytes; a UD send carries 24..", mad::kMadSize));
  }
  if (free_send_slots_.empty()) {
    ++stats_.send_queue_full;
    return absl::ResourceExhaustedError(absl::StrCat(
        "UD send queue full (", send_depth_, " sends in flight); call Drain() to reap completions"));
  }
  auto ah = AddressHandle(to);
  if (!ah.ok()) {
    ++stats_.send_errors;
    return ah.status();
  }
  const size_t slot = free_send_slots_.back();
  std::memcpy(SendSlot(slot), mad.data(), mad.size());
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(SendSlot(slot));
  sge.length = static_cast<uint32_t>(mad.size());
  sge.lkey = mr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = kSendTag | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = *ah;
  wr.wr.ud.remote_qpn = to.qpn;
  wr.wr.ud.remote_qkey = to.qkey;
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(qp_, &wr, &bad); err != 0) {
    ++stats_.send_errors;
    return absl::UnavailableError(absl::StrCat("ibv_post_send: ", ErrnoText(err)));
  }
  free_send_slots_.pop_back();
  ++stats_.sent;
  return absl::OkStatus();
}

size_t UdTransport::Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) {
  // Consume a pending channel event and re-arm before polling, so a
  // completion that lands after the poll raises a new event.
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    ibv_req_notify_cq(cq_, 0);
  }
  size_t delivered = 0;
  ibv_wc wcs[16];
  while (delivered < max) {
    const int want = static_cast<int>(std::min<size_t>(16, max - delivered));
    const int got = ibv_poll_cq(cq_, want, wcs);
    if (got <= 0) break;
    for (int k = 0; k < got; ++k) {
      const ibv_wc& wc = wcs[k];
      if (wc.wr_id & kSendTag) {
        free_send_slots_.push_back(static_cast<size_t>(wc.wr_id & ~kSendTag));
        if (wc.status != IBV_WC_SUCCESS) ++stats_.send_errors;
        continue;
      }
      const size_t slot = static_cast<size_t>(wc.wr_id);
      if (wc.status == IBV_WC_WR_FLUSH_ERR) continue;  // QP going away
      uint8_t* buf = RecvSlot(slot);
      if (wc.status != IBV_WC_SUCCESS || wc.byte_len < kGrhSize + 24) {
        ++stats_.receive_errors;
        (void)PostReceive(slot);
        continue;
      }
      mad::ReceivedMad r;
      r.from.lid = wc.slid;
      r.from.qpn = wc.src_qp;
      // The WC has no Q_Key: QP1 senders use 0x80010000, peers our scheme's.
      r.from.qkey = wc.src_qp == mad::kQp1 ? mad::kQp1Qkey : qkey_;
      r.from.pkey_index = wc.pkey_index;
      r.from.sl = wc.sl;
      r.from.path_bits = wc.dlid_path_bits;
      if (wc.wc_flags & IBV_WC_GRH) {
        r.from.has_grh = true;
        ibv_ah_attr a{};
        if (ibv_init_ah_from_wc(ctx_, port_.port_num, const_cast<ibv_wc*>(&wc),
                                reinterpret_cast<ibv_grh*>(buf), &a) == 0) {
          // The reply's address: source GID, our GID index, the sender's flow.
          std::memcpy(r.from.gid.raw.data(), a.grh.dgid.raw, 16);
          r.from.sgid_index = a.grh.sgid_index;
          r.from.hop_limit = a.grh.hop_limit;
          r.from.traffic_class = a.grh.traffic_class;
          r.from.flow_label = a.grh.flow_label;
        } else {
          std::memcpy(r.from.gid.raw.data(), buf + 8, 16);  // IB GRH: SGID at byte 8
        }
      }
      const size_t len = std::min<size_t>(wc.byte_len - kGrhSize, mad::kMadSize);
      r.data = std::span<const uint8_t>(buf + kGrhSize, len);
      ++stats_.received;
      ++delivered;
      sink(r);
      (void)PostReceive(slot);
    }
  }
  return delivered;
}

}  // namespace uscm::verbs
