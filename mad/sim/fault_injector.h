// Middleware that wraps any Transport and injects seeded faults: drop,
// duplicate, delay, reorder and bit-flip, separately on send and on receive,
// with counters. Delayed MADs are held until due on the given clock and
// released by the next Send or Drain; a runtime polls again at
// NextDeadline(). Model: smoltcp src/phy/fault_injector.rs.
#ifndef USCM_MAD_SIM_FAULT_INJECTOR_H_
#define USCM_MAD_SIM_FAULT_INJECTOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/sim/scheduler.h"
#include "mad/time.h"
#include "mad/transport.h"

namespace uscm::sim {

// Faults for one direction. Order per MAD: drop, bit-flip, duplicate, then
// each copy is held `delay` + uniform [0, delay_jitter], plus `reorder_delay`
// with probability `reorder` (so later MADs overtake it).
struct FaultSpec {
  double drop = 0;
  double bit_flip = 0;  // flips one uniformly chosen bit
  double duplicate = 0;
  Duration delay = Duration::Zero();
  Duration delay_jitter = Duration::Zero();
  double reorder = 0;
  Duration reorder_delay = Duration::Millis(1);

  bool active() const;
};

struct FaultInjectorOptions {
  uint64_t seed = 0;  // mandatory in spirit: the same seed gives the same faults
  FaultSpec send;
  FaultSpec receive;
  size_t max_held = 4096;  // per direction; beyond it a MAD is dropped (overflow)
};

struct FaultCounters {
  uint64_t seen = 0;
  uint64_t dropped = 0;
  uint64_t bit_flipped = 0;
  uint64_t duplicated = 0;
  uint64_t delayed = 0;
  uint64_t reordered = 0;
  uint64_t overflow = 0;
  uint64_t send_errors = 0;  // inner Send failed for a held MAD
};

class FaultInjector final : public mad::ForwardingTransport {
 public:
  // InvalidArgument for a probability outside [0, 1] or a negative duration.
  static absl::StatusOr<std::unique_ptr<FaultInjector>> Create(mad::Transport& inner,
                                                               const mad::Clock& clock,
                                                               FaultInjectorOptions options);

  // A dropped or held MAD returns OK (the wire has it); when MADs go out now,
  // the inner transport's last error, if any.
  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override;
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max = SIZE_MAX) override;
  const mad::TransportCaps& caps() const override { return caps_; }

  // Sends the held MADs that are due (Send and Drain also do this).
  void ReleaseDue();
  // When a held MAD next comes due.
  absl::optional<TimePoint> NextDeadline() const;
  size_t held() const { return held_send_.size() + held_recv_.size(); }

  const FaultCounters& send_counters() const { return send_counters_; }
  const FaultCounters& receive_counters() const { return recv_counters_; }

 private:
  struct Held {
    TimePoint due;
    uint64_t seq = 0;
    mad::MadAddress addr;
    std::vector<uint8_t> data;
  };
  static bool Later(const Held& a, const Held& b) {
    return a.due != b.due ? a.due > b.due : a.seq > b.seq;
  }

  FaultInjector(mad::Transport& inner, const mad::Clock& clock, FaultInjectorOptions options);
  // Sends every held MAD that is due; the last inner error, if any.
  absl::Status SendDue();
  // Applies `spec` to one MAD; every surviving copy goes to `out` with its due time.
  void Inject(const FaultSpec& spec, FaultCounters& counters, std::vector<Held>& queue,
              const mad::MadAddress& addr, std::span<const uint8_t> mad);

  const mad::Clock& clock_;
  FaultInjectorOptions options_;
  Rng rng_;
  mad::TransportCaps caps_;
  std::vector<Held> held_send_;  // heaps on (due, seq)
  std::vector<Held> held_recv_;
  uint64_t next_seq_ = 0;
  FaultCounters send_counters_;
  FaultCounters recv_counters_;
};

}  // namespace uscm::sim

#endif  // USCM_MAD_SIM_FAULT_INJECTOR_H_
