/* Which binds and listens share a port (the kernel's cma_check_port and
 * rdma_listen): AFONLY between an IPv6 wildcard and IPv4, two specific
 * addresses on one port, a wildcard against a specific address, REUSEADDR
 * and listen, REUSEADDR after the bind, an address of no local device, and a port below 1024 without
 * CAP_NET_BIND_SERVICE (dropped from the effective set at the end). Prints
 * each call's return value and errno; 67-dropin-behaviour compares the
 * kernel's and uscm's outputs line by line.
 *
 *   port_bind LOCAL_IPV4 SECOND_LOCAL_IPV4 PORT   (PORT..PORT+7 are used) */
#define _GNU_SOURCE /* strerrorname_np */
#include <arpa/inet.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "tests/vm/behaviour/behaviour.h"

static struct sockaddr_in6 any6(int port) {
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
  return a;
}

static struct sockaddr_in v4(const char* ip, int port) {
  char p[8];
  snprintf(p, sizeof(p), "%d", port);
  return ipv4_arg(ip, p);
}

static int set_int(struct rdma_cm_id* id, int name, int value) {
  return rdma_set_option(id, RDMA_OPTION_ID, name, &value, sizeof(value));
}

static void destroy(struct rdma_cm_id** ids, int n) {
  for (int i = 0; i < n; i++) rdma_destroy_id(ids[i]);
}

/* CAP_NET_BIND_SERVICE out of this process's effective set. */
static int drop_net_bind_service(void) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof(data));
  if (syscall(SYS_capget, &hdr, data) != 0) return -1;
  data[0].effective &= ~(1u << CAP_NET_BIND_SERVICE);
  return (int)syscall(SYS_capset, &hdr, data);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: port_bind LOCAL_IPV4 SECOND_LOCAL_IPV4 PORT\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *ip1 = argv[1], *ip2 = argv[2];
  const int port = atoi(argv[3]);
  ch = rdma_create_event_channel();
  if (ch == NULL) return 1;
  struct rdma_cm_id* id[4];
  struct sockaddr_in a4, b4;
  struct sockaddr_in6 a6;

  /* [::] without AFONLY covers IPv4 too; with AFONLY it does not */
  id[0] = new_id(), id[1] = new_id();
  a6 = any6(port), a4 = v4("0.0.0.0", port);
  call("bind [::] (no AFONLY)", rdma_bind_addr(id[0], (struct sockaddr*)&a6));
  call("bind 0.0.0.0 same port", rdma_bind_addr(id[1], (struct sockaddr*)&a4));
  b4 = v4(ip1, port);
  call("bind LOCAL same port", rdma_bind_addr(id[1], (struct sockaddr*)&b4));
  destroy(id, 2);
  id[0] = new_id(), id[1] = new_id();
  a6 = any6(port + 1), a4 = v4("0.0.0.0", port + 1);
  call("AFONLY 1", set_int(id[0], RDMA_OPTION_ID_AFONLY, 1));
  call("bind [::] (AFONLY 1)", rdma_bind_addr(id[0], (struct sockaddr*)&a6));
  call("bind 0.0.0.0 same port", rdma_bind_addr(id[1], (struct sockaddr*)&a4));
  call("listen [::]", rdma_listen(id[0], 1));
  call("listen 0.0.0.0", rdma_listen(id[1], 1));
  destroy(id, 2);
  id[0] = new_id(), id[1] = new_id();
  a6 = any6(port + 2), a4 = v4("0.0.0.0", port + 2);
  call("bind 0.0.0.0", rdma_bind_addr(id[0], (struct sockaddr*)&a4));
  call("AFONLY 0", set_int(id[1], RDMA_OPTION_ID_AFONLY, 0));
  call("bind [::] (AFONLY 0) same port", rdma_bind_addr(id[1], (struct sockaddr*)&a6));
  destroy(id, 2);

  /* two specific addresses on one port; the same one twice */
  id[0] = new_id(), id[1] = new_id(), id[2] = new_id();
  a4 = v4(ip1, port + 3), b4 = v4(ip2, port + 3);
  call("bind LOCAL", rdma_bind_addr(id[0], (struct sockaddr*)&a4));
  call("bind SECOND same port", rdma_bind_addr(id[1], (struct sockaddr*)&b4));
  call("bind LOCAL again", rdma_bind_addr(id[2], (struct sockaddr*)&a4));
  call("listen LOCAL", rdma_listen(id[0], 1));
  call("listen SECOND", rdma_listen(id[1], 1));
  a4 = v4("0.0.0.0", port + 3);
  call("bind 0.0.0.0 same port", rdma_bind_addr(id[2], (struct sockaddr*)&a4));
  destroy(id, 3);

  /* REUSEADDR: binds share an address, a listener holds it alone */
  id[0] = new_id(), id[1] = new_id(), id[2] = new_id();
  a4 = v4(ip1, port + 4);
  call("REUSEADDR a", set_int(id[0], RDMA_OPTION_ID_REUSEADDR, 1));
  call("REUSEADDR b", set_int(id[1], RDMA_OPTION_ID_REUSEADDR, 1));
  call("bind a", rdma_bind_addr(id[0], (struct sockaddr*)&a4));
  call("bind b same address", rdma_bind_addr(id[1], (struct sockaddr*)&a4));
  call("listen a", rdma_listen(id[0], 1));
  rdma_destroy_id(id[1]);
  call("listen a after b is gone", rdma_listen(id[0], 1));
  call("REUSEADDR c", set_int(id[2], RDMA_OPTION_ID_REUSEADDR, 1));
  call("bind c (REUSEADDR) to the listener's address",
       rdma_bind_addr(id[2], (struct sockaddr*)&a4));
  rdma_destroy_id(id[0]);
  rdma_destroy_id(id[2]);

  /* REUSEADDR turned on after the bind (the kernel's rdma_set_reuseaddr: on
   * in any state but LISTEN, off only in IDLE): a later bind with REUSEADDR
   * shares the address; off again, or on in LISTEN, is EINVAL */
  id[0] = new_id(), id[1] = new_id(), id[2] = new_id();
  a4 = v4(ip1, port + 7);
  call("bind a", rdma_bind_addr(id[0], (struct sockaddr*)&a4));
  call("REUSEADDR b", set_int(id[1], RDMA_OPTION_ID_REUSEADDR, 1));
  call("bind b (REUSEADDR) same address", rdma_bind_addr(id[1], (struct sockaddr*)&a4));
  call("REUSEADDR 1 on bound a", set_int(id[0], RDMA_OPTION_ID_REUSEADDR, 1));
  call("REUSEADDR c", set_int(id[2], RDMA_OPTION_ID_REUSEADDR, 1));
  call("bind c (REUSEADDR) same address", rdma_bind_addr(id[2], (struct sockaddr*)&a4));
  call("REUSEADDR 0 on bound a", set_int(id[0], RDMA_OPTION_ID_REUSEADDR, 0));
  call("listen a while c shares it", rdma_listen(id[0], 1));
  rdma_destroy_id(id[2]);
  call("listen a", rdma_listen(id[0], 1));
  call("REUSEADDR 1 on listening a", set_int(id[0], RDMA_OPTION_ID_REUSEADDR, 1));
  destroy(id, 2);

  /* an address of no local device (TEST-NET-1) */
  id[0] = new_id();
  a4 = v4("192.0.2.1", port + 5);
  call("bind 192.0.2.1", rdma_bind_addr(id[0], (struct sockaddr*)&a4));
  destroy(id, 1);

  /* a port below 1024, with and without CAP_NET_BIND_SERVICE. The kernel's
   * ucma refuses every call (EACCES) on a channel opened with other
   * credentials (ib_safe_file_access): a new channel after capset. The id
   * bound as root stays, so librdmacm keeps the device's PD (allocated on
   * the uverbs fd opened before capset). */
  struct rdma_event_channel* root_ch = ch;
  struct rdma_cm_id* root_id = new_id();
  a4 = v4(ip1, 999);
  call("bind LOCAL:999 (root)", rdma_bind_addr(root_id, (struct sockaddr*)&a4));
  if (drop_net_bind_service() != 0) {
    perror("capset");
    return 1;
  }
  ch = rdma_create_event_channel();
  if (ch == NULL) return 1;
  id[0] = new_id(), id[1] = new_id();
  a4 = v4(ip1, 998);
  call("bind LOCAL:998 (no CAP_NET_BIND_SERVICE)", rdma_bind_addr(id[0], (struct sockaddr*)&a4));
  a4 = v4(ip1, port + 6);
  call("bind LOCAL:PORT+6 (no CAP_NET_BIND_SERVICE)",
       rdma_bind_addr(id[1], (struct sockaddr*)&a4));
  destroy(id, 2);
  rdma_destroy_event_channel(ch);
  rdma_destroy_id(root_id); /* the kernel's ucma may refuse it now: exit cleans up */
  rdma_destroy_event_channel(root_ch);
  printf("done\n");
  return 0;
}
