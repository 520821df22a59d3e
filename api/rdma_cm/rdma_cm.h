// The user-facing CM API of uscm, shaped like librdmacm (rdma_cma.h) so that
// a port of an rdma_cm program is a rename: EventChannel ~ rdma_event_channel,
// CmId ~ rdma_cm_id, Event ~ rdma_cm_event, same event types in the same
// order. The C API (api/c/uscm_cma.h) is a thin layer over this one. docs/API.md
// has the event mapping table and every difference from librdmacm.
//
// One Device = one local port (a cm::Node from cm/runtime.h). Channels belong
// to a device; ids are created from a channel. Every call is thread-safe.
// Errors are absl::Status values that name what is wrong and the limit
// ("private data is 57 bytes; REQ with the 36-byte CMA header carries at
// most 56"); the C API turns them into -1 + errno + uscm_last_error().
#ifndef USCM_API_RDMA_CM_RDMA_CM_H_
#define USCM_API_RDMA_CM_RDMA_CM_H_

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "api/rdma_cm/address.h"
#include "api/rdma_cm/conn_table.h"
#include "api/rdma_cm/device_options.h"
#include "api/rdma_cm/roce_multicast.h"
#include "cm/qp_transitioner.h"
#include "cm/runtime.h"
#include "cm/types.h"
#include "mad/gid.h"
#include "mad/time.h"
#include "mad/transport.h"

namespace uscm {

// enum rdma_cm_event_type, same values.
enum class EventType : int {
  kAddrResolved = 0,
  kAddrError = 1,
  kRouteResolved = 2,
  kRouteError = 3,
  kConnectRequest = 4,
  kConnectResponse = 5,
  kConnectError = 6,
  kUnreachable = 7,
  kRejected = 8,
  kEstablished = 9,
  kDisconnected = 10,
  kDeviceRemoval = 11,
  kMulticastJoin = 12,
  kMulticastError = 13,
  kAddrChange = 14,
  kTimewaitExit = 15,
};
// "RDMA_CM_EVENT_ESTABLISHED" (as rdma_event_str).
const char* EventTypeName(EventType t);

// enum rdma_port_space, same values. TCP and IB are RC; UDP and IPOIB are UD.
enum class PortSpace : uint16_t { kIpoib = 0x0002, kTcp = 0x0106, kUdp = 0x0111, kIb = 0x013F };

// struct rdma_conn_param. On events, private_data holds what the user sees:
// CONNECT_REQUEST over an IP port space = the REQ bytes after the 36-byte
// header (56), AF_IB = 92; ESTABLISHED (active) = REP (196); REJECTED = 148.
struct ConnParam {
  std::vector<uint8_t> private_data;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t flow_control = 1;
  uint8_t retry_count = 7;
  uint8_t rnr_retry_count = 7;
  uint8_t srq = 0;
  uint32_t qp_num = 0;  // the data QP (required unless a QpTransitioner is set)
};

// An id's QP type (rdma_create_id2's qp_type): CmId::SetQpType.
enum class QpType : uint8_t { kRc, kUd };

// The address vector of a UD peer or a multicast group (ibv_ah_attr).
using AhAttr = cm::QpAv;

// struct rdma_ud_param.
struct UdParam {
  std::vector<uint8_t> private_data;
  AhAttr ah_attr;
  uint32_t qp_num = 0;
  uint32_t qkey = 0;
};

inline constexpr uint32_t kUdpQkey = 0x01234567;  // RDMA_UDP_QKEY
inline constexpr uint32_t kMulticastQpn = 0xFFFFFF;

// Private data limits as an rdma_cm user sees them.
inline constexpr size_t kReqPrivateDataIp = 56;   // 92 - 36-byte CMA header
inline constexpr size_t kReqPrivateDataIb = 92;
inline constexpr size_t kRepPrivateData = 196;
inline constexpr size_t kRejPrivateData = 148;
inline constexpr size_t kDreqPrivateData = 220;
inline constexpr size_t kSidrReqPrivateDataIp = 180;  // 216 - 36
inline constexpr size_t kSidrReqPrivateDataIb = 216;
inline constexpr size_t kSidrRepPrivateData = 136;

class CmId;
class Device;
class EventChannel;

struct Event {
  EventType event = EventType::kAddrResolved;
  int status = 0;  // 0, -errno, or the IB REJ reason / SIDR status (positive)
  CmId* id = nullptr;
  CmId* listen_id = nullptr;  // CONNECT_REQUEST
  ConnParam conn;             // RC events
  UdParam ud;                 // UD events and MULTICAST_JOIN
  void* mc_context = nullptr;  // MULTICAST_JOIN / _ERROR: the join's context
  cm::Ece remote_ece;          // CONNECT_REQUEST / ESTABLISHED
  std::string detail;          // *_ERROR events: what went wrong, readable
};

// [fabric] rdma_join_multicast_ex join flags (enum rdma_cm_join_flags).
enum class McJoinFlags : uint8_t { kFullMember = 0, kSendOnlyFullMember = 1 };

enum class IdState : uint8_t {
  kIdle,
  kAddrQuery,
  kAddrResolved,
  kRouteQuery,
  kRouteResolved,
  kConnect,
  kConnectResponse,  // active, external QP: CONNECT_RESPONSE delivered, waiting for Establish
  kListen,
  kConnectRequest,   // passive, not yet accepted
  kAccepted,
  kEstablished,
  kDisconnect,
  kDestroying,
};
const char* IdStateName(IdState s);

// rdma_set_option options. Level ID: kTos, kReuseAddr, kAfOnly, kAckTimeout;
// level IB: kIbPath. uscm-only: response timeout, CM retries, backoff.
struct IdOptions {
  absl::optional<uint8_t> tos;
  bool reuse_addr = false;
  // Unset: as the kernel's rdma_bind_addr, AF_INET binds are AF-only and
  // AF_INET6 ones follow net.ipv6.bindv6only (DeviceOptions::bindv6only).
  absl::optional<bool> af_only;
  absl::optional<uint8_t> ack_timeout;             // QP local ACK timeout code
  absl::optional<cm::PathInfo> ib_path;            // replaces the SA query
  absl::optional<mad::Duration> response_timeout;  // uscm: CM retransmit wait
  absl::optional<uint8_t> max_cm_retries;          // uscm: 0..15
  uint32_t backoff_factor = 1;                     // uscm: retransmit backoff
};

class CmId {
 public:
  // ---- librdmacm calls ----
  absl::Status BindAddr(const Address& addr);
  // Local address table lookup; ADDR_RESOLVED / ADDR_ERROR on the channel.
  absl::Status ResolveAddr(const absl::optional<Address>& src, const Address& dst,
                           mad::Duration timeout = mad::Duration::Seconds(2));
  // ResolveAddr for a layer that hands ADDR_RESOLVED to its program itself
  // (the drop-in librdmacm): where the address resolves within the call on a
  // RoCE port (a neighbour entry, a multicast group, the kernel table's
  // reused or immediate answer, the IP's own GID) or is AF_IB, the id
  // becomes ADDR_RESOLVED and nothing is queued on its channel: true.
  // Otherwise exactly ResolveAddr (ADDR_RESOLVED / ADDR_ERROR follows on the
  // channel; a pending neighbour's resolution has started): false. When
  // true, *local and *peer (if not NULL) are GetLocalAddr()'s and
  // GetPeerAddr()'s, read under the same lock.
  absl::StatusOr<bool> ResolveAddrNow(const absl::optional<Address>& src, const Address& dst,
                                      mad::Duration timeout, Address* local = nullptr,
                                      Address* peer = nullptr);
  // SA PathRecord (through the path cache) or the IB_PATH option;
  // ROUTE_RESOLVED / ROUTE_ERROR on the channel; an SA query unanswered
  // after `timeout` is ROUTE_ERROR -ETIMEDOUT.
  absl::Status ResolveRoute(mad::Duration timeout = mad::Duration::Seconds(2));
  // ResolveRoute where the route needs no SA query (the IB_PATH option, or
  // RoCE: the path from the two IPs), for a layer that hands ROUTE_RESOLVED
  // to its program itself (the drop-in librdmacm): the id becomes
  // ROUTE_RESOLVED but nothing is queued on its channel. True with the
  // route and the peer's P_Key (route()'s and GetPeerAddr()'s); false, with
  // nothing changed, when the route needs the SA (call ResolveRoute);
  // ResolveRoute's error before resolve_addr.
  absl::StatusOr<bool> ResolveRouteNow(cm::PathInfo* path, uint16_t* peer_pkey);
  absl::Status Connect(const ConnParam& param);
  // backlog <= 0: the default (1024).
  absl::Status Listen(int backlog);
  // [fabric] fi_control(FI_BACKLOG) on a listening id: the new backlog (same
  // rule as Listen) applies to the next REQ; connections already pending
  // stay. FailedPrecondition unless the id is in LISTEN.
  absl::Status SetBacklog(int backlog);
  absl::Status Accept(const ConnParam& param);
  absl::Status Reject(std::span<const uint8_t> private_data);
  absl::Status RejectEce(std::span<const uint8_t> private_data);
  absl::Status SetLocalEce(const cm::Ece& ece);
  absl::StatusOr<cm::Ece> GetRemoteEce() const;
  // Active, external QP, after CONNECT_RESPONSE: sends RTU. No event follows
  // on this side (as librdmacm).
  absl::Status Establish();
  // Passive: IBV_EVENT_COMM_EST on the data QP (the RTU may be lost).
  absl::Status NotifyCommEst();
  absl::Status Disconnect();
  // A changed REUSEADDR follows SetReuseAddr's rule.
  absl::Status SetOption(const IdOptions& options);
  // rdma_set_option(REUSEADDR) as the kernel's rdma_set_reuseaddr: on in any
  // state but LISTEN (after the bind too: later binds of other ids, in this
  // process and, through a shared port's router, in others, may share the
  // address), off only while IDLE and unbound; otherwise FailedPrecondition
  // (C: EINVAL), even when the flag would not change.
  absl::Status SetReuseAddr(bool on);
  IdOptions options() const;
  absl::Status JoinMulticast(const Address& group, void* context);
  // [fabric] rdma_join_multicast_ex: send-only full membership (no attach).
  absl::Status JoinMulticastEx(const Address& group, void* context, McJoinFlags flags);
  absl::Status LeaveMulticast(const Address& group);
  // rdma_init_qp_attr: attributes for INIT / RTR / RTS ("external QP" mode).
  absl::StatusOr<cm::QpAttributes> InitQpAttr(cm::QpState state) const;
  // Attaches a QP the runtime transitions (rdma_create_qp without the create).
  absl::Status SetQp(QpTransitioner* qp);
  // Forgets the attached QP (rdma_destroy_qp): the runtime no longer touches it.
  void ClearQp();
  // rdma_migrate_id: this id and its queued events (and the queued
  // CONNECT_REQUESTs of a listener, with their children) move to `to`, which
  // must belong to the same device. FailedPrecondition (C: EBUSY) while events
  // of the id retrieved from its current channel are not acked (librdmacm
  // waits for the acks instead).
  absl::Status Migrate(EventChannel* to);

  Address GetLocalAddr() const;  // rdma_get_local_addr / getname
  Address GetPeerAddr() const;   // rdma_get_peer_addr / getpeer
  absl::optional<cm::PathInfo> route() const;
  // RoCE: the index of the GID entry its REQ, MADs and QP leave from, in the
  // device's kept table (RoceSourceGidIndex of its address and netdev);
  // -1 on InfiniBand, without a kept table, or when the address is not in it.
  int SourceGidIndex() const;
  IdState state() const;
  PortSpace port_space() const { return ps_; }
  // The id's QP type, as the kernel's id->qp_type: RC for kTcp, UD for kUdp
  // and kIpoib, and for kIb RC unless SetQpType made it UD (librdmacm's
  // rdma_create_id2 qp_type, which rdma_create_ep takes from ai_qp_type). A
  // UD id connects by SIDR, its listener takes SIDR_REQs only (an RC one
  // REQs only), and a passive id is of its request's type.
  bool is_ud() const { return ud_; }
  // kIb: RC or UD, before connect or listen (IDLE to ROUTE_RESOLVED),
  // else FailedPrecondition (C: EINVAL). Any other port space: only its own
  // type (InvalidArgument otherwise; the kernel's ucma_get_qp_type ignores
  // the type given for them).
  absl::Status SetQpType(QpType type);
  void* context() const { return context_; }
  void set_context(void* c) { context_ = c; }
  EventChannel* channel() const { return channel_; }
  Device* device() const { return device_; }

 private:
  friend class Device;
  friend class EventChannel;
  CmId(Device* device, EventChannel* channel, void* context, PortSpace ps)
      : device_(device),
        channel_(channel),
        context_(context),
        ps_(ps),
        ud_(ps == PortSpace::kUdp || ps == PortSpace::kIpoib) {}
  // BindAddr; `reserve`: also claim the address at a shared port's router
  // (ClaimBind): every bind but resolve_addr's of an ephemeral port (the
  // kernel's cma_port_is_unique lets active ids share those).
  absl::Status Bind(const Address& addr, bool reserve);
  // DeviceOptions::netdev_of's answer for a given IP source (not
  // link-local) with GID entries on two of the port's netdevs, asked without
  // the device lock (taken here only to look at the table); 0 for any other
  // address.
  int NetdevOfSource(const Address& addr) const;
  // rdma_cm_resolve.cc (device lock held): the table's answer for the
  // destination in peer_ -> ADDR_RESOLVED / ADDR_ERROR, or, `in_call`, the
  // call's own error (no route).
  // ResolveAddrNow's answer: done, and the addresses it asked for.
  struct AddrNow {
    bool done;
    Address* local;
    Address* peer;
  };
  // `now`: ResolveAddrNow's, else NULL (AddrResolvedLocked).
  absl::Status FinishResolve(const absl::StatusOr<absl::optional<mad::Gid>>& gid, bool in_call,
                             AddrNow* now = nullptr);
  // FinishResolve's usable answer (a GID, or none: the IP's on RoCE); also
  // ResolveAddrIn's with a reused one, which has no status to wrap.
  void FinishResolveWith(const absl::optional<mad::Gid>& gid, AddrNow* now);
  // rdma_cm_resolve.cc: ResolveAddr and ResolveAddrNow (`now` non-NULL).
  absl::Status ResolveAddrIn(const absl::optional<Address>& src, const Address& dst,
                             mad::Duration timeout, AddrNow* now);
  // The id is ADDR_RESOLVED: the event is posted, or, for ResolveAddrNow
  // on RoCE or AF_IB, *now is filled instead (device lock held).
  void AddrResolvedLocked(AddrNow* now);
  absl::Status CheckReuseAddrLocked(bool on) const;
  // ADDR_RESOLVED -> ROUTE_RESOLVED where no SA query is needed (IB_PATH,
  // RoCE); false otherwise, nothing changed (device lock held).
  bool RouteWithoutQueryLocked();
  absl::Status SetOptionLocked(const IdOptions& options);

  Device* device_;
  EventChannel* channel_;
  void* context_;
  PortSpace ps_;
  bool ud_;  // is_ud(); changed by SetQpType under the device's node mutex
  // Guarded by the device's node mutex. (The small fields sit together:
  // a CmId is held per connection end, docs/CM.md "Performance".)
  IdState state_ = IdState::kIdle;
  bool bound_ = false;
  bool ephemeral_port_ = false;  // local_.port came from AllocPort
  bool af_only_ = false;         // fixed at bind (IdOptions::af_only)
  bool bind_claimed_ = false;    // the port's router holds a bind claim (ClaimBind)
  bool leased_port_ = false;     // local_.port is claimed in a leased block (AllocLeasedPort)
  // The route came from an SA PathRecord (or the path cache), not from the
  // IB_PATH option nor a REQ: a timeout or a path REJ invalidates it.
  bool path_from_sa_ = false;
  uint8_t path_mtu_ = 4;
  bool swallow_established_ = false;
  bool ud_reply_pending_ = false;
  Address local_;
  Address peer_;
  // RoCE: the routing table's output netdev (ifindex) of an id whose source
  // the routing table gave (resolve_addr unbound, DeviceOptions::route_to),
  // the kernel's bound_dev_if: its GID entry is that netdev's; for a bound
  // IPv4 address on two netdevs, the one it was added to last (DeviceOptions::
  // netdev_of). 0: local_'s scope_id names it (a link-local address), or the
  // address's first entry.
  int netdev_ = 0;
  // Out of line, from the first SetOption on (88 bytes most ids never use);
  // opts() reads the defaults while there is none.
  std::unique_ptr<IdOptions> options_;
  const IdOptions& opts() const {
    static const IdOptions kDefaults;
    return options_ != nullptr ? *options_ : kDefaults;
  }
  absl::optional<cm::PathInfo> path_;  // local = this side
  cm::ConnId conn_;
  cm::ListenId listen_;
  // Guarded by the channel mutex: events queued or delivered, not acked.
  int unacked_ = 0;
  uint64_t listen_sid_ = 0, listen_mask_ = 0;  // claimed from a shared port's router
  mad::ListenAddress listen_address_;           // with this address
  uint64_t sa_query_ = 0;           // outstanding route query
  uint64_t resolve_seq_ = 0;        // which resolve_addr a pending answer belongs to
  absl::optional<cm::Ece> local_ece_;
  cm::Ece remote_ece_;
  QpTransitioner* qp_ = nullptr;
  uint32_t qpn_ = 0;
  // The REP's QPN (active side), which CONNECT_RESPONSE and ESTABLISHED
  // report as the kernel's rdma_cm does (cma_set_rep_event_data); 0 on a
  // passive id (the kernel's ESTABLISHED after an RTU has no parameters).
  uint32_t remote_qpn_ = 0;
  // The REP's private data from CONNECT_RESPONSE until ESTABLISHED (with an
  // attached QP) takes it; empty otherwise.
  std::vector<uint8_t> rep_private_data_;
  struct McJoinState {
    Address group;
    void* context = nullptr;
    uint64_t ticket = 0;
    bool send_only = false;    // [fabric]
    bool attached = false;     // [fabric] the QP was attached to the group
    mad::Gid mgid;             // [fabric] for the detach
    uint16_t mlid = 0;
    bool refused = false;      // MULTICAST_ERROR from the SA: nothing to leave there
    bool roce = false;         // joined without SA (no ticket)
    std::shared_ptr<cm::IpMembership> ip_membership;  // RoCE full member: the IP group
  };
  // RoCE: the join as cma_iboe_join_multicast (device lock held).
  absl::Status JoinRoceLocked(const Address& group, void* context, McJoinFlags flags);
  std::vector<McJoinState> joins_;
};

// rdma_event_channel: a queue of events with a pollable fd (an eventfd that
// is readable exactly while events are queued).
class EventChannel {
 public:
  ~EventChannel();
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  // The pollable fd, made by the first call: from then on it is readable
  // exactly while events are queued (at once if some already are). Until
  // then the channel makes no syscall per event, so a user who only calls
  // GetEvent (libfabric's FI_WAIT_NONE) does not pay for an fd it never
  // polls. -1 if eventfd(2) failed (errno says why; a later call retries).
  int fd() const;
  // eventfd reads and writes so far (two per empty -> non-empty -> empty).
  uint64_t fd_syscalls() const;
  // rdma_create_id on this channel's device.
  absl::StatusOr<CmId*> CreateId(void* context, PortSpace ps);
  // The next event, or Unavailable("no event queued; poll fd()") at once.
  // The event stays owned by the channel until AckEvent.
  absl::StatusOr<Event*> GetEvent();
  // Like GetEvent, but drives the device (simulation: nothing; real: Poll)
  // up to `timeout` waiting for one.
  absl::StatusOr<Event*> WaitEvent(mad::Duration timeout);
  absl::Status AckEvent(Event* event);
  // rdma_destroy_id. FailedPrecondition (C: EBUSY) while events of the id
  // were retrieved and not acked; queued events of the id are dropped.
  absl::Status DestroyId(CmId* id);

  // Events queued, not yet retrieved. Lock-free (a simulation's RunUntil
  // asks it before every step); a snapshot when other threads post or get.
  size_t queued() const { return queued_.load(std::memory_order_acquire); }
  size_t unacked() const;
  Device* device() const { return device_; }

 private:
  friend class Device;
  friend class CmId;  // Migrate
  explicit EventChannel(Device* device) : device_(device) {}
  void Push(std::unique_ptr<Event> e);  // device lock held
  // A blank Event: an acked one of this channel reset (its private data
  // buffers keep their capacity), or a new one when none is spare.
  std::unique_ptr<Event> NewEvent();
  // After every change of the queue (mu_ held): queued() takes its size,
  // and the fd, if made, is readable iff the queue is not empty.
  void SyncFdLocked() const;

  Device* device_;
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<Event>> queue_;
  mutable std::atomic<size_t> queued_{0};  // queue_.size(), written under mu_
  // Guarded by mu_; made by fd() (hence mutable).
  mutable int fd_ = -1;
  mutable bool fd_readable_ = false;  // the eventfd holds 1
  mutable uint64_t fd_syscalls_ = 0;
  // Retrieved, not yet acked (mu_). Programs ack each event before the next
  // get or hold a few: AckEvent finds it by a scan from the newest, cheaper
  // than a hash probe at these sizes (O(held) for a program holding many).
  std::vector<std::unique_ptr<Event>> delivered_;
  // Acked events kept for NewEvent (mu_): no allocation per event once warm.
  static constexpr size_t kMaxSpareEvents = 64;
  std::vector<std::unique_ptr<Event>> spare_;
};

// net.ipv6.bindv6only (false when it cannot be read).
bool ReadBindV6Only();
// What a router claim says of a bound address (mad::ListenAddress): IP
// family, address and AFONLY; AF_IB none.
mad::ListenAddress ListenAddressOf(const Address& a, bool af_only);

// The GID of an IP address on a RoCE v2 port (IPv4-mapped for IPv4).
mad::Gid RoceGidOf(const Address& ip);
// The index in `o.roce_gids` of `local`'s GID that its MADs and QP leave from
// (-1: not there): the entry of netdev `netdev` (ifindex; 0: the one
// `local.scope_id` names) when the address has one there, else the first, as
// the kernel's rdma_cm takes the GID entry of the address and the id's bound
// netdev (cma_validate_port, rdma_find_gid_by_port with the ndev); rxe sends
// on the entry's netdev, tagged with a VLAN's id.
int RoceSourceGidIndex(const DeviceOptions& o, const Address& local, int netdev = 0);
// The path between two IPs on a RoCE port without SA, as the kernel's
// rdma_cm builds it (cma_resolve_iboe_route): GIDs of the IPs, permissive
// LIDs, hop limit 64 (IPv6 link-local: 1), local ACK timeout 19, packet
// lifetime 18, `mtu`; `tos` as traffic class; the flow label from the two
// ports (RoceFlowLabel).
cm::PathInfo RocePath(const Address& local, const Address& remote, uint8_t mtu, uint8_t tos);
// The flow label of a RoCE v2 connection's path, as the kernel's
// cma_get_roce_udp_flow_label: (source port * 31 + destination port) in 20
// bits. It goes in the REQ, so the passive side's AV has it too, and rxe
// derives the UDP source port of the connection's packets from it. An IPv6
// source's flow label (Address::flowinfo, 20 bits) when not 0, as the
// kernel's takes sin6_flowinfo.
uint32_t RoceFlowLabel(uint16_t source_port, uint16_t destination_port);
uint32_t RoceFlowLabel(const Address& local, const Address& remote);

// One port: the node plus the id tables and the address table. IP
// resolution: AddNeighbor(ip, gid, lid) plays the ARP / ND cache; on the
// simulated fabric every host registers its addresses with the others.
class Device final : public cm::NodeObserver {
 public:
  // Simulation driver on `scheduler`; `has_input` as for cm::SimNode.
  static absl::StatusOr<std::unique_ptr<Device>> CreateSimulated(
      sim::Scheduler& scheduler, mad::Transport& transport, std::function<bool()> has_input,
      DeviceOptions options);
  // Real driver (epoll + timerfd).
  static absl::StatusOr<std::unique_ptr<Device>> Create(mad::Transport& transport,
                                                        DeviceOptions options);
  ~Device() override;

  absl::StatusOr<std::unique_ptr<EventChannel>> CreateEventChannel();
  absl::Status AddNeighbor(const Address& ip, const mad::Gid& gid, uint16_t lid);
  absl::Status AddLocalAddress(const Address& ip);
  // The port's addresses as the kernel has them now (DeviceOptions::local_ips
  // and, on RoCE, roce_gids), for a port whose netdev gained or lost one:
  // later binds and resolutions see them (ids already bound keep theirs, as
  // the kernel's).
  void SetPortAddresses(std::vector<Address> local_ips, std::vector<mad::Gid> roce_gids,
                        std::vector<int> roce_gid_ifindexes = {});

  // Real driver only (FailedPrecondition otherwise).
  absl::StatusOr<int> Poll(mad::Duration timeout);
  absl::Status StartProgressThread();
  void StopProgressThread();
  // RealNode::SetAfterStep of the real driver (ignored when simulated).
  void SetAfterProgress(void (*fn)(void*), void* arg);

  cm::Node& node() { return *node_; }
  const mad::LocalPort& port() const { return node_->port(); }
  bool simulated() const { return real_ == nullptr; }
  // Ids alive (including passive ids not yet retrieved). 0 after every id
  // was destroyed.
  size_t id_count() const;
  // Binds moved to another ephemeral port because another process behind
  // the same uscmd held the first (Device::ClaimBind).
  uint64_t ephemeral_moves() const { return ephemeral_moves_; }
  // Blocks of ephemeral ports the router leased this device.
  size_t leased_blocks() const;
  // Tests: how many ports of leased blocks binds to port 0 looked at (a load,
  // and a hash lookup and a CAS when free), all port spaces.
  uint64_t lease_ports_scanned() const;
  // resolve_addr calls answered from an earlier neighbour answer
  // (DeviceOptions::neighbour_reuse) instead of resolve_neighbour.
  uint64_t neighbour_reuses() const;
  // Requests refused because the route back to their source does not leave
  // on the netdev they came in on (DeviceOptions::route_back_on), or, on
  // InfiniBand, because no IPoIB netdev of the port is theirs or it is down
  // (DeviceOptions::ipoib_netdev_of).
  uint64_t misrouted_requests() const;
  // REQs to a UD listener (REJ 28) and SIDR_REQs to an RC one (SIDR_REP
  // status 2), as the kernel's cma_ib_check_req_qp_type refuses them.
  uint64_t qp_type_mismatches() const;

  void OnProgress(mad::TimePoint now) override;

 private:
  friend class CmId;
  friend class EventChannel;
  Device(std::unique_ptr<cm::Node> node, cm::RealNode* real, DeviceOptions options);

  struct Neighbor {
    mad::Gid gid;
    uint16_t lid = 0;
  };
  // The 16 address bytes and the family (no allocation per resolve_addr).
  using IpKeyBytes = std::array<uint8_t, 17>;
  static IpKeyBytes IpKey(const Address& a);

  // rdma_cm.cc (device lock held for all of these)
  void Post(CmId* id, EventType t, int status, std::string detail = {});
  void PostEvent(CmId* id, std::unique_ptr<Event> e);
  CmId* NewId(EventChannel* ch, void* ctx, PortSpace ps);
  void FreeId(CmId* id);
  // rdma_cm_events.cc
  // The CM endpoint's events, in order (a step's, or a call's own).
  void TakeCmEventsLocked(mad::TimePoint now);
  void OnCmEvent(mad::TimePoint now, cm::CmEvent& e);
  void OnConnectRequest(mad::TimePoint now, cm::CmEvent& e);
  void OnSidrRequest(mad::TimePoint now, cm::CmEvent& e);
  // validate_net_dev for a request that came in on GID entry `sgid_index`
  // (RoCE; InfiniBand: of P_Key `pkey`, DeviceOptions::ipoib_netdev_of)
  // from `remote` to `local` (DeviceOptions::route_back_on): false refuses it
  // (counted).
  bool RoutesBack(uint8_t sgid_index, uint16_t pkey, const Address& local,
                  const Address& remote);
  void OnConnectResponse(mad::TimePoint now, CmId* id, cm::CmEvent& e);
  // The REQ / REP now waits for the user: an MRA answers its duplicates.
  void HoldMraForDuplicate(mad::TimePoint now, cm::ConnId conn);
  void OnSaResult(mad::TimePoint now, sa::SaResult& r);
  // The SA's (or the path cache's) path for `id`: ROUTE_RESOLVED.
  void RouteResolved(CmId* id, const mad::wire::PathRecord& record);
  void OnMcEvent(sa::McEvent& e);
  // Drops the cached paths to the id's destination when its SA route proved
  // wrong (connect timed out, or a REJ reason that blames the path).
  void InvalidateRoute(CmId* id);
  // rdma_cm_ports.cc (lock held): the kernel's bind lists. An IP id bound to
  // a port is one of that (port space, port)'s owners.
  absl::Status AllocPort(CmId* id);
  // cma_use_port for id->local_ (a specific port): EACCES below 1024 without
  // CAP_NET_BIND_SERVICE, then CheckPort; the id becomes an owner.
  absl::Status UsePort(CmId* id);
  // cma_check_port: does id->local_ conflict with another owner of its port?
  // `reuse`: owners that set REUSEADDR too are skipped (bind); a listen
  // checks with false, as only one listener may hold an address.
  absl::Status CheckPort(const CmId* id, bool reuse) const;
  void FreePort(CmId* id);  // undoes AllocPort or UsePort
  // The listener on `first`'s port that takes a request for `dst`: one bound
  // to dst itself, else a wildcard of its family (or an IPv6 wildcard that is
  // not AF-only, for IPv4), else null (the kernel's cma_find_listener). A
  // link-local dst (its scope_id: the netdev the request came in on) is taken
  // by a listener bound to it on another netdev no more (cma_match_net_dev).
  CmId* ListenerFor(CmId* first, const Address& dst) const;
  // Router claims of this device's listeners, counted per (ServiceID,
  // address): the router routes a request by its destination address, so
  // listeners on two addresses of one port make two claims.
  absl::Status Claim(uint64_t sid, uint64_t mask, bool reuse, const mad::ListenAddress& address,
                     mad::ClaimKind kind = mad::ClaimKind::kListen);
  // `wait`: until the router has it (mad::Transport::ReleaseServiceNoWait).
  void Release(uint64_t sid, uint64_t mask, const mad::ListenAddress& address,
               mad::ClaimKind kind = mad::ClaimKind::kListen, bool wait = true);
  // rdma_bind_addr's reservation across the processes of a shared port (the
  // kernel's bind list is the host's, cma_get_port): the router's bind claim
  // on the IP id's (port space, port, address), REUSEADDR as the id's. An
  // ephemeral port another process holds is skipped, as cma_alloc_any_port
  // skips ports in use (bounded). OK at once on a port this process owns.
  absl::Status ClaimBind(CmId* id);
  // REUSEADDR turned on after the bind: the router's bind claim takes it
  // (a re-claim updates the process's claim; docs/ROUTER.md "Routing"). Only
  // when the id holds the claim alone: ids of this process sharing one
  // address all set REUSEADDR before (CheckPort), so the claim has it.
  absl::Status ClaimBindReuse(CmId* id);
  void ReleaseBind(CmId* id);
  // A bind to port 0 on a shared port: a port of a block the router leased
  // this device (mad::Transport::LeasePorts), claimed in the block's page
  // with no frame; a new block when the held ones are used up (one round
  // trip per block). False when none can be had (a port this process owns,
  // no block left): the bind then goes port by port (AllocPort, ClaimBind).
  bool AllocLeasedPort(CmId* id);
  bool LeaseBlock(uint16_t port_space);
  // rdma_cm_resolve.cc: destinations the kernel is still resolving (ARP /
  // ND), probed by one thread until each resolves or its timeout passes.
  struct PendingResolve {
    CmId* id;
    uint64_t seq;  // the id's resolve_seq_ when queued
    Address src, dst;
    mad::Duration timeout;
    std::chrono::steady_clock::time_point deadline;
  };
  void QueueResolve(PendingResolve p);  // device lock held
  // DeviceOptions::neighbour_reuse (device lock held): a usable answer for
  // (src, dst) younger than it, or nullopt; Remember keeps a usable one.
  absl::optional<absl::optional<mad::Gid>> ReusedNeighbour(const Address& src, const Address& dst);
  void RememberNeighbour(const Address& src, const Address& dst,
                         const absl::StatusOr<absl::optional<mad::Gid>>& answer);
  void ResolverLoop();
  bool Live(const PendingResolve& p) const;  // the id still waits for this answer
  void StopResolver();

  std::unique_ptr<cm::Node> node_;
  cm::RealNode* real_;  // null when simulated
  DeviceOptions options_;
  absl::flat_hash_map<IpKeyBytes, Neighbor> neighbors_;
  absl::flat_hash_map<CmId*, std::unique_ptr<CmId>> ids_;
  ConnTable<CmId> by_conn_;
  absl::flat_hash_map<uint64_t, CmId*> by_listen_;  // ListenId packed
  absl::flat_hash_map<uint64_t, CmId*> by_query_;   // SA query id
  absl::flat_hash_map<uint64_t, CmId*> by_ticket_;  // multicast ticket
  // (ps << 16 | port) -> its owners; most ports have one (an ephemeral port
  // of a connecting id): kept inline, no allocation per connection.
  absl::flat_hash_map<uint32_t, absl::InlinedVector<CmId*, 1>> port_owners_;
  // (ServiceID, address, bind or listen) -> ids holding the claim.
  absl::flat_hash_map<std::tuple<uint64_t, mad::ListenAddress, mad::ClaimKind>, int> claims_;
  // REQ / SIDR_REQ private data under construction (CmId::Connect), kept
  // for its capacity.
  std::vector<uint8_t> request_data_;
  uint16_t next_port_ = 0;
  // Blocks the router leased (AllocLeasedPort), all port spaces.
  struct LeasedBlock {
    uint16_t port_space = 0;
    mad::PortLease lease;
    size_t next = 0;     // where the next claim looks first (after the last claimed)
    size_t claimed = 0;  // ports of the page this device's ids hold
    bool full = false;   // a whole scan found no free port (until one is freed)
  };
  std::vector<LeasedBlock> leased_blocks_;
  uint64_t lease_ports_scanned_ = 0;  // lease_ports_scanned()
  // A free port of `b` for `id` (AllocLeasedPort), false when it has none.
  bool ClaimLeasedPort(CmId* id, LeasedBlock& b);
  // Per port space: binds to go port by port before asking for a block again
  // (the router refused one); SIZE_MAX: never (the transport leases none).
  absl::flat_hash_map<uint16_t, size_t> lease_backoff_;
  uint64_t ephemeral_moves_ = 0;  // the next ephemeral port tried (DeviceOptions)
  uint64_t rng_state_;
  std::vector<PendingResolve> pending_resolves_;  // device lock
  struct ReusableNeighbour {
    absl::optional<mad::Gid> gid;  // nullopt: the IP's GID (RoCE)
    std::chrono::steady_clock::time_point until;
  };
  absl::flat_hash_map<std::pair<IpKeyBytes, IpKeyBytes>, ReusableNeighbour> reusable_neighbours_;
  // The entry of reusable_neighbours_ remembered last, asked first: a burst
  // of resolves to one destination (cmtime's 1,000 ids) then hashes no key
  // (ReusedNeighbour was 420 of resolve_addr's 2,700 instructions per id).
  struct LastReusable {
    bool set = false;
    std::pair<IpKeyBytes, IpKeyBytes> key;
    ReusableNeighbour entry;
  } last_reusable_;
  uint64_t neighbour_reuses_ = 0;
  uint64_t misrouted_requests_ = 0;  // misrouted_requests()
  uint64_t qp_type_mismatches_ = 0;  // qp_type_mismatches()
  std::condition_variable resolver_cv_;
  std::thread resolver_;  // started by the first pending destination
  bool stop_resolver_ = false;
};

}  // namespace uscm

#endif  // USCM_API_RDMA_CM_RDMA_CM_H_
