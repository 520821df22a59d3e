// The one interface every MAD transport implements: umad (QP1 through the
// kernel), a raw verbs UD QP, the in-process simulated fabric, and middleware
// (fault injection, capture) that wraps any of them. Retransmission is never
// the transport's job: umad sends with timeout 0, so all transports behave alike.
#ifndef USCM_MAD_TRANSPORT_H_
#define USCM_MAD_TRANSPORT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mad/gid.h"
#include "mad/port_page.h"

namespace uscm::mad {

inline constexpr size_t kMadSize = 256;
inline constexpr uint32_t kQp1 = 1;
inline constexpr uint32_t kQp1Qkey = 0x80010000;  // IB_QP1_QKEY
inline constexpr uint16_t kPermissiveLid = 0xFFFF;

// Where a MAD goes to or came from (the UD address vector plus QPN / Q_Key).
struct MadAddress {
  uint16_t lid = 0;            // DLID when sending, SLID when received
  uint32_t qpn = kQp1;         // remote QPN when sending, source QPN when received
  uint32_t qkey = kQp1Qkey;
  uint16_t pkey_index = 0;
  uint8_t sl = 0;
  uint8_t path_bits = 0;
  bool has_grh = false;        // global route (required on RoCE, across subnets)
  Gid gid;                     // DGID when sending, SGID when received
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0;      // local GID table index used for the GRH

  friend bool operator==(const MadAddress&, const MadAddress&) = default;
};

enum class LinkLayer : uint8_t { kInfiniBand, kEthernet };

// What the transport knows about the local port.
struct LocalPort {
  std::string ca_name;         // "mlx5_0", "rxe0", "sim:host1"
  uint8_t port_num = 1;
  LinkLayer link_layer = LinkLayer::kInfiniBand;
  uint16_t lid = 0;
  uint8_t lmc = 0;
  uint16_t sm_lid = 0;
  uint8_t sm_sl = 0;
  Gid gid;                     // GID index 0
  uint64_t node_guid = 0;      // the CA GUID the CM puts in REQ / REP
  std::vector<uint16_t> pkeys; // P_Key table, index order
};

struct TransportCaps {
  std::string name;            // "umad", "verbs-ud", "sim", ...
  bool kernel_rmpp = false;    // receiver coalesces RMPP (umad with rmpp_version 1)
  bool can_reach_qp1 = true;   // peers answer on QP1 (false only for a peer-UD scheme)
  size_t max_receive_size = kMadSize;
  // The transport overwrites TID bits 63..32 of requests (ib_umad puts its
  // agent id there): responses must be matched on the lower 32 bits.
  bool rewrites_tid_high = false;
  // A router client (cm/router) may only use local comm IDs whose top
  // `comm_id_prefix_bits` bits equal `comm_id_prefix`; 0 bits = all of them.
  uint8_t comm_id_prefix_bits = 0;
  uint32_t comm_id_prefix = 0;
};

// One received MAD. `data` is valid only inside the Drain callback. It is 256
// bytes except for an SA response coalesced by kernel RMPP (umad), which is
// longer: 56 bytes of headers, then the concatenated records.
struct ReceivedMad {
  MadAddress from;
  std::span<const uint8_t> data;
};

// The local address an rdma_cm listener is bound to, given with its service
// claim so a router shared by several processes can apply the kernel's rules
// to listeners of one port on different addresses (cma_check_port) and route
// a REQ by the destination address in its rdma_cm IP header
// (cma_find_listener). kNone: no address (AF_IB, or a claim of the service ID
// as a whole).
struct ListenAddress {
  enum class Family : uint8_t { kNone = 0, kIpv4 = 4, kIpv6 = 6 };
  Family family = Family::kNone;
  // Network order; IPv4 in the last 4 bytes, 12 zero bytes in front (as the
  // rdma_cm IP header carries it).
  std::array<uint8_t, 16> ip{};
  // RDMA_OPTION_ID_AFONLY: an IPv6 wildcard that does not take IPv4. The
  // kernel sets it on every IPv4 id, and on IPv6 ones from bindv6only.
  bool af_only = false;

  static ListenAddress Ipv4(uint32_t host_order, bool af_only = true) {
    ListenAddress a;
    a.family = Family::kIpv4;
    for (int i = 0; i < 4; ++i) a.ip[12 + i] = static_cast<uint8_t>(host_order >> (24 - 8 * i));
    a.af_only = af_only;
    return a;
  }
  friend bool operator==(const ListenAddress&, const ListenAddress&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ListenAddress& a) {
    return H::combine(std::move(h), a.family, a.ip, a.af_only);
  }
};

// What a service claim holds (cm/router): a bound address (rdma_bind_addr:
// the kernel reserves the port at bind, cma_get_port; no request reaches a
// bind) or a listener (requests for it go to this process).
enum class ClaimKind : uint8_t { kBind = 1, kListen = 2 };

// A block of ephemeral ports a shared port's router leases to this process
// (Transport::LeasePorts): ports first_port .. first_port + page->size() - 1
// of one port space, claimed and freed in `page` without asking the router.
struct PortLease {
  uint16_t first_port = 0;
  std::shared_ptr<PortPage> page;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Queues one MAD (normally 256 bytes) for `to`. Errors say what is wrong.
  virtual absl::Status Send(const MadAddress& to, std::span<const uint8_t> mad) = 0;

  // Hands up to `max` received MADs to `sink`; returns how many.
  virtual size_t Drain(absl::FunctionRef<void(const ReceivedMad&)> sink,
                       size_t max = SIZE_MAX) = 0;

  // Readable when Drain has work; -1 if the transport has no fd (simulation).
  virtual int fd() const = 0;

  virtual const TransportCaps& caps() const = 0;
  virtual const LocalPort& port() const = 0;

  // A transport that shares the port with other processes (cm/router) must
  // be told which service IDs this process listens on, so REQ / SIDR_REQ for
  // them are routed here. A transport that owns the port accepts everything.
  // `address` is the listener's (every override declares the same defaults).
  // kBind claims an address at bind (REUSEADDR shares it between ids that
  // both set it); kListen routes the requests (never shared).
  virtual absl::Status ClaimService(uint64_t service_id, uint64_t mask, bool reuse,
                                    const ListenAddress& address = {},
                                    ClaimKind kind = ClaimKind::kListen) {
    return absl::OkStatus();
  }
  virtual void ReleaseService(uint64_t service_id, uint64_t mask,
                              const ListenAddress& address = {},
                              ClaimKind kind = ClaimKind::kListen) {}
  // As ReleaseService, but it need not wait until the other processes see the
  // service free: for a port no other process asks for by name (an ephemeral
  // port this process chose; another process's pick that finds it still
  // taken moves to the next). It still reaches the router before any later
  // claim of this process.
  virtual void ReleaseServiceNoWait(uint64_t service_id, uint64_t mask,
                                    const ListenAddress& address, ClaimKind kind) {
    ReleaseService(service_id, mask, address, kind);
  }

  // A block of ephemeral ports of `port_space` (rdma_cm's RDMA_PS_*, as in
  // the ServiceID) for binds to port 0 (cm/router, docs/ROUTER.md "Port
  // blocks"). Unimplemented on a transport that owns the port (a bind claims
  // nothing there); ResourceExhausted when the router has none to give this
  // process. Either way the caller binds as before, port by port.
  virtual absl::StatusOr<PortLease> LeasePorts(uint16_t port_space) {
    return absl::UnimplementedError("this transport leases no ports: it owns the port");
  }

  // OK while the transport works; once it is gone for good (cm/router: the
  // uscmd router exited), why. A Node turns the loss into
  // RDMA_CM_EVENT_DEVICE_REMOVAL on every id. A transport that owns the port
  // is never lost this way.
  virtual absl::Status link_status() const { return absl::OkStatus(); }
};

// A transport that hands every call to `inner`: the base of the decorators
// (capture, fault injection, RoCE addressing, ...), which override only what
// they change. `inner` must outlive it.
class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(Transport& inner) : inner_(inner) {}

  absl::Status Send(const MadAddress& to, std::span<const uint8_t> mad) override {
    return inner_.Send(to, mad);
  }
  size_t Drain(absl::FunctionRef<void(const ReceivedMad&)> sink,
               size_t max = SIZE_MAX) override {
    return inner_.Drain(sink, max);
  }
  int fd() const override { return inner_.fd(); }
  const TransportCaps& caps() const override { return inner_.caps(); }
  const LocalPort& port() const override { return inner_.port(); }
  absl::Status ClaimService(uint64_t service_id, uint64_t mask, bool reuse,
                            const ListenAddress& address = {},
                            ClaimKind kind = ClaimKind::kListen) override {
    return inner_.ClaimService(service_id, mask, reuse, address, kind);
  }
  void ReleaseService(uint64_t service_id, uint64_t mask, const ListenAddress& address = {},
                      ClaimKind kind = ClaimKind::kListen) override {
    inner_.ReleaseService(service_id, mask, address, kind);
  }
  void ReleaseServiceNoWait(uint64_t service_id, uint64_t mask, const ListenAddress& address,
                            ClaimKind kind) override {
    inner_.ReleaseServiceNoWait(service_id, mask, address, kind);
  }
  absl::StatusOr<PortLease> LeasePorts(uint16_t port_space) override {
    return inner_.LeasePorts(port_space);
  }
  absl::Status link_status() const override { return inner_.link_status(); }

 protected:
  Transport& inner_;
};

}  // namespace uscm::mad

#endif  // USCM_MAD_TRANSPORT_H_
