#include "api/c/uscm_sim_c.h"

#include <poll.h>

#include <cerrno>
#include <memory>

#include "api/rdma_cm/rdma_cm_testing.h"

struct uscm_sim {
  std::unique_ptr<uscm::testing::SimFabric> fabric;
  uscm_device* devices[2] = {nullptr, nullptr};
};

extern "C" {

struct uscm_sim* uscm_sim_create(uint64_t seed) {
  auto f = uscm::testing::SimFabric::Create(seed);
  if (!f.ok()) return nullptr;
  auto* s = new uscm_sim();
  s->fabric = std::move(*f);
  for (int i = 0; i < 2; ++i) s->devices[i] = uscm_device_wrap(s->fabric->host(i).device.get());
  return s;
}

void uscm_sim_destroy(struct uscm_sim* sim) {
  if (sim == nullptr) return;
  for (uscm_device* d : sim->devices) uscm_device_unwrap_free(d);
  delete sim;
}

struct uscm_device* uscm_sim_device(struct uscm_sim* sim, int host) {
  if (sim == nullptr || host < 0 || host > 1) return nullptr;
  return sim->devices[host];
}

int uscm_sim_run_until_event(struct uscm_sim* sim, struct uscm_event_channel* channel,
                             int max_ms) {
  uscm::sim::Scheduler& s = sim->fabric->scheduler();
  // An unpolled channel (fd -1) has no fd to poll: its queue says the same.
  auto readable = [channel] {
    if (channel->fd < 0) return uscm_event_channel_queued(channel) > 0;
    pollfd p{channel->fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  };
  absl::Status st =
      s.RunUntil(readable, s.Now() + uscm::mad::Duration::Millis(max_ms));
  if (st.ok()) return 0;
  errno = ETIMEDOUT;
  return -1;
}

int uscm_sim_lose_transport(struct uscm_sim* sim, int host, const char* why) {
  if (sim == nullptr || host < 0 || host > 1 || why == nullptr) {
    errno = EINVAL;
    return -1;
  }
  sim->fabric->host(host).device->node().LoseTransportForTesting(absl::UnavailableError(why));
  return 0;
}

}  // extern "C"
