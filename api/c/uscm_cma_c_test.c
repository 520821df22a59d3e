/* Compiled as C: proves api/c/uscm_cma.h is valid C, checks errno + detailed
 * messages for misuse, and runs a librdmacm-style flow on the simulated
 * fabric through the C API only. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/c/uscm_cma.h"
#include "api/c/uscm_sim_c.h"

static int failures = 0;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n",    \
              __FILE__, __LINE__, #cond, uscm_last_error());          \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

static struct uscm_cm_event* next(struct uscm_sim* sim, struct uscm_event_channel* ch,
                                  enum uscm_cm_event_type want) {
  struct uscm_cm_event* e = NULL;
  CHECK(uscm_sim_run_until_event(sim, ch, 120000) == 0);
  CHECK(uscm_get_cm_event(ch, &e) == 0);
  if (e != NULL && e->event != want) {
    fprintf(stderr, "got %s (status %d), want %s\n", uscm_event_str(e->event), e->status,
            uscm_event_str(want));
    ++failures;
  }
  return e;
}

int main(void) {
  /* Misuse without a device. */
  struct uscm_cm_id* id = NULL;
  CHECK(uscm_create_event_channel() == NULL && errno == ENODEV);
  CHECK(strstr(uscm_last_error(), "no device") != NULL);
  CHECK(uscm_connect(NULL, NULL) == -1 && errno == EINVAL);
  CHECK(strstr(uscm_last_error(), "connect: id is NULL") != NULL);

  struct uscm_sim* sim = uscm_sim_create(5);
  CHECK(sim != NULL);
  uscm_set_default_device(uscm_sim_device(sim, 1));
  struct uscm_event_channel* ch_b = uscm_create_event_channel();
  struct uscm_event_channel* ch_a = uscm_create_event_channel_on(uscm_sim_device(sim, 0));
  CHECK(ch_a != NULL && ch_b != NULL && ch_a->fd >= 0);

  /* Listener on 10.0.0.2:7471. */
  struct uscm_cm_id* listener = NULL;
  int ctx_l = 1, ctx_a = 2;
  CHECK(uscm_create_id(ch_b, &listener, &ctx_l, USCM_PS_TCP) == 0);
  struct uscm_addr addr;
  CHECK(uscm_parse_addr("10.0.0.2:7471", &addr) == 0);
  CHECK(uscm_bind_addr(listener, &addr) == 0);
  CHECK(uscm_listen(listener, 8) == 0);

  CHECK(uscm_create_id(ch_a, &id, &ctx_a, USCM_PS_TCP) == 0);
  CHECK(uscm_connect(id, NULL) == -1 && errno == EINVAL);
  CHECK(strstr(uscm_last_error(), "expected ROUTE_RESOLVED") != NULL);
  CHECK(uscm_resolve_addr(id, NULL, &addr, 2000) == 0);
  struct uscm_cm_event* e = next(sim, ch_a, USCM_CM_EVENT_ADDR_RESOLVED);
  CHECK(e != NULL && e->id == id);
  CHECK(uscm_ack_cm_event(e) == 0);
  CHECK(uscm_resolve_route(id, 2000) == 0);
  e = next(sim, ch_a, USCM_CM_EVENT_ROUTE_RESOLVED);
  CHECK(uscm_ack_cm_event(e) == 0);

  unsigned char pd[57];
  memset(pd, 0x5a, sizeof pd);
  struct uscm_conn_param cp;
  memset(&cp, 0, sizeof cp);
  cp.private_data = pd;
  cp.private_data_len = 57;
  cp.qp_num = 0x123;
  CHECK(uscm_connect(id, &cp) == -1 && errno == EINVAL);
  CHECK(strstr(uscm_last_error(), "at most 56") != NULL);
  cp.private_data_len = 56;
  CHECK(uscm_connect(id, &cp) == 0);

  e = next(sim, ch_b, USCM_CM_EVENT_CONNECT_REQUEST);
  struct uscm_cm_id* child = e ? e->id : NULL;
  CHECK(e != NULL && e->listen_id == listener && child != NULL);
  CHECK(e != NULL && e->param.conn.private_data_len == 56);
  CHECK(e != NULL && memcmp(e->param.conn.private_data, pd, 56) == 0);
  CHECK(child != NULL && child->context == &ctx_l);
  CHECK(uscm_destroy_id(child) == -1 && errno == EBUSY);
  CHECK(uscm_ack_cm_event(e) == 0);
  struct uscm_addr peer;
  CHECK(uscm_getpeer(child, &peer) == 0 && peer.family == USCM_AF_INET && peer.ip[15] == 1);

  unsigned char rep[148];
  memset(rep, 0x33, sizeof rep);
  CHECK(uscm_reject(child, rep, 148) == 0);
  e = next(sim, ch_a, USCM_CM_EVENT_REJECTED);
  CHECK(e != NULL && e->status == 28 && e->param.conn.private_data_len == 148);
  CHECK(e != NULL && memcmp(e->param.conn.private_data, rep, 148) == 0);
  CHECK(uscm_ack_cm_event(e) == 0);

  CHECK(uscm_destroy_id(child) == 0);
  /* A handle the library never made (a freed one would be use-after-free). */
  struct uscm_cm_id bogus;
  memset(&bogus, 0, sizeof bogus);
  bogus.impl = &bogus;
  CHECK(uscm_destroy_id(&bogus) == -1 && errno == EINVAL);
  CHECK(strstr(uscm_last_error(), "unknown id") != NULL);
  CHECK(uscm_destroy_id(id) == 0);
  CHECK(uscm_destroy_id(listener) == 0);

  /* An RDMA_PS_IB id made UD (rdma_create_id2's IBV_QPT_UD): SIDR, as the
   * kernel's; RC ones are refused by a UD listener (REJ 28). */
  struct uscm_cm_id* ud_listener = NULL;
  CHECK(uscm_create_id(ch_b, &ud_listener, &ctx_l, USCM_PS_IB) == 0);
  CHECK(uscm_get_qp_type(ud_listener) == USCM_QPT_RC);
  CHECK(uscm_set_qp_type(ud_listener, (enum uscm_qp_type)3) == -1 && errno == EINVAL);
  CHECK(strstr(uscm_last_error(), "set_qp_type: 3 is not") != NULL);
  CHECK(uscm_set_qp_type(ud_listener, USCM_QPT_UD) == 0);
  CHECK(uscm_get_qp_type(ud_listener) == USCM_QPT_UD);
  CHECK(uscm_parse_addr("10.0.0.2:7472", &addr) == 0);
  CHECK(uscm_bind_addr(ud_listener, &addr) == 0);
  CHECK(uscm_listen(ud_listener, 8) == 0);
  CHECK(uscm_set_qp_type(ud_listener, USCM_QPT_RC) == -1 && errno == EINVAL);
  CHECK(strstr(uscm_last_error(), "before connect or listen") != NULL);

  struct uscm_cm_id* tcp = NULL;
  CHECK(uscm_create_id(ch_a, &tcp, &ctx_a, USCM_PS_TCP) == 0);
  CHECK(uscm_set_qp_type(tcp, USCM_QPT_UD) == -1 && errno == EINVAL);
  CHECK(strstr(uscm_last_error(), "only an RDMA_PS_IB id") != NULL);
  CHECK(uscm_set_qp_type(tcp, USCM_QPT_RC) == 0);
  CHECK(uscm_destroy_id(tcp) == 0);

  struct uscm_cm_id* ids[2] = {NULL, NULL}; /* RC, then UD */
  for (int i = 0; i < 2; ++i) {
    CHECK(uscm_create_id(ch_a, &ids[i], &ctx_a, USCM_PS_IB) == 0);
    if (i == 1) CHECK(uscm_set_qp_type(ids[i], USCM_QPT_UD) == 0);
    CHECK(uscm_resolve_addr(ids[i], NULL, &addr, 2000) == 0);
    CHECK(uscm_ack_cm_event(next(sim, ch_a, USCM_CM_EVENT_ADDR_RESOLVED)) == 0);
    CHECK(uscm_resolve_route(ids[i], 2000) == 0);
    CHECK(uscm_ack_cm_event(next(sim, ch_a, USCM_CM_EVENT_ROUTE_RESOLVED)) == 0);
    memset(&cp, 0, sizeof cp);
    cp.private_data = "sidr";
    cp.private_data_len = 4;
    cp.qp_num = 0x345;
    CHECK(uscm_connect(ids[i], &cp) == 0);
  }
  e = next(sim, ch_a, USCM_CM_EVENT_REJECTED);
  CHECK(e != NULL && e->id == ids[0] && e->status == 28);
  CHECK(uscm_ack_cm_event(e) == 0);
  e = next(sim, ch_b, USCM_CM_EVENT_CONNECT_REQUEST);
  child = e ? e->id : NULL;
  CHECK(e != NULL && e->listen_id == ud_listener && child != NULL);
  CHECK(e != NULL && e->param.ud.private_data_len >= 4 &&
        memcmp(e->param.ud.private_data, "sidr", 4) == 0);
  CHECK(child != NULL && uscm_get_qp_type(child) == USCM_QPT_UD);
  CHECK(uscm_ack_cm_event(e) == 0);
  memset(&cp, 0, sizeof cp);
  cp.qp_num = 0x456;
  CHECK(uscm_accept(child, &cp) == 0);
  e = next(sim, ch_a, USCM_CM_EVENT_ESTABLISHED);
  CHECK(e != NULL && e->id == ids[1] && e->param.ud.qp_num == 0x456);
  CHECK(e != NULL && e->param.ud.qkey == 0x01234567u); /* cma_set_default_qkey: RDMA_UDP_QKEY */
  CHECK(uscm_ack_cm_event(e) == 0);
  CHECK(uscm_destroy_id(child) == 0);
  CHECK(uscm_destroy_id(ids[0]) == 0);
  CHECK(uscm_destroy_id(ids[1]) == 0);
  CHECK(uscm_destroy_id(ud_listener) == 0);
  uscm_destroy_event_channel(ch_a);
  uscm_destroy_event_channel(ch_b);
  uscm_sim_destroy(sim);
  if (failures == 0) printf("uscm_cma_c_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
