// A MAD transport on a raw verbs UD QP (libibverbs) instead of QP1.
//
// Usable for the SA (OpenSM answers the requester's source QP) and between
// two uscm peers that address each other's UD QPs. Not usable with kernel CM
// peers: Linux ib_cm always sends its replies to QP1 and has no redirect, so
// a REQ from this QP gets a REP that only the kernel's QP1 sees. To talk to
// QP1 of a remote port the QP needs Q_Key 0x80010000, a "controlled" Q_Key
// whose use needs CAP_NET_RAW on kernels since 6.4 (and stable backports).
// See docs/TRANSPORTS.md.
//
// Resources: device context, PD, one CQ with a completion channel (fd() is
// the channel's fd, non-blocking), the UD QP, one registered buffer holding
// `recv_depth` receive slots (40-byte GRH space + 256-byte MAD) and
// `send_depth` send slots, and an address-handle cache keyed by address.
#ifndef USCM_VERBS_UD_TRANSPORT_H_
#define USCM_VERBS_UD_TRANSPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/transport.h"

struct ibv_context;
struct ibv_pd;
struct ibv_comp_channel;
struct ibv_cq;
struct ibv_qp;
struct ibv_mr;
struct ibv_ah;

namespace uscm::verbs {

struct UdOptions {
  std::string device;              // "" = the first device with an ACTIVE port
  int port_num = 0;                // 0 = the first ACTIVE port
  uint32_t qkey = mad::kQp1Qkey;   // the QP's Q_Key (bit 31 set: needs CAP_NET_RAW)
  uint16_t pkey_index = 0;
  int recv_depth = 64;
  int send_depth = 64;
};

struct UdStats {
  uint64_t sent = 0;
  uint64_t send_errors = 0;          // post failures and error completions
  uint64_t send_queue_full = 0;
  uint64_t received = 0;
  uint64_t receive_errors = 0;       // error completions / short messages
  uint64_t ah_created = 0;
};

class UdTransport final : public mad::Transport {
 public:
  static absl::StatusOr<std::unique_ptr<UdTransport>> Open(const UdOptions& options);
  ~UdTransport() override;
  UdTransport(const UdTransport&) = delete;
  UdTransport& operator=(const UdTransport&) = delete;

  // `to.qpn`/`to.qkey` select the remote QP (QP1 with 0x80010000, or a peer
  // uscm QP with its Q_Key). `to.pkey_index` is ignored: a UD QP sends with
  // the P_Key index it was created with.
  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override;
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink,
               size_t max = SIZE_MAX) override;
  int fd() const override;
  const mad::TransportCaps& caps() const override { return caps_; }
  const mad::LocalPort& port() const override { return port_; }

  uint32_t qpn() const;
  const UdStats& stats() const { return stats_; }

 private:
  // Everything an address handle depends on.
  using AhKey = std::tuple<uint16_t, uint8_t, uint8_t, bool, mad::Gid, uint8_t, uint8_t, uint32_t,
                           uint8_t>;
  UdTransport() = default;
  absl::Status Setup(const UdOptions& options);
  absl::Status PostReceive(size_t slot);
  absl::StatusOr<ibv_ah*> AddressHandle(const mad::MadAddress& to);
  uint8_t* RecvSlot(size_t i);
  uint8_t* SendSlot(size_t i);

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buffer_;
  uint32_t qkey_ = 0;
  size_t recv_depth_ = 0;
  size_t send_depth_ = 0;
  std::vector<size_t> free_send_slots_;
  std::map<AhKey, ibv_ah*> ah_cache_;
  mad::TransportCaps caps_;
  mad::LocalPort port_;
  UdStats stats_;
};

}  // namespace uscm::verbs

#endif  // USCM_VERBS_UD_TRANSPORT_H_
