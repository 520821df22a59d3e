/* rdma_join_multicast / rdma_join_multicast_ex with each join flag, the
 * calls' argument checks, and the joins of a UD and an RC RDMA_PS_IB id:
 * prints every return value, errno and event field that does not depend on
 * the run (no pointers, no QPNs of our own). Built
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

/* Prints event `e` (a multicast one with its param.ud and address vector). */
static void print_event(const struct rdma_cm_event* e) {
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
}

/* The next event, printed; returns its type (-1: none). */
static int next_event(void) {
  struct rdma_cm_event* e;
  if (rdma_get_cm_event(ch, &e) != 0) {
    printf("  no event: errno %s\n", strerrorname_np(errno));
    return -1;
  }
  int type = e->event;
  print_event(e);
  rdma_ack_cm_event(e);
  return type;
}

/* RDMA_PS_IB ids (the kernel's cma_set_default_qkey gives a UD one
 * RDMA_UDP_QKEY, as RDMA_PS_UDP): a UD one, as rdma_create_ep makes it from
 * rdma_getaddrinfo's ai_qp_type (librdmacm's only way to a UD RDMA_PS_IB id;
 * synchronous: the call leaves its event in id->event), bound to `bind`,
 * joins `group`: its MULTICAST_JOIN and rdma_init_qp_attr's Q_Key. An RC one
 * joins nothing (the kernel: only UD joins). */
static void ib_ids_join(const char* bind, struct sockaddr* group) {
  struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST,
                                .ai_qp_type = IBV_QPT_UD,
                                .ai_port_space = RDMA_PS_IB};
  struct rdma_addrinfo* res = NULL;
  struct rdma_cm_id* ud = NULL;
  if (call("rdma_getaddrinfo PS_IB UD", rdma_getaddrinfo(bind, "7620", &hints, &res)) == 0 &&
      call("rdma_create_ep PS_IB UD", rdma_create_ep(&ud, res, NULL, NULL)) == 0) {
    printf("  qp_type %s\n", ud->qp_type == IBV_QPT_UD ? "UD" : "not UD");
    if (call("join on a UD PS_IB id", rdma_join_multicast(ud, group, &context_tag)) == 0 &&
        ud->event != NULL) {
      print_event(ud->event);
      /* librdmacm's leave waits for the join's event to be acked. */
      rdma_ack_cm_event(ud->event);
      ud->event = NULL;
      call("  rdma_leave_multicast", rdma_leave_multicast(ud, group));
    }
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT};
    int mask = 0;
    if (call("rdma_init_qp_attr INIT of the UD PS_IB id", rdma_init_qp_attr(ud, &qa, &mask)) == 0) {
      printf("  qkey %s 0x%x\n", mask & IBV_QP_QKEY ? "set" : "not set", qa.qkey);
    }
    rdma_destroy_ep(ud);
  }
  if (res != NULL) rdma_freeaddrinfo(res);
  struct rdma_cm_id* rc;
  if (rdma_create_id(ch, &rc, NULL, RDMA_PS_IB) != 0) return;
  struct sockaddr_in here = ipv4_arg(bind, "0");
  call("rdma_bind_addr RC PS_IB", rdma_bind_addr(rc, (struct sockaddr*)&here));
  call("join on an RC PS_IB id", rdma_join_multicast(rc, group, NULL));
  rdma_destroy_id(rc);
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
  ib_ids_join(argv[1], (struct sockaddr*)&group);

  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_id(idle);
  rdma_destroy_id(tcp);
  rdma_destroy_event_channel(ch);
  printf("done\n");
  return 0;
}
