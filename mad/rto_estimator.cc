#include "mad/rto_estimator.h"

#include <algorithm>

namespace uscm::mad {

void RtoEstimator::AddSample(Duration rtt) {
  if (rtt < Duration::Zero()) rtt = Duration::Zero();
  if (samples_++ == 0) {
    srtt_ = rtt;
    rttvar_ = rtt / 2;
    return;
  }
  const Duration diff = srtt_ > rtt ? srtt_ - rtt : rtt - srtt_;
  rttvar_ = (rttvar_ * 3 + diff) / 4;  // beta = 1/4
  srtt_ = (srtt_ * 7 + rtt) / 8;       // alpha = 1/8
}

Duration RtoEstimator::rto() const {
  Duration rto = config_.initial;
  if (samples_ > 0) rto = srtt_ + std::max(config_.granularity, rttvar_ * 4);
  const Duration upper = bound_ > Duration::Zero() ? std::min(bound_, config_.ceiling)
                                                   : config_.ceiling;
  // The floor wins over an advertised bound below it: the bound says when an
  // answer is due, the floor how fine our timers are.
  return std::max(std::min(rto, upper), config_.floor);
}

}  // namespace uscm::mad
