// A Subnet Administrator for the simulated fabric (mad/sim/fabric.h). It runs
// on the SM node's QP1 and answers as OpenSM does (digest §6, §10 item 10):
//
//   PathRecord      Get / GetTable from the fabric's topology and routes:
//                   LIDs, GIDs, MTU, rate (slowest link), SL 0, a configured
//                   PacketLifeTime; selectors and P_Key honoured.
//   MCMemberRecord  Set (join; MGID 0 -> FF1<scope>:A01B:<prefix>:<n>, MLIDs
//                   from 0xC000), Delete (leave; the group goes when its last
//                   full member does), Get / GetTable.
//   ClassPortInfo   Get (CapabilityMask2 bit 12 per configuration).
//
// Set is answered with GetResp (0x81), Delete with DeleteResp (0x95);
// GetTableResp is always RMPP, even for one segment or an error; Get with
// more than one match answers ERR_TOO_MANY_RECORDS, with none
// ERR_NO_RECORDS. Anything else: "method/attribute not supported".
#ifndef USCM_SA_SIM_SA_H_
#define USCM_SA_SIM_SA_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/agent.h"
#include "mad/sim/fabric.h"
#include "mad/sim/scheduler.h"
#include "mad/transport.h"
#include "mad/wire/mcmember_record.h"
#include "mad/wire/path_record.h"

namespace uscm::sa {

// Drives one Agent on one Transport from the simulation scheduler: woken when
// a MAD is waiting (`has_input`) or a timer is due, it pumps the agent, then
// calls `on_wake` (where a test may poll results or start queries) and sends
// what was queued.
class AgentActor : public sim::Actor {
 public:
  AgentActor(mad::Transport& transport, mad::Agent& agent, std::function<bool()> has_input,
             std::function<absl::optional<mad::TimePoint>()> extra_deadline = nullptr,
             std::function<void(mad::TimePoint)> on_wake = nullptr);

  absl::optional<mad::TimePoint> NextDeadline() const override;
  void Wake(mad::TimePoint now) override;
  uint64_t send_errors() const { return send_errors_; }

 private:
  mad::Transport& transport_;
  mad::Agent& agent_;
  std::function<bool()> has_input_;
  std::function<absl::optional<mad::TimePoint>()> extra_deadline_;
  std::function<void(mad::TimePoint)> on_wake_;
  uint64_t send_errors_ = 0;
};

struct SimSaConfig {
  uint8_t packet_life_time = 18;  // PathRecord / new groups (4.096 us * 2^18 ~ 1.07 s)
  uint8_t default_mc_rate = 3;    // 10 Gb/s, when a creating join names none
  bool send_only_full_member = true;  // ClassPortInfo CapabilityMask2 bit 12
  uint8_t resp_time_value = 18;
  int busy_answers = 0;  // answer the first N requests Busy (tests)
  // The SA as one server with a FIFO queue: each request takes
  // `service_time` (Zero: answered the moment it arrives, no queue, as
  // before); requests arriving while `queue_limit` are waiting or in service
  // are dropped (the clients' agents retry them); 0 = no limit.
  mad::Duration service_time = mad::Duration::Zero();
  size_t queue_limit = 0;
  mad::AgentConfig agent;
};

struct SimSaCounters {
  uint64_t requests = 0;
  uint64_t errors = 0;  // answered with a non-zero status
  uint64_t busy = 0;
  uint64_t tables = 0;  // GetTable answers (RMPP transfers)
  // With a service time: requests that waited and were served, the sum of
  // their waits (arrival to the start of service), the longest queue
  // (waiting + in service), and the requests dropped at the queue limit.
  uint64_t served = 0;
  int64_t wait_ns_total = 0;
  size_t max_queue = 0;
  uint64_t dropped = 0;
};

class SimSa : public mad::MadHandler {
 public:
  // Opens QP1 on the SM's port and registers an actor with the scheduler.
  static absl::StatusOr<std::unique_ptr<SimSa>> Create(sim::Fabric& fabric,
                                                       SimSaConfig config = {});
  ~SimSa() override;

  void OnMad(mad::TimePoint now, const mad::ReceivedMad& mad) override;

  mad::Agent& agent() { return *agent_; }
  const SimSaCounters& counters() const { return counters_; }
  // Requests waiting or in service now (0 without a service time).
  size_t queue_depth() const { return queue_.size(); }
  size_t groups() const { return groups_.size(); }
  // Members of a group (0 if the group does not exist).
  size_t members(const mad::Gid& mgid) const;

 private:
  struct Group {
    mad::wire::McMemberRecord record;  // port_gid / join_state unused
    absl::btree_map<mad::Gid, uint8_t> members;  // port GID -> JoinState bits
  };
  using Mad = std::array<uint8_t, mad::kMadSize>;

  SimSa(sim::Fabric& fabric, std::unique_ptr<sim::SimTransport> transport, SimSaConfig config);

  void OnPathRecord(mad::TimePoint now, const mad::ReceivedMad& mad, uint8_t method);
  void OnMcMember(mad::TimePoint now, const mad::ReceivedMad& mad, uint8_t method);
  void OnClassPortInfo(mad::TimePoint now, const mad::ReceivedMad& mad, uint8_t method);

  // Paths matching a query, or an SA status.
  absl::StatusOr<std::vector<mad::wire::PathRecord>> FindPaths(
      const mad::wire::PathRecord& q, mad::wire::PathRecordMask mask, uint16_t* status) const;
  uint16_t Join(const mad::wire::McMemberRecord& q, mad::wire::McMemberRecordMask mask,
                mad::wire::McMemberRecord* out);
  uint16_t Leave(const mad::wire::McMemberRecord& q, mad::wire::McMemberRecordMask mask,
                 mad::wire::McMemberRecord* out);
  std::vector<mad::wire::McMemberRecord> FindMembers(const mad::wire::McMemberRecord& q,
                                                     mad::wire::McMemberRecordMask mask) const;

  // Answers: a single MAD (`method` = the response method) or an RMPP table.
  void Reply(const mad::ReceivedMad& req, uint8_t method, uint16_t status,
             std::span<const uint8_t> record, size_t record_bytes);
  void ReplyTable(mad::TimePoint now, const mad::ReceivedMad& req, uint16_t status,
                  std::span<const uint8_t> payload, uint16_t attribute_offset);
  void ReplyError(mad::TimePoint now, const mad::ReceivedMad& req, uint16_t status);

  sim::Fabric& fabric_;
  std::unique_ptr<sim::SimTransport> transport_;
  // The server (service_time > 0).
  struct Queued {
    mad::TimePoint arrived;
    mad::MadAddress from;
    uint16_t len = 0;
    std::array<uint8_t, mad::kMadSize> data;
  };
  void Serve(mad::TimePoint now, const mad::ReceivedMad& mad);  // answers one request
  void StartService(mad::TimePoint now);
  void CompleteService();
  std::deque<Queued> queue_;  // front: in service while busy_
  bool busy_ = false;
  sim::Scheduler::EventId service_event_ = 0;

  SimSaConfig config_;
  std::unique_ptr<mad::Agent> agent_;
  std::unique_ptr<AgentActor> actor_;
  SimSaCounters counters_;
  absl::btree_map<mad::Gid, Group> groups_;
  absl::flat_hash_set<uint16_t> mlids_;
  uint16_t next_mlid_ = 0xC000;
  uint32_t next_mgid_ = 1;
};

}  // namespace uscm::sa

#endif  // USCM_SA_SIM_SA_H_
