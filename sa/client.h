// The SA client: PathRecord and MCMemberRecord queries, multicast join and
// leave, and the SA's ClassPortInfo, on top of a MAD agent (mad/agent.h).
//
// Sans-IO like the agent: calls take `now` and return a query id; the owner
// drives the agent (mad/agent_pump.h) and drains SaResults with PollResult()
// (the agent hands each completion to the client that started it, so several
// clients, and the CM, can share one agent). Many
// queries may be outstanding; the agent's window, retries, backoff and Busy
// handling apply to each. The client works on any transport: with kernel
// RMPP (umad) the agent hands over the coalesced GetTable response, otherwise
// it reassembles the segments itself.
//
// Identical queries in flight are coalesced: a query whose request MAD is
// byte for byte one already on the wire (a burst of connects to one host all
// asking the same PathRecord) sends nothing; it gets its own id and a copy of
// the answer, or of the failure, when the one on the wire completes. When the
// one on the wire is presumed lost (Agent::PresumedLost: unanswered for longer
// than the SA's answers take), the new query goes on the wire instead, and
// the lost one and its waiters are answered with it (the lost one is
// cancelled, so they wait one round trip, not a retransmission timeout). An
// answered ClassPortInfo bounds the agent's retransmission timeout for the SA
// (RespTimeValue plus two packet lifetimes, IBA 13.4.6.2).
#ifndef USCM_SA_CLIENT_H_
#define USCM_SA_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/agent.h"
#include "mad/gid.h"
#include "mad/queue_storage.h"
#include "mad/time.h"
#include "mad/transport.h"
#include "mad/wire/class_port_info.h"
#include "mad/wire/mcmember_record.h"
#include "mad/wire/path_record.h"
#include "sa/path_cache.h"

namespace uscm::sa {

using mad::Gid;
using mad::TimePoint;

// A PathRecord query: each setter fills the template field and its
// ComponentMask bit, so any combination can be expressed.
class PathQuery {
 public:
  PathQuery& Sgid(const Gid& g);
  PathQuery& Dgid(const Gid& g);
  PathQuery& Slid(uint16_t lid);
  PathQuery& Dlid(uint16_t lid);
  PathQuery& PKey(uint16_t pkey);
  PathQuery& ServiceId(uint64_t id);  // sets both ServiceID mask bits
  PathQuery& Sl(uint8_t sl);
  PathQuery& TClass(uint8_t tclass);
  PathQuery& QosClass(uint16_t qos);
  PathQuery& FlowLabel(uint32_t label);
  PathQuery& HopLimit(uint8_t hops);
  PathQuery& Mtu(mad::wire::Selector sel, mad::wire::Mtu mtu);
  PathQuery& Rate(mad::wire::Selector sel, uint8_t rate);
  PathQuery& PacketLifeTime(mad::wire::Selector sel, uint8_t plt);
  PathQuery& NumbPath(uint8_t n);
  PathQuery& Reversible(bool r);

  // What rdma_cm asks (digest §6.1): SGID, DGID, P_Key, NumbPath 1,
  // Reversible, and the ServiceID.
  static PathQuery RdmaCm(const Gid& sgid, const Gid& dgid, uint16_t pkey, uint64_t service_id);

  const mad::wire::PathRecord& record() const { return record_; }
  mad::wire::PathRecordMask mask() const { return mask_; }
  // "from fe80::2 to fe80::3" (or LIDs), for error messages.
  std::string Describe() const;

 private:
  mad::wire::PathRecord record_;
  mad::wire::PathRecordMask mask_;
};

// What a member needs to send to (and receive from) a multicast group.
struct McGroup {
  Gid mgid;
  uint16_t mlid = 0;
  uint32_t qkey = 0;
  uint16_t pkey = 0;
  uint8_t sl = 0;
  uint8_t tclass = 0;
  uint32_t flow_label = 0;
  uint8_t hop_limit = 0;
  uint8_t rate = 0;
  mad::wire::Mtu mtu{};
  uint8_t packet_life_time = 0;
  mad::wire::JoinState join_state;
  uint32_t remote_qpn = 0xFFFFFF;  // a UD send to a group goes to QPN 0xFFFFFF

  static McGroup FromRecord(const mad::wire::McMemberRecord& r);
};

// A join (SubnAdmSet MCMemberRecord). mgid all-zero = the SA assigns one.
// Creating a group needs Q_Key, P_Key, SL, flow label and TClass (OpenSM
// insists on their mask bits); MTU and rate go with their selectors.
struct McJoin {
  Gid mgid;
  Gid port_gid;
  mad::wire::JoinState join_state{mad::wire::JoinState::kFullMember};
  uint32_t qkey = 0;
  uint16_t pkey = 0xFFFF;
  uint8_t sl = 0;
  uint8_t tclass = 0;
  uint32_t flow_label = 0;
  absl::optional<mad::wire::Mtu> mtu;        // sent with selector "exactly"
  absl::optional<uint8_t> rate;              // sent with selector "exactly"
  absl::optional<mad::wire::McScope> scope;  // for SA-assigned MGIDs
  bool create = true;  // include the create components (else join existing only)
};

struct SaResult {
  uint64_t id = 0;
  absl::Status status;
  std::vector<mad::wire::PathRecord> paths;       // GetPath: exactly one
  std::vector<mad::wire::McMemberRecord> members;
  absl::optional<McGroup> group;                  // Join / Leave
  absl::optional<mad::wire::ClassPortInfo> class_port_info;
  bool from_cache = false;
};

struct SaClientConfig {
  mad::MadAddress sa;  // the SA: SM LID, QP1, Q_Key 0x80010000
  // Cache PathRecords answered to Get queries that name SGID and DGID.
  PathCache* path_cache = nullptr;
  mad::Duration path_ttl = mad::Duration::Seconds(300);
  // Send a query identical to one in flight (no coalescing).
  bool coalesce = true;
  // The packet lifetime (IBA time code) added twice to the SA's advertised
  // RespTimeValue for the response bound: 18 (~1.07 s) is OpenSM's default
  // subnet packet_life_time.
  uint8_t sa_packet_life_time = 18;
};

// The SA's address as a port sees it (SM LID / SL, QP1, P_Key 0xFFFF's index).
mad::MadAddress SaAddressFor(const mad::LocalPort& port);

struct SaClientCounters {
  uint64_t queries = 0;
  uint64_t cache_hits = 0;
  uint64_t coalesced = 0;   // answered by an identical query already in flight
  // Waiters answered DeadlineExceeded at their own deadline while the query
  // they were coalesced into went on for later deadlines (not in `failures`,
  // which counts queries on the wire).
  uint64_t waiter_deadlines = 0;
  uint64_t superseded = 0;  // queries presumed lost whose waiters moved to a new one
  uint64_t sa_errors = 0;   // answered with a non-zero SA status
  uint64_t failures = 0;    // no answer (timeout, busy, RMPP abort)
  uint64_t bad_responses = 0;
};

class SaClient : public mad::CompletionSink, public mad::TimerSink {
 public:
  // `agent` is shared (the CM may use it too) and must outlive the client.
  SaClient(mad::Agent* agent, SaClientConfig config);
  ~SaClient() override;
  SaClient(const SaClient&) = delete;
  SaClient& operator=(const SaClient&) = delete;

  // Get: exactly one path (NotFound when the SA has none, FailedPrecondition
  // when the query matches several). Served from the cache when possible.
  // `deadline`: DeadlineExceeded then at the latest (rdma_resolve_route's
  // timeout_ms). Each query keeps its own, coalesced or not (the kernel sends
  // each ib_sa_path_rec_get on its own): a waiter whose deadline passes is
  // answered DeadlineExceeded then while the query goes on for the others;
  // the query on the wire lives until its last waiter's deadline (none while
  // one waiter has none).
  absl::StatusOr<uint64_t> GetPath(TimePoint now, const PathQuery& q,
                                   absl::optional<TimePoint> deadline = absl::nullopt);
  // GetPath, with a path cache hit handed back in *hit instead of queued as
  // an SaResult (nothing to poll; the returned id is finished). Counted and
  // numbered as GetPath; a miss is GetPath's query.
  absl::StatusOr<uint64_t> GetPathOrCached(TimePoint now, const PathQuery& q,
                                           absl::optional<mad::wire::PathRecord>* hit,
                                           absl::optional<TimePoint> deadline = absl::nullopt);
  // GetTable: every matching path (possibly none).
  absl::StatusOr<uint64_t> GetPaths(TimePoint now, const PathQuery& q);

  absl::StatusOr<uint64_t> Join(TimePoint now, const McJoin& join);
  // Delete with JoinState = the bits to leave.
  absl::StatusOr<uint64_t> Leave(TimePoint now, const Gid& mgid, const Gid& port_gid,
                                 mad::wire::JoinState bits);
  // GetTable MCMemberRecord with any template and mask.
  absl::StatusOr<uint64_t> GetMcMembers(TimePoint now, const mad::wire::McMemberRecord& tmpl,
                                        mad::wire::McMemberRecordMask mask);
  absl::StatusOr<uint64_t> GetClassPortInfo(TimePoint now);

  absl::optional<SaResult> PollResult();
  size_t pending_results() const { return results_.size(); }

  void OnCompletion(TimePoint now, mad::Completion completion) override;
  // A waiter's own deadline (the agent's timer): DeadlineExceeded for it.
  void OnTimer(TimePoint now, uint64_t waiter) override;

  size_t outstanding() const { return queries_.size(); }
  const SaClientCounters& counters() const { return counters_; }
  // Prefetches this object (5 lines); see mad::Agent::PrefetchForWake.
  void PrefetchForWake() const;

 private:
  enum class Kind : uint8_t { kPath, kPaths, kJoin, kLeave, kMembers, kClassPortInfo };
  // A query id waiting for a query on the wire, with its own deadline; the
  // agent's timer for it while the wire query's deadline is later.
  struct Waiter {
    uint64_t id = 0;
    absl::optional<TimePoint> deadline;
    uint64_t timer = 0;  // Agent::StartTimer's id, 0 none
  };
  struct Query {
    Kind kind;
    std::string what;  // for error messages
    absl::optional<PathCacheKey> cache_key;
    mad::RequestId request = 0;      // the agent's
    std::string flight_key;          // the request MAD, while in flight_
    // Everyone answered with this query, in the order asked: a superseded
    // lost query's waiters first, then the one that sent it, then the
    // coalesced ones.
    std::vector<Waiter> waiters;
    absl::optional<TimePoint> deadline;  // the request's: the waiters' latest
    // Waiters without a timer whose deadline is the request's (its expiry
    // answers them); they need one when the deadline moves later.
    size_t untimed = 0;
  };

  absl::StatusOr<uint64_t> Start(TimePoint now, Kind kind, std::string what,
                                 std::span<const uint8_t> mad,
                                 absl::optional<PathCacheKey> cache_key = absl::nullopt,
                                 absl::optional<TimePoint> deadline = absl::nullopt);
  // A new waiter joins query `qid` in flight: a later deadline (or none)
  // extends the request's, and the waiters it held get timers.
  void AddWaiter(uint64_t qid, Query& q, Waiter w);
  // Appends `w` to `q` (whose deadline already covers it): a timer when its
  // deadline is earlier than the request's.
  void Place(uint64_t qid, Query& q, Waiter w);
  SaResult Convert(const Query& q, const mad::Completion& c);
  absl::Status SaError(const Query& q, uint16_t status) const;

  mad::Agent* agent_;
  SaClientConfig config_;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<uint64_t, Query> queries_;  // by cookie = query id
  absl::flat_hash_map<std::string, uint64_t> flight_;  // request MAD -> query id
  absl::flat_hash_map<uint64_t, uint64_t> timed_waiters_;  // waiter with a timer -> query id
  mad::RecycledFifo<SaResult> results_;  // one warm buffer for a thread's clients
  SaClientCounters counters_;
};

}  // namespace uscm::sa

#endif  // USCM_SA_CLIENT_H_
