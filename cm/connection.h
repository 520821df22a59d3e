// Internal: the per-connection record of CmEndpoint and the listener record.
// Not part of the public API (cm/endpoint.h).
#ifndef USCM_CM_CONNECTION_H_
#define USCM_CM_CONNECTION_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/types/optional.h"
#include "cm/types.h"
#include "mad/time.h"
#include "mad/timer_wheel.h"
#include "mad/transport.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/private_data.h"

namespace uscm::cm::internal {

// Timers as data: one deadline per kind, mirrored into the endpoint's wheel.
enum class TimerKind : uint8_t {
  kRetransmit,  // the outstanding REQ / REP / DREQ / LAP / SIDR_REQ
  kAutoMra,     // answer a slow user with MRA before the peer gives up
  kTimeWait,
};
inline constexpr int kTimerKinds = 3;

struct ConnTimer {
  // Endpoint-wide, never 0 while armed (0 = not armed); the wheel payload
  // carries it so a stale expiry is ignored.
  uint32_t generation = 0;
  mad::TimerHandle handle;
  bool armed() const { return generation != 0; }
};

inline constexpr uint32_t kNoBuffer = UINT32_MAX;

// The request under retransmission. Its formatted MAD lives in one of the
// endpoint's pooled 256-byte buffers, held only while a request is
// outstanding (an ESTABLISHED connection holds none).
struct Outstanding {
  bool armed = false;
  mad::wire::CmAttr attr = mad::wire::CmAttr::kReq;
  uint32_t buffer = kNoBuffer;  // index into the endpoint's request pool
  mad::Duration timeout;   // wait before the next retransmission
  int retries_left = 0;
  RetryPolicy policy;
};

// Bytes kept out of line, allocated only when non-empty (private data of a
// reply that may have to be re-sent; usually empty).
class StoredBytes {
 public:
  void Assign(std::span<const uint8_t> b) {
    size_ = static_cast<uint8_t>(b.size());
    data_.reset();
    if (b.empty()) return;
    data_ = std::make_unique<uint8_t[]>(b.size());
    std::copy(b.begin(), b.end(), data_.get());
  }
  std::span<const uint8_t> bytes() const { return {data_.get(), size_}; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  uint8_t size_ = 0;  // private data fields are at most 224 bytes
};

struct Connection {
  // First, in the record's first two lines: what a lookup, a timer's expiry,
  // TimeWait's end and freeing the record read (on a simulated host not
  // touched for a while every line of it is a cache miss; docs/SIMULATOR.md,
  // "Hot fields first").
  CmState state = CmState::kIdle;
  LapState lap = LapState::kUninit;
  bool active_side = false;
  bool destroyed = false;        // the user released the id; free once IDLE
  bool in_backlog = false;       // counted against the listener's backlog
  bool in_remote_id_table = false;
  bool in_remote_qpn_table = false;
  bool has_reply = false;        // see the reply fields below
  ListenId listen;               // passive: the listener it came through

  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint64_t remote_ca_guid = 0;
  uint32_t remote_qpn = 0;
  // SIDR
  uint32_t sidr_request_id = 0;
  uint16_t sidr_source_lid = 0;
  std::array<ConnTimer, kTimerKinds> timers{};
  Outstanding out;
  // Out of line: most connections have no alternate path.
  std::unique_ptr<PathInfo> alternate;
  std::unique_ptr<PathInfo> pending_alternate;  // LAP in flight
  // The private data of the last untimed reply (the reply fields below).
  StoredBytes reply_private_data;

  uint64_t service_id = 0;
  uint64_t transaction_id = 0;   // of the REQ (REP/RTU/MRA/REJ reuse it)
  mad::MadAddress peer;          // where CM MADs for this connection go

  // Data-QP parameters, from THIS side's point of view (remote_qpn above).
  uint32_t local_qpn = 0;
  uint32_t local_psn = 0;        // the starting PSN we advertised
  uint32_t remote_psn = 0;       // the one the peer advertised
  uint32_t local_qkey = 0;
  uint32_t remote_qkey = 0;
  uint16_t pkey = 0xFFFF;
  uint8_t path_mtu = 0;
  TransportType transport = TransportType::kRc;
  uint8_t responder_resources = 0;  // for our QP's max_dest_rd_atomic
  uint8_t initiator_depth = 0;      // for our QP's max_rd_atomic
  uint8_t retry_count = 0;          // from the REQ
  uint8_t rnr_retry_count = 0;      // what the peer sent, for our QP
  uint8_t local_ack_timeout = 0;    // av.timeout: QP timeout and TimeWait
  bool srq = false;
  PathInfo primary;                 // local = this side
  uint8_t remote_cm_response_timeout = 0;  // REQ byte 43
  uint8_t local_cm_response_timeout = 0;   // REQ byte 47
  uint8_t max_cm_retries = 0;
  mad::Duration response_timeout;   // Linux timeout_ms: REQ or REP timer, reused by DREQ/LAP
  RetryPolicy retry;

  absl::optional<Ece> local_ece;
  Ece remote_ece;

  // The last untimed message sent (MRA / RTU / DREP; has_reply above),
  // formatted again from these fields (and the ids above) when a duplicate
  // asks for it.
  mad::wire::CmAttr reply_attr = mad::wire::CmAttr::kMra;
  MsgRef reply_mra_msg = MsgRef::kReq;  // MRA: Message MRAed
  uint8_t reply_mra_timeout = 0;        // MRA: service timeout
};

struct Listener {
  uint64_t service_id = 0;
  uint64_t service_mask = ~uint64_t{0};
  uint32_t backlog = 0;
  uint32_t pending = 0;  // connections in REQ_RCVD / MRA_REQ_SENT
  bool reuse = false;
};

}  // namespace uscm::cm::internal

#endif  // USCM_CM_CONNECTION_H_
