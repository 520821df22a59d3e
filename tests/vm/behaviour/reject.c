/* rdma_reject with 148 bytes of private data (the most a REJ carries): the
 * server rejects every CONNECT_REQUEST, the client prints what its REJECTED
 * event carries (status, private_data_len, the bytes). Built against the
 * system's <rdma/rdma_cma.h> with -lrdmacm only; 67-dropin-behaviour runs it
 * on the kernel's rdma_cm and on uscm and compares the outputs line by line.
 *
 *   reject -s BIND_IPV4 PORT          server: prints "listening", rejects one
 *   reject -c SERVER_IPV4 PORT        client: connects, prints the REJECTED event */
#define _GNU_SOURCE /* strerrorname_np */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "tests/vm/behaviour/behaviour.h"

static void print_bytes(const char* what, const void* data, unsigned len) {
  printf("  %s %u:", what, len);
  for (unsigned i = 0; i < len; ++i) {
    if (i % 32 == 0) printf("\n   ");
    printf(" %02x", ((const unsigned char*)data)[i]);
  }
  printf("\n");
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "-s") != 0 && strcmp(argv[1], "-c") != 0)) {
    fprintf(stderr, "usage: reject -s BIND_IPV4 PORT | -c SERVER_IPV4 PORT\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sockaddr_in addr = ipv4_arg(argv[2], argv[3]);
  ch = rdma_create_event_channel();
  struct rdma_cm_id* id;
  if (ch == NULL || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) {
    perror("rdma_create_id");
    return 1;
  }
  unsigned char data[148];
  if (strcmp(argv[1], "-s") == 0) {
    must("rdma_bind_addr", rdma_bind_addr(id, (struct sockaddr*)&addr));
    must("rdma_listen", rdma_listen(id, 1));
    printf("listening\n");
    struct rdma_cm_event* e = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
    struct rdma_cm_id* child = e->id;
    print_bytes("request private_data", e->param.conn.private_data,
                e->param.conn.private_data_len);
    for (unsigned i = 0; i < sizeof(data); ++i) data[i] = (unsigned char)(0xA0 + i);
    must("rdma_reject 148 bytes", rdma_reject(child, data, sizeof(data)));
    rdma_ack_cm_event(e);
    must("rdma_destroy_id child", rdma_destroy_id(child));
  } else {
    resolve_to(id, &addr, "");
    for (unsigned i = 0; i < 16; ++i) data[i] = (unsigned char)(0x10 + i);
    struct rdma_conn_param p = {.private_data = data, .private_data_len = 16,
                                .responder_resources = 1, .initiator_depth = 1,
                                .retry_count = 7, .rnr_retry_count = 7, .qp_num = 0x123};
    must("rdma_connect", rdma_connect(id, &p));
    struct rdma_cm_event* e = expect(RDMA_CM_EVENT_REJECTED);
    print_bytes("reject private_data", e->param.conn.private_data,
                e->param.conn.private_data_len);
    rdma_ack_cm_event(e);
  }
  printf("done\n");
  return 0;
}
