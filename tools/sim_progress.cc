#include "tools/sim_progress.h"

#include <cstdint>
#include <cstdio>
#include <utility>

namespace uscm::tools {

SweepProgress::SweepProgress(bool enabled, bool terminal)
    : enabled_(enabled), terminal_(terminal), start_(Clock::now()), last_(start_) {}

void SweepProgress::StartRun(size_t run, size_t runs, std::string label) {
  run_ = run;
  runs_ = runs;
  label_ = std::move(label);
  drawn_in_run_ = false;
}

void SweepProgress::Update(int settled, int total, double virtual_ms) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  const auto every = terminal_ ? std::chrono::milliseconds(200) : std::chrono::seconds(5);
  if (drawn_in_run_ && settled != total && now - last_ < every) return;
  Draw(settled, total, virtual_ms, now);
}

void SweepProgress::Draw(int settled, int total, double virtual_ms, Clock::time_point now) {
  last_ = now;
  drawn_in_run_ = true;
  constexpr int kWidth = 30;
  const int filled = total <= 0 ? kWidth : static_cast<int>(int64_t{settled} * kWidth / total);
  const double wall_s = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "%s[%-*s] run %zu/%zu %s: %d/%d connections, %.1f ms virtual, %.1f s wall%s",
               terminal_ ? "\r" : "", kWidth, std::string(filled, '#').c_str(), run_ + 1, runs_,
               label_.c_str(), settled, total, virtual_ms, wall_s, terminal_ ? " " : "\n");
  std::fflush(stderr);
}

void SweepProgress::Done() {
  if (enabled_ && terminal_) std::fputs("\r\033[K", stderr);
}

}  // namespace uscm::tools
