#include "mad/iba_time.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace uscm::mad {

absl::StatusOr<IbaTimeCode> IbaTimeCode::Create(int value,
                                                absl::string_view field) {
  if (value < 0 || value > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", value, "; an IBA time value is 0..", kMax,
                     " (4.096 us * 2^t)"));
  }
  return IbaTimeCode(static_cast<uint8_t>(value));
}

Duration CmReqTimeout(IbaTimeCode packet_life_time,
                      IbaTimeCode remote_cm_response_timeout,
                      IbaTimeRounding rounding) {
  return packet_life_time.ToDuration(rounding) * 2 +
         remote_cm_response_timeout.ToDuration(rounding);
}

Duration CmRepTimeout(IbaTimeCode req_local_cm_response_timeout,
                      IbaTimeRounding rounding) {
  return req_local_cm_response_timeout.ToDuration(rounding);
}

Duration CmMraTimeout(IbaTimeCode mra_service_timeout,
                      IbaTimeCode local_ack_timeout, IbaTimeRounding rounding) {
  return mra_service_timeout.ToDuration(rounding) +
         local_ack_timeout.ToDuration(rounding);
}

Duration CmTimeWait(IbaTimeCode local_ack_timeout, IbaTimeRounding rounding) {
  return local_ack_timeout.ToDuration(rounding);
}

IbaTimeCode CmAckTimeout(IbaTimeCode ca_ack_delay,
                         IbaTimeCode packet_life_time) {
  const int delay = ca_ack_delay.value();
  int ack = packet_life_time.value() + 1;
  if (ack >= delay) {
    ack += (delay >= ack - 1) ? 1 : 0;
  } else {
    ack = delay + ((ack >= delay - 1) ? 1 : 0);
  }
  // In range by construction: min(31, ...) of non-negative values.
  return *IbaTimeCode::Create(std::min(IbaTimeCode::kMax, ack), "ack timeout");
}

}  // namespace uscm::mad
