// See open_channels.h.
#include "api/librdmacm/open_channels.h"

#include <sched.h>

#include <array>
#include <atomic>

namespace uscm::librdmacm {
namespace {

std::array<std::atomic<uscm_event_channel*>, kMaxOpenChannels> g_channels{};
std::atomic<int> g_count{0};      // entries of g_channels published (NULL: removed)
std::atomic<bool> g_overflow{false};
// AnyOpenChannelQueued calls under way: RemoveOpenChannel waits for none
// after it cleared the slot (seq_cst on both sides: a call either sees the
// NULL or is counted when the remover looks).
std::atomic<int> g_readers{0};

}  // namespace

void AddOpenChannel(uscm_event_channel* channel) {
  const int n = g_count.load(std::memory_order_relaxed);  // writers hold the library's lock
  for (int i = 0; i < n; ++i) {
    if (g_channels[i].load(std::memory_order_relaxed) == nullptr) {
      g_channels[i].store(channel, std::memory_order_seq_cst);
      return;
    }
  }
  if (n == kMaxOpenChannels) {
    g_overflow.store(true, std::memory_order_release);
    return;
  }
  g_channels[n].store(channel, std::memory_order_relaxed);
  g_count.store(n + 1, std::memory_order_release);
}

void RemoveOpenChannel(uscm_event_channel* channel) {
  const int n = g_count.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    if (g_channels[i].load(std::memory_order_relaxed) == channel) {
      g_channels[i].store(nullptr, std::memory_order_seq_cst);
    }
  }
  while (g_readers.load(std::memory_order_seq_cst) != 0) sched_yield();
}

bool AnyOpenChannelQueued() {
  if (g_overflow.load(std::memory_order_acquire)) return true;
  g_readers.fetch_add(1, std::memory_order_seq_cst);
  const int n = g_count.load(std::memory_order_acquire);
  bool any = false;
  for (int i = 0; i < n && !any; ++i) {
    const uscm_event_channel* channel = g_channels[i].load(std::memory_order_seq_cst);
    any = channel != nullptr && uscm_event_channel_queued(channel) > 0;
  }
  g_readers.fetch_sub(1, std::memory_order_release);
  return any;
}

void ForgetOpenChannelReadersInChild() { g_readers.store(0, std::memory_order_relaxed); }

void ClearOpenChannelsForTesting() {
  for (auto& c : g_channels) c.store(nullptr, std::memory_order_relaxed);
  g_count.store(0, std::memory_order_release);
  g_overflow.store(false, std::memory_order_release);
}

}  // namespace uscm::librdmacm
