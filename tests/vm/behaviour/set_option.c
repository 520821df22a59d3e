/* rdma_set_option with each option (TOS, REUSEADDR, AFONLY, ACK_TIMEOUT,
 * IB_PATH), good and bad values: prints each return value and errno and the
 * option's visible effect (the route's traffic class for TOS, a second bind
 * to the same port for REUSEADDR, the route IB_PATH gives). Built against the
 * system's <rdma/rdma_cma.h> with -lrdmacm only; 67-dropin-behaviour runs it
 * on the kernel's rdma_cm and on uscm and compares the outputs line by line.
 *
 *   set_option LOCAL_IPV4 PEER_IPV4 PORT */
#define _GNU_SOURCE /* strerrorname_np */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "tests/vm/behaviour/behaviour.h"

static void next_event(void) {
  struct rdma_cm_event* e;
  if (rdma_get_cm_event(ch, &e) != 0) {
    printf("  no event: errno %s\n", strerrorname_np(errno));
    exit(1);
  }
  printf("  event %s status %d\n", rdma_event_str(e->event), e->status);
  rdma_ack_cm_event(e);
}

static void print_route(struct rdma_cm_id* id) {
  printf("  route: num_paths %d", id->route.num_paths);
  if (id->route.num_paths > 0) {
    const struct ibv_sa_path_rec* p = id->route.path_rec;
    char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, p->sgid.raw, s, sizeof(s));
    inet_ntop(AF_INET6, p->dgid.raw, d, sizeof(d));
    printf(" sgid %s dgid %s traffic_class %u hop_limit %u pkey 0x%x sl %u mtu %u", s, d,
           p->traffic_class, p->hop_limit, ntohs(p->pkey), p->sl, p->mtu);
  }
  printf("\n");
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: set_option LOCAL_IPV4 PEER_IPV4 PORT\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sockaddr_in local = ipv4_arg(argv[1], argv[3]), peer = ipv4_arg(argv[2], argv[3]);
  ch = rdma_create_event_channel();
  if (ch == NULL) return 1;
  uint8_t u8;
  int one = 1;

  /* TOS: the route's traffic class */
  struct rdma_cm_id* id = new_id();
  u8 = 0x20;
  call("TOS 0x20", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &u8, sizeof(u8)));
  call("TOS, optlen 4", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, sizeof(one)));
  call("resolve_addr", rdma_resolve_addr(id, NULL, (struct sockaddr*)&peer, 2000));
  next_event();
  call("resolve_route", rdma_resolve_route(id, 2000));
  next_event();
  print_route(id);
  rdma_destroy_id(id);

  /* REUSEADDR: a second bind to the same port */
  struct rdma_cm_id *a = new_id(), *b = new_id(), *c = new_id();
  call("bind a", rdma_bind_addr(a, (struct sockaddr*)&local));
  call("bind b (no REUSEADDR)", rdma_bind_addr(b, (struct sockaddr*)&local));
  call("REUSEADDR 1 on c",
       rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)));
  call("REUSEADDR, optlen 1",
       rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, 1));
  call("bind c (REUSEADDR)", rdma_bind_addr(c, (struct sockaddr*)&local));
  rdma_destroy_id(a);
  rdma_destroy_id(b);
  rdma_destroy_id(c);

  /* AFONLY: before and after bind */
  id = new_id();
  call("AFONLY 1", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)));
  call("AFONLY, optlen 1", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, 1));
  call("bind", rdma_bind_addr(id, (struct sockaddr*)&local));
  call("AFONLY after bind",
       rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)));
  rdma_destroy_id(id);

  /* ACK_TIMEOUT */
  id = new_id();
  u8 = 14;
  call("ACK_TIMEOUT 14",
       rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &u8, sizeof(u8)));
  call("ACK_TIMEOUT, optlen 4",
       rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &one, sizeof(one)));
  rdma_destroy_id(id);

  /* IB_PATH: before resolve_addr, with a bad length, then after ADDR_RESOLVED */
  id = new_id();
  struct ibv_path_data pd;
  memset(&pd, 0, sizeof(pd));
  pd.flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
  memset(&pd.path.sgid.raw[10], 0xff, 2);
  memcpy(&pd.path.sgid.raw[12], &local.sin_addr, 4);
  memset(&pd.path.dgid.raw[10], 0xff, 2);
  memcpy(&pd.path.dgid.raw[12], &peer.sin_addr, 4);
  pd.path.pkey = htons(0xffff);
  pd.path.flowlabel_hoplimit = htonl(64);
  pd.path.dlid = pd.path.slid = htons(0xffff);
  pd.path.reversible_numpath = 0x81;
  pd.path.mtu = 0x80 | IBV_MTU_1024;
  pd.path.rate = 0x80 | 3;
  pd.path.packetlifetime = 0x80 | 18;
  call("IB_PATH before resolve_addr",
       rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, sizeof(pd)));
  call("resolve_addr", rdma_resolve_addr(id, NULL, (struct sockaddr*)&peer, 2000));
  next_event();
  call("IB_PATH, optlen 10", rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, 10));
  call("IB_PATH", rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, sizeof(pd)));
  print_route(id);
  rdma_destroy_id(id);

  /* unknown option and level */
  id = new_id();
  call("optname 99", rdma_set_option(id, RDMA_OPTION_ID, 99, &one, sizeof(one)));
  call("level 99", rdma_set_option(id, 99, RDMA_OPTION_ID_TOS, &u8, sizeof(u8)));
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  printf("done\n");
  return 0;
}
