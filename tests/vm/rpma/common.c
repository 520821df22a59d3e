#include "tests/vm/rpma/common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void die_rpma(int ret, const char *what) {
  if (ret == 0) return;
  fprintf(stderr, "%s: %s\n", what, rpma_err_2str(ret));
  exit(1);
}

void die(const char *what) {
  fprintf(stderr, "%s\n", what);
  exit(1);
}

uint8_t server_pattern(size_t i) { return (uint8_t)(i * 7 + 3); }

uint8_t client_pattern(const char *tag, size_t i) {
  uint8_t seed = 0;
  for (const char *c = tag; *c; c++) seed = (uint8_t)(seed * 31 + (uint8_t)*c);
  return (uint8_t)(i * 13 + seed);
}

size_t server_mismatch(const uint8_t *buf, size_t size) {
  for (size_t i = 0; i < size; i++)
    if (buf[i] != server_pattern(i)) return i;
  return size;
}

size_t client_mismatch(const char *tag, const uint8_t *buf, size_t size) {
  for (size_t i = 0; i < size; i++)
    if (buf[i] != client_pattern(tag, i)) return i;
  return size;
}

uint32_t fnv1a(const uint8_t *buf, size_t size) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; i++) h = (h ^ buf[i]) * 16777619u;
  return h;
}

void set_nonblock(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) die("fcntl O_NONBLOCK failed");
}

enum rpma_conn_event next_event(struct rpma_conn *conn) {
  int fd;
  die_rpma(rpma_conn_get_event_fd(conn, &fd), "rpma_conn_get_event_fd");
  struct pollfd p = {.fd = fd, .events = POLLIN};
  while (poll(&p, 1, -1) < 0)
    if (errno != EINTR) die("poll on the connection's event fd failed");
  enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
  die_rpma(rpma_conn_next_event(conn, &event), "rpma_conn_next_event");
  return event;
}

void expect_event(struct rpma_conn *conn, enum rpma_conn_event want, const char *prefix) {
  enum rpma_conn_event got = next_event(conn);
  printf("%sevent %s\n", prefix, rpma_utils_conn_event_2str(got));
  fflush(stdout);
  if (got != want) {
    fprintf(stderr, "%sexpected %s\n", prefix, rpma_utils_conn_event_2str(want));
    exit(1);
  }
}

static void check_status(const struct ibv_wc *wc) {
  if (wc->status != IBV_WC_SUCCESS) {
    fprintf(stderr, "completion status %s (opcode %d)\n", ibv_wc_status_str(wc->status),
            (int)wc->opcode);
    exit(1);
  }
}

void next_wc_shared(struct rpma_conn *conn, struct ibv_wc *wc) {
  struct rpma_cq *cqs[2];
  die_rpma(rpma_conn_get_cq(conn, &cqs[0]), "rpma_conn_get_cq");
  die_rpma(rpma_conn_get_rcq(conn, &cqs[1]), "rpma_conn_get_rcq");
  if (cqs[1] == NULL) die("the connection has no receive CQ");
  for (;;) {
    for (int i = 0; i < 2; i++) {
      int got = 0;
      int ret = rpma_cq_get_wc(cqs[i], 1, wc, &got);
      if (ret == 0 && got == 1) {
        check_status(wc);
        return;
      }
      if (ret != RPMA_E_NO_COMPLETION) die_rpma(ret, "rpma_cq_get_wc");
    }
    struct rpma_cq *which = NULL;
    bool is_rcq = false;
    die_rpma(rpma_conn_wait(conn, 0, &which, &is_rcq), "rpma_conn_wait");
  }
}

void next_wc(struct rpma_cq *cq, struct ibv_wc *wc) {
  for (;;) {
    int got = 0;
    int ret = rpma_cq_get_wc(cq, 1, wc, &got);
    if (ret == 0 && got == 1) break;
    if (ret != RPMA_E_NO_COMPLETION) die_rpma(ret, "rpma_cq_get_wc");
    die_rpma(rpma_cq_wait(cq), "rpma_cq_wait");
  }
  check_status(wc);
}
