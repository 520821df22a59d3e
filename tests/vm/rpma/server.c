/* rpma_server IP PORT N [srq]: a librpma server on IP's device. It takes N connection
 * requests and accepts them (but see "reject" below), each
 * migrated by librpma to an event channel of its own, one after the other, and gives each
 * a 4 KiB buffer of the server's pattern registered for remote read, write and flush; the
 * buffer's descriptor goes in the accept's private data. Then, connection by connection,
 * it waits for the client's message (posted before the accept), checks that the buffer
 * now holds that client's pattern, answers, and waits for the client's disconnect.
 * Lines about a connection start with "[TAG]", the tag its client sent in the connect's
 * private data, so the lines of concurrent clients can be sorted. Prints
 * "server: listening" when rpma_ep_listen returned. A request whose tag starts with
 * "reject" is rejected (rpma_conn_req_delete: rdma_reject); N counts it too. With
 * "srq" the connections' QPs share one SRQ (rdma_create_qp_ex with its srq) whose
 * receive CQ is its own, and the messages' receives are posted to the SRQ before the
 * first accept. A client whose tag starts with "drop" sends no message: its connection
 * is served by waiting for its CLOSED alone. Exit 0 when every check held. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/vm/rpma/common.h"

#define MAX_CONNS 8

struct served {
  char tag[RPMA_TAG_MAX];
  char prefix[RPMA_TAG_MAX + 4];
  uint8_t *buf; /* RPMA_BUF_SIZE: the remote client's target */
  uint8_t *msg; /* 2 * RPMA_MSG_SIZE: received message, then the answer */
  struct rpma_mr_local *buf_mr, *msg_mr;
  struct rpma_conn *conn;
  int received; /* the message is in msg (srq: taken from the SRQ's receive CQ) */
};

static struct rpma_srq *g_srq;         /* "srq": the connections' shared receive queue */
static struct rpma_conn_cfg *g_cfg;    /* NULL, or the SRQ's connection configuration */
static uint8_t *g_srq_buf;             /* "srq": N receives of RPMA_MSG_SIZE */
static struct rpma_mr_local *g_srq_mr;

static void *page_alloc(size_t size) {
  void *p = NULL;
  if (posix_memalign(&p, 4096, size) != 0) die("posix_memalign failed");
  memset(p, 0, size);
  return p;
}

/* accept_one: the next connection request; a "reject" one is rejected (returns 0);
 * otherwise, with its message receive posted (no SRQ) and the buffer's descriptor in the
 * accept's private data, accepted until ESTABLISHED (returns 1) */
static int accept_one(struct rpma_peer *peer, struct rpma_ep *ep, struct served *s) {
  int fd;
  die_rpma(rpma_ep_get_fd(ep, &fd), "rpma_ep_get_fd");
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, -1) != 1) die("poll on the endpoint's fd failed");
  struct rpma_conn_req *req = NULL;
  die_rpma(rpma_ep_next_conn_req(ep, g_cfg, &req), "rpma_ep_next_conn_req");

  struct rpma_conn_private_data in;
  die_rpma(rpma_conn_req_get_private_data(req, &in), "rpma_conn_req_get_private_data");
  /* the client's private data: "rpma TAG" NUL-terminated; the CM may pad it with zeros */
  const char *text = in.ptr;
  if (in.len < 6 || strncmp(text, "rpma ", 5) != 0 || memchr(text, 0, in.len) == NULL ||
      strlen(text + 5) == 0 || strlen(text + 5) >= RPMA_TAG_MAX)
    die("the connection request's private data is not \"rpma TAG\"");
  snprintf(s->tag, sizeof s->tag, "%s", text + 5);
  snprintf(s->prefix, sizeof s->prefix, "[%s] ", text + 5);
  printf("%sconnection request, private data %u bytes: \"%s\"\n", s->prefix, in.len, text);
  if (strncmp(s->tag, "reject", 6) == 0) {
    die_rpma(rpma_conn_req_delete(&req), "rpma_conn_req_delete");
    printf("%srejected\n", s->prefix);
    return 0;
  }

  s->buf = page_alloc(RPMA_BUF_SIZE);
  for (size_t i = 0; i < RPMA_BUF_SIZE; i++) s->buf[i] = server_pattern(i);
  s->msg = page_alloc(2 * RPMA_MSG_SIZE);
  die_rpma(rpma_mr_reg(peer, s->buf, RPMA_BUF_SIZE,
                       RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST |
                           RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
                       &s->buf_mr),
           "rpma_mr_reg(buffer)");
  die_rpma(rpma_mr_reg(peer, s->msg, 2 * RPMA_MSG_SIZE,
                       RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &s->msg_mr),
           "rpma_mr_reg(messages)");
  if (g_srq == NULL)
    die_rpma(rpma_conn_req_recv(req, s->msg_mr, 0, RPMA_MSG_SIZE, NULL), "rpma_conn_req_recv");
  size_t desc_size;
  die_rpma(rpma_mr_get_descriptor_size(s->buf_mr, &desc_size), "rpma_mr_get_descriptor_size");
  uint8_t desc[64];
  if (desc_size > sizeof desc) die("the MR descriptor is larger than 64 bytes");
  die_rpma(rpma_mr_get_descriptor(s->buf_mr, desc), "rpma_mr_get_descriptor");
  struct rpma_conn_private_data out = {.ptr = desc, .len = (uint8_t)desc_size};
  die_rpma(rpma_conn_req_connect(&req, &out, &s->conn), "rpma_conn_req_connect");
  printf("%saccepted with the buffer's %zu-byte descriptor%s\n", s->prefix, desc_size,
         g_srq ? ", on the SRQ" : "");
  expect_event(s->conn, RPMA_CONN_ESTABLISHED, s->prefix);
  /* no other event can come before the client has its answer (a "drop" client's CLOSED
   * can): with the event fd non-blocking (as example 06 sets it), librdmacm's EAGAIN is
   * librpma's provider error */
  if (strncmp(s->tag, "drop", 4) == 0) return 1;
  int conn_fd;
  die_rpma(rpma_conn_get_event_fd(s->conn, &conn_fd), "rpma_conn_get_event_fd");
  set_nonblock(conn_fd);
  enum rpma_conn_event none = RPMA_CONN_UNDEFINED;
  int ret = rpma_conn_next_event(s->conn, &none);
  printf("%snon-blocking rpma_conn_next_event with no event: %s\n", s->prefix,
         ret == 0 ? rpma_utils_conn_event_2str(none) : rpma_err_2str(ret));
  return 1;
}

/* take_srq_messages: the N messages from the SRQ's receive CQ, each copied to the
 * connection whose QP received it */
static void take_srq_messages(struct served *served, int n) {
  struct rpma_cq *rcq;
  die_rpma(rpma_srq_get_rcq(g_srq, &rcq), "rpma_srq_get_rcq");
  for (int got = 0; got < n; got++) {
    struct ibv_wc wc;
    next_wc(rcq, &wc);
    if (wc.opcode != IBV_WC_RECV) die("a completion on the SRQ's CQ is not a receive");
    struct served *s = NULL;
    for (int k = 0; k < n && s == NULL; k++) {
      uint32_t qp_num;
      die_rpma(rpma_conn_get_qp_num(served[k].conn, &qp_num), "rpma_conn_get_qp_num");
      if (qp_num == wc.qp_num && !served[k].received) s = &served[k];
    }
    if (s == NULL) die("a receive on the SRQ from no connection (or a second one)");
    if (wc.wr_id >= (uint64_t)n) die("a receive on the SRQ with an unknown wr_id");
    memcpy(s->msg, g_srq_buf + wc.wr_id * RPMA_MSG_SIZE, RPMA_MSG_SIZE);
    s->received = (int)wc.byte_len;
  }
}

/* release: the connection (its CLOSED seen) and its buffers */
static void release(struct served *s) {
  die_rpma(rpma_conn_disconnect(s->conn), "rpma_conn_disconnect");
  die_rpma(rpma_conn_delete(&s->conn), "rpma_conn_delete");
  die_rpma(rpma_mr_dereg(&s->buf_mr), "rpma_mr_dereg");
  die_rpma(rpma_mr_dereg(&s->msg_mr), "rpma_mr_dereg");
  free(s->buf);
  free(s->msg);
  printf("%sdone\n", s->prefix);
}

/* serve_one: the client's message, its pattern in the buffer, the answer, its disconnect */
static void serve_one(struct served *s) {
  if (strncmp(s->tag, "drop", 4) == 0) {
    /* the client deletes its connection without rpma_conn_disconnect */
    expect_event(s->conn, RPMA_CONN_CLOSED, s->prefix);
    release(s);
    return;
  }
  struct rpma_cq *cq;
  die_rpma(rpma_conn_get_cq(s->conn, &cq), "rpma_conn_get_cq");
  struct ibv_wc wc;
  if (!s->received) {
    next_wc(cq, &wc);
    if (wc.opcode != IBV_WC_RECV) die("the first completion is not the message's receive");
    s->received = (int)wc.byte_len;
  }
  char want[RPMA_MSG_SIZE];
  snprintf(want, sizeof want, "%.15s wrote", s->tag);
  const char *got = (const char *)s->msg;
  printf("%sreceived %d bytes: \"%.*s\"\n", s->prefix, s->received, RPMA_MSG_SIZE, got);
  if ((size_t)s->received != strlen(want) + 1 || strcmp(got, want) != 0)
    die("the message is not \"TAG wrote\"");

  size_t bad = client_mismatch(s->tag, s->buf, RPMA_BUF_SIZE);
  printf("%sbuffer: %zu of %d bytes are the client's pattern, fnv1a %08x\n", s->prefix,
         bad, RPMA_BUF_SIZE, fnv1a(s->buf, RPMA_BUF_SIZE));
  if (bad != RPMA_BUF_SIZE) die("the buffer does not hold what the client wrote");

  char *answer = (char *)s->msg + RPMA_MSG_SIZE;
  snprintf(answer, RPMA_MSG_SIZE, "ack %.15s", s->tag);
  die_rpma(rpma_send(s->conn, s->msg_mr, RPMA_MSG_SIZE, strlen(answer) + 1,
                     RPMA_F_COMPLETION_ALWAYS, NULL),
           "rpma_send");
  next_wc(cq, &wc);
  if (wc.opcode != IBV_WC_SEND) die("the answer's completion is not a send");
  printf("%ssent \"%s\"\n", s->prefix, answer);
  fflush(stdout);

  expect_event(s->conn, RPMA_CONN_CLOSED, s->prefix);
  release(s);
}

int main(int argc, char **argv) {
  if (argc != 4 && !(argc == 5 && strcmp(argv[4], "srq") == 0))
    die("usage: rpma_server IP PORT N [srq]");
  int n = atoi(argv[3]);
  if (n < 1 || n > MAX_CONNS) die("N must be 1 to 8");
  setvbuf(stdout, NULL, _IOLBF, 0);

  struct ibv_context *ctx = NULL;
  die_rpma(rpma_utils_get_ibv_context(argv[1], RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
           "rpma_utils_get_ibv_context");
  struct rpma_peer *peer = NULL;
  die_rpma(rpma_peer_new(ctx, &peer), "rpma_peer_new");
  struct rpma_ep *ep = NULL;
  die_rpma(rpma_ep_listen(peer, argv[1], argv[2], &ep), "rpma_ep_listen");
  if (argc == 5) {
    struct rpma_srq_cfg *srq_cfg = NULL;
    die_rpma(rpma_srq_cfg_new(&srq_cfg), "rpma_srq_cfg_new");
    die_rpma(rpma_srq_cfg_set_rq_size(srq_cfg, MAX_CONNS), "rpma_srq_cfg_set_rq_size");
    die_rpma(rpma_srq_cfg_set_rcq_size(srq_cfg, MAX_CONNS), "rpma_srq_cfg_set_rcq_size");
    die_rpma(rpma_srq_new(peer, srq_cfg, &g_srq), "rpma_srq_new");
    die_rpma(rpma_srq_cfg_delete(&srq_cfg), "rpma_srq_cfg_delete");
    die_rpma(rpma_conn_cfg_new(&g_cfg), "rpma_conn_cfg_new");
    die_rpma(rpma_conn_cfg_set_srq(g_cfg, g_srq), "rpma_conn_cfg_set_srq");
    g_srq_buf = page_alloc((size_t)n * RPMA_MSG_SIZE);
    die_rpma(rpma_mr_reg(peer, g_srq_buf, (size_t)n * RPMA_MSG_SIZE, RPMA_MR_USAGE_RECV,
                         &g_srq_mr),
             "rpma_mr_reg(SRQ receives)");
    for (int k = 0; k < n; k++)
      die_rpma(rpma_srq_recv(g_srq, g_srq_mr, (size_t)k * RPMA_MSG_SIZE, RPMA_MSG_SIZE,
                             (void *)(uintptr_t)k),
               "rpma_srq_recv");
  }
  /* before any client can come: the endpoint's fd non-blocking and no request */
  int ep_fd;
  die_rpma(rpma_ep_get_fd(ep, &ep_fd), "rpma_ep_get_fd");
  set_nonblock(ep_fd);
  struct rpma_conn_req *none = NULL;
  int ret = rpma_ep_next_conn_req(ep, g_cfg, &none);
  printf("server: non-blocking rpma_ep_next_conn_req with no request: %s\n",
         ret == 0 ? "a request" : rpma_err_2str(ret));
  if (ret == 0) die("a connection request before the server said it listens");
  printf("server: listening%s\n", g_srq ? " (SRQ)" : "");

  static struct served served[MAX_CONNS];
  int accepted = 0;
  for (int r = 0; r < n; r++) accepted += accept_one(peer, ep, &served[accepted]);
  if (g_srq) take_srq_messages(served, accepted);
  for (int k = 0; k < accepted; k++) serve_one(&served[k]);

  die_rpma(rpma_ep_shutdown(&ep), "rpma_ep_shutdown");
  if (g_srq) {
    die_rpma(rpma_mr_dereg(&g_srq_mr), "rpma_mr_dereg");
    die_rpma(rpma_conn_cfg_delete(&g_cfg), "rpma_conn_cfg_delete");
    die_rpma(rpma_srq_delete(&g_srq), "rpma_srq_delete");
    free(g_srq_buf);
  }
  die_rpma(rpma_peer_delete(&peer), "rpma_peer_delete");
  printf("server: served %d connections, rejected %d\n", accepted, n - accepted);
  return 0;
}
