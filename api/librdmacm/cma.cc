// The rdma_cm_id calls of the drop-in. Done: rdma_event_str,
// rdma_get_src_port / rdma_get_dst_port. Not done yet (docs/API.md "Drop-in
// librdmacm"): everything that needs an id. With no RDMA device they fail as
// librdmacm does there, -1/ENODEV (its ucma_init); with a device, -1/ENOSYS
// until they are built over the uscm C API.
#include <endian.h>
#include <errno.h>
#include <infiniband/ib.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdint.h>
#include <sys/socket.h>

#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"

namespace {

// -1 with ENODEV when there is no device, else ENOSYS: the call is not
// implemented yet.
int NotDone(const char* call) {
  if (uscm::librdmacm::EnsureDevices(call) != 0) return -1;  // ENODEV, said why
  return uscm::librdmacm::Fail(ENOSYS, call, "not implemented yet in uscm's librdmacm");
}

// librdmacm's ucma_get_port: network order; AF_IB: the low 16 bits of the
// service ID.
uint16_t PortOf(const sockaddr* addr) {
  switch (addr->sa_family) {
    case AF_INET:
      return reinterpret_cast<const sockaddr_in*>(addr)->sin_port;
    case AF_INET6:
      return reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port;
    case AF_IB:
      return htobe16(
          static_cast<uint16_t>(be64toh(reinterpret_cast<const sockaddr_ib*>(addr)->sib_sid)));
    default:
      return 0;
  }
}

}  // namespace

extern "C" {

const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

// From id->route.addr, as librdmacm (network order; 0 for an unset address).
__be16 rdma_get_src_port(rdma_cm_id* id) { return PortOf(&id->route.addr.src_addr); }
__be16 rdma_get_dst_port(rdma_cm_id* id) { return PortOf(&id->route.addr.dst_addr); }

// ---- Not done yet: ENODEV without a device, else ENOSYS. ----

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) {
  return NotDone("rdma_create_id");
}
int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                   ibv_qp_init_attr* qp_init_attr) {
  return NotDone("rdma_create_ep");
}
void rdma_destroy_ep(rdma_cm_id* id) { NotDone("rdma_destroy_ep"); }
int rdma_destroy_id(rdma_cm_id* id) { return NotDone("rdma_destroy_id"); }
int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) { return NotDone("rdma_bind_addr"); }
int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  return NotDone("rdma_resolve_addr");
}
int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) { return NotDone("rdma_resolve_route"); }
int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  return NotDone("rdma_create_qp");
}
int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* qp_init_attr) {
  return NotDone("rdma_create_qp_ex");
}
void rdma_destroy_qp(rdma_cm_id* id) { NotDone("rdma_destroy_qp"); }
int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) { return NotDone("rdma_connect"); }
int rdma_establish(rdma_cm_id* id) { return NotDone("rdma_establish"); }
int rdma_listen(rdma_cm_id* id, int backlog) { return NotDone("rdma_listen"); }
int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) { return NotDone("rdma_get_request"); }
int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) { return NotDone("rdma_accept"); }
int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return NotDone("rdma_reject");
}
int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return NotDone("rdma_reject_ece");
}
int rdma_notify(rdma_cm_id* id, ibv_event_type event) { return NotDone("rdma_notify"); }
int rdma_disconnect(rdma_cm_id* id) { return NotDone("rdma_disconnect"); }
int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return NotDone("rdma_join_multicast");
}
int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr, void* context) {
  return NotDone("rdma_join_multicast_ex");
}
int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) { return NotDone("rdma_leave_multicast"); }
int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  return NotDone("rdma_set_option");
}
int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  return NotDone("rdma_migrate_id");
}
int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  return NotDone("rdma_init_qp_attr");
}
int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) { return NotDone("rdma_set_local_ece"); }
int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) { return NotDone("rdma_get_remote_ece"); }
int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  return NotDone("rdma_create_srq");
}
int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  return NotDone("rdma_create_srq_ex");
}
void rdma_destroy_srq(rdma_cm_id* id) { NotDone("rdma_destroy_srq"); }

}  // extern "C"
