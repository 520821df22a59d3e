/* rdma_join_multicast / rdma_join_multicast_ex with each join flag, and the
 * calls' argument checks: prints every return value, errno and event field
 * that does not depend on the run (no pointers, no QPNs of our own). Built
 * against the system's <rdma/rdma_cma.h> with -lrdmacm only; the drop-in
 * replaces the library at run time. 67-dropin-behaviour runs it on the
 * kernel's rdma_cm and on uscm and compares the two outputs line for line.
 *
 *   mc_join BIND_IPV4 GROUP_IPV4 */
#define _GNU_SOURCE /* strerrorname_np */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/vm/behaviour/behaviour.h"

static int context_tag;

/* The next event, printed; returns its type (-1: none). */
static int next_event(void) {
  struct rdma_cm_event* e;
  if (rdma_get_cm_event(ch, &e) != 0) {
    printf("  no event: errno %s\n", strerrorname_np(errno));
    return -1;
  }
  int type = e->event;
  printf("  event %s status %d\n", rdma_event_str(e->event), e->status);
  if (type == RDMA_CM_EVENT_MULTICAST_JOIN || type == RDMA_CM_EVENT_MULTICAST_ERROR) {
    const struct rdma_ud_param* u = &e->param.ud;
    const struct ibv_ah_attr* a = &u->ah_attr;
    char dgid[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, a->grh.dgid.raw, dgid, sizeof(dgid));
    printf("  ud: private_data %s len %u qp_num 0x%x qkey 0x%x\n",
           u->private_data == &context_tag ? "=context" : u->private_data ? "other" : "NULL",
           u->private_data_len, u->qp_num, u->qkey);
    printf("  ah: is_global %u dgid %s flow_label %u sgid_index %u hop_limit %u "
           "traffic_class %u\n", a->is_global, dgid, a->grh.flow_label, a->grh.sgid_index,
           a->grh.hop_limit, a->grh.traffic_class);
    printf("  ah: dlid 0x%x sl %u src_path_bits %u static_rate %u port_num %u\n", a->dlid,
           a->sl, a->src_path_bits, a->static_rate, a->port_num);
  }
  rdma_ack_cm_event(e);
  return type;
}

static void join_ex(struct rdma_cm_id* id, struct sockaddr* group, uint32_t mask,
                    uint32_t flags, const char* what) {
  struct rdma_cm_join_mc_attr_ex attr = {.comp_mask = mask, .join_flags = flags, .addr = group};
  int rc = rdma_join_multicast_ex(id, &attr, &context_tag);
  call(what, rc);
  if (rc == 0 && next_event() == RDMA_CM_EVENT_MULTICAST_JOIN) {
    call("  rdma_leave_multicast", rdma_leave_multicast(id, group));
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mc_join BIND_IPV4 GROUP_IPV4\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sockaddr_in bind = ipv4_arg(argv[1], "0"), group = ipv4_arg(argv[2], "0"),
                     zero = ipv4_arg("0.0.0.0", "0");
  struct sockaddr_in6 group6 = {.sin6_family = AF_INET6};
  inet_pton(AF_INET6, "ff0e::1:2", &group6.sin6_addr);
  ch = rdma_create_event_channel();
  if (ch == NULL) {
    perror("rdma_create_event_channel");
    return 1;
  }
  struct rdma_cm_id *id, *idle, *tcp;
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) || rdma_create_id(ch, &idle, NULL, RDMA_PS_UDP) ||
      rdma_create_id(ch, &tcp, NULL, RDMA_PS_TCP)) {
    perror("rdma_create_id");
    return 1;
  }
  call("join on an idle id", rdma_join_multicast(idle, (struct sockaddr*)&group, NULL));
  call("rdma_bind_addr tcp", rdma_bind_addr(tcp, (struct sockaddr*)&bind));
  call("join on a TCP id", rdma_join_multicast(tcp, (struct sockaddr*)&group, NULL));
  call("rdma_resolve_addr to the group",
       rdma_resolve_addr(id, (struct sockaddr*)&bind, (struct sockaddr*)&group, 2000));
  if (next_event() != RDMA_CM_EVENT_ADDR_RESOLVED) return 1;
  struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_UD,
                                .cap = {.max_send_wr = 4, .max_recv_wr = 4,
                                        .max_send_sge = 1, .max_recv_sge = 1}};
  call("rdma_create_qp UD", rdma_create_qp(id, NULL, &qa));

  call("rdma_join_multicast", rdma_join_multicast(id, (struct sockaddr*)&group, &context_tag));
  if (next_event() == RDMA_CM_EVENT_MULTICAST_JOIN) {
    call("  rdma_leave_multicast", rdma_leave_multicast(id, (struct sockaddr*)&group));
  }
  const uint32_t both = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  join_ex(id, (struct sockaddr*)&group, both, RDMA_MC_JOIN_FLAG_FULLMEMBER, "join_ex FULLMEMBER");
  join_ex(id, (struct sockaddr*)&group, both, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
          "join_ex SENDONLY_FULLMEMBER");
  join_ex(id, (struct sockaddr*)&group, both, RDMA_MC_JOIN_FLAG_RESERVED, "join_ex RESERVED flag");
  join_ex(id, (struct sockaddr*)&group, RDMA_CM_JOIN_MC_ATTR_ADDRESS, 0, "join_ex without flags");
  join_ex(id, (struct sockaddr*)&group, both | RDMA_CM_JOIN_MC_ATTR_RESERVED,
          RDMA_MC_JOIN_FLAG_FULLMEMBER, "join_ex reserved comp_mask");
  join_ex(id, (struct sockaddr*)&zero, both, RDMA_MC_JOIN_FLAG_FULLMEMBER, "join_ex 0.0.0.0");
  join_ex(id, (struct sockaddr*)&group6, both, RDMA_MC_JOIN_FLAG_FULLMEMBER, "join_ex ff0e::1:2");
  call("leave a group never joined", rdma_leave_multicast(id, (struct sockaddr*)&group));

  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_id(idle);
  rdma_destroy_id(tcp);
  rdma_destroy_event_channel(ch);
  printf("done\n");
  return 0;
}
