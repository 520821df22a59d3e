/* rpma_client LOCAL_IP|remote SERVER_IP PORT TAG [rcq]: a librpma client on LOCAL_IP's
 * device (or, with "remote", the device SERVER_IP resolves to). rpma_conn_req_new makes its
 * id in librdmacm's synchronous mode (rdma_create_id with no channel, blocking
 * rdma_resolve_addr / _route) and rpma_conn_req_connect migrates it to a channel of its
 * own before rdma_connect. It sends "rpma TAG" in the connect's private data, takes the
 * server's buffer descriptor from the accept's, reads the server's pattern (rpma_read),
 * writes its own (rpma_write + rpma_flush), reads it back, sends "TAG wrote" and checks
 * the answer "ack TAG" (posted before the connect), then disconnects. Every byte is
 * checked; exit 0 when every check held. With "rcq" its QP has a receive CQ of its own
 * (rdma_create_qp_ex with two CQs) sharing one completion channel with the other
 * (rpma_conn_wait). A TAG that starts with "reject" expects the server's reject; one
 * that starts with "drop" deletes the connection after the first read, not
 * disconnecting first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/vm/rpma/common.h"

/* the local buffer: what was read, what is written, what was read back, two messages */
enum { kRead = 0, kWrite = RPMA_BUF_SIZE, kBack = 2 * RPMA_BUF_SIZE, kSend = 3 * RPMA_BUF_SIZE,
       kRecv = kSend + RPMA_MSG_SIZE, kSize = kRecv + RPMA_MSG_SIZE };

static int g_shared; /* "rcq": both CQs on one completion channel */

/* wait_wc: the connection's next completion */
static void wait_wc(struct rpma_conn *conn, struct ibv_wc *wc) {
  if (g_shared) {
    next_wc_shared(conn, wc);
    return;
  }
  struct rpma_cq *cq = NULL;
  die_rpma(rpma_conn_get_cq(conn, &cq), "rpma_conn_get_cq");
  next_wc(cq, wc);
}

static void read_remote(struct rpma_conn *conn, struct rpma_mr_local *mr, size_t offset,
                        struct rpma_mr_remote *remote) {
  die_rpma(rpma_read(conn, mr, offset, remote, 0, RPMA_BUF_SIZE, RPMA_F_COMPLETION_ALWAYS,
                     NULL),
           "rpma_read");
  struct ibv_wc wc;
  wait_wc(conn, &wc);
  if (wc.opcode != IBV_WC_RDMA_READ) die("the read's completion is not an RDMA read");
}

/* done: deletes what the client made (the connection already deleted or NULL) and says
 * so; main's exit status */
static int done(struct rpma_mr_remote *remote, struct rpma_mr_local *mr,
                struct rpma_conn_cfg *cfg, struct rpma_peer *peer, uint8_t *buf) {
  if (remote != NULL) die_rpma(rpma_mr_remote_delete(&remote), "rpma_mr_remote_delete");
  die_rpma(rpma_mr_dereg(&mr), "rpma_mr_dereg");
  die_rpma(rpma_conn_cfg_delete(&cfg), "rpma_conn_cfg_delete");
  die_rpma(rpma_peer_delete(&peer), "rpma_peer_delete");
  free(buf);
  printf("client: done\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 5 && !(argc == 6 && strcmp(argv[5], "rcq") == 0))
    die("usage: rpma_client LOCAL_IP|remote SERVER_IP PORT TAG [rcq]");
  const char *tag = argv[4];
  g_shared = argc == 6;
  if (strlen(tag) == 0 || strlen(tag) >= RPMA_TAG_MAX) die("TAG must be 1 to 15 characters");
  setvbuf(stdout, NULL, _IOLBF, 0);

  struct ibv_context *ctx = NULL;
  /* "remote": the device the server's address resolves to (rdma_resolve_addr of a
   * synchronous id with librpma's 1 s timeout), as librpma's example clients take it */
  const int by_server = strcmp(argv[1], "remote") == 0;
  die_rpma(rpma_utils_get_ibv_context(by_server ? argv[2] : argv[1],
                                      by_server ? RPMA_UTIL_IBV_CONTEXT_REMOTE
                                             : RPMA_UTIL_IBV_CONTEXT_LOCAL,
                                      &ctx),
           "rpma_utils_get_ibv_context");
  struct rpma_peer *peer = NULL;
  die_rpma(rpma_peer_new(ctx, &peer), "rpma_peer_new");

  uint8_t *buf = NULL;
  if (posix_memalign((void **)&buf, 4096, kSize) != 0) die("posix_memalign failed");
  memset(buf, 0, kSize);
  struct rpma_mr_local *mr = NULL;
  die_rpma(rpma_mr_reg(peer, buf, kSize,
                       RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND |
                           RPMA_MR_USAGE_RECV,
                       &mr),
           "rpma_mr_reg");

  /* the connect: 10 s for each resolve step (librpma's default is 1 s; TCG guests) */
  struct rpma_conn_cfg *cfg = NULL;
  die_rpma(rpma_conn_cfg_new(&cfg), "rpma_conn_cfg_new");
  die_rpma(rpma_conn_cfg_set_timeout(cfg, 10000), "rpma_conn_cfg_set_timeout");
  if (g_shared) {
    die_rpma(rpma_conn_cfg_set_rcq_size(cfg, 8), "rpma_conn_cfg_set_rcq_size");
    die_rpma(rpma_conn_cfg_set_compl_channel(cfg, true), "rpma_conn_cfg_set_compl_channel");
  }
  struct rpma_conn_req *req = NULL;
  die_rpma(rpma_conn_req_new(peer, argv[2], argv[3], cfg, &req), "rpma_conn_req_new");
  die_rpma(rpma_conn_req_recv(req, mr, kRecv, RPMA_MSG_SIZE, NULL), "rpma_conn_req_recv");
  char hello[RPMA_TAG_MAX + 5];
  snprintf(hello, sizeof hello, "rpma %s", tag);
  struct rpma_conn_private_data out = {.ptr = hello, .len = (uint8_t)(strlen(hello) + 1)};
  struct rpma_conn *conn = NULL;
  die_rpma(rpma_conn_req_connect(&req, &out, &conn), "rpma_conn_req_connect");
  printf("client %s: connect sent, private data \"%s\"%s\n", tag, hello,
         g_shared ? ", a receive CQ of its own" : "");
  if (strncmp(tag, "reject", 6) == 0) {
    expect_event(conn, RPMA_CONN_REJECTED, "client: ");
    die_rpma(rpma_conn_delete(&conn), "rpma_conn_delete");
    return done(NULL, mr, cfg, peer, buf);
  }
  expect_event(conn, RPMA_CONN_ESTABLISHED, "client: ");

  struct rpma_conn_private_data in;
  die_rpma(rpma_conn_get_private_data(conn, &in), "rpma_conn_get_private_data");
  struct rpma_mr_remote *remote = NULL;
  die_rpma(rpma_mr_remote_from_descriptor(in.ptr, in.len, &remote),
           "rpma_mr_remote_from_descriptor (the accept's private data)");
  size_t remote_size = 0;
  int flush_type = 0;
  die_rpma(rpma_mr_remote_get_size(remote, &remote_size), "rpma_mr_remote_get_size");
  die_rpma(rpma_mr_remote_get_flush_type(remote, &flush_type), "rpma_mr_remote_get_flush_type");
  printf("client: accept's private data %u bytes; the server's buffer: %zu bytes, flush to "
         "visibility %s\n", in.len, remote_size,
         (flush_type & RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY) ? "yes" : "no");
  if (remote_size != RPMA_BUF_SIZE) die("the server's buffer is not 4096 bytes");

  read_remote(conn, mr, kRead, remote);
  size_t good = server_mismatch(buf + kRead, RPMA_BUF_SIZE);
  printf("client: read %d bytes, %zu are the server's pattern, fnv1a %08x\n", RPMA_BUF_SIZE,
         good, fnv1a(buf + kRead, RPMA_BUF_SIZE));
  if (good != RPMA_BUF_SIZE) die("the server's buffer is not its pattern");
  if (strncmp(tag, "drop", 4) == 0) {
    /* librpma's error paths: the connection deleted with no rpma_conn_disconnect
     * (rdma_destroy_id of an established id, which sends the DREQ) */
    die_rpma(rpma_conn_delete(&conn), "rpma_conn_delete");
    printf("client: deleted the connection without disconnecting\n");
    return done(remote, mr, cfg, peer, buf);
  }

  for (size_t i = 0; i < RPMA_BUF_SIZE; i++) buf[kWrite + i] = client_pattern(tag, i);
  die_rpma(rpma_write(conn, remote, 0, mr, kWrite, RPMA_BUF_SIZE, RPMA_F_COMPLETION_ON_ERROR,
                      NULL),
           "rpma_write");
  die_rpma(rpma_flush(conn, remote, 0, RPMA_BUF_SIZE, RPMA_FLUSH_TYPE_VISIBILITY,
                      RPMA_F_COMPLETION_ALWAYS, NULL),
           "rpma_flush");
  struct ibv_wc wc;
  wait_wc(conn, &wc);
  if (wc.opcode != IBV_WC_RDMA_READ) die("the flush's completion is not its RDMA read");
  printf("client: wrote %d bytes of pattern %s and flushed, fnv1a %08x\n", RPMA_BUF_SIZE, tag,
         fnv1a(buf + kWrite, RPMA_BUF_SIZE));
  read_remote(conn, mr, kBack, remote);
  good = client_mismatch(tag, buf + kBack, RPMA_BUF_SIZE);
  printf("client: read back %zu of %d bytes as written\n", good, RPMA_BUF_SIZE);
  if (good != RPMA_BUF_SIZE) die("the server's buffer is not what was written");

  char *msg = (char *)buf + kSend;
  snprintf(msg, RPMA_MSG_SIZE, "%s wrote", tag);
  die_rpma(rpma_send(conn, mr, kSend, strlen(msg) + 1, RPMA_F_COMPLETION_ALWAYS, NULL),
           "rpma_send");
  /* the send's and the answer's completions, in either order */
  int sent = 0, received = 0;
  while (!sent || !received) {
    wait_wc(conn, &wc);
    if (wc.opcode == IBV_WC_SEND && !sent) {
      sent = 1;
    } else if (wc.opcode == IBV_WC_RECV && !received) {
      received = 1;
      char want[RPMA_MSG_SIZE];
      snprintf(want, sizeof want, "ack %s", tag);
      const char *got = (const char *)buf + kRecv;
      if (wc.byte_len != strlen(want) + 1 || strcmp(got, want) != 0)
        die("the answer is not \"ack TAG\"");
    } else {
      die("an unexpected completion");
    }
  }
  printf("client: sent \"%s\", received \"%s\"\n", msg, (const char *)buf + kRecv);

  die_rpma(rpma_conn_disconnect(conn), "rpma_conn_disconnect");
  expect_event(conn, RPMA_CONN_CLOSED, "client: ");
  die_rpma(rpma_conn_delete(&conn), "rpma_conn_delete");
  return done(remote, mr, cfg, peer, buf);
}
