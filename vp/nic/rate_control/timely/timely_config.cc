#include "vp/nic/rate_control/timely/timely_config.h"

namespace mprdma::nic {

void TimelyConfig::bind(core::Binder& b) {
  const core::Duration us1 = core::Duration::from_ps(1000000);
  const core::Duration s1 = core::Duration::from_ps(1000000000000ull);
  b.field("t_low", t_low,
          "T_low: an RTT sample below it raises the rate by add_step whatever the gradient "
          "(paper §6: 50 us).",
          core::Duration{}, s1);
  b.field("t_high", t_high,
          "T_high: an RTT sample above it cuts the rate by beta (1 - T_high/RTT) whatever the "
          "gradient (paper §6: 500 us).",
          us1, s1);
  if (t_high.ps <= t_low.ps) b.error("t_high must be above t_low");
  b.field("min_rtt", min_rtt,
          "minRTT: the RTT difference is divided by it to give the normalised gradient (20 us, "
          "the value reported as TIMELY's by Zhu et al., CoNEXT'16).",
          us1, s1);
  b.field("ewma_alpha", ewma_alpha,
          "alpha: weight of the newest RTT difference in its moving average (0.875, as "
          "reported by Zhu et al., CoNEXT'16).",
          1e-6, 1.0);
  b.field("beta", beta, "beta: multiplicative decrement factor (paper §6: 0.8).", 1e-6, 1.0);
  b.field("add_step", add_step, "delta: additive increment per RTT sample (paper §6: 10 Mbps).");
  b.field("hai_threshold", hai_threshold,
          "Consecutive non-positive gradients after which increases are hai_multiplier steps "
          "(hyperactive increase; paper Algorithm 1: 5). 0: never.",
          0, 1000, "samples");
  b.field("hai_multiplier", hai_multiplier,
          "N: steps of add_step per increase in HAI mode (paper Algorithm 1: 5).", 1, 1000,
          "steps");
  b.field("min_rate", min_rate, "Floor of the rate (not in the paper: 10 Mbps, as DCQCN's).");
  if (add_step.bps <= 0 || min_rate.bps <= 0) b.error("add_step and min_rate must be positive");
}

}  // namespace mprdma::nic
