// Internal: the per-connection record of CmEndpoint and the listener record.
// Not part of the public API (cm/endpoint.h).
#ifndef USCM_CM_CONNECTION_H_
#define USCM_CM_CONNECTION_H_

#include <array>
#include <cstdint>

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
  absl::optional<mad::TimePoint> deadline;
  uint32_t generation = 0;  // endpoint-wide; the wheel payload carries it
  mad::TimerHandle handle;
};

// The request under retransmission, kept formatted.
struct Outstanding {
  bool armed = false;
  mad::wire::CmAttr attr = mad::wire::CmAttr::kReq;
  std::array<uint8_t, mad::kMadSize> mad{};
  mad::Duration timeout;   // wait before the next retransmission
  int retries_left = 0;
  RetryPolicy policy;
};

struct Connection {
  CmState state = CmState::kIdle;
  LapState lap = LapState::kUninit;
  bool active_side = false;
  bool destroyed = false;        // the user released the id; free once IDLE
  ListenId listen;               // passive: the listener it came through
  bool in_backlog = false;       // counted against the listener's backlog

  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint64_t remote_ca_guid = 0;
  bool in_remote_id_table = false;
  bool in_remote_qpn_table = false;
  uint64_t service_id = 0;
  uint64_t transaction_id = 0;   // of the REQ (REP/RTU/MRA/REJ reuse it)
  mad::MadAddress peer;          // where CM MADs for this connection go

  // Data-QP parameters, from THIS side's point of view.
  uint32_t local_qpn = 0;
  uint32_t remote_qpn = 0;
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
  absl::optional<PathInfo> alternate;
  PathInfo pending_alternate;       // LAP in flight
  uint8_t remote_cm_response_timeout = 0;  // REQ byte 43
  uint8_t local_cm_response_timeout = 0;   // REQ byte 47
  uint8_t max_cm_retries = 0;
  mad::Duration response_timeout;   // Linux timeout_ms: REQ or REP timer, reused by DREQ/LAP
  RetryPolicy retry;

  absl::optional<Ece> local_ece;
  Ece remote_ece;

  Outstanding out;
  // The last untimed message sent (MRA / RTU / DREP), re-sent on duplicates.
  bool has_reply = false;
  mad::wire::CmAttr reply_attr = mad::wire::CmAttr::kMra;
  std::array<uint8_t, mad::kMadSize> reply{};
  mad::wire::PrivateData drep_private_data;

  // SIDR
  uint32_t sidr_request_id = 0;
  uint16_t sidr_source_lid = 0;

  std::array<ConnTimer, kTimerKinds> timers{};
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
