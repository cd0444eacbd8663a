// A clock domain: a period in picoseconds and the arithmetic of its edges.
// Blocks count their latencies in cycles and use this to land on edges; no
// sc_clock runs.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <systemc>

namespace mprdma::core {

class ClockDomain {
 public:
  explicit ClockDomain(uint64_t period_ps = 4000) : period_ps_(period_ps) {
    if (period_ps == 0) throw std::invalid_argument("clock period must be positive");
  }
  static ClockDomain from_hz(double hz) {
    if (!(hz > 0)) throw std::invalid_argument("clock frequency must be positive");
    return ClockDomain(static_cast<uint64_t>(1e12 / hz + 0.5));
  }
  uint64_t period_ps() const { return period_ps_; }
  double hz() const { return 1e12 / static_cast<double>(period_ps_); }
  sc_core::sc_time cycles(uint64_t n) const { return sc_core::sc_time::from_value(n * period_ps_); }
  // Index of the cycle containing time t (edge at or before t).
  uint64_t cycle_at(const sc_core::sc_time& t) const { return t.value() / period_ps_; }
  // First edge at or after t.
  sc_core::sc_time edge_at_or_after(const sc_core::sc_time& t) const {
    const uint64_t v = t.value();
    return sc_core::sc_time::from_value((v + period_ps_ - 1) / period_ps_ * period_ps_);
  }
  // Absolute time n cycles after the first edge at or after now.
  sc_core::sc_time after_cycles(uint64_t n) const {
    return edge_at_or_after(sc_core::sc_time_stamp()) + cycles(n);
  }
  uint64_t now_cycle() const { return cycle_at(sc_core::sc_time_stamp()); }

 private:
  uint64_t period_ps_;
};

}  // namespace mprdma::core
