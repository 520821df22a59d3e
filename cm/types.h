// Plain value types of the sans-IO CM endpoint (cm/endpoint.h): ids, states,
// user parameters, events, outgoing MADs, QP attributes and counters.
// See docs/CM.md for the state machine these describe.
#ifndef USCM_CM_TYPES_H_
#define USCM_CM_TYPES_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/types/optional.h"
#include "mad/gid.h"
#include "mad/time.h"
#include "mad/transport.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/private_data.h"

namespace uscm::cm {

// A connection (or SIDR exchange) handle: slot index + generation. A handle
// whose connection was freed never matches again (generation-checked).
struct ConnId {
  uint32_t index = UINT32_MAX;
  uint32_t generation = 0;
  bool valid() const { return generation != 0; }
  friend bool operator==(const ConnId&, const ConnId&) = default;
};

struct ListenId {
  uint32_t index = UINT32_MAX;
  uint32_t generation = 0;
  bool valid() const { return generation != 0; }
  friend bool operator==(const ListenId&, const ListenId&) = default;
};

// IBA CM states (digest §4; Linux enum ib_cm_state). LISTEN belongs to
// listeners, every other state to connections.
enum class CmState : uint8_t {
  kIdle,
  kListen,
  kReqSent,
  kReqRcvd,
  kMraReqSent,
  kMraReqRcvd,
  kRepSent,
  kRepRcvd,
  kMraRepSent,
  kMraRepRcvd,
  kEstablished,
  kDreqSent,
  kDreqRcvd,
  kTimeWait,
  kSidrReqSent,
  kSidrReqRcvd,
};
const char* CmStateName(CmState s);

// Load-alternate-path sub-state, meaningful in ESTABLISHED.
enum class LapState : uint8_t {
  kUninit,
  kIdle,
  kLapSent,
  kLapRcvd,
  kMraLapSent,
  kMraLapRcvd,
};
const char* LapStateName(LapState s);

enum class TransportType : uint8_t { kRc = 0, kUc = 1 };

// REJ reasons (digest §3.1); unknown values are carried as numbers.
using RejReason = mad::wire::RejReason;

// Which message a REJ or MRA refers to (REJ "Message Rejected", MRA "Message MRAed").
enum class MsgRef : uint8_t { kReq = 0, kRep = 1, kOther = 2 };

// Enhanced Connection Establishment: vendor id (24 bits) + options (the MAD
// header AttributeModifier).
using Ece = mad::wire::Ece;

// One path as the ACTIVE side names it: "local" is the REQ sender.
struct PathInfo {
  uint16_t local_lid = 0;
  uint16_t remote_lid = 0;
  mad::Gid local_gid;
  mad::Gid remote_gid;
  uint32_t flow_label = 0;       // 20 bits
  uint8_t packet_rate = 0;       // IBA rate enum, 6 bits
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;                // 4 bits
  bool subnet_local = true;      // false: routed, CM MADs and data carry a GRH
  uint8_t local_ack_timeout = 0; // IBA time code placed in REQ/LAP
  uint8_t packet_life_time = 0;  // IBA time code (SA PathRecord); not on the wire
  // Path MTU, IBA enum 1..5 (256..4096; ibv_mtu has the same values). 0: not
  // known (a route from the SA takes the PathRecord's; else the REQ says 2048).
  uint8_t mtu = 0;
  friend bool operator==(const PathInfo&, const PathInfo&) = default;
};

// How a request is retransmitted. The spec timeout is the default; every knob
// here is local (not negotiated).
struct RetryPolicy {
  // Replaces the spec-derived wait for a response (REQ: 2*PLT + remote CM
  // response timeout; REP: REQ's local CM response timeout; DREQ: as REQ/REP).
  absl::optional<mad::Duration> response_timeout;
  // Each retransmission waits `backoff_factor` times longer than the previous
  // one (1 = constant, as the spec), capped at `backoff_cap`.
  uint32_t backoff_factor = 1;
  mad::Duration backoff_cap = mad::Duration::Seconds(60);
};

struct ConnectParams {
  uint64_t service_id = 0;
  PathInfo primary;
  absl::optional<PathInfo> alternate;
  uint16_t pkey = 0xFFFF;
  uint8_t path_mtu = 4;                  // IBA MTU enum: 1=256 .. 5=4096
  uint32_t qpn = 0;                      // 24 bits
  uint32_t starting_psn = 0;             // 24 bits
  uint32_t qkey = 0;                     // 0 for RC, as Linux
  TransportType transport = TransportType::kRc;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t retry_count = 7;               // 3 bits
  uint8_t rnr_retry_count = 7;           // 3 bits, for the PEER's QP
  bool srq = false;
  uint8_t remote_cm_response_timeout = 20;  // how long the peer may take (code)
  uint8_t local_cm_response_timeout = 20;   // how long we take to send RTU (code)
  uint8_t max_cm_retries = 15;              // 4 bits
  absl::optional<Ece> ece;
  std::vector<uint8_t> private_data;     // <= 92
  RetryPolicy retry;
  // The local GID table index the REQ and the connection's other MADs leave
  // from (MadAddress::sgid_index; not in the REQ). RoCE: the entry of the
  // id's own address on its netdev, which picks the VLAN the frames carry
  // (the kernel's cm_init_av_by_path with the id's sgid_attr).
  uint8_t sgid_index = 0;
};

struct AcceptParams {
  uint32_t qpn = 0;
  uint32_t starting_psn = 0;
  uint32_t qkey = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t rnr_retry_count = 7;           // for the PEER's QP
  uint8_t target_ack_delay = 0;          // our CA's local ACK delay code
  bool srq = false;
  bool failover_accepted = true;         // meaningful with an alternate path
  // Options to send; the REP always echoes the vendor id of the REQ.
  absl::optional<uint32_t> ece_options;
  std::vector<uint8_t> private_data;     // <= 196
  RetryPolicy retry;
};

struct SidrRequestParams {
  uint64_t service_id = 0;
  uint16_t pkey = 0xFFFF;
  mad::MadAddress peer;                   // where the SIDR_REQ goes (QP1)
  uint8_t timeout = 20;                   // IBA time code per attempt
  uint8_t max_retries = 15;
  std::vector<uint8_t> private_data;      // <= 216
  RetryPolicy retry;
};

struct SidrReplyParams {
  uint8_t status = 0;                     // digest §3.3; 0 = success
  uint32_t qpn = 0;
  uint32_t qkey = 0;
  absl::optional<Ece> ece;
  std::vector<uint8_t> additional_info;   // <= 72
  std::vector<uint8_t> private_data;      // <= 136
};

// What arrived in a REQ, as the passive side sees it (names from the REQ
// sender's point of view, as on the wire).
struct ReqInfo {
  uint64_t service_id = 0;
  uint64_t remote_ca_guid = 0;
  uint32_t remote_qpn = 0;
  uint32_t remote_psn = 0;
  uint32_t remote_qkey = 0;
  uint16_t pkey = 0;
  uint8_t path_mtu = 0;
  TransportType transport = TransportType::kRc;
  uint8_t responder_resources = 0;  // as sent: the REQ sender's responder resources
  uint8_t initiator_depth = 0;
  uint8_t retry_count = 0;
  uint8_t rnr_retry_count = 0;
  bool srq = false;
  uint8_t remote_cm_response_timeout = 0;  // bounds OUR answer time
  uint8_t local_cm_response_timeout = 0;   // the sender's RTU time
  uint8_t max_cm_retries = 0;
  PathInfo primary;
  absl::optional<PathInfo> alternate;
  // Not in the REQ: the index of the local GID it came in on (its receipt's
  // MadAddress::sgid_index). On RoCE the entry names the netdev (a VLAN's,
  // whose link-local address the base netdev has too), as the kernel's
  // rdma_cm takes the connection's netdev from the REQ's GID entry.
  uint8_t sgid_index = 0;
};

enum class CmEventType : uint8_t {
  kConnectRequest,   // passive: REQ for a listener (new ConnId, listen id set)
  kConnectResponse,  // active: REP arrived; move the QP to RTR/RTS, then Rtu()
  kEstablished,
  kRejected,         // REJ received: status = reason
  kUnreachable,      // retries exhausted (status -ETIMEDOUT) or SIDR status != 0
  kConnectError,     // REP unusable (ECE vendor mismatch); Reject or Destroy
  kDisconnected,     // DREQ or DREP received (status 0) or DREQ timeout (-ETIMEDOUT)
  kTimewaitExit,
  kMraReceived,      // informational: the peer asked for more time
  kSidrRequest,      // passive SIDR_REQ for a listener
  kSidrReply,        // active: SIDR_REP arrived (status 0 only; else kUnreachable)
  kLapReceived,      // LAP arrived: answer with AprReply
  kAprReceived,      // APR arrived: status = AP status
  kLapError,         // LAP retries exhausted
};
const char* CmEventTypeName(CmEventType t);

inline constexpr int kEtimedout = 110;

struct CmEvent {
  CmEventType type = CmEventType::kEstablished;
  ConnId conn;
  ListenId listen;                  // kConnectRequest / kSidrRequest
  int status = 0;                   // REJ reason, SIDR/AP status or -errno
  mad::wire::PrivateData private_data;  // the message's whole field
  std::array<uint8_t, 72> ari{};    // REJ ARI / APR / SIDR_REP additional info
  uint8_t ari_length = 0;
  Ece remote_ece;                   // from REQ / REP / SIDR_REP
  ReqInfo req;                      // kConnectRequest
  uint8_t mra_service_timeout = 0;  // kMraReceived
  uint32_t sidr_qpn = 0;            // kSidrReply
  uint32_t sidr_qkey = 0;
  uint64_t service_id = 0;          // kSidrRequest
  PathInfo alternate_path;          // kLapReceived
};

// One MAD to send, fully formatted.
struct OutgoingMad {
  mad::MadAddress to;
  std::array<uint8_t, mad::kMadSize> mad{};
};

enum class QpState : uint8_t { kInit, kRtr, kRts };

// Verbs-style attribute mask bits (values as in ibv_qp_attr_mask).
enum QpAttrMask : uint32_t {
  kQpState = 1 << 0,
  kQpAccessFlags = 1 << 3,
  kQpPkeyIndex = 1 << 4,
  kQpPort = 1 << 5,
  kQpAv = 1 << 7,
  kQpPathMtu = 1 << 8,
  kQpTimeout = 1 << 9,
  kQpRetryCnt = 1 << 10,
  kQpRnrRetry = 1 << 11,
  kQpRqPsn = 1 << 12,
  kQpMaxQpRdAtomic = 1 << 13,
  kQpAltPath = 1 << 14,
  kQpMinRnrTimer = 1 << 15,
  kQpSqPsn = 1 << 16,
  kQpMaxDestRdAtomic = 1 << 17,
  kQpPathMigState = 1 << 18,
  kQpDestQpn = 1 << 20,
};

enum QpAccess : uint32_t {
  kAccessRemoteWrite = 1 << 1,
  kAccessRemoteRead = 1 << 2,
  kAccessRemoteAtomic = 1 << 3,
};

// The address vector of a data QP, from THIS side's point of view.
struct QpAv {
  uint16_t dlid = 0;
  uint8_t sl = 0;
  uint8_t static_rate = 0;
  bool is_global = false;
  mad::Gid dgid;
  uint32_t flow_label = 0;
  uint8_t hop_limit = 0;
  uint8_t traffic_class = 0;
  uint8_t port_num = 1;
  uint16_t pkey_index = 0;
  uint8_t timeout = 0;  // local ACK timeout code
  uint8_t sgid_index = 0;  // events' ah_attr (RoCE multicast: the id's own GID)
  friend bool operator==(const QpAv&, const QpAv&) = default;
};

struct QpAttributes {
  uint32_t mask = 0;
  QpState state = QpState::kInit;
  uint32_t access_flags = 0;
  uint16_t pkey_index = 0;
  uint8_t port_num = 1;
  QpAv av;
  uint8_t path_mtu = 0;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;
  QpAv alt_av;
  uint32_t sq_psn = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t timeout = 0;
  bool path_mig_rearm = false;
};

// Per-endpoint counters. Attribute-indexed arrays use (AttributeID - 0x10),
// REQ = 0 .. APR = 10.
inline constexpr int kCmAttrCount = 11;
struct CmCounters {
  std::array<uint64_t, kCmAttrCount> sent{};
  std::array<uint64_t, kCmAttrCount> received{};
  std::array<uint64_t, kCmAttrCount> retransmitted{};
  std::array<uint64_t, kCmAttrCount> duplicates{};
  uint64_t stale_connections = 0;     // REJ 10 sent for a stale QPN / timewait
  uint64_t malformed = 0;             // failed to parse; dropped
  uint64_t unknown_connection = 0;    // no connection for the ids; dropped/answered
  uint64_t unexpected_state = 0;      // valid message for a connection in a state that ignores it
  uint64_t no_listener = 0;           // REJ 8 / SIDR_REP 1 sent
  uint64_t backlog_rejected = 0;      // REJ 3 sent
  uint64_t backlog_dropped = 0;
  uint64_t timeouts = 0;              // retries exhausted
  uint64_t auto_mra = 0;              // MRAs sent by the auto-MRA timer
  uint64_t mra_held = 0;              // SendMra kOnDuplicate: kept for a duplicate
  uint64_t rep_resent_for_duplicate_req = 0;  // REP_SENT: a duplicate REQ got the REP again
};

}  // namespace uscm::cm

#endif  // USCM_CM_TYPES_H_
