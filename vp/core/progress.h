// A one-line progress display for long simulations: simulated time, wall
// time, events per second and slowdown (wall time / simulated time),
// redrawn in place with a carriage return.
//
// update() is meant to be called from the simulation loop as often as every
// event, so it only counts calls and looks at the clock every
// `check_every` calls, and redraws at most every `redraw_interval`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

namespace mprdma::core {

class ProgressReporter {
 public:
  // Monotonic time since an arbitrary origin.
  using Clock = std::function<std::chrono::nanoseconds()>;

  // `enabled` is typically isatty(STDERR_FILENO): a redrawn line in a log
  // file is only noise. When disabled, nothing is ever written.
  ProgressReporter(std::ostream& os, bool enabled);
  // For tests: an injected clock and checking interval.
  ProgressReporter(std::ostream& os, bool enabled, Clock clock, uint32_t check_every = 4096,
                   std::chrono::nanoseconds redraw_interval = std::chrono::milliseconds(500));

  void update(uint64_t sim_time_ps, uint64_t events);
  // Draws the final figures and ends the line (once; later calls do nothing).
  void finish();

  uint64_t redraws() const { return redraws_; }
  // The text of the line as it would be drawn now (without '\r').
  std::string line() const;

 private:
  void draw();

  std::ostream& os_;
  bool enabled_;
  Clock clock_;
  uint32_t check_every_;
  std::chrono::nanoseconds redraw_interval_;
  std::chrono::nanoseconds start_{0}, last_draw_{0}, now_{0};
  uint32_t calls_ = 0;
  uint64_t sim_ps_ = 0, events_ = 0;
  uint64_t redraws_ = 0;
  size_t last_width_ = 0;
  bool finished_ = false;
};

}  // namespace mprdma::core
