// The retransmission timeout of one responder, from the response times
// measured to it: RFC 6298 (TCP's RTO) applied to MAD requests.
//
//   first sample R:   SRTT = R, RTTVAR = R / 2
//   later samples:    RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|,  SRTT = 7/8 SRTT + 1/8 R
//   RTO = clamp(SRTT + max(granularity, 4 RTTVAR), floor, bound)
//
// Before the first sample the RTO is the initial value (RFC 6298 2.1: 1 s),
// still clamped to the bound. Karn's rule (RFC 6298 3) is the caller's: a
// request that was retransmitted gives no sample, since its answer cannot be
// matched to one transmission (MAD retransmissions reuse the TID).
//
// The bound is what the responder promises: an SA advertises RespTimeValue
// in its ClassPortInfo, and an answer is due within 4.096 us * 2^RespTimeValue
// plus two packet lifetimes (IBA 13.4.6.2). Sans-IO; nothing here reads a clock.
#ifndef USCM_MAD_RTO_ESTIMATOR_H_
#define USCM_MAD_RTO_ESTIMATOR_H_

#include "mad/time.h"

namespace uscm::mad {

struct RtoConfig {
  Duration initial = Duration::Seconds(1);
  // The floor. 10 ms: ten ticks of the agent's 1 ms timer wheel (a timer is at
  // most one tick late), and 10x OpenSM's p99 answer time over ibsim (about
  // 1 ms, docs/SA.md), so a quiet SA's jitter does not trigger retransmissions;
  // a spurious one costs the SA one more query.
  Duration floor = Duration::Millis(10);
  // The clock granularity G of RFC 6298 (the agent's timer tick).
  Duration granularity = Duration::Millis(1);
  // The ceiling when the responder advertised nothing.
  Duration ceiling = Duration::Seconds(16);
};

class RtoEstimator {
 public:
  explicit RtoEstimator(const RtoConfig& config = {}) : config_(config) {}

  void AddSample(Duration rtt);
  // What the responder advertised (an answer is due within `bound`); the RTO
  // never exceeds it. Zero = none advertised (the ceiling applies).
  void SetBound(Duration bound) { bound_ = bound; }

  Duration rto() const;
  bool has_sample() const { return samples_ > 0; }
  Duration srtt() const { return srtt_; }
  Duration rttvar() const { return rttvar_; }
  uint64_t samples() const { return samples_; }
  Duration bound() const { return bound_; }

 private:
  RtoConfig config_;
  Duration srtt_;
  Duration rttvar_;
  Duration bound_;
  uint64_t samples_ = 0;
};

}  // namespace uscm::mad

#endif  // USCM_MAD_RTO_ESTIMATOR_H_
