// tests/vm/bench/fork_post.c: what a child of fork() gets when it posts a send on an RC QP
// its parent created and connected (docs/API.md "fork", issue 13): plain verbs, no CM,
// rxe0 -> rxe1 in one VM. The parent sends message 1 (received), forks; the child posts
// message 2 and exits; the parent posts message 3. Prints each ibv_post_send's result,
// the child's exit, what rxe1 received, and the kernel's uverbs_write line (dmesg).
// FORK_INIT=1: ibv_fork_init() first. A probe, not a test. Built with the host's gcc:
//   gcc -Wall -O1 -o /tmp/fork_post tests/vm/bench/fork_post.c -libverbs &&
//   tests/vm/boot.sh '/tmp/fork_post; FORK_INIT=1 /tmp/fork_post'
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct end { struct ibv_context *ctx; struct ibv_pd *pd; struct ibv_cq *cq; struct ibv_qp *qp; struct ibv_mr *mr; char buf[64]; union ibv_gid gid; };

static struct ibv_context *open_dev(const char *name) {
  int n; struct ibv_device **l = ibv_get_device_list(&n);
  for (int i = 0; i < n; i++) if (!strcmp(ibv_get_device_name(l[i]), name)) return ibv_open_device(l[i]);
  return NULL;
}
static void setup(struct end *e, const char *dev) {
  e->ctx = open_dev(dev); if (!e->ctx) { perror(dev); exit(2); }
  e->pd = ibv_alloc_pd(e->ctx); e->cq = ibv_create_cq(e->ctx, 8, NULL, NULL, 0);
  e->mr = ibv_reg_mr(e->pd, e->buf, sizeof e->buf, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_qp_init_attr ia = {.send_cq = e->cq, .recv_cq = e->cq, .cap = {4, 4, 1, 1}, .qp_type = IBV_QPT_RC};
  e->qp = ibv_create_qp(e->pd, &ia);
  if (!e->qp || !e->mr) { perror("setup"); exit(2); }
  ibv_query_gid(e->ctx, 1, 1, &e->gid);
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = 0};
  if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) { perror("init"); exit(2); }
}
static void connect_to(struct end *e, struct end *peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer->qp->qp_num,
                          .max_dest_rd_atomic = 1, .min_rnr_timer = 12};
  a.ah_attr.is_global = 1; a.ah_attr.grh.dgid = peer->gid; a.ah_attr.grh.sgid_index = 1; a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) { perror("rtr"); exit(2); }
  struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1};
  if (ibv_modify_qp(e->qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                    IBV_QP_MAX_QP_RD_ATOMIC)) { perror("rts"); exit(2); }
}
static int post_send(struct end *e, const char *msg, unsigned imm) {
  strcpy(e->buf, msg);
  struct ibv_sge sge = {(uintptr_t)e->buf, sizeof e->buf, e->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm)}, *bad;
  return ibv_post_send(e->qp, &wr, &bad);
}
static int received(struct end *r, int ms) {  // 1: a receive completion with data
  for (int i = 0; i < ms; i++) {
    struct ibv_wc wc; int n = ibv_poll_cq(r->cq, 1, &wc);
    if (n > 0 && wc.opcode == IBV_WC_RECV) { printf("  received (status %d): message %u\n", wc.status, ntohl(wc.imm_data)); return 1; }
    usleep(1000);
  }
  return 0;
}
static void post_recv(struct end *r) {
  memset(r->buf, 0, sizeof r->buf);
  struct ibv_sge sge = {(uintptr_t)r->buf, sizeof r->buf, r->mr->lkey};
  struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(r->qp, &wr, &bad)) { perror("post_recv"); exit(2); }
}
int main(void) {
  if (getenv("FORK_INIT")) printf("ibv_fork_init: %d\n", ibv_fork_init());
  struct end a = {0}, b = {0};
  setup(&a, "rxe0"); setup(&b, "rxe1");
  connect_to(&a, &b); connect_to(&b, &a);
  post_recv(&b);
  printf("parent: ibv_post_send %d\n", post_send(&a, "from the parent", 1));
  if (!received(&b, 5000)) printf("  parent's message not received\n");
  post_recv(&b);
  post_recv(&b);
  fflush(stdout);
  pid_t c = fork();
  if (c == 0) {
    int r = post_send(&a, "from the child", 2);
    printf("child: ibv_post_send %d (%s)\n", r, r ? strerror(r) : "ok");
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(c, &status, 0);
  if (WIFSIGNALED(status)) printf("child: killed by signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else printf("child: exit %d\n", WEXITSTATUS(status));
  if (!received(&b, 3000)) printf("  child's message not received within 3 s\n");
  printf("parent: ibv_post_send %d (after the child's)\n", post_send(&a, "from the parent again", 3));
  if (!received(&b, 3000)) printf("  parent's second message not received\n");
  else if (received(&b, 1000)) printf("  and one more\n");
  fflush(stdout);
  if (system("dmesg | grep -i 'security contexts' | sed 's/^\\[[^]]*\\] /dmesg: /'") != 0) printf("no dmesg line\n");
  return 0;
}
