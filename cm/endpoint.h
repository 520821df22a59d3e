// The sans-IO InfiniBand CM endpoint: the connection state machine of one
// local port. It never does I/O, never reads a clock and never sleeps.
//
//   * Received MADs go in through HandleMad(now, from, bytes).
//   * Time goes in through HandleTimeout(now); NextDeadline() says when.
//   * User calls (Connect, Listen, Accept, Reject, Rtu, Disconnect, ...) take
//     `now` and return a Status that names what is wrong.
//   * What the endpoint wants sent comes out of PollTransmit; what the user
//     must hear comes out of PollEvent. Both are drained by the caller.
//
// A runtime (epoll + real clock) and a simulator (virtual clock) drive the
// same object. States, timers and what is sent when: docs/CM.md.
#ifndef USCM_CM_ENDPOINT_H_
#define USCM_CM_ENDPOINT_H_

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "cm/connection.h"
#include "cm/slot_map.h"
#include "cm/types.h"
#include "mad/iba_time.h"
#include "mad/queue_storage.h"
#include "mad/time.h"
#include "mad/timer_wheel.h"
#include "mad/transport.h"

namespace uscm::cm {

enum class BacklogPolicy : uint8_t {
  kReject,  // REJ 3 "no resources": the peer learns at once (default)
  kDrop,    // silently dropped, as Linux: the peer's REQ retries may succeed later
};

// When SendMra's MRA goes on the wire.
enum class MraTiming : uint8_t {
  kNow,
  kOnDuplicate,  // only in answer to a duplicate (Linux IB_CM_MRA_FLAG_DELAY)
};

struct CmConfig {
  // How IBA time codes become durations (exact 4.096us*2^t, or Linux's ms).
  mad::IbaTimeRounding rounding = mad::IbaTimeRounding::kExact;
  // Timer wheel resolution; deadlines round up to it.
  mad::Duration timer_tick = mad::Duration::Micros(1);
  BacklogPolicy backlog_overflow = BacklogPolicy::kReject;
  // Auto-MRA: if the user has not answered a REQ (or REP) within
  // auto_mra_percent % of the time the peer allows, send MRA with
  // mra_service_timeout. Duplicates in MRA_*_SENT re-send that MRA.
  bool auto_mra = true;
  uint32_t auto_mra_percent = 50;
  uint8_t mra_service_timeout = 24;  // ~68.7 s, as Linux rdma_cm
  // A duplicate REQ in REP_SENT: send the REP again at once (recovers a lost
  // REP one REQ timeout sooner), or drop it and leave the REP to its own
  // timer, as Linux cm_dup_req_handler (the rdma_cm API: under queueing each
  // late duplicate otherwise costs a REP and an RTU more).
  bool rep_for_duplicate_req = true;
  // TimeWait; default the connection's local ACK timeout (digest §4.4).
  absl::optional<mad::Duration> timewait;
  // Local comm IDs (and SIDR request IDs) all carry `comm_id_prefix` in their
  // top `comm_id_prefix_bits` bits: the range a MAD router (cm/router) gave
  // this process. 0 bits = the whole 32-bit space.
  uint8_t comm_id_prefix_bits = 0;
  uint32_t comm_id_prefix = 0;
};

class CmEndpoint {
 public:
  CmEndpoint(const mad::LocalPort& port, CmConfig config, uint64_t seed);
  CmEndpoint(const CmEndpoint&) = delete;
  CmEndpoint& operator=(const CmEndpoint&) = delete;

  // ---- driven by the runtime ----
  // Garbage from the peer is counted and dropped; never an error.
  void HandleMad(mad::TimePoint now, const mad::MadAddress& from,
                 std::span<const uint8_t> mad);
  void HandleTimeout(mad::TimePoint now);
  absl::optional<mad::TimePoint> NextDeadline() const;
  bool PollTransmit(OutgoingMad* out);
  // Hands every queued MAD to `send` in order, in place (no copy), and
  // empties the queue: what a PollTransmit loop does. `send` must not call
  // into this endpoint. Returns the number handed out.
  size_t DrainTransmit(absl::FunctionRef<void(const OutgoingMad&)> send);
  bool PollEvent(CmEvent* out);
  // Hands every queued event to `handle` in order, in place (no copy of the
  // ~500-byte CmEvent), and empties the queue: what a PollEvent loop does.
  // `handle` may call into this endpoint (Rtu, Reject, ...); events those
  // raise come after the ones already queued, as a PollEvent loop sees them.
  // It must not poll this endpoint's events itself. Returns how many.
  size_t DrainEvents(absl::FunctionRef<void(CmEvent&)> handle);
  // An event waits for PollEvent.
  bool has_events() const { return events_head_ < events_.size(); }

  // ---- user calls ----
  absl::StatusOr<ConnId> Connect(mad::TimePoint now, const ConnectParams& p);
  absl::StatusOr<ListenId> Listen(uint64_t service_id, uint64_t mask,
                                  uint32_t backlog, bool reuse);
  absl::Status StopListening(ListenId id);
  // Changes a live listener's backlog (>= 1). Connections already pending
  // stay; while `pending` >= the new backlog further REQs overflow
  // (CmConfig::backlog_overflow).
  absl::Status SetBacklog(ListenId id, uint32_t backlog);
  absl::Status Accept(mad::TimePoint now, ConnId id, const AcceptParams& p);
  absl::Status Reject(mad::TimePoint now, ConnId id, RejReason reason,
                      std::span<const uint8_t> private_data,
                      std::span<const uint8_t> ari = {});
  // rdma_reject_ece: REJ 35.
  absl::Status RejectEce(mad::TimePoint now, ConnId id,
                         std::span<const uint8_t> private_data) {
    return Reject(now, id, RejReason::kVendorOptionNotSupported, private_data);
  }
  // MRA for the REQ (REQ_RCVD), REP (REP_RCVD) or LAP received: the state
  // becomes MRA_*_SENT and the auto-MRA timer is off. kOnDuplicate sends
  // nothing now, only in answer to a duplicate of that message (Linux's
  // IB_CM_MRA_FLAG_DELAY, which rdma_cm sets on every REQ and REP it passes
  // to its user): a peer that is answered within its timeout sees no MRA.
  absl::Status SendMra(mad::TimePoint now, ConnId id, uint8_t service_timeout,
                       std::span<const uint8_t> private_data = {},
                       MraTiming timing = MraTiming::kNow);
  // Active side, after kConnectResponse: sends RTU, reports kEstablished.
  absl::Status Rtu(mad::TimePoint now, ConnId id,
                   std::span<const uint8_t> private_data = {});
  // Passive side: IBV_EVENT_COMM_EST on the data QP (the RTU may be lost).
  absl::Status NotifyCommEstablished(mad::TimePoint now, ConnId id);
  // DREQ from ESTABLISHED, or DREP after a DREQ was received.
  absl::Status Disconnect(mad::TimePoint now, ConnId id,
                          std::span<const uint8_t> private_data = {});
  absl::StatusOr<ConnId> SidrRequest(mad::TimePoint now,
                                     const SidrRequestParams& p);
  absl::Status SidrReply(mad::TimePoint now, ConnId id,
                         const SidrReplyParams& p);
  absl::Status LoadAlternatePath(mad::TimePoint now, ConnId id,
                                 const PathInfo& alternate,
                                 std::span<const uint8_t> private_data = {});
  absl::Status AprReply(mad::TimePoint now, ConnId id, uint8_t ap_status,
                        std::span<const uint8_t> info = {},
                        std::span<const uint8_t> private_data = {});
  // Releases the id: REJ 4 from REQ_SENT, REJ 28 from REQ_RCVD / REP_SENT /
  // REP_RCVD, DREQ from ESTABLISHED, DREP from DREQ_RCVD. The record lives on
  // (silently) through TimeWait and is freed when it reaches IDLE.
  absl::Status Destroy(mad::TimePoint now, ConnId id);

  // Pure function of the connection state (digest §5).
  absl::StatusOr<QpAttributes> GetQpAttributes(ConnId id, QpState state) const;

  // ---- inspection ----
  absl::StatusOr<CmState> State(ConnId id) const;
  absl::StatusOr<LapState> GetLapState(ConnId id) const;
  absl::StatusOr<uint32_t> LocalCommId(ConnId id) const;
  absl::StatusOr<Ece> RemoteEce(ConnId id) const;
  const CmCounters& counters() const { return counters_; }
  size_t connection_count() const { return conns_.size(); }
  size_t listener_count() const { return listeners_.size(); }
  // Entries in the lookup tables (all zero once every connection is freed).
  size_t table_entries() const {
    return by_local_id_.size() + by_remote_id_.size() + by_remote_qpn_.size() +
           sidr_table_.size();
  }
  bool timers_empty() const { return wheel_.empty(); }
  const mad::LocalPort& port() const { return port_; }
  // Prefetches the lines a call's first steps read (the tables' and the
  // wheel's headers, the queues), and nothing else: a simulator warms a
  // cold endpoint with it before a MAD reaches it.
  void PrefetchForWake() const;

 private:
  using Connection = internal::Connection;
  using TimerKind = internal::TimerKind;
  using Listener = internal::Listener;
  using RemoteKey = std::pair<uint32_t, uint64_t>;  // (id or QPN, CA GUID)

  // endpoint.cc: plumbing
  Connection* Find(ConnId id);
  const Connection* Find(ConnId id) const;
  absl::StatusOr<Connection*> FindOrError(ConnId id);
  ConnId IdOf(const Connection& c) const;
  Connection* ByLocalId(uint32_t local_comm_id);
  Connection* ByRemoteId(uint32_t remote_comm_id, uint64_t guid);
  ConnId NewConnection(Connection c);  // allocates the local comm ID
  void MaybeFree(ConnId id);
  uint32_t NewCommId();
  void SetRemote(Connection& c, uint32_t remote_comm_id, uint64_t guid);
  void InsertRemoteQpn(Connection& c, ConnId id);
  void RemoveRemoteQpn(Connection& c);
  void RemoveRemoteId(Connection& c);
  absl::optional<ListenId> MatchListener(uint64_t service_id);
  void LeaveBacklog(Connection& c);

  void Arm(Connection& c, ConnId id, TimerKind kind, mad::TimePoint deadline);
  void Disarm(Connection& c, TimerKind kind);
  void OnTimer(mad::TimePoint now, ConnId id, TimerKind kind);

  void Queue(const mad::MadAddress& to, std::span<const uint8_t> mad);
  // Emits through `emit` into a fresh buffer and queues it; our own format
  // errors are bugs (asserted) since every input was validated.
  template <typename Repr>
  void Send(const mad::MadAddress& to, const Repr& r);
  // The pooled buffer of c's outstanding request (taken from the pool if c
  // holds none); the request is formatted into it.
  std::span<uint8_t, mad::kMadSize> RequestBuffer(Connection& c);
  std::span<const uint8_t, mad::kMadSize> RequestMad(const Connection& c) const;
  // No request outstanding any more: disarmed, its buffer back in the pool.
  void EndRequest(Connection& c);
  // Arms retransmission of the request already formatted in RequestBuffer(c).
  void ArmRequest(mad::TimePoint now, Connection& c, ConnId id,
                  mad::wire::CmAttr attr, mad::Duration timeout, int retries,
                  const RetryPolicy& p);
  // Queues a formatted MAD (copy) and counts it.
  void QueueCounted(const mad::MadAddress& to, std::span<const uint8_t> mad);
  // Remembers the untimed answer just sent (RTU / MRA / DREP) so a duplicate
  // can be answered by formatting it again; ResendReply does that.
  void KeepReply(Connection& c, mad::wire::CmAttr attr,
                 std::span<const uint8_t> private_data, MsgRef mra_msg = MsgRef::kReq,
                 uint8_t mra_timeout = 0);
  void ResendReply(Connection& c);
  void Emit(CmEvent e);
  CmEvent MakeEvent(CmEventType t, const Connection& c) const;
  mad::Duration Ms(uint8_t code) const;  // IBA time code -> Duration
  mad::MadAddress AddressForPath(const PathInfo& p, uint16_t pkey) const;
  void CountSent(mad::wire::CmAttr a);
  void CountReceived(mad::wire::CmAttr a);
  void CountDuplicate(mad::wire::CmAttr a);

  // endpoint_active.cc
  void HandleRep(mad::TimePoint now, const mad::MadAddress& from,
                 std::span<const uint8_t> mad);
  void HandleMra(mad::TimePoint now, std::span<const uint8_t> mad);
  void HandleRej(mad::TimePoint now, std::span<const uint8_t> mad);
  void EnterTimeWait(mad::TimePoint now, Connection& c, ConnId id);
  void SendRej(Connection& c, RejReason reason, MsgRef msg,
               std::span<const uint8_t> ari, std::span<const uint8_t> pd);

  // endpoint_passive.cc
  void HandleReq(mad::TimePoint now, const mad::MadAddress& from,
                 std::span<const uint8_t> mad);
  void HandleRtu(mad::TimePoint now, std::span<const uint8_t> mad);
  // Sends the MRA (kNow) or keeps it for a duplicate (kOnDuplicate).
  void AnswerWithMra(Connection& c, MsgRef msg, uint8_t service_timeout,
                     std::span<const uint8_t> pd, MraTiming timing = MraTiming::kNow);

  // endpoint_disconnect.cc
  void HandleDreq(mad::TimePoint now, const mad::MadAddress& from,
                  std::span<const uint8_t> mad);
  void HandleDrep(mad::TimePoint now, std::span<const uint8_t> mad);
  void SendDreq(mad::TimePoint now, Connection& c, ConnId id,
                std::span<const uint8_t> pd);
  void SendDrep(mad::TimePoint now, Connection& c, ConnId id,
                std::span<const uint8_t> pd);

  // endpoint_sidr.cc
  void HandleSidrReq(mad::TimePoint now, const mad::MadAddress& from,
                     std::span<const uint8_t> mad);
  void HandleSidrRep(mad::TimePoint now, std::span<const uint8_t> mad);

  // endpoint_lap.cc
  void HandleLap(mad::TimePoint now, std::span<const uint8_t> mad);
  void HandleApr(mad::TimePoint now, std::span<const uint8_t> mad);

  mad::LocalPort port_;
  CmConfig config_;
  std::mt19937_64 rng_;
  uint32_t tid_counter_ = 0;
  uint32_t timer_generation_ = 0;

  SlotMap<Connection> conns_;
  SlotMap<Listener> listeners_;
  absl::flat_hash_map<uint32_t, uint32_t> by_local_id_;  // -> slot index
  absl::flat_hash_map<RemoteKey, uint32_t> by_remote_id_;
  absl::flat_hash_map<RemoteKey, uint32_t> by_remote_qpn_;
  // SIDR duplicates: (request id, source LID) -> slot index.
  absl::flat_hash_map<std::pair<uint32_t, uint16_t>, uint32_t> sidr_table_;

  // Formatted requests under retransmission (Outstanding::buffer).
  std::vector<std::array<uint8_t, mad::kMadSize>> request_pool_;
  std::vector<uint32_t> free_requests_;

  mad::TimerWheel wheel_;
  // FIFO queues drained by PollTransmit / PollEvent: vectors read from a
  // head index; a queue that drains empty gives its buffer to the thread's
  // QueueStorage and takes one from there for its next item, so one warm
  // buffer serves all of a thread's endpoints (no allocation per MAD or
  // event once warm).
  std::vector<OutgoingMad> tx_;
  size_t tx_head_ = 0;
  std::vector<CmEvent> events_;
  size_t events_head_ = 0;
  // DrainEvents swaps the queue in here and reads it in place (empty, its
  // capacity kept, between calls).
  std::vector<CmEvent> draining_;
  CmCounters counters_;
};

}  // namespace uscm::cm

#endif  // USCM_CM_ENDPOINT_H_
