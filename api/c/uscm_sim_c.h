/* A C entry to the simulated two-host fabric of api/rdma_cm/rdma_cm_testing.h, so C
 * programs (tests, demos) can drive the uscm C API in virtual time: host 0 is
 * 10.0.0.1, host 1 is 10.0.0.2, the SA runs on the switch. */
#ifndef USCM_API_C_USCM_SIM_C_H_
#define USCM_API_C_USCM_SIM_C_H_

#include <stdint.h>

#include "api/c/uscm_cma.h"

#ifdef __cplusplus
extern "C" {
#endif

struct uscm_sim;
struct uscm_sim* uscm_sim_create(uint64_t seed);
void uscm_sim_destroy(struct uscm_sim* sim);
struct uscm_device* uscm_sim_device(struct uscm_sim* sim, int host);
/* Runs virtual time until `channel` has an event or `max_ms` pass; 0 if an
 * event is waiting, -1 (errno ETIMEDOUT) otherwise. */
int uscm_sim_run_until_event(struct uscm_sim* sim, struct uscm_event_channel* channel,
                             int max_ms);
/* Host `host`'s MAD path is lost for good from now on, as when its uscmd
 * exits or its umad file goes dead: every id of its device gets
 * USCM_CM_EVENT_DEVICE_REMOVAL (status -ENODEV, the detail `why`). 0, or -1
 * with errno EINVAL. */
int uscm_sim_lose_transport(struct uscm_sim* sim, int host, const char* why);

#ifdef __cplusplus
}
#endif

#endif /* USCM_API_C_USCM_SIM_C_H_ */
