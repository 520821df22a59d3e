/* Two connections from one process, with the source address's GID moved to
 * another index of the GID table between them (tests/vm/groups/
 * 68-dropin-gid-moved.sh removes the address, adds another that takes its
 * index, adds it back). Each connection: RC QP from rdma_create_qp, the QP's
 * source GID index as ibv_query_qp reports it, one message sent and echoed.
 *
 *   gid_moved -s BIND_IPV4 PORT [N [HOLD_PORT [QUIET]]]
 *                                       server: echoes one message on each of
 *                                       N connections (default 2; "listening"
 *                                       first); with HOLD_PORT (not 0), another
 *                                       id bound to 0.0.0.0:HOLD_PORT first,
 *                                       never listening ("holding 0.0.0.0:
 *                                       HOLD_PORT"); the first QUIET connections
 *                                       carry no message ("accepted N")
 *   gid_moved -c SRC_IPV4 PEER_IPV4 PORT [SRC2_IPV4]
 *                                       client: connection 1 from SRC, prints
 *                                       "moved?" and waits for a line on stdin,
 *                                       then connection 2 from SRC2 (default
 *                                       SRC); with SRC2, then rdma_bind_addr of
 *                                       SRC ("bind first source: ok" or the
 *                                       errno's name: 69-dropin-addr-moved.sh
 *                                       removes SRC, as the kernel refuses it)
 *   gid_moved -l SRC_IPV4 PEER_IPV4 PORT
 *                                       late device: the devices rdma_get_devices
 *                                       lists ("devices before: rxe0") and
 *                                       rdma_bind_addr of SRC ("bind before: ok"
 *                                       or the errno's name), "moved?", a line on
 *                                       stdin, the devices again ("devices
 *                                       after: rxe0 rxe1"), then connection 1
 *                                       from SRC (69-dropin-device-later.sh adds
 *                                       SRC's device while it waits), then
 *                                       "removed?", a line on stdin, the devices
 *                                       again ("devices after removal: rxe0"),
 *                                       "closed?" and stdin to its end: the
 *                                       group deletes SRC's device meanwhile, and
 *                                       `rdma link del` returns only once this
 *                                       process closed its context of it (rxe)
 *   gid_moved -b IPV4 PORT              rdma_bind_addr of IPV4:PORT: "bind held:
 *                                       ok" or the errno's name (69-dropin-device-
 *                                       later.sh: a port the server holds on a
 *                                       wildcard, on a device added since)
 *   gid_moved -r IPV4 PORT              an id bound to IPV4:PORT ("bound: ok" or
 *                                       the errno's name), then the next event on
 *                                       its channel with no other call ("event:
 *                                       RDMA_CM_EVENT_DEVICE_REMOVAL status 0":
 *                                       69-dropin-device-later.sh deletes IPV4's
 *                                       device meanwhile; the kernel sends it at
 *                                       once, cma_process_remove), the id
 *                                       destroyed ("destroyed"): only then does
 *                                       `rdma link del` return (rxe)
 *   gid_moved -f SRC_IPV4 PEER_IPV4 PORT
 *                                       fork: the parent resolves an id's address
 *                                       from SRC (its port opened) and forks; the
 *                                       child calls rdma_create_id on the parent's
 *                                       channel and rdma_resolve_route on the
 *                                       parent's id ("child: ...: ok" or the
 *                                       errno's name: the kernel refuses a
 *                                       child's use of the parent's rdma_cm fd,
 *                                       EACCES), then makes connection 1 on a
 *                                       channel of its own, with no message (its
 *                                       verbs are on the parent's device context,
 *                                       whose uverbs fd the kernel refuses to a
 *                                       child's writes too: rxe's sends fail);
 *                                       the parent prints the child's exit
 *                                       status, resolves its id's route and
 *                                       makes connection 2 with its echo (issue
 *                                       13: 67-dropin-behaviour, server
 *                                       -s ... 2 0 1)
 * The client prints "connection N: sgid_index I" and "connection N: echo ok"
 * (or why not); it exits 0 when both echoes came back (-l: the one).
 *
 * The client disconnects once it has the echo; the server looks at its echo's
 * send completion only after that DISCONNECTED, and a send still waiting for
 * its ACK then is not a failure (the client had the echo). rxe loses an ACK
 * now and then (~1 connection in 60 under TCG: tests/vm/bench/echo_stress.sh);
 * RC recovers by sending again, but a QP in ERROR (the client's, after
 * rdma_disconnect) answers nothing, and at retry_count 7 rxe retries for ever
 * (rxe_comp.c decrements only a count that is not 7): a server that waited
 * for that completion saw "send: no completion in 20000 ms" on the kernel CM
 * and on uscm alike (CI of 1576576, 69-dropin-device-later). */
#define _GNU_SOURCE /* strerrorname_np */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/vm/behaviour/behaviour.h"

enum { kMsg = 64, kWaitMs = 20000 };

static struct rdma_conn_param conn_param = {.responder_resources = 1, .initiator_depth = 1,
                                            .retry_count = 7, .rnr_retry_count = 7};

/* The id's RC QP (CQs created) and a kMsg buffer, registered, with a receive
 * posted on it (before the connection, as rping); the buffer's MR. */
static struct ibv_mr* qp_with_a_receive(struct rdma_cm_id* id, char** buf, const char* indent) {
  char what[64];
  struct ibv_qp_init_attr a = rc_qp_attr(2);
  snprintf(what, sizeof(what), "%srdma_create_qp", indent);
  must(what, rdma_create_qp(id, NULL, &a));
  *buf = calloc(1, kMsg);
  struct ibv_mr* mr = rdma_reg_msgs(id, *buf, kMsg);
  snprintf(what, sizeof(what), "%srdma_post_recv", indent);
  must(what, rdma_post_recv(id, NULL, *buf, kMsg, mr));
  return mr;
}

/* The next completion on `cq` within kWaitMs; 0 when it succeeded. */
static int complete(struct ibv_cq* cq, const char* what) {
  struct timespec tick = {0, 1000000};
  for (int ms = 0; ms < kWaitMs; ms++) {
    struct ibv_wc wc;
    int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) break;
    if (n == 1) {
      if (wc.status == IBV_WC_SUCCESS) return 0;
      printf("  %s: completion status %s\n", what, ibv_wc_status_str(wc.status));
      return 1;
    }
    nanosleep(&tick, NULL);
  }
  printf("  %s: no completion in %d ms\n", what, kWaitMs);
  return 1;
}

/* One message received and sent back on an established `id` (the send
 * posted; its completion is the_echo_sent's). */
static int echo_back(struct rdma_cm_id* id, char* buf, struct ibv_mr* mr) {
  if (complete(id->recv_cq, "receive") != 0) return 1;
  return call("  rdma_post_send", rdma_post_send(id, NULL, buf, kMsg, mr, IBV_SEND_SIGNALED));
}

/* The echo's send completion, once the client disconnected: 0 when it
 * succeeded, was flushed, or is still waiting for an ACK the client can no
 * longer send (see the top); 1 for any other status. */
static int the_echo_sent(struct ibv_cq* cq) {
  struct ibv_wc wc;
  const int n = ibv_poll_cq(cq, 1, &wc);
  if (n == 0) {
    /* On stderr: whether the ACK came before the client's DREQ is a race of
     * the two hosts (the kernel CM's server printed it and uscm's did not in
     * one run of 67-dropin-behaviour's fork step, 2026-11-28), and the groups compare
     * stdout line for line. */
    fprintf(stderr, "  send: not acknowledged before the client's disconnect\n");
    return 0;
  }
  if (n < 0 || (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR)) {
    printf("  send: %s\n", n < 0 ? "ibv_poll_cq failed" : ibv_wc_status_str(wc.status));
    return 1;
  }
  return 0;
}

static int server(struct sockaddr_in* addr, int connections, int hold_port, int quiet) {
  struct rdma_cm_id* hold = NULL;
  if (hold_port != 0) {
    char port[8];
    snprintf(port, sizeof(port), "%d", hold_port);
    struct sockaddr_in any = ipv4_arg("0.0.0.0", port);
    hold = new_id();
    must("rdma_bind_addr (hold)", rdma_bind_addr(hold, (struct sockaddr*)&any));
    printf("holding 0.0.0.0:%d\n", hold_port);
  }
  struct rdma_cm_id* listener = new_id();
  must("rdma_bind_addr", rdma_bind_addr(listener, (struct sockaddr*)addr));
  must("rdma_listen", rdma_listen(listener, connections));
  printf("listening\n");
  int failed = 0;
  for (int n = 1; n <= connections; n++) {
    struct rdma_cm_event* e = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
    struct rdma_cm_id* child = e->id;
    rdma_ack_cm_event(e);
    char* buf;
    struct ibv_mr* mr = qp_with_a_receive(child, &buf, "  ");
    must("  rdma_accept", rdma_accept(child, &conn_param));
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED));
    const int echoed = n > quiet && echo_back(child, buf, mr) == 0;
    if (n <= quiet) {
      printf("accepted %d\n", n);
    } else if (echoed) {
      printf("served %d: %s\n", n, buf);
    } else {
      failed = 1;
    }
    rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
    if (echoed && the_echo_sent(child->send_cq) != 0) failed = 1;
    rdma_dereg_mr(mr);
    free(buf);
    rdma_destroy_qp(child);
    rdma_destroy_id(child);
  }
  rdma_destroy_id(listener);
  if (hold != NULL) rdma_destroy_id(hold);
  return failed;
}

/* A new id from `src`, connected to `peer` with an RC QP whose receive is
 * posted on `*buf` (the buffer's MR returned). */
static struct ibv_mr* connected(struct rdma_cm_id** out, struct sockaddr_in* src,
                                struct sockaddr_in* peer, char** buf) {
  struct rdma_cm_id* id = new_id();
  must("rdma_resolve_addr", rdma_resolve_addr(id, (struct sockaddr*)src,
                                              (struct sockaddr*)peer, 2000));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED));
  must("rdma_resolve_route", rdma_resolve_route(id, 2000));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED));
  struct ibv_mr* mr = qp_with_a_receive(id, buf, "");
  must("rdma_connect", rdma_connect(id, &conn_param));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED));
  *out = id;
  return mr;
}

/* Disconnects connected()'s `id` and destroys what it made. */
static void disconnect_and_destroy(struct rdma_cm_id* id, struct ibv_mr* mr, char* buf) {
  must("rdma_disconnect", rdma_disconnect(id));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED));
  rdma_dereg_mr(mr);
  free(buf);
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
}

/* Connection `n` from `src` to `peer`: connect, the QP's source GID index,
 * one message there and back, disconnect; every resource destroyed (the GID
 * entry the QP held is free once the QP is gone). 0 when the echo came back. */
static int connect_once(int n, struct sockaddr_in* src, struct sockaddr_in* peer) {
  struct rdma_cm_id* id;
  char* buf;
  struct ibv_mr* mr = connected(&id, src, peer, &buf);
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr init;
  memset(&qa, 0, sizeof(qa));
  must("ibv_query_qp", ibv_query_qp(id->qp, &qa, IBV_QP_AV, &init));
  printf("connection %d: sgid_index %u\n", n, qa.ah_attr.grh.sgid_index);
  char* out = calloc(1, kMsg);
  struct ibv_mr* out_mr = rdma_reg_msgs(id, out, kMsg);
  snprintf(out, kMsg, "message %d", n);
  int failed = rdma_post_send(id, NULL, out, kMsg, out_mr, IBV_SEND_SIGNALED) != 0 ||
               complete(id->send_cq, "send") != 0 || complete(id->recv_cq, "receive") != 0 ||
               strcmp(buf, out) != 0;
  printf("connection %d: %s\n", n, failed ? "no echo" : "echo ok");
  rdma_dereg_mr(out_mr);
  free(out);
  disconnect_and_destroy(id, mr, buf);
  return failed;
}

/* rdma_bind_addr of `src` on a new id: "<what>: ok" or the errno's name. */
static void try_bind(const char* what, struct sockaddr_in* src) {
  struct rdma_cm_id* id = new_id();
  const int rc = rdma_bind_addr(id, (struct sockaddr*)src);
  printf("%s: %s\n", what, rc == 0 ? "ok" : strerrorname_np(errno));
  rdma_destroy_id(id);
}

static int by_name(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* "<what>: NAME NAME ..." of the devices rdma_get_devices lists, by name. */
static void print_devices(const char* what) {
  int n = 0;
  struct ibv_context** devs = rdma_get_devices(&n);
  const char* names[64];
  int count = 0;
  for (int i = 0; devs != NULL && devs[i] != NULL && count < 64; i++) {
    names[count++] = ibv_get_device_name(devs[i]->device);
  }
  qsort(names, count, sizeof(names[0]), by_name);
  printf("%s:", what);
  for (int i = 0; i < count; i++) printf(" %s", names[i]);
  printf("%s\n", n == count ? "" : " (count differs)");
  if (devs != NULL) rdma_free_devices(devs);
}

/* -l: SRC's device appears while the process waits (see the top). */
static int late_device(struct sockaddr_in* src, struct sockaddr_in* peer) {
  print_devices("devices before");
  try_bind("bind before", src);
  printf("moved?\n");
  char line[16];
  if (fgets(line, sizeof(line), stdin) == NULL) return 1;
  print_devices("devices after");
  const int rc = connect_once(1, src, peer);
  printf("removed?\n");
  if (fgets(line, sizeof(line), stdin) == NULL) return 1;
  print_devices("devices after removal");
  printf("closed?\n");
  while (fgets(line, sizeof(line), stdin) != NULL) {
  }
  return rc;
}

/* -r: the id's device goes while the process waits for its next event. */
static int removed_device(struct sockaddr_in* addr) {
  struct rdma_cm_id* id = new_id();
  if (rdma_bind_addr(id, (struct sockaddr*)addr) != 0) {
    printf("bound: %s\n", strerrorname_np(errno));
    return 1;
  }
  printf("bound: ok\n");
  struct rdma_cm_event* e = NULL;
  if (rdma_get_cm_event(ch, &e) != 0) {
    printf("event: %s\n", strerrorname_np(errno));
    return 1;
  }
  printf("event: %s status %d\n", rdma_event_str(e->event), e->status);
  const int rc = e->event == RDMA_CM_EVENT_DEVICE_REMOVAL && e->id == id ? 0 : 1;
  rdma_ack_cm_event(e);
  rdma_destroy_id(id);
  printf("destroyed\n");
  return rc;
}

/* -f: a child of fork() on the port its parent opened (see the top). */
static int forked_child(struct sockaddr_in* src, struct sockaddr_in* peer) {
  struct rdma_cm_id* mine = new_id();
  must("parent rdma_resolve_addr",
       rdma_resolve_addr(mine, (struct sockaddr*)src, (struct sockaddr*)peer, 2000));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED));
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    struct rdma_cm_id* other = NULL;
    const int created = rdma_create_id(ch, &other, NULL, RDMA_PS_TCP);
    printf("child: rdma_create_id on the parent's channel: %s\n",
           created == 0 ? "ok" : strerrorname_np(errno));
    const int resolved = rdma_resolve_route(mine, 2000);
    printf("child: rdma_resolve_route of the parent's id: %s\n",
           resolved == 0 ? "ok" : strerrorname_np(errno));
    ch = rdma_create_event_channel();
    if (ch == NULL) _exit(1);
    struct rdma_cm_id* id;
    char* buf;
    struct ibv_mr* mr = connected(&id, src, peer, &buf);
    printf("connection 1: established\n");
    disconnect_and_destroy(id, mr, buf);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 1;
  printf("child exit status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  must("parent rdma_resolve_route", rdma_resolve_route(mine, 2000));
  rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED));
  rdma_destroy_id(mine);
  return connect_once(2, src, peer) != 0 || status != 0;
}

int main(int argc, char** argv) {
  const int is_server = argc >= 4 && argc <= 7 && strcmp(argv[1], "-s") == 0;
  const int is_late = argc == 5 && strcmp(argv[1], "-l") == 0;
  const int is_bind = argc == 4 && strcmp(argv[1], "-b") == 0;
  const int is_removal = argc == 4 && strcmp(argv[1], "-r") == 0;
  const int is_fork = argc == 5 && strcmp(argv[1], "-f") == 0;
  if (!is_server && !is_late && !is_bind && !is_removal && !is_fork &&
      !((argc == 5 || argc == 6) && strcmp(argv[1], "-c") == 0)) {
    fprintf(stderr,
            "usage: gid_moved -s BIND_IPV4 PORT [N [HOLD_PORT [QUIET]]] | -c SRC_IPV4 PEER_IPV4 PORT"
            " [SRC2_IPV4] | -l SRC_IPV4 PEER_IPV4 PORT | -b IPV4 PORT | -r IPV4 PORT"
            " | -f SRC_IPV4 PEER_IPV4 PORT\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  ch = rdma_create_event_channel();
  if (ch == NULL) return 1;
  int rc;
  if (is_server) {
    struct sockaddr_in addr = ipv4_arg(argv[2], argv[3]);
    rc = server(&addr, argc >= 5 ? atoi(argv[4]) : 2, argc >= 6 ? atoi(argv[5]) : 0,
                argc == 7 ? atoi(argv[6]) : 0);
  } else if (is_bind) {
    struct sockaddr_in addr = ipv4_arg(argv[2], argv[3]);
    try_bind("bind held", &addr);
    rc = 0;
  } else if (is_removal) {
    struct sockaddr_in addr = ipv4_arg(argv[2], argv[3]);
    rc = removed_device(&addr);
  } else if (is_fork) {
    struct sockaddr_in src = ipv4_arg(argv[2], "0");
    struct sockaddr_in peer = ipv4_arg(argv[3], argv[4]);
    rc = forked_child(&src, &peer);
  } else if (is_late) {
    struct sockaddr_in src = ipv4_arg(argv[2], "0");
    struct sockaddr_in peer = ipv4_arg(argv[3], argv[4]);
    rc = late_device(&src, &peer);
  } else {
    struct sockaddr_in src = ipv4_arg(argv[2], "0");
    struct sockaddr_in peer = ipv4_arg(argv[3], argv[4]);
    struct sockaddr_in src2 = argc == 6 ? ipv4_arg(argv[5], "0") : src;
    rc = connect_once(1, &src, &peer);
    printf("moved?\n");
    char line[16];
    if (fgets(line, sizeof(line), stdin) == NULL) return 1;
    rc |= connect_once(2, &src2, &peer);
    if (argc == 6) try_bind("bind first source", &src);
  }
  rdma_destroy_event_channel(ch);
  printf("done\n");
  return rc;
}
