/* The uscm C API: function for function like librdmacm's rdma_cma.h, with
 * the prefix uscm_. Calls return 0, or -1 with errno set (as librdmacm);
 * uscm_last_error() gives the detailed message of the calling thread's last
 * failure ("connect: private data is 57 bytes; REQ with the 36-byte CMA
 * header carries at most 56"). A thin layer over api/rdma_cm/rdma_cm.h (C++).
 *
 * Differences from librdmacm (docs/API.md): an event channel belongs to one
 * port (uscm_create_event_channel_on), uscm_destroy_id fails with EBUSY
 * instead of blocking while retrieved events are not acked, and
 * uscm_get_cm_event never blocks on a simulated device (EAGAIN). */
#ifndef USCM_API_C_USCM_CMA_H_
#define USCM_API_C_USCM_CMA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum uscm_cm_event_type {
  USCM_CM_EVENT_ADDR_RESOLVED,
  USCM_CM_EVENT_ADDR_ERROR,
  USCM_CM_EVENT_ROUTE_RESOLVED,
  USCM_CM_EVENT_ROUTE_ERROR,
  USCM_CM_EVENT_CONNECT_REQUEST,
  USCM_CM_EVENT_CONNECT_RESPONSE,
  USCM_CM_EVENT_CONNECT_ERROR,
  USCM_CM_EVENT_UNREACHABLE,
  USCM_CM_EVENT_REJECTED,
  USCM_CM_EVENT_ESTABLISHED,
  USCM_CM_EVENT_DISCONNECTED,
  USCM_CM_EVENT_DEVICE_REMOVAL,
  USCM_CM_EVENT_MULTICAST_JOIN,
  USCM_CM_EVENT_MULTICAST_ERROR,
  USCM_CM_EVENT_ADDR_CHANGE,
  USCM_CM_EVENT_TIMEWAIT_EXIT
};

enum uscm_port_space {
  USCM_PS_IPOIB = 0x0002,
  USCM_PS_TCP = 0x0106,
  USCM_PS_UDP = 0x0111,
  USCM_PS_IB = 0x013F
};

/* Address families of struct uscm_addr. */
enum { USCM_AF_UNSPEC = 0, USCM_AF_INET = 1, USCM_AF_INET6 = 2, USCM_AF_IB = 3 };

/* sockaddr_in / sockaddr_in6 / sockaddr_ib in one struct. */
struct uscm_addr {
  int family;
  uint8_t ip[16];       /* network order; IPv4 in ip[12..15] */
  uint16_t port;        /* host order */
  uint8_t gid[16];      /* AF_IB */
  uint16_t lid;         /* AF_IB */
  uint16_t pkey;        /* AF_IB */
  uint64_t service_id;  /* AF_IB */
  uint64_t service_mask;
  /* AF_INET6: sin6_scope_id, the interface index a link-local (fe80::/10)
   * address belongs to; 0 for the others. */
  uint32_t scope_id;
  /* AF_INET6: sin6_flowinfo in host order; its low 20 bits, when not 0, are
   * a RoCE connection's flow label (the kernel's cma_get_roce_udp_flow_label). */
  uint32_t flowinfo;
};

struct uscm_ah_attr {
  uint8_t dgid[16];
  uint32_t flow_label;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t is_global;
  uint16_t dlid;
  uint8_t sl;
  uint8_t static_rate;
  uint8_t port_num;
  uint8_t sgid_index; /* the source GID (in the padding: size unchanged) */
};

struct uscm_conn_param {
  const void* private_data;
  uint8_t private_data_len;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t flow_control;
  uint8_t retry_count;
  uint8_t rnr_retry_count;
  uint8_t srq;
  uint32_t qp_num;
};

struct uscm_ud_param {
  const void* private_data;  /* MULTICAST_JOIN: the join's context (as librdmacm) */
  uint8_t private_data_len;
  struct uscm_ah_attr ah_attr;
  uint32_t qp_num;
  uint32_t qkey;
};

struct uscm_device;
struct uscm_event_channel {
  int fd;
};

struct ibv_qp;
struct ibv_pd;
struct ibv_qp_init_attr;

struct uscm_cm_id {
  void* context;
  struct uscm_event_channel* channel;
  enum uscm_port_space ps;
  void* impl; /* private */
  struct ibv_qp* qp; /* as rdma_cm_id.qp: set by uscm_create_qp / uscm_set_qp */
};

struct uscm_cm_event {
  struct uscm_cm_id* id;
  struct uscm_cm_id* listen_id;
  enum uscm_cm_event_type event;
  int status;
  union {
    struct uscm_conn_param conn;
    struct uscm_ud_param ud;
  } param;
};

struct uscm_ece {
  uint32_t vendor_id;
  uint32_t options;
};

/* QP attributes for INIT / RTR / RTS ("external QP" mode). */
enum uscm_qp_state { USCM_QPS_INIT = 1, USCM_QPS_RTR = 2, USCM_QPS_RTS = 3 };
struct uscm_qp_attr {
  uint32_t mask; /* ibv_qp_attr_mask bits */
  enum uscm_qp_state qp_state;
  uint32_t qp_access_flags;
  uint16_t pkey_index;
  uint8_t port_num;
  struct uscm_ah_attr ah_attr;
  uint8_t path_mtu;
  uint32_t dest_qp_num;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint8_t max_dest_rd_atomic;
  uint8_t max_rd_atomic;
  uint8_t min_rnr_timer;
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
};

/* Option levels and names (rdma_set_option), plus uscm-only names. */
enum { USCM_OPTION_ID = 0, USCM_OPTION_IB = 1 };
/* Level USCM_OPTION_IB (RDMA_OPTION_IB_PATH): optval is an array of
 * struct uscm_path_data, optlen a non-zero multiple of its size; the first
 * entry flagged GMP | PRIMARY | BIDIRECTIONAL is used (as the kernel's
 * ucma_set_ib_path) and replaces the SA query of uscm_resolve_route. Allowed
 * while the id is idle or ADDR_RESOLVED. */
enum { USCM_OPTION_IB_PATH = 1 };
/* struct ibv_path_data (infiniband/sa.h): flags, then one 64-byte SA
 * PathRecord in wire (network) order, SGID = this side. */
enum {
  USCM_PATH_FLAG_GMP = 1 << 0,
  USCM_PATH_FLAG_PRIMARY = 1 << 1,
  USCM_PATH_FLAG_ALTERNATE = 1 << 2,
  USCM_PATH_FLAG_OUTBOUND = 1 << 3,
  USCM_PATH_FLAG_INBOUND = 1 << 4,
  USCM_PATH_FLAG_INBOUND_REVERSE = 1 << 5,
  USCM_PATH_FLAG_BIDIRECTIONAL = (1 << 3) | (1 << 5)
};
struct uscm_path_data {
  uint32_t flags;
  uint32_t reserved;
  uint8_t path_rec[64];
};

/* rdma_join_multicast_ex (enum rdma_cm_join_mc_attr_mask,
 * enum rdma_cm_mc_join_flags, struct rdma_cm_join_mc_attr_ex). */
enum uscm_cm_join_mc_attr_mask {
  USCM_CM_JOIN_MC_ATTR_ADDRESS = 1 << 0,
  USCM_CM_JOIN_MC_ATTR_JOIN_FLAGS = 1 << 1,
  USCM_CM_JOIN_MC_ATTR_RESERVED = 1 << 2
};
enum uscm_cm_mc_join_flags {
  USCM_MC_JOIN_FLAG_FULLMEMBER,
  USCM_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, /* no QP attach, as librdmacm */
  USCM_MC_JOIN_FLAG_RESERVED
};
struct uscm_cm_join_mc_attr_ex {
  uint32_t comp_mask;  /* USCM_CM_JOIN_MC_ATTR_*: ADDRESS and JOIN_FLAGS required */
  uint32_t join_flags; /* enum uscm_cm_mc_join_flags */
  const struct uscm_addr* addr;
};
enum {
  USCM_OPTION_ID_TOS = 0,         /* uint8_t */
  USCM_OPTION_ID_REUSEADDR = 1,   /* int */
  USCM_OPTION_ID_AFONLY = 2,      /* int */
  USCM_OPTION_ID_ACK_TIMEOUT = 3, /* uint8_t */
  USCM_OPTION_ID_RESPONSE_TIMEOUT_MS = 100, /* uint32_t, uscm only */
  USCM_OPTION_ID_CM_RETRIES = 101,          /* uint8_t, uscm only */
  USCM_OPTION_ID_BACKOFF = 102              /* uint32_t, uscm only */
};

/* The detailed message of this thread's last failed call ("" if none). */
const char* uscm_last_error(void);
const char* uscm_event_str(enum uscm_cm_event_type event);

/* The device used by uscm_create_event_channel (set by the C++ owner, e.g.
 * the uscm tool or a simulation helper). */
void uscm_set_default_device(struct uscm_device* dev);
struct uscm_event_channel* uscm_create_event_channel(void);
struct uscm_event_channel* uscm_create_event_channel_on(struct uscm_device* dev);
/* A channel for a layer that drains it itself after each step and call
 * (uscm_try_get_cm_event; the drop-in librdmacm): `fd` is -1 and no eventfd
 * is written or read as events come and go (two syscalls per burst saved).
 * uscm_get_cm_event on it still waits (it makes the eventfd then). */
struct uscm_event_channel* uscm_create_event_channel_unpolled_on(struct uscm_device* dev);
void uscm_destroy_event_channel(struct uscm_event_channel* channel);
/* Events queued on `channel`, not yet retrieved: a lock-free read (0 for a
 * NULL channel), so a hook run after every step can skip a drain that has
 * nothing to move without taking any lock. */
size_t uscm_event_channel_queued(const struct uscm_event_channel* channel);
/* This process's CM counters on the device's port as one line of text (NUL
 * terminated, cut to `len`): per message sent / received / retransmitted /
 * duplicates, then the drops ("REQ 1000/0/3/0 MRA 0/2/0/1 ...; unexpected
 * state 0, unknown connection 0, ..."), for the drop-in's USCM_CM_COUNTERS=1 exit line.
 * 0, or -1 with errno EINVAL. */
int uscm_device_cm_counters_text(struct uscm_device* dev, char* buf, size_t len);

int uscm_create_id(struct uscm_event_channel* channel, struct uscm_cm_id** id, void* context,
                   enum uscm_port_space ps);
int uscm_destroy_id(struct uscm_cm_id* id);
/* The id's QP type, as the kernel's id->qp_type (librdmacm's rdma_create_id2
 * qp_type, which rdma_create_ep takes from ai_qp_type). USCM_PS_TCP ids are
 * RC, USCM_PS_UDP / USCM_PS_IPOIB ones UD; a USCM_PS_IB id is RC unless
 * uscm_set_qp_type makes it UD before connect or listen (EINVAL after, or
 * for another type than its own in another port space). A UD id connects by
 * SIDR (ESTABLISHED with param.ud, Q_Key 0x01234567 as the kernel's
 * cma_set_default_qkey), a UD listener takes SIDR_REQs only and an RC one
 * REQs only (a REQ to a UD listener gets REJ 28, a SIDR_REQ to an RC one
 * SIDR_REP status 2, as cma_ib_check_req_qp_type), and a passive id is of
 * its request's type. uscm_get_qp_type: USCM_QPT_RC or USCM_QPT_UD, or -1
 * (EINVAL) for a bad id. */
enum uscm_qp_type { USCM_QPT_RC = 2, USCM_QPT_UD = 4 }; /* ibv_qp_type's values */
int uscm_set_qp_type(struct uscm_cm_id* id, enum uscm_qp_type type);
int uscm_get_qp_type(struct uscm_cm_id* id);
/* rdma_migrate_id: the id, its queued events (and for a listener the
 * queued CONNECT_REQUESTs with their new ids) move to `channel`, which must
 * be of the same device; id->channel is updated. Differences from librdmacm:
 * EBUSY (instead of blocking) while events of the id retrieved from its
 * current channel are not acked; a NULL channel (librdmacm: synchronous
 * mode) is ENOTSUP. */
int uscm_migrate_id(struct uscm_cm_id* id, struct uscm_event_channel* channel);
int uscm_bind_addr(struct uscm_cm_id* id, const struct uscm_addr* addr);
int uscm_resolve_addr(struct uscm_cm_id* id, const struct uscm_addr* src,
                      const struct uscm_addr* dst, int timeout_ms);
/* uscm_resolve_addr for a layer that hands ADDR_RESOLVED to its program
 * itself (the drop-in librdmacm): 1 when the address resolved within the
 * call (RoCE with no neighbour resolution to wait for, AF_IB): the id is
 * ADDR_RESOLVED, no event is queued, and *local / *peer (when not NULL) are
 * what uscm_getname / uscm_getpeer now give; 0 when it went as
 * uscm_resolve_addr (its ADDR_RESOLVED / ADDR_ERROR follows on the
 * channel); -1 with errno as uscm_resolve_addr's. */
int uscm_resolve_addr_now(struct uscm_cm_id* id, const struct uscm_addr* src,
                          const struct uscm_addr* dst, int timeout_ms, struct uscm_addr* local,
                          struct uscm_addr* peer);
int uscm_resolve_route(struct uscm_cm_id* id, int timeout_ms);
int uscm_connect(struct uscm_cm_id* id, const struct uscm_conn_param* param);
int uscm_listen(struct uscm_cm_id* id, int backlog);
int uscm_accept(struct uscm_cm_id* id, const struct uscm_conn_param* param);
int uscm_reject(struct uscm_cm_id* id, const void* private_data, uint8_t private_data_len);
int uscm_reject_ece(struct uscm_cm_id* id, const void* private_data, uint8_t private_data_len);
int uscm_set_local_ece(struct uscm_cm_id* id, const struct uscm_ece* ece);
int uscm_get_remote_ece(struct uscm_cm_id* id, struct uscm_ece* ece);
int uscm_establish(struct uscm_cm_id* id);
int uscm_notify(struct uscm_cm_id* id);
int uscm_disconnect(struct uscm_cm_id* id);
int uscm_set_option(struct uscm_cm_id* id, int level, int optname, const void* optval,
                    size_t optlen);
int uscm_join_multicast(struct uscm_cm_id* id, const struct uscm_addr* addr, void* context);
int uscm_join_multicast_ex(struct uscm_cm_id* id, const struct uscm_cm_join_mc_attr_ex* attr,
                           void* context);
int uscm_leave_multicast(struct uscm_cm_id* id, const struct uscm_addr* addr);
/* rdma_get_src_port / rdma_get_dst_port: the IP port, or for AF_IB the low
 * 16 bits of the service ID (as librdmacm's ucma_get_port). Host order, like
 * uscm_addr.port (librdmacm returns __be16). 0 when none is known yet; an
 * unknown id also gives 0, with errno EINVAL and uscm_last_error(). */
uint16_t uscm_get_src_port(struct uscm_cm_id* id);
uint16_t uscm_get_dst_port(struct uscm_cm_id* id);
int uscm_init_qp_attr(struct uscm_cm_id* id, struct uscm_qp_attr* attr, int* mask);
/* A verbs QP the CM drives (rdma_create_qp's QP): after these, uscm moves the
 * QP to INIT / RTR / RTS while connecting or accepting and to ERROR on
 * REJECTED / DISCONNECTED, attaches it to joined multicast groups (UD), and
 * conn_param.qp_num may be 0. Call after resolve_addr / resolve_route
 * (active) or on CONNECT_REQUEST (passive), before connect / accept; one QP
 * per id. RC, UC and UD QPs (RC/UC for an RC id, UD for a UD one:
 * uscm_get_qp_type; UD QPs get the Q_Key 0x01234567).
 *
 * uscm_set_qp (uscm only): the application created `qp` with libibverbs on the
 * id's port and keeps owning it (uscm_destroy_qp only detaches it). The
 * port's active MTU caps the path MTU; the source GID index is the one of the
 * id's IPv4-mapped GID (RoCE), else of the port's GID, else 0 (ibv_query_port
 * / ibv_query_gid on qp->context). uscm_set_qp_ex takes both instead
 * (active_mtu: enum ibv_mtu, 1..5). EEXIST when the id already has a QP,
 * EINVAL for a NULL qp, a QP type that does not fit the port space, or an id
 * that listens, is connecting or is past CONNECT_REQUEST. */
int uscm_set_qp(struct uscm_cm_id* id, struct ibv_qp* qp);
int uscm_set_qp_ex(struct uscm_cm_id* id, struct ibv_qp* qp, uint8_t sgid_index, int active_mtu);
/* RoCE: the index of the GID entry the id's REQ, MADs and QP leave from in
 * the table uscm_device_open read: its address on its netdev (a link-local
 * address's interface; the route's output netdev for an id resolved without
 * a source; the netdev a request came in on for its id), what uscm_set_qp
 * gives the QP. -1 (EINVAL) for a bad id; -2 on InfiniBand, or when the table
 * lacks the address (the caller finds the index itself). */
int uscm_source_gid_index(struct uscm_cm_id* id);
/* rdma_create_qp: ibv_create_qp(pd, qp_init_attr) then uscm_set_qp; the QP
 * is destroyed again when that fails. pd must be given (librdmacm's NULL pd =
 * the id's default PD has no equivalent). The QP is id->qp. */
int uscm_create_qp(struct uscm_cm_id* id, struct ibv_pd* pd, struct ibv_qp_init_attr* qp_init_attr);
/* rdma_destroy_qp: uscm stops driving the QP and id->qp becomes NULL; a QP of
 * uscm_create_qp is destroyed (ibv_destroy_qp), one of uscm_set_qp is left to
 * the application. No-op when the id has no QP. */
void uscm_destroy_qp(struct uscm_cm_id* id);
int uscm_get_cm_event(struct uscm_event_channel* channel, struct uscm_cm_event** event);
/* As uscm_get_cm_event, but never waits, on any device: -1 with errno EAGAIN
 * at once when no event is queued (uscm_last_error() is not set for that).
 * No syscall: a layer that drains the channel after each step (the drop-in
 * librdmacm) need not poll the fd before each get. */
int uscm_try_get_cm_event(struct uscm_event_channel* channel, struct uscm_cm_event** event);
int uscm_ack_cm_event(struct uscm_cm_event* event);
int uscm_getname(struct uscm_cm_id* id, struct uscm_addr* addr);
int uscm_getpeer(struct uscm_cm_id* id, struct uscm_addr* addr);
/* The id's resolved route (rdma_cm_id.route.path_rec): from the SA, an
 * IB_PATH option, or on RoCE the two IPs. ENODATA before resolve_route (and
 * on a passive id, the REQ's primary path once it arrived). */
struct uscm_path {
  uint8_t sgid[16];
  uint8_t dgid[16];
  uint16_t slid;
  uint16_t dlid;
  uint32_t flow_label;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t sl;
  uint8_t mtu;              /* IBA enum 1..5, 0 unknown */
  uint8_t rate;             /* IBA rate enum */
  uint8_t packet_life_time; /* IBA time code */
  uint16_t pkey;
};
int uscm_get_route(struct uscm_cm_id* id, struct uscm_path* path);
/* uscm_resolve_route where the route needs no SA query (the IB_PATH option,
 * or RoCE: the path from the two IPs), for a layer that hands
 * ROUTE_RESOLVED to its program itself (the drop-in librdmacm): the id
 * becomes ROUTE_RESOLVED as with uscm_resolve_route, but no event is
 * queued; *path as uscm_get_route then gives it (the addresses are those
 * of ADDR_RESOLVED: resolve_route does not change them). 1 when done; 0
 * when the route needs the SA (nothing changed: call uscm_resolve_route);
 * -1 with errno as uscm_resolve_route's (EINVAL before resolve_addr). */
int uscm_resolve_route_now(struct uscm_cm_id* id, struct uscm_path* path);
/* "10.0.0.1:7471", "[fe80::1]:7471" -> addr. */
int uscm_parse_addr(const char* text, struct uscm_addr* addr);

#ifdef __cplusplus
}  /* extern "C" */

/* C++ owners hand a device to C code (the handle does not own it). */
namespace uscm {
class Device;
}
struct uscm_device* uscm_device_wrap(uscm::Device* dev);
void uscm_device_unwrap_free(struct uscm_device* handle);
/* For C entry points in other files (api/c/uscm_device.cc): sets errno and the
 * message uscm_last_error() returns; always -1. */
int uscm_fail_with(int err, const char* message);
/* Tests: the verbs calls (ibv_modify_qp, attach/detach) of QPs attached
 * afterwards go through `ops` (NULL: the real ones). */
namespace uscm::verbs {
struct VerbsOps;
}
void uscm_set_verbs_ops_for_testing(const uscm::verbs::VerbsOps* ops);
#endif

#endif /* USCM_API_C_USCM_CMA_H_ */
