/*
 * The kernel side's reporter for the reject checks of kernel_interop.sh: a
 * librdmacm (kernel rdma_cm) program, because rping and ucmatose print the
 * reject reason but never its private data.
 *
 *   kernel_cm_reporter -c -a DST -b SRC -p PORT -e TEXT
 *       connects with private data "kernel-req"; succeeds when the connection
 *       is REJECTED and the REJ private data starts with TEXT.
 *   kernel_cm_reporter -s -b ADDR -p PORT -r TEXT
 *       listens, rejects the first CONNECT_REQUEST with private data TEXT.
 *
 * Prints one line per event; exit status 0 on success, 1 otherwise.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_ip(const char *text, int port, struct sockaddr_in *sin) {
  memset(sin, 0, sizeof(*sin));
  sin->sin_family = AF_INET;
  sin->sin_port = htons((unsigned short)port);
  if (inet_pton(AF_INET, text, &sin->sin_addr) != 1) {
    fprintf(stderr, "not an IPv4 address: %s\n", text);
    return -1;
  }
  return 0;
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, const char *step) {
  struct rdma_cm_event *ev = NULL;
  if (rdma_get_cm_event(ch, &ev)) {
    perror(step);
    return NULL;
  }
  printf("%s: %s status %d\n", step, rdma_event_str(ev->event), ev->status);
  return ev;
}

static void print_data(const char *what, const void *data, unsigned len) {
  const unsigned char *p = data;
  unsigned n = 0;
  while (n < len && p[n] >= 0x20 && p[n] < 0x7f) ++n;
  printf("%s: %u bytes, text \"%.*s\"\n", what, len, (int)n, (const char *)p);
}

static int run_client(const char *dst, const char *src, int port, const char *expect) {
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *id = NULL;
  struct sockaddr_in d, s;
  struct rdma_cm_event *ev;
  struct ibv_qp_init_attr qpa;
  struct rdma_conn_param cp;
  static const char req_data[] = "kernel-req";
  int ok = 0;

  if (!ch || parse_ip(dst, port, &d) || parse_ip(src, 0, &s)) return 1;
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) { perror("rdma_create_id"); return 1; }
  if (rdma_resolve_addr(id, (struct sockaddr *)&s, (struct sockaddr *)&d, 5000)) {
    perror("rdma_resolve_addr");
    return 1;
  }
  if (!(ev = next_event(ch, "resolve_addr")) || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) return 1;
  rdma_ack_cm_event(ev);
  if (rdma_resolve_route(id, 5000)) { perror("rdma_resolve_route"); return 1; }
  if (!(ev = next_event(ch, "resolve_route")) || ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED) return 1;
  rdma_ack_cm_event(ev);
  memset(&qpa, 0, sizeof(qpa));
  qpa.qp_type = IBV_QPT_RC;
  qpa.cap.max_send_wr = qpa.cap.max_recv_wr = 1;
  qpa.cap.max_send_sge = qpa.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, NULL, &qpa)) { perror("rdma_create_qp"); return 1; }
  memset(&cp, 0, sizeof(cp));
  cp.private_data = req_data;
  cp.private_data_len = sizeof(req_data) - 1;
  cp.responder_resources = cp.initiator_depth = 1;
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  if (rdma_connect(id, &cp)) { perror("rdma_connect"); return 1; }
  if (!(ev = next_event(ch, "connect"))) return 1;
  if (ev->event == RDMA_CM_EVENT_REJECTED) {
    print_data("REJ private data", ev->param.conn.private_data, ev->param.conn.private_data_len);
    ok = ev->param.conn.private_data_len >= strlen(expect) &&
         memcmp(ev->param.conn.private_data, expect, strlen(expect)) == 0;
    printf("%s: REJECTED, reason %d, private data %s \"%s\"\n", ok ? "OK" : "FAIL", ev->status,
           ok ? "starts with" : "does not start with", expect);
  } else {
    printf("FAIL: expected REJECTED\n");
  }
  rdma_ack_cm_event(ev);
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return ok ? 0 : 1;
}

static int run_server(const char *addr, int port, const char *rej) {
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *listen_id = NULL;
  struct sockaddr_in a;
  struct rdma_cm_event *ev;
  struct rdma_cm_id *child;

  if (!ch || parse_ip(addr, port, &a)) return 1;
  if (rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP)) { perror("rdma_create_id"); return 1; }
  if (rdma_bind_addr(listen_id, (struct sockaddr *)&a)) { perror("rdma_bind_addr"); return 1; }
  if (rdma_listen(listen_id, 4)) { perror("rdma_listen"); return 1; }
  printf("listening on %s:%d\n", addr, port);
  fflush(stdout);
  if (!(ev = next_event(ch, "listen")) || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) return 1;
  print_data("REQ private data", ev->param.conn.private_data, ev->param.conn.private_data_len);
  child = ev->id;
  if (rdma_reject(child, rej, (uint8_t)strlen(rej))) { perror("rdma_reject"); return 1; }
  printf("OK: rejected with \"%s\"\n", rej);
  rdma_ack_cm_event(ev);
  rdma_destroy_id(child);
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(ch);
  return 0;
}

int main(int argc, char **argv) {
  const char *a = NULL, *b = NULL, *expect = NULL, *rej = NULL;
  int port = 7500, client = -1, op;
  while ((op = getopt(argc, argv, "csa:b:p:e:r:")) != -1) {
    switch (op) {
      case 'c': client = 1; break;
      case 's': client = 0; break;
      case 'a': a = optarg; break;
      case 'b': b = optarg; break;
      case 'p': port = atoi(optarg); break;
      case 'e': expect = optarg; break;
      case 'r': rej = optarg; break;
      default: client = -1; optind = argc; break;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (client == 1 && a && b && expect) return run_client(a, b, port, expect);
  if (client == 0 && b && rej && strlen(rej) <= 148) return run_server(b, port, rej);
  fprintf(stderr, "usage: %s -c -a DST -b SRC [-p PORT] -e TEXT | -s -b ADDR [-p PORT] -r TEXT\n",
          argv[0]);
  return 2;
}
