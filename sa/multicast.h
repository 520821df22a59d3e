// Multicast membership for local users on top of the SA client, the way the
// Linux kernel's multicast.c does it: several local members of one group on
// one port share a single SA membership. A join whose JoinState bits the port
// already holds is answered from the table without asking the SA; a leave
// tells the SA only about the bits no remaining member needs (so the SA sees
// the leave of the last member).
//
// SendOnlyFullMember joins need the SA to advertise ClassPortInfo
// CapabilityMask2 bit 12: the manager asks the SA once and fails such joins
// with FailedPrecondition when the bit is clear (Linux: EOPNOTSUPP).
#ifndef USCM_SA_MULTICAST_H_
#define USCM_SA_MULTICAST_H_

#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "sa/client.h"

namespace uscm::sa {

struct McEvent {
  uint64_t ticket = 0;
  bool left = false;     // the answer to Leave (else to Join)
  absl::Status status;
  McGroup group;         // on a successful join: what to send to the group
  bool from_table = false;  // answered without SA traffic
};

struct McManagerCounters {
  uint64_t sa_joins = 0;
  uint64_t sa_leaves = 0;
  uint64_t local_joins = 0;  // answered from the table
  uint64_t leave_errors = 0;
};

class McManager {
 public:
  McManager(mad::Agent* agent, SaClientConfig config);

  // Joins one local member; the outcome arrives as an McEvent with the
  // returned ticket.
  absl::StatusOr<uint64_t> Join(TimePoint now, const McJoin& join);
  // Ends the ticket's membership (joined or not). NotFound for an unknown ticket.
  absl::Status Leave(TimePoint now, uint64_t ticket);

  // Moves SA answers into events; call after driving the agent.
  void Process(TimePoint now);
  absl::optional<McEvent> PollEvent();

  // Local members of (MGID, port), and the bits the SA holds for them.
  size_t members(const Gid& mgid, const Gid& port_gid) const;
  uint8_t sa_state(const Gid& mgid, const Gid& port_gid) const;
  size_t groups() const { return entries_.size(); }
  const McManagerCounters& counters() const { return counters_; }
  const SaClient& client() const { return client_; }

 private:
  using Key = std::pair<Gid, Gid>;  // (MGID, port GID)
  struct Entry {
    uint8_t sa_state = 0;
    McGroup group;
    std::map<uint64_t, uint8_t> members;  // ticket -> JoinState bits
  };
  struct Ticket {
    McJoin join;
    absl::optional<Key> key;  // once joined
  };
  enum class Op : uint8_t { kJoin, kLeave, kClassPortInfo };

  void StartJoin(TimePoint now, uint64_t ticket);
  void Fail(uint64_t ticket, absl::Status status);

  SaClient client_;
  uint64_t next_ticket_ = 1;
  absl::flat_hash_map<uint64_t, Ticket> tickets_;
  std::map<Key, Entry> entries_;
  absl::flat_hash_map<uint64_t, std::pair<Op, uint64_t>> ops_;  // query -> (op, ticket)
  absl::optional<uint32_t> sa_cap2_;
  bool cpi_pending_ = false;
  std::vector<uint64_t> waiting_for_cpi_;
  std::deque<McEvent> events_;
  McManagerCounters counters_;
};

}  // namespace uscm::sa

#endif  // USCM_SA_MULTICAST_H_
