// The C API (api/c/uscm_cma.h) over the C++ one (api/rdma_cm/rdma_cm.h).
#include "api/c/uscm_cma.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include <infiniband/verbs.h>

#include "api/c/c_api_internal.h"
#include "api/rdma_cm/rdma_cm.h"
#include "cm/path_from_record.h"
#include "mad/status_errno.h"
#include "mad/wire/path_record.h"
#include "verbs/qp_transitions.h"
#include "verbs/rc_resources.h"


namespace {

using uscm::c_api::Fail;
using uscm::c_api::FromAh;
using uscm::c_api::g_last_error;
using uscm::c_api::g_mu;
using uscm::c_api::Handles;
using uscm::c_api::IdOf;
using uscm::c_api::Result;
using uscm::Address;
using uscm::CmId;
using uscm::Event;
using uscm::EventChannel;

uscm_device* g_default = nullptr;

struct EventImpl {
  uscm_cm_event pub;  // first
  Event* event;
  struct ChannelImpl* channel;
};

struct ChannelImpl {
  uscm_event_channel pub;  // first: the C pointer is this struct
  std::unique_ptr<EventChannel> ch;
  // Acked events' wrappers, handed out again blank (as the C++ channel
  // recycles its events): a connection's events cost no allocation here.
  std::mutex spare_mu;
  std::vector<EventImpl*> spare;
  static constexpr size_t kMaxSpare = 64;

  ~ChannelImpl() {
    for (EventImpl* e : spare) delete e;
  }
  EventImpl* TakeEvent() {
    {
      std::lock_guard<std::mutex> lock(spare_mu);
      if (!spare.empty()) {
        EventImpl* e = spare.back();
        spare.pop_back();
        *e = EventImpl{};
        return e;
      }
    }
    return new EventImpl();
  }
  void GiveBack(EventImpl* e) {
    e->event = nullptr;  // a second ack of this pointer is refused, not applied
    {
      std::lock_guard<std::mutex> lock(spare_mu);
      if (spare.size() < kMaxSpare) {
        spare.push_back(e);
        return;
      }
    }
    delete e;
  }
};

// Finds or makes the C handle of a C++ id (passive ids appear in events).
uscm_cm_id* HandleOf(CmId* id, ChannelImpl* ch) {
  if (id == nullptr) return nullptr;
  // Once an id has a handle (uscm_create_id, or made below) its C++ context
  // is that handle, which lives as long as the id: found without the lock
  // and the table. A passive id not yet handed out carries its listener's
  // handle, whose impl is the listener: made below.
  auto* own = static_cast<uscm_cm_id*>(id->context());
  if (own != nullptr && own->impl == id) return own;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Handles().find(id);
  if (it != Handles().end()) return it->second;
  auto* h = new uscm_cm_id();
  // A passive id inherits the listener's context: the C++ context of every id
  // made here is the listener's C handle.
  auto* listener = static_cast<uscm_cm_id*>(id->context());
  h->context = listener != nullptr ? listener->context : nullptr;
  h->channel = &ch->pub;
  h->ps = static_cast<uscm_port_space>(id->port_space());
  h->impl = id;
  id->set_context(h);
  Handles()[id] = h;
  return h;
}

// Into `out`, which the caller owns: resolve_addr's two addresses are
// converted on every call, and a StatusOr<Address> took 71 instructions each.
absl::Status ToAddressIn(const uscm_addr* a, const char* call, Address* out) {
  if (a == nullptr) return absl::InvalidArgumentError(std::string(call) + ": address is NULL");
  switch (a->family) {
    case USCM_AF_INET: out->family = Address::Family::kIpv4; break;
    case USCM_AF_INET6: out->family = Address::Family::kIpv6; break;
    case USCM_AF_IB: out->family = Address::Family::kIb; break;
    default:
      return absl::InvalidArgumentError(std::string(call) + ": address family " +
                                         std::to_string(a->family) + " is not USCM_AF_*");
  }
  std::memcpy(out->ip.data(), a->ip, 16);
  out->port = a->port;
  std::memcpy(out->gid.raw.data(), a->gid, 16);
  out->lid = a->lid;
  out->pkey = a->pkey == 0 ? 0xFFFF : a->pkey;
  out->service_id = a->service_id;
  out->service_mask = a->service_mask == 0 ? ~uint64_t{0} : a->service_mask;
  out->scope_id = a->family == USCM_AF_INET6 ? a->scope_id : 0;
  out->flowinfo = a->family == USCM_AF_INET6 ? a->flowinfo : 0;
  return absl::OkStatus();
}

absl::StatusOr<Address> ToAddress(const uscm_addr* a, const char* call) {
  Address out;
  if (absl::Status s = ToAddressIn(a, call, &out); !s.ok()) return s;
  return out;
}

void FromAddress(const Address& in, uscm_addr* a) {
  std::memset(a, 0, sizeof *a);
  switch (in.family) {
    case Address::Family::kIpv4: a->family = USCM_AF_INET; break;
    case Address::Family::kIpv6: a->family = USCM_AF_INET6; break;
    case Address::Family::kIb: a->family = USCM_AF_IB; break;
    default: a->family = USCM_AF_UNSPEC; break;
  }
  std::memcpy(a->ip, in.ip.data(), 16);
  a->port = in.port;
  std::memcpy(a->gid, in.gid.raw.data(), 16);
  a->lid = in.lid;
  a->pkey = in.pkey;
  a->service_id = in.service_id;
  a->service_mask = in.service_mask;
  a->scope_id = in.scope_id;
  a->flowinfo = in.flowinfo;
}

// uscm_get_route's answer; `pkey` the peer's.
void FromPath(const uscm::cm::PathInfo& r, uint16_t pkey, uscm_path* path) {
  std::memset(path, 0, sizeof(*path));
  std::memcpy(path->sgid, r.local_gid.raw.data(), 16);
  std::memcpy(path->dgid, r.remote_gid.raw.data(), 16);
  path->slid = r.local_lid;
  path->dlid = r.remote_lid;
  path->flow_label = r.flow_label;
  path->hop_limit = r.hop_limit;
  path->traffic_class = r.traffic_class;
  path->sl = r.sl;
  path->mtu = r.mtu;
  path->rate = r.packet_rate;
  path->packet_life_time = r.packet_life_time;
  path->pkey = pkey;
}

uscm::ConnParam ToParam(const uscm_conn_param* p) {
  uscm::ConnParam c;
  if (p == nullptr) return c;  // librdmacm defaults
  if (p->private_data != nullptr && p->private_data_len > 0) {
    auto* b = static_cast<const uint8_t*>(p->private_data);
    c.private_data.assign(b, b + p->private_data_len);
  }
  c.responder_resources = p->responder_resources;
  c.initiator_depth = p->initiator_depth;
  c.flow_control = p->flow_control;
  c.retry_count = p->retry_count;
  c.rnr_retry_count = p->rnr_retry_count;
  c.srq = p->srq;
  c.qp_num = p->qp_num;
  return c;
}

std::span<const uint8_t> Bytes(const void* p, uint8_t len) {
  if (p == nullptr) return {};
  return {static_cast<const uint8_t*>(p), len};
}

// NULL private data with a length would be read from address 0 (librdmacm
// gives EFAULT): refused, so the caller learns of it.
bool NullDataWithLength(const char* call, const void* data, uint8_t len) {
  if (data != nullptr || len == 0) return false;
  Fail(EINVAL, std::string(call) + ": private_data is NULL but private_data_len is " +
                   std::to_string(len));
  return true;
}

// RDMA_OPTION_IB_PATH (kernel ucma_set_ib_path): the first entry flagged
// GMP | PRIMARY | BIDIRECTIONAL, its PathRecord read as an SA answer
// (PathFromRecord: SGID = this side, the record's MTU included).
absl::StatusOr<uscm::cm::PathInfo> IbPathOption(const void* optval, size_t optlen) {
  constexpr uint32_t kWanted =
      USCM_PATH_FLAG_GMP | USCM_PATH_FLAG_PRIMARY | USCM_PATH_FLAG_BIDIRECTIONAL;
  if (optlen == 0 || optlen % sizeof(uscm_path_data) != 0) {
    return absl::InvalidArgumentError(
        "set_option(IB_PATH): optlen " + std::to_string(optlen) +
        " is not a non-zero multiple of sizeof(struct uscm_path_data) = " +
        std::to_string(sizeof(uscm_path_data)));
  }
  const auto* d = static_cast<const uscm_path_data*>(optval);
  for (size_t i = 0; i < optlen / sizeof(uscm_path_data); ++i) {
    if (d[i].flags != kWanted) continue;
    auto r = uscm::mad::wire::PathRecord::Parse(d[i].path_rec);
    if (!r.ok()) {
      return absl::InvalidArgumentError("set_option(IB_PATH): entry " + std::to_string(i) +
                                        ": " + std::string(r.status().message()));
    }
    return uscm::cm::PathFromRecord(*r);
  }
  return absl::InvalidArgumentError(
      "set_option(IB_PATH): no entry has flags GMP | PRIMARY | BIDIRECTIONAL (0x2b)");
}

// ucma_get_port: sin_port / sin6_port, or the low 16 bits of an AF_IB SID.
uint16_t PortOf(const Address& a) {
  return a.family == Address::Family::kIb ? static_cast<uint16_t>(a.service_id) : a.port;
}


// A C channel on dev. A polled one's fd is a field the program may poll at
// any time, so its eventfd is made now; an unpolled one has fd -1 and its
// EventChannel makes no eventfd unless asked (fd()).
uscm_event_channel* NewChannel(uscm_device* dev, bool polled) {
  if (dev == nullptr || dev->dev == nullptr) {
    Fail(ENODEV, "create_event_channel: no device (uscm_set_default_device first)");
    return nullptr;
  }
  auto ch = dev->dev->CreateEventChannel();
  if (!ch.ok()) {
    Fail(ch.status());
    return nullptr;
  }
  int fd = -1;
  if (polled && (fd = (*ch)->fd()) < 0) {
    Fail(errno, absl::StrCat("create_event_channel: eventfd: ", strerror(errno)));
    return nullptr;
  }
  auto* impl = new ChannelImpl();
  impl->ch = std::move(*ch);
  impl->pub.fd = fd;
  return &impl->pub;
}

}  // namespace

extern "C" {

const char* uscm_last_error(void) { return g_last_error.c_str(); }

const char* uscm_event_str(enum uscm_cm_event_type event) {
  return uscm::EventTypeName(static_cast<uscm::EventType>(event));
}

void uscm_set_default_device(struct uscm_device* dev) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_default = dev;
}

struct uscm_event_channel* uscm_create_event_channel_on(struct uscm_device* dev) {
  return NewChannel(dev, /*polled=*/true);
}

struct uscm_event_channel* uscm_create_event_channel_unpolled_on(struct uscm_device* dev) {
  return NewChannel(dev, /*polled=*/false);
}

size_t uscm_event_channel_queued(const struct uscm_event_channel* channel) {
  if (channel == nullptr) return 0;
  return reinterpret_cast<const ChannelImpl*>(channel)->ch->queued();
}

int uscm_device_cm_counters_text(struct uscm_device* dev, char* buf, size_t len) {
  if (dev == nullptr || dev->dev == nullptr || buf == nullptr || len == 0) {
    return Fail(EINVAL, "device_cm_counters_text: NULL device, or NULL or empty buffer");
  }
  static constexpr const char* kNames[uscm::cm::kCmAttrCount] = {
      "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP", "SIDR_REQ", "SIDR_REP", "LAP", "APR"};
  uscm::cm::CmCounters c;
  {
    uscm::cm::Node& node = dev->dev->node();
    std::lock_guard<std::mutex> lock(node.mutex());
    c = node.cm().counters();
  }
  std::string text = "sent/received/retransmitted/duplicates:";
  for (int i = 0; i < uscm::cm::kCmAttrCount; ++i) {
    if (c.sent[i] + c.received[i] == 0) continue;
    absl::StrAppend(&text, " ", kNames[i], " ", c.sent[i], "/", c.received[i], "/",
                    c.retransmitted[i], "/", c.duplicates[i]);
  }
  absl::StrAppend(&text, "; unexpected state ", c.unexpected_state, ", unknown connection ",
                  c.unknown_connection, ", malformed ", c.malformed, ", timeouts ", c.timeouts,
                  ", MRAs held ", c.mra_held, ", stale ", c.stale_connections);
  const size_t n = std::min(text.size(), len - 1);
  memcpy(buf, text.data(), n);
  buf[n] = 0;
  return 0;
}

struct uscm_event_channel* uscm_create_event_channel(void) {
  uscm_device* d;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    d = g_default;
  }
  return uscm_create_event_channel_on(d);
}

void uscm_destroy_event_channel(struct uscm_event_channel* channel) {
  delete reinterpret_cast<ChannelImpl*>(channel);
}

int uscm_create_id(struct uscm_event_channel* channel, struct uscm_cm_id** id, void* context,
                   enum uscm_port_space ps) {
  if (channel == nullptr || id == nullptr) {
    return Fail(EINVAL, "create_id: channel and id must not be NULL");
  }
  auto* ch = reinterpret_cast<ChannelImpl*>(channel);
  auto* h = new uscm_cm_id();
  h->context = context;
  h->channel = channel;
  h->ps = ps;
  absl::StatusOr<CmId*> c = ch->ch->CreateId(h, static_cast<uscm::PortSpace>(ps));
  if (!c.ok()) {
    delete h;
    return Fail(c.status());
  }
  h->impl = *c;
  std::lock_guard<std::mutex> lock(g_mu);
  Handles()[*c] = h;
  *id = h;
  return 0;
}

int uscm_destroy_id(struct uscm_cm_id* id) {
  CmId* c = IdOf(id, "destroy_id");
  if (c == nullptr) return -1;
  // g_mu is held across DestroyId: once `c` is freed another thread may get a
  // new CmId at the same address (create_id, or a passive id in HandleOf);
  // the old mapping must be gone before either can look it up, or it would
  // erase the new id's handle (the next event of that id then carried a
  // fresh handle: c_api_threads_test).
  std::lock_guard<std::mutex> lock(g_mu);
  absl::Status s = c->channel()->DestroyId(c);
  if (!s.ok()) return Fail(s);
  Handles().erase(c);
  uscm::c_api::Qps().erase(c);  // a QP of uscm_create_qp stays (rdma_destroy_id leaves it too)
  delete id;
  return 0;
}

int uscm_migrate_id(struct uscm_cm_id* id, struct uscm_event_channel* channel) {
  USCM_ID("migrate_id");
  if (channel == nullptr) {
    return Fail(ENOTSUP,
                "migrate_id: NULL channel (librdmacm's synchronous mode) is not supported; "
                "pass an event channel");
  }
  absl::Status s = c->Migrate(reinterpret_cast<ChannelImpl*>(channel)->ch.get());
  if (!s.ok()) {
    return Fail(s.code() == absl::StatusCode::kFailedPrecondition ? EBUSY : EINVAL,
                std::string(s.message()));
  }
  id->channel = channel;
  return 0;
}

int uscm_bind_addr(struct uscm_cm_id* id, const struct uscm_addr* addr) {
  USCM_ID("bind_addr");
  auto a = ToAddress(addr, "bind_addr");
  if (!a.ok()) return Fail(a.status());
  return Result(c->BindAddr(*a));
}

namespace {

// A resolve_addr call's destination and its source (none when NULL or
// unspecified), or why not.
absl::Status ResolveAddresses(const uscm_addr* src, const uscm_addr* dst,
                              absl::optional<Address>* s, Address* d) {
  if (absl::Status to = ToAddressIn(dst, "resolve_addr", d); !to.ok()) return to;
  if (src != nullptr && src->family != USCM_AF_UNSPEC) {
    if (absl::Status from = ToAddressIn(src, "resolve_addr", &s->emplace()); !from.ok()) {
      s->reset();
      return from;
    }
  }
  return absl::OkStatus();
}

}  // namespace

int uscm_resolve_addr(struct uscm_cm_id* id, const struct uscm_addr* src,
                      const struct uscm_addr* dst, int timeout_ms) {
  USCM_ID("resolve_addr");
  absl::optional<Address> s;
  Address d;
  if (absl::Status a = ResolveAddresses(src, dst, &s, &d); !a.ok()) return Fail(a);
  return Result(c->ResolveAddr(s, d, uscm::mad::Duration::Millis(timeout_ms)));
}

int uscm_resolve_addr_now(struct uscm_cm_id* id, const struct uscm_addr* src,
                          const struct uscm_addr* dst, int timeout_ms, struct uscm_addr* local,
                          struct uscm_addr* peer) {
  USCM_ID("resolve_addr");
  absl::optional<Address> s;
  Address d;
  if (absl::Status a = ResolveAddresses(src, dst, &s, &d); !a.ok()) return Fail(a);
  Address l, p;
  absl::StatusOr<bool> now =
      c->ResolveAddrNow(s, d, uscm::mad::Duration::Millis(timeout_ms), &l, &p);
  if (!now.ok()) return Fail(now.status());
  if (!*now) return 0;
  if (local != nullptr) FromAddress(l, local);
  if (peer != nullptr) FromAddress(p, peer);
  return 1;
}

int uscm_resolve_route(struct uscm_cm_id* id, int timeout_ms) {
  USCM_ID("resolve_route");
  return Result(c->ResolveRoute(uscm::mad::Duration::Millis(timeout_ms)));
}

int uscm_connect(struct uscm_cm_id* id, const struct uscm_conn_param* param) {
  USCM_ID("connect");
  if (param != nullptr &&
      NullDataWithLength("connect", param->private_data, param->private_data_len)) {
    return -1;
  }
  return Result(c->Connect(ToParam(param)));
}

int uscm_set_qp_type(struct uscm_cm_id* id, enum uscm_qp_type type) {
  USCM_ID("set_qp_type");
  if (type != USCM_QPT_RC && type != USCM_QPT_UD) {
    return Fail(EINVAL, "set_qp_type: " + std::to_string(static_cast<int>(type)) +
                            " is not USCM_QPT_RC (2) nor USCM_QPT_UD (4)");
  }
  return Result(c->SetQpType(type == USCM_QPT_UD ? uscm::QpType::kUd : uscm::QpType::kRc));
}

int uscm_get_qp_type(struct uscm_cm_id* id) {
  USCM_ID("get_qp_type");
  return c->is_ud() ? USCM_QPT_UD : USCM_QPT_RC;
}

int uscm_listen(struct uscm_cm_id* id, int backlog) {
  USCM_ID("listen");
  return Result(c->Listen(backlog));
}

int uscm_accept(struct uscm_cm_id* id, const struct uscm_conn_param* param) {
  USCM_ID("accept");
  if (param != nullptr &&
      NullDataWithLength("accept", param->private_data, param->private_data_len)) {
    return -1;
  }
  return Result(c->Accept(ToParam(param)));
}

int uscm_reject(struct uscm_cm_id* id, const void* private_data, uint8_t private_data_len) {
  USCM_ID("reject");
  if (NullDataWithLength("reject", private_data, private_data_len)) return -1;
  return Result(c->Reject(Bytes(private_data, private_data_len)));
}

int uscm_reject_ece(struct uscm_cm_id* id, const void* private_data, uint8_t private_data_len) {
  USCM_ID("reject_ece");
  if (NullDataWithLength("reject_ece", private_data, private_data_len)) return -1;
  return Result(c->RejectEce(Bytes(private_data, private_data_len)));
}

int uscm_set_local_ece(struct uscm_cm_id* id, const struct uscm_ece* ece) {
  USCM_ID("set_local_ece");
  if (ece == nullptr) return Fail(EINVAL, "set_local_ece: ece is NULL");
  return Result(c->SetLocalEce(uscm::cm::Ece{ece->vendor_id, ece->options}));
}

int uscm_get_remote_ece(struct uscm_cm_id* id, struct uscm_ece* ece) {
  USCM_ID("get_remote_ece");
  if (ece == nullptr) return Fail(EINVAL, "get_remote_ece: ece is NULL");
  auto e = c->GetRemoteEce();
  if (!e.ok()) return Fail(e.status());
  ece->vendor_id = e->vendor_id;
  ece->options = e->options;
  return 0;
}

int uscm_establish(struct uscm_cm_id* id) {
  USCM_ID("establish");
  return Result(c->Establish());
}

int uscm_notify(struct uscm_cm_id* id) {
  USCM_ID("notify");
  return Result(c->NotifyCommEst());
}

int uscm_disconnect(struct uscm_cm_id* id) {
  USCM_ID("disconnect");
  return Result(c->Disconnect());
}

namespace {
bool KnownOption(int level, int optname) {
  if (level == USCM_OPTION_IB) return optname == USCM_OPTION_IB_PATH;
  return level == USCM_OPTION_ID &&
         (optname == USCM_OPTION_ID_TOS || optname == USCM_OPTION_ID_REUSEADDR ||
          optname == USCM_OPTION_ID_AFONLY || optname == USCM_OPTION_ID_ACK_TIMEOUT ||
          optname == USCM_OPTION_ID_RESPONSE_TIMEOUT_MS || optname == USCM_OPTION_ID_CM_RETRIES ||
          optname == USCM_OPTION_ID_BACKOFF);
}
}  // namespace

int uscm_set_option(struct uscm_cm_id* id, int level, int optname, const void* optval,
                    size_t optlen) {
  USCM_ID("set_option");
  if (optval == nullptr) return Fail(EINVAL, "set_option: optval is NULL");
  uscm::IdOptions o = c->options();
  auto need = [&](size_t n) { return optlen == n; };
  if (level == USCM_OPTION_ID && optname == USCM_OPTION_ID_TOS && need(1)) {
    o.tos = *static_cast<const uint8_t*>(optval);
  } else if (level == USCM_OPTION_ID && optname == USCM_OPTION_ID_REUSEADDR && need(sizeof(int))) {
    // The kernel's rdma_set_reuseaddr checks the state even when the flag
    // would not change (off after the bind: EINVAL).
    return Result(c->SetReuseAddr(*static_cast<const int*>(optval) != 0));
  } else if (level == USCM_OPTION_ID && optname == USCM_OPTION_ID_AFONLY && need(sizeof(int))) {
    o.af_only = *static_cast<const int*>(optval) != 0;
  } else if (level == USCM_OPTION_ID && optname == USCM_OPTION_ID_ACK_TIMEOUT && need(1)) {
    o.ack_timeout = *static_cast<const uint8_t*>(optval);
  } else if (level == USCM_OPTION_ID && optname == USCM_OPTION_ID_RESPONSE_TIMEOUT_MS &&
             need(4)) {
    o.response_timeout = uscm::mad::Duration::Millis(*static_cast<const uint32_t*>(optval));
  } else if (level == USCM_OPTION_ID && optname == USCM_OPTION_ID_CM_RETRIES && need(1)) {
    o.max_cm_retries = *static_cast<const uint8_t*>(optval);
  } else if (level == USCM_OPTION_ID && optname == USCM_OPTION_ID_BACKOFF && need(4)) {
    o.backoff_factor = *static_cast<const uint32_t*>(optval);
  } else if (level == USCM_OPTION_IB && optname == USCM_OPTION_IB_PATH) {
    auto path = IbPathOption(optval, optlen);
    if (!path.ok()) return Fail(path.status());
    // rdma_set_option(IB_PATH) is refused outside ADDR_RESOLVED, before
    // resolve_addr too (the kernel's rdma_set_ib_path); the C++ SetOption only
    // refuses a changed path, so the C call checks the state itself.
    const uscm::IdState st = c->state();
    if (st != uscm::IdState::kAddrResolved) {
      return Fail(EINVAL, std::string("set_option(IB_PATH): id is in state ") +
                              uscm::IdStateName(st) + "; expected ADDR_RESOLVED");
    }
    o.ib_path = *path;
  } else if (!KnownOption(level, optname)) {
    // The kernel's ucma_set_option: an unknown level or option is ENOSYS.
    return Fail(ENOSYS, "set_option: unknown option (level " + std::to_string(level) +
                            ", option " + std::to_string(optname) + ")");
  } else {
    return Fail(EINVAL, "set_option: optlen " + std::to_string(optlen) + " does not match the "
                            "type of (level " + std::to_string(level) + ", option " +
                            std::to_string(optname) + ") (TOS/ACK_TIMEOUT/CM_RETRIES: 1, "
                            "REUSEADDR/AFONLY: sizeof(int), RESPONSE_TIMEOUT_MS/BACKOFF: 4, "
                            "IB_PATH: n * sizeof(struct uscm_path_data))");
  }
  return Result(c->SetOption(o));
}

int uscm_join_multicast(struct uscm_cm_id* id, const struct uscm_addr* addr, void* context) {
  USCM_ID("join_multicast");
  auto a = ToAddress(addr, "join_multicast");
  if (!a.ok()) return Fail(a.status());
  return Result(c->JoinMulticast(*a, context));
}

// rdma_join_multicast_ex (librdmacm cma.c): a reserved comp_mask bit is
// ENOTSUP; a missing address or join flags, or flags >= RESERVED, EINVAL.
int uscm_join_multicast_ex(struct uscm_cm_id* id, const struct uscm_cm_join_mc_attr_ex* attr,
                           void* context) {
  USCM_ID("join_multicast_ex");
  if (attr == nullptr) return Fail(EINVAL, "join_multicast_ex: attr is NULL");
  if (attr->comp_mask >= USCM_CM_JOIN_MC_ATTR_RESERVED) {
    return Fail(ENOTSUP, "join_multicast_ex: comp_mask 0x" + absl::StrCat(absl::Hex(attr->comp_mask)) +
                             " has bits beyond USCM_CM_JOIN_MC_ATTR_JOIN_FLAGS");
  }
  if (!(attr->comp_mask & USCM_CM_JOIN_MC_ATTR_ADDRESS) || attr->addr == nullptr) {
    return Fail(EINVAL, "join_multicast_ex: no address (USCM_CM_JOIN_MC_ATTR_ADDRESS and addr)");
  }
  if (!(attr->comp_mask & USCM_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      attr->join_flags >= USCM_MC_JOIN_FLAG_RESERVED) {
    return Fail(EINVAL, "join_multicast_ex: join_flags " + std::to_string(attr->join_flags) +
                            " not given or not FULLMEMBER (0) / SENDONLY_FULLMEMBER (1)");
  }
  auto a = ToAddress(attr->addr, "join_multicast_ex");
  if (!a.ok()) return Fail(a.status());
  return Result(c->JoinMulticastEx(*a, context,
                                   attr->join_flags == USCM_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
                                       ? uscm::McJoinFlags::kSendOnlyFullMember
                                       : uscm::McJoinFlags::kFullMember));
}

uint16_t uscm_get_src_port(struct uscm_cm_id* id) {
  CmId* c = IdOf(id, "get_src_port");
  return c == nullptr ? 0 : PortOf(c->GetLocalAddr());
}

uint16_t uscm_get_dst_port(struct uscm_cm_id* id) {
  CmId* c = IdOf(id, "get_dst_port");
  return c == nullptr ? 0 : PortOf(c->GetPeerAddr());
}

int uscm_leave_multicast(struct uscm_cm_id* id, const struct uscm_addr* addr) {
  USCM_ID("leave_multicast");
  auto a = ToAddress(addr, "leave_multicast");
  if (!a.ok()) return Fail(a.status());
  return Result(c->LeaveMulticast(*a));
}

namespace {

// The C event of a retrieved C++ event (acked by uscm_ack_cm_event).
void Deliver(ChannelImpl* ch, Event* e, struct uscm_cm_event** event);

}  // namespace

int uscm_get_cm_event(struct uscm_event_channel* channel, struct uscm_cm_event** event) {
  if (channel == nullptr || event == nullptr) {
    return Fail(EINVAL, "get_cm_event: channel and event must not be NULL");
  }
  auto* ch = reinterpret_cast<ChannelImpl*>(channel);
  absl::StatusOr<Event*> e = ch->ch->GetEvent();
  if (!e.ok() && !ch->ch->device()->simulated()) {
    e = ch->ch->WaitEvent(uscm::mad::Duration::Seconds(3600));
  }
  if (!e.ok()) return Fail(e.status());
  Deliver(ch, *e, event);
  return 0;
}

int uscm_try_get_cm_event(struct uscm_event_channel* channel, struct uscm_cm_event** event) {
  if (channel == nullptr || event == nullptr) {
    return Fail(EINVAL, "try_get_cm_event: channel and event must not be NULL");
  }
  auto* ch = reinterpret_cast<ChannelImpl*>(channel);
  absl::StatusOr<Event*> e = ch->ch->GetEvent();
  if (!e.ok()) {
    errno = EAGAIN;  // nothing queued: no error text to format
    return -1;
  }
  Deliver(ch, *e, event);
  return 0;
}

namespace {

void Deliver(ChannelImpl* ch, Event* e, struct uscm_cm_event** event) {
  EventImpl* impl = ch->TakeEvent();
  impl->event = e;
  impl->channel = ch;
  uscm_cm_event& p = impl->pub;
  const Event& ev = *e;
  p.id = HandleOf(ev.id, ch);
  p.listen_id = HandleOf(ev.listen_id, ch);
  p.event = static_cast<uscm_cm_event_type>(ev.event);
  p.status = ev.status;
  const bool ud = ev.event == uscm::EventType::kMulticastJoin ||
                  ev.event == uscm::EventType::kMulticastError ||
                  (ev.id != nullptr && ev.id->is_ud());
  if (ud) {
    p.param.ud.private_data = ev.event == uscm::EventType::kMulticastJoin ||
                                      ev.event == uscm::EventType::kMulticastError
                                  ? ev.mc_context
                                  : (ev.ud.private_data.empty() ? nullptr
                                                                : ev.ud.private_data.data());
    p.param.ud.private_data_len = static_cast<uint8_t>(ev.ud.private_data.size());
    FromAh(ev.ud.ah_attr, &p.param.ud.ah_attr);
    p.param.ud.qp_num = ev.ud.qp_num;
    p.param.ud.qkey = ev.ud.qkey;
  } else {
    p.param.conn.private_data =
        ev.conn.private_data.empty() ? nullptr : ev.conn.private_data.data();
    p.param.conn.private_data_len = static_cast<uint8_t>(ev.conn.private_data.size());
    p.param.conn.responder_resources = ev.conn.responder_resources;
    p.param.conn.initiator_depth = ev.conn.initiator_depth;
    p.param.conn.flow_control = ev.conn.flow_control;
    p.param.conn.retry_count = ev.conn.retry_count;
    p.param.conn.rnr_retry_count = ev.conn.rnr_retry_count;
    p.param.conn.srq = ev.conn.srq;
    p.param.conn.qp_num = ev.conn.qp_num;
  }
  *event = &impl->pub;
}

}  // namespace

int uscm_ack_cm_event(struct uscm_cm_event* event) {
  if (event == nullptr) return Fail(EINVAL, "ack_cm_event: event is NULL");
  auto* impl = reinterpret_cast<EventImpl*>(event);
  absl::Status s = impl->channel->ch->AckEvent(impl->event);
  if (!s.ok()) return Fail(s);
  impl->channel->GiveBack(impl);
  return 0;
}

int uscm_getname(struct uscm_cm_id* id, struct uscm_addr* addr) {
  USCM_ID("getname");
  if (addr == nullptr) return Fail(EINVAL, "getname: addr is NULL");
  FromAddress(c->GetLocalAddr(), addr);
  return 0;
}

int uscm_getpeer(struct uscm_cm_id* id, struct uscm_addr* addr) {
  USCM_ID("getpeer");
  if (addr == nullptr) return Fail(EINVAL, "getpeer: addr is NULL");
  FromAddress(c->GetPeerAddr(), addr);
  return 0;
}

int uscm_get_route(struct uscm_cm_id* id, struct uscm_path* path) {
  USCM_ID("get_route");
  if (path == nullptr) return Fail(EINVAL, "get_route: path is NULL");
  absl::optional<uscm::cm::PathInfo> r = c->route();
  if (!r.has_value()) return Fail(ENODATA, "get_route: no route yet (resolve_route first)");
  FromPath(*r, c->GetPeerAddr().pkey, path);
  return 0;
}

int uscm_resolve_route_now(struct uscm_cm_id* id, struct uscm_path* path) {
  USCM_ID("resolve_route");
  if (path == nullptr) return Fail(EINVAL, "resolve_route_now: path is NULL");
  uscm::cm::PathInfo r;
  uint16_t pkey = 0;
  absl::StatusOr<bool> done = c->ResolveRouteNow(&r, &pkey);
  if (!done.ok()) return Fail(done.status());
  if (!*done) return 0;
  FromPath(r, pkey, path);
  return 1;
}

int uscm_parse_addr(const char* text, struct uscm_addr* addr) {
  if (text == nullptr || addr == nullptr) return Fail(EINVAL, "parse_addr: NULL argument");
  auto a = Address::Parse(text);
  if (!a.ok()) return Fail(a.status());
  FromAddress(*a, addr);
  return 0;
}

}  // extern "C"

struct uscm_device* uscm_device_wrap(uscm::Device* dev) { return new uscm_device{dev}; }
void uscm_device_unwrap_free(struct uscm_device* d) { delete d; }
int uscm_fail_with(int err, const char* message) { return Fail(err, message); }
void uscm_set_verbs_ops_for_testing(const uscm::verbs::VerbsOps* ops) {
  std::lock_guard<std::mutex> lock(g_mu);
  uscm::c_api::g_verbs_ops = ops;
}
