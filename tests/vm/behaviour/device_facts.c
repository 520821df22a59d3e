/* Device facts of an id on a real device: id->verbs is one of the contexts
 * rdma_get_devices returned, id->pd one PD for every id on the device,
 * rdma_create_srq and rdma_create_qp_ex (CQs created when absent), the
 * ACK_TIMEOUT option as the QP's RTS timeout (rdma_init_qp_attr and
 * ibv_query_qp), and rdma_notify on an established id (COMM_EST, and an event
 * rdma_notify does not take). Prints comparisons, never pointers; the
 * kernel's and uscm's outputs are compared by 67-dropin-behaviour.
 *
 *   device_facts -s BIND_IPV4 PORT   server (prints "listening")
 *   device_facts -c PEER_IPV4 PORT   client */
#define _GNU_SOURCE /* strerrorname_np */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/vm/behaviour/behaviour.h"

static const char* yes(int b) { return b ? "yes" : "no"; }

static void print_timeouts(struct rdma_cm_id* id, const char* side) {
  struct ibv_qp_attr attr;
  int mask = 0;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTS;
  if (call("  rdma_init_qp_attr RTS", rdma_init_qp_attr(id, &attr, &mask)) == 0) {
    printf("  %s RTS attr timeout %u (mask has TIMEOUT: %s)\n", side, attr.timeout,
           yes(mask & IBV_QP_TIMEOUT));
  }
  struct ibv_qp_init_attr init;
  memset(&attr, 0, sizeof(attr));
  if (call("  ibv_query_qp", ibv_query_qp(id->qp, &attr, IBV_QP_TIMEOUT | IBV_QP_STATE, &init)) ==
      0) {
    printf("  %s QP state RTS: %s, timeout %u\n", side, yes(attr.qp_state == IBV_QPS_RTS),
           attr.timeout);
  }
}

static int server(struct sockaddr_in* addr) {
  struct rdma_cm_id* listener;
  if (rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) != 0) return 1;
  must("rdma_bind_addr", rdma_bind_addr(listener, (struct sockaddr*)addr));
  must("rdma_listen", rdma_listen(listener, 2));
  printf("listening\n");
  struct rdma_cm_event* e = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
  struct rdma_cm_id* child = e->id;
  rdma_ack_cm_event(e);
  printf("  child pd is the listener's: %s\n", yes(child->pd == listener->pd));
  struct ibv_qp_init_attr a = rc_qp_attr(4);
  must("  rdma_create_qp (NULL pd, no CQs)", rdma_create_qp(child, NULL, &a));
  printf("  CQs created: %s, QP on id->pd: %s\n", yes(child->send_cq && child->recv_cq),
         yes(child->qp->pd == child->pd));
  struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1,
                              .retry_count = 7, .rnr_retry_count = 7};
  must("  rdma_accept", rdma_accept(child, &p));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
  rdma_destroy_qp(child);
  rdma_destroy_id(child);
  rdma_destroy_id(listener);
  return 0;
}

static int client(struct sockaddr_in* peer) {
  int n = 0;
  struct ibv_context** devs = rdma_get_devices(&n);
  printf("rdma_get_devices: some: %s\n", yes(devs != NULL && n > 0));
  struct rdma_cm_id *id, *other;
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) return 1;
  if (rdma_create_id(ch, &other, NULL, RDMA_PS_TCP) != 0) return 1;
  uint8_t timeout = 14;
  must("ACK_TIMEOUT 14",
       rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, 1));
  resolve_to(id, peer, "");
  resolve_to(other, peer, "other ");
  int listed = 0;
  for (int i = 0; i < n; i++) listed |= devs[i] == id->verbs;
  printf("id->verbs from rdma_get_devices: %s\n", yes(listed));
  printf("id->pd set: %s; same verbs: %s; same pd: %s\n", yes(id->pd != NULL),
         yes(id->verbs == other->verbs), yes(id->pd == other->pd));

  struct ibv_srq_init_attr sa;
  memset(&sa, 0, sizeof(sa));
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  if (call("rdma_create_srq (NULL pd)", rdma_create_srq(other, NULL, &sa)) == 0) {
    printf("  srq set: %s, on id->pd: %s\n", yes(other->srq != NULL),
           yes(other->srq != NULL && other->srq->pd == other->pd));
    struct ibv_qp_init_attr a = rc_qp_attr(4);
    a.srq = other->srq;
    call("  rdma_create_qp with the srq", rdma_create_qp(other, NULL, &a));
    if (other->qp != NULL) printf("  qp's srq is id->srq: %s\n", yes(other->qp->srq == other->srq));
    rdma_destroy_qp(other);
    rdma_destroy_srq(other);
  }
  rdma_destroy_id(other);

  struct ibv_qp_init_attr_ex ax;
  memset(&ax, 0, sizeof(ax));
  ax.qp_type = IBV_QPT_RC;
  ax.cap.max_send_wr = ax.cap.max_recv_wr = 4;
  ax.cap.max_send_sge = ax.cap.max_recv_sge = 1;
  ax.comp_mask = IBV_QP_INIT_ATTR_PD;
  ax.pd = id->pd;
  must("rdma_create_qp_ex (no CQs)", rdma_create_qp_ex(id, &ax));
  printf("  CQs created: %s, qp type RC: %s, state INIT: %s\n",
         yes(id->send_cq != NULL && id->recv_cq != NULL), yes(id->qp->qp_type == IBV_QPT_RC),
         yes(id->qp->state == IBV_QPS_INIT));

  struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1,
                              .retry_count = 7, .rnr_retry_count = 7};
  must("rdma_connect", rdma_connect(id, &p));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED));
  print_timeouts(id, "client");
  call("rdma_notify COMM_EST (established)", rdma_notify(id, IBV_EVENT_COMM_EST));
  call("rdma_notify QP_FATAL", rdma_notify(id, IBV_EVENT_QP_FATAL));
  must("rdma_disconnect", rdma_disconnect(id));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_free_devices(devs);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "-s") != 0 && strcmp(argv[1], "-c") != 0)) {
    fprintf(stderr, "usage: device_facts -s BIND_IPV4 PORT | -c PEER_IPV4 PORT\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sockaddr_in addr = ipv4_arg(argv[2], argv[3]);
  ch = rdma_create_event_channel();
  if (ch == NULL) return 1;
  int rc = argv[1][1] == 's' ? server(&addr) : client(&addr);
  rdma_destroy_event_channel(ch);
  printf("done\n");
  return rc;
}
