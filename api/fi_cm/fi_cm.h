// A libfabric-flavoured connection manager (fi_cm semantics, digest §8) on
// top of the rdma_cm-style API (api/rdma_cm/rdma_cm.h). Names follow libfabric:
//
//   fi_eq_open            EventQueue::Create(device)
//   fi_passive_ep + listen PassiveEndpoint::Create(eq) ... Listen(backlog)
//   fi_endpoint           Endpoint::Create(eq, ps) / Endpoint::FromConnReq(eq, info)
//   fi_connect            Endpoint::Connect(addr, param)   (once per endpoint)
//   fi_accept             Endpoint::Accept(param)
//   fi_reject             PassiveEndpoint::Reject(info, param)
//   fi_shutdown           Endpoint::Shutdown(flags)        (flags must be 0)
//   fi_setname / fi_getname / fi_getpeer   with libfabric's truncation rule
//   fi_getopt(FI_OPT_CM_DATA_SIZE)          CmDataSize() / CmDataSizeFor(step)
//   fi_join / fi_mc_addr / fi_close(mc)     Endpoint::Join, Multicast::Addr, Close
//   fi_eq_read / fi_eq_readerr              EventQueue::Read / ReadErr
//
// Entries: FI_CONNREQ (fid = the passive endpoint; info handle + the REQ's
// user data), FI_CONNECTED (both sides; the connecting side gets the
// acceptor's data), FI_SHUTDOWN (the peer shut down or the connection died;
// not reported to the side that called Shutdown), FI_JOIN_COMPLETE. A rejected
// connect is an ERROR entry: err ECONNREFUSED, prov_errno -(IB reason),
// err_data = the peer's REJ data; a timeout is ETIMEDOUT.
//
// Not thread-safe per object (as a libfabric endpoint without FI_THREAD_SAFE);
// different endpoints may be used from different threads.
#ifndef USCM_API_FI_CM_FI_CM_H_
#define USCM_API_FI_CM_FI_CM_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/rdma_cm/rdma_cm.h"

namespace uscm::fi {

// libfabric numbers (fi_eq.h, fi_errno.h).
enum class EqEvent : uint32_t {
  kConnReq = 1,       // FI_CONNREQ
  kConnected = 2,     // FI_CONNECTED
  kShutdown = 3,      // FI_SHUTDOWN
  kJoinComplete = 6,  // FI_JOIN_COMPLETE
};
const char* EqEventName(EqEvent e);

inline constexpr int kFiEtoosmall = 257;    // FI_ETOOSMALL
inline constexpr int kFiEopbadstate = 258;  // FI_EOPBADSTATE
inline constexpr int kFiEavail = 259;       // FI_EAVAIL
inline constexpr int kFiEbadflags = 260;    // FI_EBADFLAGS
// The negative libfabric return code for a status of this layer:
// OutOfRange -> -FI_ETOOSMALL, FailedPrecondition -> -FI_EOPBADSTATE,
// Unavailable -> -FI_EAGAIN, Aborted -> -FI_EAVAIL, InvalidArgument ->
// -FI_EINVAL (-FI_EBADFLAGS when the message says so), NotFound -> -FI_ENOENT.
int ToFiErrno(const absl::Status& s);

class Endpoint;
class PassiveEndpoint;
class Multicast;

// struct fi_info for a connection request: the handle identifies it for
// Endpoint::FromConnReq or PassiveEndpoint::Reject (each consumes it).
struct ConnReqInfo {
  CmId* handle = nullptr;
  Address src_addr;  // the requester
  Address dest_addr;  // the address it connected to
};

// struct fi_eq_cm_entry (+ the event number fi_eq_read returns).
struct EqEntry {
  EqEvent event = EqEvent::kConnected;
  void* fid = nullptr;            // PassiveEndpoint* (CONNREQ), Endpoint*, or Multicast*
  void* context = nullptr;        // the fid's context
  ConnReqInfo info;               // FI_CONNREQ
  std::vector<uint8_t> data;      // CONNREQ: the requester's; CONNECTED (active): the acceptor's
};

// struct fi_eq_err_entry.
struct EqErrEntry {
  void* fid = nullptr;
  void* context = nullptr;
  int err = 0;                    // positive errno: ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ...
  int prov_errno = 0;             // rdma_cm status: -(IB REJ reason), or -errno
  std::vector<uint8_t> err_data;  // the peer's REJ data
  std::string detail;
};

// The steps of a connection and the user data each carries (FI_OPT_CM_DATA_SIZE
// is one number in libfabric; here each step says what it really carries).
enum class CmStep { kConnect, kAccept, kReject, kShutdown };
// REQ: 56 with the 36-byte IP CM header (TCP/UDP/IPOIB port spaces), 92 for
// AF_IB (RDMA_PS_IB); REP 196; REJ 148; shutdown carries none (fi_shutdown
// has no data; the DREQ's 220 bytes are not exposed).
size_t CmDataSizeFor(CmStep step, PortSpace ps);

class EventQueue {
 public:
  static absl::StatusOr<std::unique_ptr<EventQueue>> Create(Device& device);
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // fi_eq_read: the next entry; Unavailable (-FI_EAGAIN) when none, Aborted
  // (-FI_EAVAIL) when an error entry is next (read it with ReadErr).
  absl::StatusOr<EqEntry> Read();
  // fi_eq_readerr: Unavailable when the next entry is not an error.
  absl::StatusOr<EqErrEntry> ReadErr();
  // Readable while rdma_cm events wait to be translated (EventChannel fd).
  int fd() const { return channel_->fd(); }
  // Entries ready (translates what the channel holds first).
  size_t pending();
  EventChannel& channel() { return *channel_; }
  Device& device() { return device_; }

 private:
  friend class Endpoint;
  friend class PassiveEndpoint;
  friend class Multicast;
  EventQueue(Device& device, std::unique_ptr<EventChannel> ch)
      : device_(device), channel_(std::move(ch)) {}
  struct Item {
    bool error = false;
    EqEntry entry;
    EqErrEntry err;
  };
  void Pump();
  void Translate(const Event& e);
  void PushError(void* fid, void* ctx, int err, int prov, std::vector<uint8_t> data,
                 std::string detail);
  // Entries that name a closed object are dropped.
  void Forget(void* fid);

  Device& device_;
  std::unique_ptr<EventChannel> channel_;
  std::deque<Item> items_;
  absl::flat_hash_map<CmId*, Endpoint*> eps_;
  absl::flat_hash_map<CmId*, PassiveEndpoint*> peps_;
  absl::flat_hash_set<CmId*> unclaimed_;  // CONNREQ handles not yet accepted / rejected
};

// fi_getname / fi_getpeer wire format: sockaddr_in (16), sockaddr_in6 (28) or
// sockaddr_ib (48: family 27, pkey, flowinfo, GID, ServiceID, mask, scope).
size_t SockaddrSize(const Address& a);
// Parses what EncodeSockaddr writes (fi_setname input).
absl::StatusOr<Address> DecodeSockaddr(std::span<const uint8_t> bytes);

class PassiveEndpoint {
 public:
  static absl::StatusOr<std::unique_ptr<PassiveEndpoint>> Create(EventQueue& eq,
                                                                 PortSpace ps = PortSpace::kTcp,
                                                                 void* context = nullptr);
  ~PassiveEndpoint();  // fi_close

  absl::Status SetName(const void* addr, size_t addrlen);
  absl::Status GetName(void* addr, size_t* addrlen) const;
  // fi_control(FI_BACKLOG): 0 = the default (1024). Before Listen it is the
  // backlog Listen uses; on a listening endpoint it changes the live
  // listener's backlog (REQs beyond it are refused with REJ 3, connections
  // already pending stay).
  absl::Status SetBacklog(int backlog);
  absl::Status Listen();
  // fi_reject(pep, handle, param, paramlen): consumes the info.
  absl::Status Reject(const ConnReqInfo& info, std::span<const uint8_t> param);
  // FI_OPT_CM_DATA_SIZE: the most a request can bring.
  size_t CmDataSize() const { return CmDataSizeFor(CmStep::kConnect, ps_); }
  void* context() const { return context_; }

 private:
  PassiveEndpoint(EventQueue& eq, CmId* id, PortSpace ps, void* ctx)
      : eq_(eq), id_(id), ps_(ps), context_(ctx) {}
  EventQueue& eq_;
  CmId* id_;
  PortSpace ps_;
  void* context_;
  int backlog_ = 0;
  bool listening_ = false;
};

struct McAddr {
  AhAttr ah;     // DLID = MLID, GRH DGID = MGID
  uint32_t qpn = kMulticastQpn;
  uint32_t qkey = 0;
};

// fi_join flags, libfabric's values (rdma/fabric.h: FI_RECV 1ULL << 10,
// FI_SEND 1ULL << 11): send-only (FI_SEND: send-only full membership, the QP
// is not attached), receive-only (FI_RECV: full member, attached), or both
// (0 or FI_SEND | FI_RECV: full member, attached).
enum JoinFlags : uint32_t { kJoinRecv = 1u << 10, kJoinSend = 1u << 11 };

class Endpoint {
 public:
  // Active endpoint (fi_endpoint with an info from fi_getinfo).
  static absl::StatusOr<std::unique_ptr<Endpoint>> Create(EventQueue& eq,
                                                          PortSpace ps = PortSpace::kTcp,
                                                          void* context = nullptr);
  // fi_endpoint with the info of an FI_CONNREQ: the endpoint to Accept on.
  static absl::StatusOr<std::unique_ptr<Endpoint>> FromConnReq(EventQueue& eq,
                                                               const ConnReqInfo& info,
                                                               void* context = nullptr);
  ~Endpoint();  // fi_close: leaves groups, destroys the connection (DREQ if up)

  // The data QP the runtime moves INIT -> RTR -> RTS -> ERROR (a VerbsQp or a
  // test double). Without one the runtime sends RTU as soon as the REP arrives
  // (the user reads InitQpAttr-equivalent attributes through cm_id()).
  absl::Status SetQp(QpTransitioner* qp);

  absl::Status SetName(const void* addr, size_t addrlen);
  absl::Status GetName(void* addr, size_t* addrlen) const;
  // Valid after FI_CONNECTED (FailedPrecondition before).
  absl::Status GetPeer(void* addr, size_t* addrlen) const;

  // fi_connect: resolves the address and the route, then sends the REQ. A
  // second call fails (FailedPrecondition), whatever became of the first.
  absl::Status Connect(const Address& dest, std::span<const uint8_t> param);
  absl::Status Accept(std::span<const uint8_t> param);
  // flags must be 0 (InvalidArgument, -FI_EBADFLAGS otherwise).
  absl::Status Shutdown(uint64_t flags);
  // FI_OPT_CM_DATA_SIZE: what Connect (active) or Accept (from a CONNREQ) carries.
  size_t CmDataSize() const;

  // fi_join on a UD endpoint (PortSpace kUdp / kIpoib) bound with SetName.
  absl::StatusOr<Multicast*> Join(const Address& group, uint32_t flags, void* context);

  CmId* cm_id() const { return id_; }
  void* context() const { return context_; }
  bool connected() const { return connected_; }

 private:
  friend class EventQueue;
  friend class Multicast;
  Endpoint(EventQueue& eq, CmId* id, bool passive, void* ctx)
      : eq_(eq), id_(id), passive_(passive), context_(ctx) {}

  EventQueue& eq_;
  CmId* id_;
  bool passive_;
  void* context_;
  bool connect_called_ = false;
  bool accepted_ = false;
  bool connected_ = false;
  bool shutdown_called_ = false;
  bool shutdown_reported_ = false;
  ConnParam connect_param_;
  std::vector<std::unique_ptr<Multicast>> groups_;
};

// The handle fi_join returns. Close() = fi_close(mc): leaves the group.
class Multicast {
 public:
  // fi_mc_addr: FailedPrecondition until FI_JOIN_COMPLETE.
  absl::StatusOr<McAddr> Addr() const;
  absl::Status Close();
  void* context() const { return context_; }
  bool send_only() const { return send_only_; }

 private:
  friend class Endpoint;
  friend class EventQueue;
  Multicast(Endpoint* ep, Address group, bool send_only, void* ctx)
      : ep_(ep), group_(group), send_only_(send_only), context_(ctx) {}
  Endpoint* ep_;
  Address group_;
  bool send_only_;
  void* context_;
  bool joined_ = false;
  bool closed_ = false;
  McAddr addr_;
};

}  // namespace uscm::fi

#endif  // USCM_API_FI_CM_FI_CM_H_
