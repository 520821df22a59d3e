/* ECE: rdma_set_local_ece / rdma_get_remote_ece / rdma_reject_ece. Two
 * connections from client to server: the first is rejected with
 * rdma_reject_ece, the second accepted (each side with its own ECE options);
 * both sides print every call's result and the ECE they see. No QPs (the
 * QPN is given in the conn_param, the client calls rdma_establish), so the
 * ECE path alone is compared. Built against the system's <rdma/rdma_cma.h>
 * with -lrdmacm only; 67-dropin-behaviour runs it on the kernel's rdma_cm and
 * on uscm and compares the outputs line by line.
 *
 *   ece -s BIND_IPV4 PORT        server (prints "listening")
 *   ece -c SERVER_IPV4 PORT      client */
#define _GNU_SOURCE /* strerrorname_np */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "tests/vm/behaviour/behaviour.h"

static void remote_ece(struct rdma_cm_id* id) {
  struct ibv_ece ece = {0};
  if (call("  rdma_get_remote_ece", rdma_get_remote_ece(id, &ece)) == 0) {
    printf("  remote ece: vendor_id 0x%x options 0x%x comp_mask %u\n", ece.vendor_id,
           ece.options, ece.comp_mask);
  }
}

static void local_ece(struct rdma_cm_id* id, uint32_t options) {
  struct ibv_ece ece = {.vendor_id = 0x15b3, .options = options};
  char what[64];
  snprintf(what, sizeof(what), "  rdma_set_local_ece options 0x%x", options);
  call(what, rdma_set_local_ece(id, &ece));
}

static void server(struct sockaddr_in* addr) {
  struct rdma_cm_id* listener;
  if (rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) != 0) exit(1);
  struct ibv_ece bad = {.vendor_id = 0, .options = 1};
  call("rdma_set_local_ece vendor_id 0", rdma_set_local_ece(listener, &bad));
  if (call("rdma_bind_addr", rdma_bind_addr(listener, (struct sockaddr*)addr)) ||
      call("rdma_listen", rdma_listen(listener, 2))) {
    exit(1);
  }
  printf("listening\n");
  /* 1: rejected with rdma_reject_ece */
  struct rdma_cm_event* e = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
  struct rdma_cm_id* child = e->id;
  rdma_ack_cm_event(e);
  remote_ece(child);
  local_ece(child, 0x5);
  call("  rdma_reject_ece", rdma_reject_ece(child, NULL, 0));
  rdma_destroy_id(child);
  /* 2: accepted */
  e = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
  child = e->id;
  rdma_ack_cm_event(e);
  remote_ece(child);
  local_ece(child, 0x3);
  struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1,
                              .rnr_retry_count = 7, .qp_num = 0x456};
  call("  rdma_accept", rdma_accept(child, &p));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED));
  remote_ece(child);
  /* The server disconnects, once it has its ESTABLISHED: a client's DREQ right
   * after its RTU could overtake the RTU (or follow a lost one), and the server
   * would see DISCONNECTED without ESTABLISHED (the kernel did, 1 run in 5). */
  call("  rdma_disconnect", rdma_disconnect(child));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
  rdma_destroy_id(child);
  rdma_destroy_id(listener);
}

static struct rdma_cm_id* connect_to(struct sockaddr_in* addr, uint32_t options) {
  struct rdma_cm_id* id;
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) exit(1);
  local_ece(id, options);
  resolve_to(id, addr, "  ");
  struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1,
                              .retry_count = 7, .rnr_retry_count = 7, .qp_num = 0x123};
  call("  rdma_connect", rdma_connect(id, &p));
  return id;
}

static void client(struct sockaddr_in* addr) {
  printf("connection 1\n");
  struct rdma_cm_id* id = connect_to(addr, 0x7);
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_REJECTED));
  remote_ece(id);
  rdma_destroy_id(id);
  printf("connection 2\n");
  id = connect_to(addr, 0x7);
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_CONNECT_RESPONSE));
  remote_ece(id);
  call("  rdma_establish", rdma_establish(id));
  /* The server's DREQ; destroying the id answers it with the DREP. */
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
  rdma_destroy_id(id);
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "-s") != 0 && strcmp(argv[1], "-c") != 0)) {
    fprintf(stderr, "usage: ece -s BIND_IPV4 PORT | -c SERVER_IPV4 PORT\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sockaddr_in addr = ipv4_arg(argv[2], argv[3]);
  ch = rdma_create_event_channel();
  if (ch == NULL) return 1;
  if (strcmp(argv[1], "-s") == 0) {
    server(&addr);
  } else {
    client(&addr);
  }
  rdma_destroy_event_channel(ch);
  printf("done\n");
  return 0;
}
