// TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the
// Datacenter", SIGCOMM 2015): the reaction point, the sending QP's rate
// controller, as plain C++ timed in NIC cycles. No SystemC, no packets, no
// statistics: the NIC glue hands it one RTT sample per completion (the ACK
// of a sampled segment) and asks when the next packet may start; the same
// code is the golden model for an RTL implementation.
//
// TIMELY needs no switch support: the congestion signal is the RTT the
// sender measures. Measuring it (timestamps, subtracting the serialisation
// of the segment, §3.1) is the caller's. Parameters, defaults and their
// sources are in vp/nic/rate_control/timely/timely.md.
#pragma once

#include <cstdint>

namespace mprdma::nic {

// Parameters of one reaction point, in NIC cycles and bits per second. The
// defaults are the paper's published values converted at a 250 MHz NIC
// clock (1 us = 250 cycles); timely.md gives the source of each. Section
// numbers are the TIMELY paper's; alpha and minRTT are not in its §6 list and
// come from Zhu et al., "ECN or Delay" (CoNEXT 2016), which reports them as
// TIMELY's recommended values.
struct TimelyParams {
  double cycles_per_second = 250e6;  // NIC clock: converts rates into cycles
  double line_rate_bps = 40e9;       // the port rate: a flow starts here, never exceeds it
  double min_rate_bps = 10e6;        // floor: the rate never goes below this (not in the paper)
  double ewma_alpha = 0.875;         // alpha: weight of the newest RTT difference (Zhu et al.)
  double beta = 0.8;                 // beta: multiplicative decrement factor (§6)
  double add_step_bps = 10e6;        // delta: additive increment step (§6: 10 Mbps)
  uint64_t t_low_cycles = 12500;     // T_low = 50 us (§6): below it, additive increase
  uint64_t t_high_cycles = 125000;   // T_high = 500 us (§6): above it, decrease
  uint64_t min_rtt_cycles = 5000;    // minRTT = 20 us: normalises the gradient (Zhu et al.)
  uint32_t hai_threshold = 5;        // consecutive gradients <= 0 that enter HAI; 0: no HAI
  uint32_t hai_multiplier = 5;       // N: steps of delta per increase in HAI mode (Alg. 1)
};

// Reaction point: one sending flow (QP). Starts unlimited at line rate.
// TIMELY has no timers: the rate changes only on an RTT sample, so the
// model is driven entirely by on_rtt() and on_sent().
class TimelyRp {
 public:
  // Throws std::invalid_argument for parameters the update cannot use
  // (min_rtt_cycles 0, a non-positive clock or rate, min rate above line rate).
  explicit TimelyRp(const TimelyParams& p);

  // One RTT sample `rtt_cycles` of this flow, taken at cycle `now`
  // (Algorithm 1, §4.3). The first sample only sets prev_rtt. Then:
  //   new_rtt_diff = rtt - prev_rtt;  prev_rtt = rtt
  //   rtt_diff = (1 - alpha) rtt_diff + alpha new_rtt_diff
  //   gradient = rtt_diff / minRTT
  //   rtt < T_low:     rate += delta
  //   rtt > T_high:    rate *= 1 - beta (1 - T_high / rtt)
  //   gradient <= 0:   rate += N delta   (N = hai_multiplier in HAI mode, else 1)
  //   otherwise:       rate *= 1 - beta gradient
  // and the rate is clamped to [min_rate, line_rate].
  void on_rtt(uint64_t rtt_cycles, uint64_t now);
  // A packet of `wire_bytes` (frame, FCS, preamble and gap) started at cycle
  // `now`: while the rate is limited, the next packet may start at
  // now + wire_bytes * 8 / rate.
  void on_sent(uint64_t wire_bytes, uint64_t now);
  // Moves the model's clock to `now`. TIMELY has no timers, so this only
  // keeps the interface of DcqcnRp; an earlier `now` is ignored (the clock
  // never goes backwards), as in DcqcnRp::advance.
  void advance(uint64_t now);

  // First cycle at which the next packet may start (0 when unlimited).
  uint64_t tx_allowed_at() const;

  bool limited() const { return rate_ < p_.line_rate_bps; }
  double rate_bps() const { return rate_; }
  double rtt_diff_cycles() const { return rtt_diff_; }  // EWMA of RTT differences
  double gradient() const { return gradient_; }         // last normalised gradient
  bool hai() const;                                     // in HAI mode after the last sample
  uint64_t cuts() const { return cuts_; }               // multiplicative decreases
  uint64_t samples() const { return samples_; }         // RTT samples, the first included

 private:
  TimelyParams p_;
  double rate_;
  bool have_prev_ = false;   // prev_rtt holds a sample
  uint64_t prev_rtt_ = 0;    // previous RTT sample (cycles)
  double rtt_diff_ = 0.0;    // EWMA of new_rtt_diff (cycles)
  double gradient_ = 0.0;    // rtt_diff / minRTT
  uint32_t nonpos_run_ = 0;  // consecutive samples with gradient <= 0
  double next_tx_ = 0.0;     // earliest start of the next packet (cycles)
  uint64_t now_ = 0;
  uint64_t cuts_ = 0;
  uint64_t samples_ = 0;
};

}  // namespace mprdma::nic
