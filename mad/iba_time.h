// IBA time values and the CM timeout rules built on them.
//
// An IBA "time value" t (a 5-bit field in CM messages and the SA PathRecord's
// PacketLifeTime) means 4.096 us * 2^t. That is exactly 4096 << t nanoseconds, so
// every one of the 32 codes converts to a Duration without rounding. Linux's CM
// uses a coarser approximation, 1 << max(t - 8, 0) milliseconds
// (cm_convert_to_ms() in drivers/infiniband/core/cm.c); a caller that must time
// out exactly like a Linux peer can ask for that instead.
//
// Sources: IBA Vol 1 ch. 12 (CM) and the project digest
// (/work/shared/spec/ib-cm-sa-digest.md) sections 4.1, 4.4 and 4.8.
#ifndef USCM_MAD_IBA_TIME_H_
#define USCM_MAD_IBA_TIME_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mad/time.h"

namespace uscm::mad {

// How an IBA time value turns into a Duration.
enum class IbaTimeRounding {
  kExact,  // 4.096 us * 2^t, exact in nanoseconds.
  kLinux,  // 1 << max(t - 8, 0) ms, as Linux cm_convert_to_ms() computes it.
};

// A validated 5-bit IBA time value (0..31).
class IbaTimeCode {
 public:
  static constexpr int kMax = 31;

  // Checks the range; `field` names the message field for the error message.
  static absl::StatusOr<IbaTimeCode> Create(int value, absl::string_view field);

  // For constants: rejected at compile time when out of range.
  static consteval IbaTimeCode Constant(int value) {
    if (value < 0 || value > kMax) throw "IBA time value out of range 0..31";
    return IbaTimeCode(static_cast<uint8_t>(value));
  }

  constexpr uint8_t value() const { return value_; }

  // 4.096 us * 2^t = (4096 << t) ns; the largest (t = 31) is ~2.44 hours.
  constexpr Duration Exact() const {
    return Duration::Nanos(int64_t{4096} << value_);
  }
  // 1 << max(t - 8, 0) ms (Linux cm_convert_to_ms()).
  constexpr Duration LinuxApprox() const {
    return Duration::Millis(int64_t{1} << (value_ > 8 ? value_ - 8 : 0));
  }
  constexpr Duration ToDuration(IbaTimeRounding rounding) const {
    return rounding == IbaTimeRounding::kExact ? Exact() : LinuxApprox();
  }

  constexpr auto operator<=>(const IbaTimeCode&) const = default;

 private:
  constexpr explicit IbaTimeCode(uint8_t v) : value_(v) {}
  uint8_t value_;
};

// Active side, REQ retransmission timer (digest 4.1; IBA 12.7.x REQ fields):
//   2 * PacketLifeTime + RemoteCMResponseTimeout,
// where PacketLifeTime is the primary path's and RemoteCMResponseTimeout is the
// REQ field (byte 43) that bounds how long the REQ's receiver may take to answer
// (digest 4.8: not the LocalCMResponseTimeout).
Duration CmReqTimeout(IbaTimeCode packet_life_time,
                      IbaTimeCode remote_cm_response_timeout,
                      IbaTimeRounding rounding);

// Passive side, REP retransmission timer as Linux computes it (digest 4.1):
//   REQ.LocalCMResponseTimeout (byte 47), the REQ sender's own answer time.
Duration CmRepTimeout(IbaTimeCode req_local_cm_response_timeout,
                      IbaTimeRounding rounding);

// New timeout of the outstanding REQ/REP/LAP after a valid MRA (digest 4.1):
//   MRA.ServiceTimeout + the connection's local ACK timeout (av.timeout).
Duration CmMraTimeout(IbaTimeCode mra_service_timeout,
                      IbaTimeCode local_ack_timeout, IbaTimeRounding rounding);

// TimeWait duration (digest 4.4): the connection's QP local ACK timeout.
Duration CmTimeWait(IbaTimeCode local_ack_timeout, IbaTimeRounding rounding);

// The local ACK timeout code a CM places in REQ/REP for a path (digest 4.1), as
// Linux cm_ack_timeout() computes it: about log2(2^ca_ack_delay +
// 2^(packet_life_time + 1)), i.e. the larger of the two terms, plus one when the
// other is within one step of it, capped at 31.
IbaTimeCode CmAckTimeout(IbaTimeCode ca_ack_delay,
                         IbaTimeCode packet_life_time);

}  // namespace uscm::mad

#endif  // USCM_MAD_IBA_TIME_H_
