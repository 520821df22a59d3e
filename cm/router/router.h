// The core of uscmd, the per-port MAD router: it owns the port's transport
// (QP1) and shares it among the uscm processes of one host. The CM state
// machines stay in the processes; the router only routes and checks:
//
//   * REQ / SIDR_REQ from the wire go to the process that listens on the
//     service ID on the destination address of the request's rdma_cm IP
//     header. Claims (a bind, and a listen on top of it) of two processes
//     never overlap as the kernel decides it: the same address, a wildcard
//     against its family or a claim without address is refused with
//     AlreadyExists, EADDRINUSE / EADDRNOTAVAIL; only two binds that both set
//     REUSEADDR share an address (cma_check_port), a listen never does (as
//     the kernel's rdma_listen); ids on different addresses of one port share
//     it; one process's own overlaps are its endpoint's business;
//   * every other CM MAD goes by the comm ID it is addressed to: each client
//     gets a slot, and its local comm IDs carry the slot in their top
//     `slot_bits` bits, so the owner is a shift away;
//   * other classes (SA) go by TID: the router gives every (client, TID) a
//     router TID of its own on the way out and restores the client's on the
//     way back (RMPP segments and ACKs reuse the same mapping);
//   * MCMemberRecord joins and leaves of several clients to one group are
//     merged into one membership on the wire (router_multicast.cc);
//   * identical PathRecord Gets of several clients in flight go on the wire
//     once; every client gets the answer under its own TID (router_sa.cc).
//
// A client may only send CM MADs for comm IDs in its range (or answer a
// REQ / SIDR_REQ the router handed it); anything else is refused, counted and
// reported back with a kRefused frame. The router remembers the connections
// it saw each client set up, so when a client goes away it rejects (REJ) the
// ones in the handshake, disconnects (DREQ) the established ones and answers
// (DREP) a peer's DREQ the client left unanswered, the way Linux
// cm_destroy_id does, then frees the slot.
//
// The Router is I/O-free towards its clients (frames go out through a sink);
// it calls the wire transport directly. Server (cm/router/server.h) adds the
// Unix socket and the event loop.
#ifndef USCM_CM_ROUTER_ROUTER_H_
#define USCM_CM_ROUTER_ROUTER_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cm/router/frame.h"
#include "mad/port_page.h"
#include "mad/transport.h"

namespace uscm::router {

struct RouterOptions {
  // Width of the slot in the top bits of a comm ID: 2^bits - 1 clients
  // (slot 0 is never handed out), 2^(32 - bits) comm IDs each.
  uint8_t slot_bits = 8;
  // SA transactions remembered for routing responses (oldest evicted).
  size_t tid_capacity = 1 << 16;
  // Connections / pending REQs remembered per client for the crash cleanup.
  size_t max_tracked_per_client = 1 << 16;
  // Claims (binds and listens) one client may hold; the next is refused with
  // ResourceExhausted, errno ENOMEM (what the kernel's cma_alloc_port returns
  // when it cannot allocate a bind list). 1024, the default soft
  // RLIMIT_NOFILE: a program holds one claim per bound or listening id (two
  // for a listener), and programs seen hold a few (rping, perftest, UCX,
  // cmtime: 1-2; active ids with an ephemeral port claim nothing); 255
  // clients at the bound are 261,120 claims, ~12 MB, which the router's
  // scans per claim and per REQ stay within.
  size_t max_claims_per_client = 1024;
  // Port blocks (router_ports.cc, docs/ROUTER.md "Port blocks"): the
  // ephemeral range (uscmd reads net.ipv4.ip_local_port_range) is cut into
  // blocks of `lease_ports`, leased to a client for its binds to port 0,
  // which then take no claim. 256: one lease round trip per 256 binds, a
  // page of 256 bytes, 110 blocks per port space in the default range
  // (28,232 ports; the last block has 72). `max_blocks_per_client` per port
  // space: 32 (8,192 ports, 29% of the range) so that one process cannot
  // take the range from the others; beyond them it binds as before, one
  // claim per port.
  uint16_t ephemeral_low = 32768;
  uint16_t ephemeral_high = 60999;
  uint16_t lease_ports = 256;
  size_t max_blocks_per_client = 32;
};

struct RouterCounters {
  uint64_t clients_accepted = 0;
  uint64_t clients_refused = 0;   // no free slot
  uint64_t clients_gone = 0;
  uint64_t to_wire = 0;
  uint64_t from_wire = 0;
  uint64_t to_clients = 0;
  uint64_t refused_mads = 0;      // a client sent for an ID / TID it does not own
  uint64_t malformed_frames = 0;  // unparseable frames from clients
  uint64_t wire_malformed = 0;    // CM MADs from the wire that do not parse
  uint64_t wire_unroutable = 0;   // no listener / owner / TID for a wire MAD
  uint64_t claims = 0;
  uint64_t claim_conflicts = 0;
  uint64_t claim_updates = 0;     // a re-claim changed a held claim's REUSEADDR
  uint64_t claims_denied = 0;     // a port below 1024 without CAP_NET_BIND_SERVICE
  uint64_t claims_over_limit = 0; // a client already held max_claims_per_client
  uint64_t leases = 0;            // port blocks handed out
  uint64_t leases_refused = 0;    // none free, or the client held its most
  uint64_t leased_taken = 0;      // a port of a block taken for another client's claim
  uint64_t leased_conflicts = 0;  // a claim met a port its lessee had claimed
  uint64_t leased_given_back = 0; // a taken port back to its lessee (the claim left)
  uint64_t cleanup_rej = 0;       // sent for a client that went away
  uint64_t cleanup_dreq = 0;
  uint64_t cleanup_drep = 0;      // for a peer's DREQ the client never answered
  uint64_t untracked = 0;         // a client's tracking table was full
  uint64_t duplicate_reqs = 0;    // REQs of connections already answered (handed over only)
  uint64_t send_errors = 0;       // wire Transport::Send failed
  uint64_t mc_joins_merged = 0;   // joins answered without asking the SA
  uint64_t mc_leaves_merged = 0;  // leaves answered while others hold the group
  uint64_t mc_leaves_for_gone = 0;  // leaves the router sent for departed clients
  uint64_t mc_own_answers = 0;    // SA answers to those leaves (absorbed)
  uint64_t sa_coalesced = 0;      // PathRecord Gets answered with another client's
  uint64_t sa_waiter_resends = 0; // a waiting client's retry re-sent the shared query
  // CM MADs to / from the wire by attribute ID - 0x10 (REQ .. APR; 16: other):
  // retransmissions and duplicates show here (uscmd prints them at exit).
  std::array<uint64_t, 17> cm_to_wire{};
  std::array<uint64_t, 17> cm_from_wire{};
};

// The index of a CM MAD's attribute in RouterCounters::cm_to_wire / cm_from_wire.
size_t CmAttrIndex(std::span<const uint8_t> mad);
// "REQ 100 REP 100 ..." for the non-zero entries of such an array.
std::string CmAttrCounts(const std::array<uint64_t, 17>& counts);

// Who a client is, from its socket's peer credentials (Server). In-process
// clients (tests) are trusted.
struct ClientCredentials {
  uint32_t uid = 0;
  uint32_t pid = 0;
  // CAP_NET_BIND_SERVICE in the peer's effective set (or uid 0): as in the
  // kernel's rdma_cm (cma_get_port), a listen on a port below 1024 of an
  // IP port space needs it.
  bool may_bind_privileged_ports = true;
};

// Receives every frame for client `slot` (MADs, replies, refusals).
using ClientSink = std::function<void(uint8_t slot, std::span<const uint8_t> frame)>;

// How the router shares a block's page with its lessee: `make_page` makes
// the memory (a memfd for a socket's client, the heap in one process);
// `send` delivers a kLeaseReply frame with the page (SCM_RIGHTS). Without
// them (Router::set_lease_hooks not called) a lease is answered
// Unimplemented and clients claim port by port.
struct LeaseHooks {
  std::function<absl::StatusOr<std::shared_ptr<mad::PortPage>>(size_t ports)> make_page;
  std::function<void(uint8_t slot, std::span<const uint8_t> frame,
                     const std::shared_ptr<mad::PortPage>& page)>
      send;
};

class Router {
 public:
  // `wire` must outlive the router.
  Router(mad::Transport& wire, RouterOptions options, ClientSink sink);
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // A new client: its slot, comm ID range and the port. ResourceExhausted
  // when every slot is taken. Slots are handed out round-robin so a freed
  // slot is reused as late as possible (stray answers to a dead client's
  // connections then meet no one).
  absl::StatusOr<Welcome> AddClient(const ClientCredentials& creds = {});
  // The client went away (socket closed): REJ / DREQ its connections,
  // drop its claims, TIDs and range.
  void RemoveClient(uint8_t slot);
  // One frame from client `slot`.
  void HandleFrame(uint8_t slot, std::span<const uint8_t> frame);
  void set_lease_hooks(LeaseHooks hooks) { lease_hooks_ = std::move(hooks); }
  // Routes up to `max` MADs waiting in the wire transport; returns how many.
  size_t PollWire(size_t max = SIZE_MAX);

  const RouterCounters& counters() const { return counters_; }
  size_t client_count() const { return live_clients_; }
  size_t claim_count() const { return claims_.size(); }
  size_t tid_entries() const { return tid_by_router_.size(); }
  // Blocks of `port_space` leased to `slot`.
  size_t blocks_of(uint8_t slot, uint16_t port_space) const;
  // Connections + pending REQs tracked for `slot` (0 when none or unknown).
  size_t tracked(uint8_t slot) const;
  using Mgid = std::array<uint8_t, 16>;
  // Clients holding a membership of group `mgid` through the router.
  size_t mc_members(const Mgid& mgid) const;
  uint8_t slot_of(uint32_t comm_id) const {
    return static_cast<uint8_t>(comm_id >> (32 - options_.slot_bits));
  }

 private:
  // kDreqRcvd: the peer's DREQ went to the client, which has not answered.
  enum class Phase : uint8_t { kReqSent, kRepRcvd, kPassive, kEstablished, kDreqRcvd };
  struct Track {
    Phase phase = Phase::kReqSent;
    uint32_t remote_comm_id = 0;
    uint32_t remote_qpn = 0;
    uint64_t tid = 0;
    mad::MadAddress peer;
  };
  struct PendingReq {
    uint64_t tid = 0;
    uint32_t remote_qpn = 0;
    mad::MadAddress peer;
  };
  // A peer's comm / request ID and where it came from: its LID on
  // InfiniBand; on RoCE every LID is 0, so the GID (the GRH's) tells two
  // hosts that picked the same ID apart.
  struct PeerKey {
    uint32_t id = 0;
    uint16_t lid = 0;
    mad::Gid gid;  // zero when the LID names the peer
    friend bool operator==(const PeerKey&, const PeerKey&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const PeerKey& k) {
      return H::combine(std::move(h), k.id, k.lid, k.gid);
    }
  };
  static PeerKey KeyOf(uint32_t id, const mad::MadAddress& peer) {
    return PeerKey{id, peer.lid, peer.lid == 0 ? peer.gid : mad::Gid{}};
  }
  struct Client {
    bool live = false;
    ClientCredentials creds;
    absl::flat_hash_map<uint32_t, Track> conns;  // by our local comm ID
    absl::flat_hash_map<PeerKey, PendingReq> pending_reqs;
    // REQs this client answered (REP / MRA), by the peer's key: our comm ID.
    // A duplicate of one of them is handed over but not tracked again.
    absl::flat_hash_map<PeerKey, uint32_t> answered_reqs;
    absl::flat_hash_set<PeerKey> pending_sidr;
    std::vector<uint32_t> tids;  // router TIDs this client holds
  };
  struct Claim {
    uint8_t slot = 0;
    uint64_t service_id = 0;
    uint64_t mask = 0;
    bool reuse = false;
    mad::ListenAddress address;
    mad::ClaimKind kind = mad::ClaimKind::kListen;  // a bind takes no request
  };
  struct TidEntry {
    uint8_t slot = 0;
    uint64_t client_tid = 0;
  };

  // MCMemberRecord merging (router_multicast.cc).
  struct McWaiter {
    uint8_t slot = 0;
    uint64_t client_tid = 0;
    uint8_t bits = 0;
  };
  struct McGroup {
    absl::flat_hash_map<uint8_t, uint8_t> members;  // slot -> JoinState bits it holds
    uint8_t granted = 0;            // bits the SA has granted this port
    std::vector<uint8_t> answer;    // the SA's last successful join answer
    mad::MadAddress answer_from;    // where it came from
    mad::MadAddress sa;             // where joins go
    uint32_t in_flight_tid = 0;     // router TID of the join on the wire (0: none)
    uint8_t in_flight_bits = 0;
    std::vector<McWaiter> waiters;  // joins answered with the one in flight
    uint8_t held() const;
  };
  struct McTxn {
    Mgid mgid{};
    uint8_t slot = 0;
    uint8_t bits = 0;
    bool join = false;
    mad::MadAddress sa;
  };
  enum class McVerdict : uint8_t { kForward, kHandled };
  static bool IsMcMemberChange(std::span<const uint8_t> mad);
  // `out` is the MAD about to go to the wire (router TID in place).
  McVerdict HandleClientMcMember(uint8_t slot, uint64_t client_tid, uint32_t router_tid,
                                 const MadFrame& m, std::span<uint8_t> out);
  void AnswerJoin(const McGroup& g, uint8_t slot, uint64_t client_tid, uint8_t bits);
  void RouteWireMcMember(const mad::ReceivedMad& m, uint32_t router_tid);
  void LeaveGroupsOf(uint8_t slot);
  // Leaves the bits no client holds any more; forgets an empty group.
  void Settle(const Mgid& mgid);
  bool IsOwnTransaction(uint32_t router_tid);

  Client* LiveClient(uint8_t slot);
  void Refuse(uint8_t slot, absl::Status why);
  void ToClient(uint8_t slot, const mad::MadAddress& from, std::span<const uint8_t> mad);
  void ToWire(const mad::MadAddress& to, std::span<const uint8_t> mad);

  // Client -> wire (router_client_side.cc).
  void HandleClientMad(uint8_t slot, Client& c, const MadFrame& m);
  absl::Status CheckAndTrackCm(uint8_t slot, Client& c, const mad::MadAddress& to,
                               std::span<const uint8_t> mad);
  void HandleClientOther(uint8_t slot, Client& c, const MadFrame& m);
  absl::Status HandleClaim(uint8_t slot, const ClaimFrame& claim);
  void HandleRelease(uint8_t slot, const ClaimFrame& claim);
  void Cleanup(uint8_t slot, Client& c);

  // Port blocks (router_ports.cc).
  struct Block {
    uint8_t slot = 0;  // 0: not leased
    std::shared_ptr<mad::PortPage> page;
  };
  struct PortSpaceBlocks {
    std::vector<Block> blocks;  // block i: ephemeral_low + i * lease_ports ...
    size_t next = 0;            // where the next lease looks first
  };
  // A port of a block another client leased: its block and index.
  struct LeasedPort {
    Block* block = nullptr;
    size_t index = 0;
    uint16_t port_space = 0;
    uint16_t port = 0;
  };
  PortSpaceBlocks& BlocksOf(uint16_t port_space);
  void HandleLease(uint8_t slot, const LeaseFrame& lease);
  // The ports of other clients' blocks that `claim` (of `slot`) covers.
  std::vector<LeasedPort> LeasedPortsCovered(uint8_t slot, const ClaimFrame& claim);
  // Takes every port of `ports` from its lessee (free -> taken); the first
  // one its lessee claimed is a conflict (the ones taken so far are given
  // back). `taken` receives the ports this call took.
  absl::Status TakeLeased(const ClaimFrame& claim, const std::vector<LeasedPort>& ports,
                          std::vector<LeasedPort>* taken);
  // After a release: a port of another's block no claim covers any more
  // goes back to its lessee.
  void GiveBackLeased(uint8_t slot, const ClaimFrame& released);
  void DropBlocks(uint8_t slot);
  // Forgets the connection `local` of `c` (and its answered REQ).
  static void ForgetConn(Client& c, uint32_t local);

  // Identical PathRecord Gets of several clients (router_sa.cc).
  struct SaFlight {
    uint32_t router_tid = 0;        // the query on the wire
    mad::MadAddress to;
    std::vector<uint8_t> mad;       // as sent, router TID in place
    std::vector<TidEntry> waiters;  // clients answered with it
  };
  // True when the query was absorbed into one in flight (nothing else to send).
  bool CoalescePathQuery(uint8_t slot, uint64_t client_tid, uint32_t router_tid,
                         const mad::MadAddress& to, std::span<const uint8_t> out);
  // Gives an answer to every client waiting on the query with `router_tid`;
  // how many got it.
  size_t AnswerPathWaiters(uint32_t router_tid, const mad::ReceivedMad& m);
  void ForgetPathWaiters(uint8_t slot);

  // Wire -> client (router.cc).
  void RouteWire(const mad::ReceivedMad& m);
  void RouteWireCm(const mad::ReceivedMad& m);
  // The claim that takes a request for `service_id` sent to `dst` (from
  // its rdma_cm IP header): an exact address first, else the oldest
  // wildcard, preferring one of dst's family (listen_address.h).
  absl::optional<uint8_t> ListenerFor(uint64_t service_id, const mad::ListenAddress& dst) const;
  Track* TrackFor(uint32_t local_comm_id, uint8_t* slot);

  mad::Transport& wire_;
  RouterOptions options_;
  ClientSink sink_;
  std::vector<Client> clients_;  // index = slot; [0] unused
  size_t live_clients_ = 0;
  uint8_t next_slot_ = 1;
  std::vector<Claim> claims_;  // oldest first
  absl::flat_hash_map<uint32_t, TidEntry> tid_by_router_;
  absl::flat_hash_map<std::pair<uint8_t, uint64_t>, uint32_t> tid_by_client_;
  std::deque<uint32_t> tid_order_;  // for eviction, oldest first
  uint32_t next_tid_ = 1;
  absl::flat_hash_map<Mgid, McGroup> mc_groups_;
  absl::flat_hash_map<uint32_t, McTxn> mc_txns_;  // by router TID
  absl::flat_hash_set<uint32_t> own_tids_;        // the router's own leaves
  absl::flat_hash_map<std::string, SaFlight> sa_flights_;  // query (TID zeroed) + LID
  absl::flat_hash_map<uint32_t, std::string> sa_flight_keys_;  // by router TID
  LeaseHooks lease_hooks_;
  absl::flat_hash_map<uint16_t, PortSpaceBlocks> blocks_;  // by port space
  std::vector<uint8_t> frame_buf_;
  std::vector<uint8_t> mad_buf_;
  RouterCounters counters_;
};

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_ROUTER_H_
