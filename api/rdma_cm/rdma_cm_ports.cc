// Ephemeral ports of a Device (DeviceOptions::ephemeral_*): the kernel's
// range, the allocator, and its undo.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "api/rdma_cm/rdma_cm.h"

namespace uscm {

// net.ipv4.ip_local_port_range ("32768\t60999"), the kernel's range for
// cma_alloc_any_port; the arguments stay as they are when it cannot be read.
void ReadLocalPortRange(uint16_t* low, uint16_t* high) {
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f == nullptr) return;
  unsigned lo = 0, hi = 0;
  if (fscanf(f, "%u %u", &lo, &hi) == 2 && lo >= 1 && lo <= hi && hi <= 65535) {
    *low = static_cast<uint16_t>(lo);
    *high = static_cast<uint16_t>(hi);
  }
  fclose(f);
}

absl::Status Device::AllocPort(CmId* id) {
  const uint16_t low = options_.ephemeral_low, high = options_.ephemeral_high;
  for (uint32_t tries = 0; tries <= uint32_t{high} - low; ++tries) {
    uint16_t p = next_port_;
    if (p < low || p > high) p = low;
    next_port_ = p >= high ? low : p + 1;
    const uint32_t key = uint32_t{static_cast<uint16_t>(id->ps_)} << 16 | p;
    if (!ports_in_use_.contains(key)) {
      ports_in_use_[key] = 1;
      if (!id->opts().reuse_addr) exclusive_ports_[key] = 1;
      id->local_.port = p;
      id->ephemeral_port_ = true;
      return absl::OkStatus();
    }
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("bind: no free port in ", low, "..", high, " (errno EADDRNOTAVAIL)"));
}

void Device::FreePort(CmId* id) {
  const uint32_t key = uint32_t{static_cast<uint16_t>(id->ps_)} << 16 | id->local_.port;
  auto it = ports_in_use_.find(key);
  if (it != ports_in_use_.end() && --it->second <= 0) ports_in_use_.erase(it);
  if (!id->opts().reuse_addr) {
    auto ex = exclusive_ports_.find(key);
    if (ex != exclusive_ports_.end() && --ex->second <= 0) exclusive_ports_.erase(ex);
  }
}

}  // namespace uscm
