// tests/vm/bench/first_calls.c: a program's first librdmacm calls one by one (docs/API.md
// "A program's first calls"): each call's wall time, page faults and CPU (getrusage, all
// threads), with a marker before each (a write to fd -1: EBADF) for strace to cut on.
// Built against the system's <rdma/rdma_cma.h> with -lrdmacm by first_calls.sh.
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

static long flt(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt + r.ru_majflt;
}
static double cpu(void) {  /* ms, all threads */
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
         (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}
static double now_us(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static void mark(const char* m) {  /* EBADF: a marker for strace */
  if (write(-1, m, strlen(m)) >= 0) fprintf(stderr, "marker written?\n");
}
int main(int argc, char** argv) {
  struct sockaddr_in a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; inet_pton(AF_INET, argc > 1 ? argv[1] : "192.168.77.1", &a.sin_addr);
  long f[8]; double c[8]; f[0] = flt(); c[0] = cpu();
  double t0 = now_us();
  mark("channel");
  struct rdma_event_channel* ch = rdma_create_event_channel();
  double t1 = now_us(); f[1] = flt(); c[1] = cpu();
  mark("create_id1");
  struct rdma_cm_id *id1, *id2;
  if (rdma_create_id(ch, &id1, NULL, RDMA_PS_TCP)) { perror("create_id"); return 1; }
  double t2 = now_us(); f[2] = flt(); c[2] = cpu();
  mark("bind1");
  if (rdma_bind_addr(id1, (struct sockaddr*)&a)) { perror("bind"); return 1; }
  double t3 = now_us(); f[3] = flt(); c[3] = cpu();
  mark("create_id2");
  if (rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP)) { perror("create_id2"); return 1; }
  double t4 = now_us(); f[4] = flt(); c[4] = cpu();
  mark("bind2");
  if (rdma_bind_addr(id2, (struct sockaddr*)&a)) { perror("bind2"); return 1; }
  double t5 = now_us(); f[5] = flt(); c[5] = cpu();
  mark("destroy");
  rdma_destroy_id(id2); rdma_destroy_id(id1); rdma_destroy_event_channel(ch);
  double t6 = now_us(); f[6] = flt(); c[6] = cpu();
  mark("end");
  printf("first: channel %.0f create_id1 %.0f bind1 %.0f create_id2 %.0f bind2 %.0f destroy %.0f us\n",
         t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5);
  printf("faults: channel %ld create_id1 %ld bind1 %ld create_id2 %ld bind2 %ld; cpu ms (all threads): %.0f %.0f %.0f %.0f %.0f\n",
         f[1] - f[0], f[2] - f[1], f[3] - f[2], f[4] - f[3], f[5] - f[4], c[1] - c[0], c[2] - c[1], c[3] - c[2], c[4] - c[3], c[5] - c[4]);
  return 0;
}
