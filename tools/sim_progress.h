// `uscm sim --progress`: one status line on stderr for long sweeps — the run
// (k of n, and its swept parameters), connections settled, the run's virtual
// time and the wall time since the sweep started:
//
//   [#########.....] run 3/8 loss 0.05: 612000/1000000 connections, 6120.0 ms virtual, 41.2 s wall
//
// On a terminal the line is redrawn in place, at most every 0.2 s; to a file
// or pipe (--progress=always) each update is its own line, at most one every
// 5 s. The first and the last update of every run are always shown. Only
// stderr changes: the results do not depend on it.
#ifndef USCM_TOOLS_SIM_PROGRESS_H_
#define USCM_TOOLS_SIM_PROGRESS_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace uscm::tools {

class SweepProgress {
 public:
  // `terminal`: redraw one line (\r) instead of writing a line per update.
  SweepProgress(bool enabled, bool terminal);

  void StartRun(size_t run, size_t runs, std::string label);
  // `settled` of `total` connections, `virtual_ms` into the current run.
  void Update(int settled, int total, double virtual_ms);
  // Clears the terminal line (before the run's result is printed on stdout).
  void Done();

 private:
  using Clock = std::chrono::steady_clock;
  void Draw(int settled, int total, double virtual_ms, Clock::time_point now);

  bool enabled_;
  bool terminal_;
  Clock::time_point start_;
  Clock::time_point last_;
  bool drawn_in_run_ = false;
  size_t run_ = 0, runs_ = 0;
  std::string label_;
};

}  // namespace uscm::tools

#endif  // USCM_TOOLS_SIM_PROGRESS_H_
