#include "mad/time.h"

#include <time.h>

#include "absl/strings/str_format.h"

namespace uscm::mad {

std::string Duration::ToString() const {
  const int64_t a = ns_ < 0 ? -ns_ : ns_;
  if (a >= 1000000000) return absl::StrFormat("%gs", seconds());
  if (a >= 1000000) return absl::StrFormat("%gms", millis());
  if (a >= 1000) return absl::StrFormat("%gus", micros());
  return absl::StrFormat("%dns", ns_);
}

TimePoint RealClock::Now() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return TimePoint::FromNanos(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
}

}  // namespace uscm::mad
