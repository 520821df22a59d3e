// Strong time types shared by every layer: a Duration and a TimePoint in
// nanoseconds, and a Clock interface with a monotonic real clock and a virtual
// clock that simulations advance by hand. There is no "zero means unset":
// optional deadlines are absl::optional<TimePoint>.
#ifndef USCM_MAD_TIME_H_
#define USCM_MAD_TIME_H_

#include <compare>
#include <cstdint>
#include <string>

namespace uscm::mad {

class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration Nanos(int64_t n) { return Duration(n); }
  static constexpr Duration Micros(int64_t n) { return Duration(n * 1000); }
  static constexpr Duration Millis(int64_t n) { return Duration(n * 1000000); }
  static constexpr Duration Seconds(int64_t n) { return Duration(n * 1000000000); }
  static constexpr Duration Zero() { return Duration(0); }
  static constexpr Duration Max() { return Duration(INT64_MAX); }

  constexpr int64_t nanos() const { return ns_; }
  constexpr double micros() const { return static_cast<double>(ns_) / 1e3; }
  constexpr double millis() const { return static_cast<double>(ns_) / 1e6; }
  constexpr double seconds() const { return static_cast<double>(ns_) / 1e9; }

  constexpr Duration operator+(Duration o) const { return Duration(ns_ + o.ns_); }
  constexpr Duration operator-(Duration o) const { return Duration(ns_ - o.ns_); }
  constexpr Duration operator*(int64_t k) const { return Duration(ns_ * k); }
  constexpr Duration operator/(int64_t k) const { return Duration(ns_ / k); }
  constexpr Duration& operator+=(Duration o) { ns_ += o.ns_; return *this; }
  constexpr Duration& operator-=(Duration o) { ns_ -= o.ns_; return *this; }
  constexpr auto operator<=>(const Duration&) const = default;

  std::string ToString() const;  // "1.5ms", "4.096us", "2s"

 private:
  constexpr explicit Duration(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

// A point on one clock's timeline (nanoseconds since that clock's epoch).
class TimePoint {
 public:
  constexpr TimePoint() = default;
  static constexpr TimePoint FromNanos(int64_t n) { return TimePoint(n); }
  static constexpr TimePoint Epoch() { return TimePoint(0); }
  static constexpr TimePoint Infinite() { return TimePoint(INT64_MAX); }

  constexpr int64_t nanos() const { return ns_; }
  constexpr TimePoint operator+(Duration d) const { return TimePoint(ns_ + d.nanos()); }
  constexpr TimePoint operator-(Duration d) const { return TimePoint(ns_ - d.nanos()); }
  constexpr Duration operator-(TimePoint o) const { return Duration::Nanos(ns_ - o.ns_); }
  constexpr TimePoint& operator+=(Duration d) { ns_ += d.nanos(); return *this; }
  constexpr auto operator<=>(const TimePoint&) const = default;

 private:
  constexpr explicit TimePoint(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

// CLOCK_MONOTONIC.
class RealClock final : public Clock {
 public:
  TimePoint Now() const override;
};

// Time moves only when the owner says so; never backwards.
class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(TimePoint start = TimePoint::Epoch()) : now_(start) {}
  TimePoint Now() const override { return now_; }
  void AdvanceTo(TimePoint t) { if (t > now_) now_ = t; }
  void AdvanceBy(Duration d) { AdvanceTo(now_ + d); }

 private:
  TimePoint now_;
};

}  // namespace uscm::mad

#endif  // USCM_MAD_TIME_H_
