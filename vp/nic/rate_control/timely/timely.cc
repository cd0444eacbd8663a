#include "vp/nic/rate_control/timely/timely.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mprdma::nic {

TimelyRp::TimelyRp(const TimelyParams& p) : p_(p), rate_(p.line_rate_bps) {
  // The gradient divides by minRTT and pacing by the rate: refuse what would
  // make either meaningless rather than produce NaN rates later.
  if (p.min_rtt_cycles == 0) throw std::invalid_argument("TimelyParams: min_rtt_cycles is 0");
  if (!(p.cycles_per_second > 0) || !(p.min_rate_bps > 0) || !(p.line_rate_bps >= p.min_rate_bps))
    throw std::invalid_argument(
        "TimelyParams: need cycles_per_second > 0, 0 < min_rate <= line_rate");
}

void TimelyRp::advance(uint64_t now) { now_ = std::max(now, now_); }

bool TimelyRp::hai() const { return p_.hai_threshold && nonpos_run_ >= p_.hai_threshold; }

void TimelyRp::on_rtt(uint64_t rtt_cycles, uint64_t now) {
  advance(now);
  ++samples_;
  if (!have_prev_) {
    // Algorithm 1 starts from a previous RTT it does not say how to get. The
    // authors' published code snippet sets prev_rtt to the first sample and
    // runs the update with new_rtt_diff = 0, so the first sample already
    // moves the rate (by delta, or by the T_high rule). We only initialise:
    // a difference against nothing is no gradient, and one sample at
    // connection start should not cut a flow that has not yet been measured
    // against anything (the rate starts at line rate, not from a history).
    have_prev_ = true;
    prev_rtt_ = rtt_cycles;
    return;
  }

  const double rtt = static_cast<double>(rtt_cycles);
  const double new_rtt_diff = rtt - static_cast<double>(prev_rtt_);
  prev_rtt_ = rtt_cycles;
  rtt_diff_ = (1.0 - p_.ewma_alpha) * rtt_diff_ + p_.ewma_alpha * new_rtt_diff;
  gradient_ = rtt_diff_ / static_cast<double>(p_.min_rtt_cycles);

  // HAI counts every sample's gradient, whichever branch decides the rate:
  // the paper's condition is "gradient < 0 for five completion events", and
  // the gradient is computed for every completion. We count gradients <= 0,
  // the same test as the increase branch, so a flat RTT inside
  // [T_low, T_high] (which Algorithm 1 already treats as room to grow) also
  // accelerates. The sample that completes the run is already in HAI mode,
  // as in the authors' snippet (counter incremented, then compared >= 5).
  if (gradient_ <= 0.0)
    ++nonpos_run_;
  else
    nonpos_run_ = 0;

  if (rtt_cycles < p_.t_low_cycles) {
    // Below T_low there is no queue worth reacting to, and the RTT rises a
    // segment's own burst causes are not congestion (§4.3): increase by delta
    // whatever the gradient says.
    rate_ += p_.add_step_bps;
  } else if (rtt_cycles > p_.t_high_cycles) {
    // A gradient near zero can hide a large standing queue; T_high bounds the
    // latency whatever the gradient (§4.3): cut in proportion to how far the
    // RTT is beyond T_high.
    rate_ *= 1.0 - p_.beta * (1.0 - static_cast<double>(p_.t_high_cycles) / rtt);
    ++cuts_;
  } else if (gradient_ <= 0.0) {
    const uint32_t n = hai() ? p_.hai_multiplier : 1;
    rate_ += static_cast<double>(n) * p_.add_step_bps;
  } else {
    // A gradient above 1 / beta makes the factor negative: the paper does not
    // bound it, the clamp below takes the rate to min_rate.
    rate_ *= 1.0 - p_.beta * gradient_;
    ++cuts_;
  }
  rate_ = std::clamp(rate_, p_.min_rate_bps, p_.line_rate_bps);
}

void TimelyRp::on_sent(uint64_t wire_bytes, uint64_t now) {
  advance(now);
  if (!limited()) return;
  // Kept fractional and rounded up once, in tx_allowed_at(), so the gap is
  // never shorter than the rate allows (as in DcqcnRp).
  next_tx_ = static_cast<double>(now_) +
             static_cast<double>(wire_bytes) * 8.0 / rate_ * p_.cycles_per_second;
}

uint64_t TimelyRp::tx_allowed_at() const {
  return limited() ? static_cast<uint64_t>(std::ceil(next_tx_)) : 0;
}

}  // namespace mprdma::nic
