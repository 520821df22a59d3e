// The MAD agent: requests and responses over one transport, sans-IO.
//
// It allocates transaction IDs, matches responses to requests, retransmits
// with exponential backoff, limits outstanding requests per destination,
// backs off when the responder says Busy, reassembles RMPP responses (when
// the transport does not), sends RMPP transfers (for a responder such as the
// simulated SA), and hands every other received MAD to the handler registered
// for its (class, attribute).
//
// Nothing here does I/O or reads a clock. The owner:
//   - feeds received MADs:         OnReceive(now, mad)
//   - runs timers:                 OnTimeout(now) at or after NextDeadline()
//   - drains MADs to send:         PollTransmit() -> Transport::Send
//   - drains finished requests:    PollCompletion()
// mad/agent_pump.h does those four steps against a Transport.
//
// Transaction IDs: umad overwrites TID bits 63..32 of every request it sends,
// so the agent owns only the low 32 bits and matches responses on
// (class, low 32 bits), then checks attribute, method and source.
#ifndef USCM_MAD_AGENT_H_
#define USCM_MAD_AGENT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/queue_storage.h"
#include "mad/rmpp_receiver.h"
#include "mad/rto_estimator.h"
#include "mad/time.h"
#include "mad/timer_wheel.h"
#include "mad/transport.h"
#include "mad/wire/mad_header.h"

namespace uscm::mad {

struct AgentConfig {
  // Retransmission: attempt k (k = 0 first) waits
  // min(rto * backoff_factor^k, max_timeout) for its response, where rto is
  // the destination's measured retransmission timeout (mad/rto_estimator.h,
  // RFC 6298) when adaptive_timeout is set, else base_timeout.
  Duration base_timeout = Duration::Millis(1000);  // also the RTO before any answer
  int max_retries = 3;
  int backoff_factor = 2;
  Duration max_timeout = Duration::Seconds(16);
  bool adaptive_timeout = true;
  Duration min_timeout = RtoConfig{}.floor;  // the RTO's floor (its reason there)

  // A Busy answer resends after the attempt's timeout interval, consuming one
  // retry (the responder asked us to slow down).
  // Outstanding requests per destination (LID, or GID with a GRH); more wait.
  // A request presumed lost gives its slot to the next waiting one, and its
  // retransmissions go out beside the window: a lost request does not hold
  // back the requests behind it for its timeouts. Presumed lost: timed out,
  // or (RACK, RFC 8985 6.2) a request sent after it was answered and it has
  // waited longer than SRTT + SRTT/4. A slow responder answering in order
  // gives no such evidence, so the window still paces it.
  size_t window = 4;
  // Check that a response comes from the LID the request went to (off for
  // permissive / GRH destinations).
  bool check_source = true;
  // Bits 63..32 of emitted TIDs (a transport that rewrites them ignores this).
  uint32_t tid_high = 0;
  // The first low TID; a random start avoids matching a previous run's answers.
  uint32_t first_tid = 1;
  // Reassemble RMPP here; set from Transport::caps().kernel_rmpp == false.
  bool rmpp_reassembly = true;
  RmppConfig rmpp;
  Duration tick = Duration::Millis(1);  // timer wheel resolution
};

struct AgentCounters {
  uint64_t sent = 0;        // MADs handed out by PollTransmit
  uint64_t received = 0;    // MADs given to OnReceive
  uint64_t retries = 0;     // request retransmissions (timeouts and Busy)
  uint64_t timeouts = 0;    // requests failed after all retries
  uint64_t busy = 0;        // Busy answers
  uint64_t dropped = 0;     // unsolicited MADs nobody registered for
  uint64_t malformed = 0;   // unparsable MADs
  uint64_t unmatched = 0;   // responses without a matching request
  uint64_t completed = 0;   // requests answered
  uint64_t cancelled = 0;
  uint64_t queued = 0;      // requests that had to wait for the window
  uint64_t slots_released = 0;  // timed-out requests that gave their window slot up
  uint64_t rtt_samples = 0;     // answers to first transmissions (RFC 6298 samples)
  RmppCounters rmpp;
};

using RequestId = uint64_t;

struct OutgoingMad {
  MadAddress to;
  Mad data;
};

// A finished request: the response, or why there is none.
struct Completion {
  RequestId id = 0;
  uint64_t cookie = 0;          // what the caller passed to SendRequest
  absl::Status status;          // OK, DeadlineExceeded, Unavailable (Busy), Aborted (RMPP)
  MadAddress from;
  // The response MAD (256 bytes), or for an RMPP transfer the 56 header bytes
  // followed by the reassembled data. Empty unless status is OK. MAD status
  // bits other than Busy are left for the caller to interpret.
  std::vector<uint8_t> response;
  int retries = 0;
};

// Receives the Completion of requests started with it (instead of the
// PollCompletion queue). Called from inside OnReceive / OnTimeout / Cancel;
// it may start new requests.
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual void OnCompletion(TimePoint now, Completion completion) = 0;
};

// Receives the timers started with Agent::StartTimer (a caller's own
// deadlines, run by the agent's timer wheel so its owner drives them too).
class TimerSink {
 public:
  virtual ~TimerSink() = default;
  virtual void OnTimer(TimePoint now, uint64_t cookie) = 0;
};

// Receives unsolicited MADs (requests, Sends, Traps) of one class/attribute.
class MadHandler {
 public:
  virtual ~MadHandler() = default;
  virtual void OnMad(TimePoint now, const ReceivedMad& mad) = 0;
};

inline constexpr uint16_t kAnyAttribute = 0xFFFF;

class Agent {
 public:
  Agent(AgentConfig config, TimePoint now);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Starts a request (`mad` is a 256-byte request MAD; its TID is replaced).
  // The request goes out at once or waits for the destination's window. Its
  // outcome arrives as exactly one Completion, unless it is cancelled: given
  // to `sink` when there is one, else queued for PollCompletion.
  // Errors: a MAD that is not 256 bytes, has the response bit set, or has an
  // unparsable header.
  // `deadline`: the request fails (DeadlineExceeded) then, whatever retries
  // remain, as the kernel's SA queries end at the caller's timeout_ms
  // (ib_sa_path_rec_get); a request still waiting for the window fails too.
  absl::StatusOr<RequestId> SendRequest(TimePoint now, const MadAddress& to,
                                        std::span<const uint8_t> mad, uint64_t cookie = 0,
                                        CompletionSink* sink = nullptr,
                                        absl::optional<TimePoint> deadline = absl::nullopt);
  // Forgets a request (no Completion); false if it is not pending.
  bool Cancel(TimePoint now, RequestId id);
  // Moves a pending request's deadline later (`deadline` later than its
  // own, or none: no deadline); an earlier one is ignored. The attempt in
  // flight keeps its retransmission time. False if the request is not
  // pending. (The SA client: a coalesced query lives until its last
  // waiter's deadline.)
  bool ExtendDeadline(RequestId id, absl::optional<TimePoint> deadline);
  // `sink->OnTimer(now, cookie)` once, from OnTimeout at or after `at`,
  // unless cancelled. Returns the timer's id (never 0).
  uint64_t StartTimer(TimePoint at, TimerSink* sink, uint64_t cookie);
  // False if the timer fired or was cancelled already.
  bool CancelTimer(uint64_t timer_id);
  // What `to` promises (an answer is due within `bound`, e.g. from an SA's
  // ClassPortInfo): its RTO never exceeds it. Zero removes the bound.
  void SetResponseBound(const MadAddress& to, Duration bound);
  // Whether request `id` is presumed lost: retransmitted, or unanswered for
  // longer than its destination's answers take (max(2 SRTT, SRTT + 4 RTTVAR),
  // the RTO without its floor: the floor guards against retransmitting, not
  // against asking again). False for a request that is not pending or still
  // waits for the window. The SA client uses it to stop waiting on a query.
  bool PresumedLost(TimePoint now, RequestId id) const;
  // The retransmission timeout state for `to`, or nullptr if nothing was
  // measured or bounded for it.
  const RtoEstimator* Rto(const MadAddress& to) const;
  // Queues a MAD without tracking (a Send, or a response to a request).
  absl::Status SendUntracked(const MadAddress& to, std::span<const uint8_t> mad);
  // Answers with an RMPP transfer: `header` = the 56 bytes of MAD + RMPP + SA
  // header of the response (RMPP fields are filled in), `payload` = the data.
  absl::Status SendRmpp(TimePoint now, const MadAddress& to, std::span<const uint8_t> header,
                        std::span<const uint8_t> payload);

  // Unsolicited MADs of `mgmt_class` (and `attribute_id`, or kAnyAttribute)
  // go to `handler`, which must outlive the registration. An exact attribute
  // wins over kAnyAttribute. Registering a taken key replaces the handler.
  void RegisterHandler(uint8_t mgmt_class, uint16_t attribute_id, MadHandler* handler);
  void UnregisterHandler(uint8_t mgmt_class, uint16_t attribute_id);

  void OnReceive(TimePoint now, const ReceivedMad& mad);
  void OnTimeout(TimePoint now);
  // Never later than the earliest timer (possibly earlier: calling OnTimeout
  // then is harmless and makes progress toward it).
  absl::optional<TimePoint> NextDeadline() const { return wheel_.NextDeadline(); }

  absl::optional<OutgoingMad> PollTransmit();
  absl::optional<Completion> PollCompletion();

  bool has_output() const { return !out_.empty(); }
  const AgentCounters& counters() const { return counters_; }
  const AgentConfig& config() const { return config_; }
  // Prefetches this object (21 lines: its counters, wheel and tables'
  // headers); a simulator warms a cold agent with it before a MAD lands.
  void PrefetchForWake() const;
  size_t pending_requests() const { return requests_.size(); }
  size_t rmpp_sends() const { return senders_.size(); }
  size_t lingering() const { return lingering_.size(); }
  // Nothing pending at all: requests, transfers, queued output, completions,
  // StartTimer timers.
  bool idle() const;

 private:
  enum class TimerKind : uint8_t {
    kRequest = 1,
    kRmppRecv = 2,
    kRmppSend = 3,
    kLinger = 4,
    kCaller = 5,  // StartTimer
  };

  struct Request {
    RequestId id = 0;
    uint64_t cookie = 0;
    CompletionSink* sink = nullptr;
    uint32_t tid_low = 0;
    uint8_t mgmt_class = 0;
    uint8_t method = 0;
    uint16_t attribute_id = 0;
    MadAddress to;
    Mad mad{};
    uint64_t dest = 0;
    bool started = false;    // sent at least once (not waiting for the window)
    bool in_window = false;  // holds one of the destination's window slots
    TimePoint first_sent;
    TimePoint last_sent;
    bool busy_wait = false;  // the timer resends (after Busy) instead of retrying
    int retries = 0;
    absl::optional<TimePoint> deadline;  // SendRequest's
    TimePoint attempt_end;  // the attempt's timer before the deadline cut it
    TimerHandle timer;
    std::unique_ptr<RmppReceiver> rmpp;  // while a segmented response arrives
    TimerHandle rmpp_timer;
  };
  // What the answers of one destination tell (kept for at most 4096).
  struct Responder {
    RtoEstimator rto;
    TimePoint newest_answered;  // when the latest-sent answered request went out (RACK)
  };
  struct Destination {
    std::vector<RequestId> slots;  // requests holding the window (at most `window`)
    std::deque<RequestId> waiting;
  };
  // A finished RMPP receive kept for a while so a repeated last segment is
  // ACKed again.
  struct Lingering {
    std::unique_ptr<RmppReceiver> rmpp;
    uint64_t match = 0;
    TimerHandle timer;
  };
  struct SendKey {
    uint64_t tid;
    uint16_t lid;
    uint32_t qpn;
    friend bool operator==(const SendKey&, const SendKey&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const SendKey& k) {
      return H::combine(std::move(h), k.tid, k.lid, k.qpn);
    }
  };
  struct Sender {
    std::unique_ptr<RmppSender> rmpp;
    uint64_t id = 0;
    TimerHandle timer;
  };
  struct CallerTimer {
    TimerSink* sink = nullptr;
    uint64_t cookie = 0;
    TimerHandle timer;
  };

  static uint64_t MatchKey(uint8_t mgmt_class, uint32_t tid_low) {
    return uint64_t{mgmt_class} << 32 | tid_low;
  }
  static uint64_t DestKey(const MadAddress& to);
  Duration AttemptTimeout(const Request& r) const;
  Responder& ResponderFor(uint64_t dest);

  void Transmit(Request& r, TimePoint now);
  void Finish(TimePoint now, RequestId id, absl::Status status, const MadAddress& from,
              std::vector<uint8_t> response);
  // Gives up `r`'s window slot (if it holds one) and starts the next waiting.
  void Release(Request& r, TimePoint now);
  void Sample(const Request& r, TimePoint now);  // an RTT sample, by Karn's rule
  // RACK's loss rule for the window (see `window`).
  bool LostByLaterAnswer(const Request& r, TimePoint now) const;
  void StartWaiting(uint64_t dest, TimePoint now);
  void ArmRequest(Request& r, TimePoint deadline);
  TimerHandle Arm(TimerKind kind, uint64_t id, TimePoint deadline);
  void Flush(std::vector<Mad>& mads, const MadAddress& to);

  // The started request `mad` answers, or nullptr.
  Request* Match(const ReceivedMad& mad, const wire::MadHeader& h);
  void OnResponse(TimePoint now, const ReceivedMad& mad, const wire::MadHeader& h);
  void OnRmppResponse(TimePoint now, Request& r, const ReceivedMad& mad,
                      const wire::RmppHeader& rmpp);
  bool OnRmppControl(TimePoint now, const ReceivedMad& mad, uint64_t tid,
                     const wire::RmppHeader& rmpp);
  void Dispatch(TimePoint now, const ReceivedMad& mad, uint8_t mgmt_class,
                uint16_t attribute_id);
  void Expire(TimePoint now, TimerHandle handle, TimerKind kind, uint64_t id);

  AgentConfig config_;
  AgentCounters counters_;
  TimerWheel wheel_;
  uint32_t next_tid_;
  RequestId next_id_ = 1;
  uint64_t next_linger_ = 1;
  absl::flat_hash_map<RequestId, Request> requests_;
  absl::flat_hash_map<uint64_t, RequestId> by_match_;  // MatchKey -> request
  absl::flat_hash_map<uint64_t, Destination> destinations_;
  absl::flat_hash_map<uint64_t, Responder> responders_;  // by DestKey
  absl::flat_hash_map<uint64_t, Lingering> lingering_;   // id -> finished receive
  absl::flat_hash_map<uint64_t, uint64_t> linger_by_match_;
  absl::flat_hash_map<SendKey, Sender> senders_;
  absl::flat_hash_map<uint64_t, SendKey> sender_ids_;
  uint64_t next_sender_ = 1;
  absl::flat_hash_map<uint64_t, CallerTimer> caller_timers_;
  uint64_t next_caller_timer_ = 1;
  absl::flat_hash_map<uint32_t, MadHandler*> handlers_;  // class << 16 | attribute
  // Waiting for PollTransmit (one warm buffer for all of a thread's agents).
  RecycledFifo<OutgoingMad> out_;
  std::deque<Completion> completions_;
  std::vector<Mad> scratch_;
};

}  // namespace uscm::mad

#endif  // USCM_MAD_AGENT_H_
