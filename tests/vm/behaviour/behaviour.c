#define _GNU_SOURCE /* strerrorname_np */
#include "tests/vm/behaviour/behaviour.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rdma_event_channel* ch;

int call(const char* what, int rc) {
  printf("%s: rc %d errno %s\n", what, rc, rc == 0 ? "-" : strerrorname_np(errno));
  return rc;
}

void must(const char* what, int rc) {
  if (call(what, rc) != 0) exit(1);
}

struct rdma_cm_event* expect(enum rdma_cm_event_type want) {
  struct rdma_cm_event* e;
  if (rdma_get_cm_event(ch, &e) != 0) {
    printf("no event: errno %s\n", strerrorname_np(errno));
    exit(1);
  }
  printf("event %s status %d\n", rdma_event_str(e->event), e->status);
  if (e->event != want) {
    printf("  (wanted %s)\n", rdma_event_str(want));
    exit(1);
  }
  return e;
}

struct sockaddr_in ipv4_arg(const char* ip, const char* port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(port))};
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
    fprintf(stderr, "not an IPv4 address: %s\n", ip);
    exit(2);
  }
  return a;
}

void resolve_to(struct rdma_cm_id* id, struct sockaddr_in* peer, const char* indent) {
  char what[64];
  snprintf(what, sizeof(what), "%srdma_resolve_addr", indent);
  must(what, rdma_resolve_addr(id, NULL, (struct sockaddr*)peer, 2000));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED));
  snprintf(what, sizeof(what), "%srdma_resolve_route", indent);
  must(what, rdma_resolve_route(id, 2000));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED));
}

struct rdma_cm_id* new_id(void) {
  struct rdma_cm_id* id;
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) {
    perror("rdma_create_id");
    exit(1);
  }
  return id;
}

struct ibv_qp_init_attr rc_qp_attr(int wrs) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = wrs;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  return a;
}
