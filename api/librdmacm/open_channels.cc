// See open_channels.h.
#include "api/librdmacm/open_channels.h"

#include <array>
#include <atomic>

namespace uscm::librdmacm {
namespace {

std::array<std::atomic<uscm_event_channel*>, kMaxOpenChannels> g_channels{};
std::atomic<int> g_count{0};      // entries of g_channels published
std::atomic<bool> g_overflow{false};

}  // namespace

void AddOpenChannel(uscm_event_channel* channel) {
  const int n = g_count.load(std::memory_order_relaxed);  // writers hold the library's lock
  if (n == kMaxOpenChannels) {
    g_overflow.store(true, std::memory_order_release);
    return;
  }
  g_channels[n].store(channel, std::memory_order_relaxed);
  g_count.store(n + 1, std::memory_order_release);
}

bool AnyOpenChannelQueued() {
  if (g_overflow.load(std::memory_order_acquire)) return true;
  const int n = g_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (uscm_event_channel_queued(g_channels[i].load(std::memory_order_relaxed)) > 0) return true;
  }
  return false;
}

void ClearOpenChannelsForTesting() {
  g_count.store(0, std::memory_order_release);
  g_overflow.store(false, std::memory_order_release);
}

}  // namespace uscm::librdmacm
