// Identical PathRecord queries of several clients: one on the wire.
//
// A burst of processes connecting to one host asks the SA the same
// PathRecord (SubnAdmGet with byte-identical components) at once. The first
// query goes to the wire under its router TID; an identical one from another
// client, while the first is unanswered, waits on it, and the answer goes to
// every waiter under its own TID. Clients keep their own retransmissions: a
// waiter's retry re-sends the shared query (the one on the wire may be lost),
// and when the first client goes away a waiter's retry takes the query over.
// Only single-MAD Gets are merged; GetTable answers come in RMPP transfers
// that each client acknowledges itself.
#include <algorithm>
#include <cstring>

#include "cm/router/router.h"

namespace uscm::router {
namespace {

constexpr uint8_t kSubnAdm = 0x03;
constexpr uint8_t kGet = 0x01;
constexpr uint16_t kPathRecord = 0x0035;

bool IsPathRecordGet(std::span<const uint8_t> mad) {
  return mad.size() >= 256 && mad[1] == kSubnAdm && mad[3] == kGet &&
         (uint16_t{mad[16]} << 8 | mad[17]) == kPathRecord;
}

// The query with its TID zeroed, and the destination LID.
std::string FlightKey(std::span<const uint8_t> mad, const mad::MadAddress& to) {
  std::string key(reinterpret_cast<const char*>(mad.data()), mad.size());
  std::memset(key.data() + 8, 0, 8);
  key.push_back(static_cast<char>(to.lid >> 8));
  key.push_back(static_cast<char>(to.lid));
  return key;
}

}  // namespace

bool Router::CoalescePathQuery(uint8_t slot, uint64_t client_tid, uint32_t router_tid,
                               const mad::MadAddress& to, std::span<const uint8_t> out) {
  if (!IsPathRecordGet(out) || to.has_grh) return false;
  std::string key = FlightKey(out, to);
  auto it = sa_flights_.find(key);
  if (it != sa_flights_.end()) {
    SaFlight& f = it->second;
    if (f.router_tid == router_tid) return false;  // the first client's own retry
    if (!tid_by_router_.contains(f.router_tid)) {
      // Its client went away (or its TID was evicted): this query takes over,
      // keeping the clients that waited.
      sa_flight_keys_.erase(f.router_tid);
      f.router_tid = router_tid;
      f.mad.assign(out.begin(), out.end());
      std::erase_if(f.waiters, [&](const TidEntry& w) {
        return w.slot == slot && w.client_tid == client_tid;
      });
      sa_flight_keys_[router_tid] = key;
      return false;
    }
    const bool waiting = std::any_of(f.waiters.begin(), f.waiters.end(), [&](const TidEntry& w) {
      return w.slot == slot && w.client_tid == client_tid;
    });
    if (waiting) {
      ++counters_.sa_waiter_resends;  // its timer says the shared query may be lost
      ToWire(f.to, f.mad);
    } else {
      ++counters_.sa_coalesced;
      f.waiters.push_back(TidEntry{slot, client_tid});
    }
    return true;
  }
  if (sa_flights_.size() >= options_.tid_capacity) {
    absl::erase_if(sa_flights_, [&](const auto& kv) {
      if (tid_by_router_.contains(kv.second.router_tid)) return false;
      sa_flight_keys_.erase(kv.second.router_tid);
      return true;
    });
    if (sa_flights_.size() >= options_.tid_capacity) return false;
  }
  SaFlight& f = sa_flights_[key];
  f.router_tid = router_tid;
  f.to = to;
  f.mad.assign(out.begin(), out.end());
  sa_flight_keys_[router_tid] = std::move(key);
  return false;
}

size_t Router::AnswerPathWaiters(uint32_t router_tid, const mad::ReceivedMad& m) {
  auto k = sa_flight_keys_.find(router_tid);
  if (k == sa_flight_keys_.end()) return 0;
  auto it = sa_flights_.find(k->second);
  sa_flight_keys_.erase(k);
  if (it == sa_flights_.end()) return 0;
  const std::vector<TidEntry> waiters = std::move(it->second.waiters);
  sa_flights_.erase(it);
  size_t answered = 0;
  std::vector<uint8_t> copy(m.data.begin(), m.data.end());
  for (const TidEntry& w : waiters) {
    if (LiveClient(w.slot) == nullptr) continue;
    for (int i = 0; i < 8; ++i) copy[8 + i] = static_cast<uint8_t>(w.client_tid >> (56 - 8 * i));
    ToClient(w.slot, m.from, copy);
    ++answered;
  }
  return answered;
}

void Router::ForgetPathWaiters(uint8_t slot) {
  for (auto& [key, f] : sa_flights_) {
    std::erase_if(f.waiters, [slot](const TidEntry& w) { return w.slot == slot; });
  }
}

}  // namespace uscm::router
