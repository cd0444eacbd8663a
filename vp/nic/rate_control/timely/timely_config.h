// Scenario parameters of TIMELY (nic.timely, used with congestion_control:
// timely); defaults and sources in timely.md.
#pragma once

#include <cstdint>

#include "vp/core/config.h"
#include "vp/core/units.h"

namespace mprdma::nic {

struct TimelyConfig {
  // Its section: nic.timely (the registry names the plug-in after it).
  static constexpr const char* kName = "timely";
  core::Duration t_low = core::Duration::from_us(50);    // T_low (§6)
  core::Duration t_high = core::Duration::from_us(500);  // T_high (§6)
  core::Duration min_rtt = core::Duration::from_us(20);  // normalises the gradient
  double ewma_alpha = 0.875;                             // weight of the newest RTT difference
  double beta = 0.8;                                     // multiplicative decrement (§6)
  core::Bandwidth add_step{10e6};                        // delta, additive step (§6)
  int64_t hai_threshold = 5;                             // gradients <= 0 in a row before HAI
  int64_t hai_multiplier = 5;                            // N: delta steps per HAI increase
  core::Bandwidth min_rate{10e6};                        // floor of the rate
  void bind(core::Binder& b);
};

}  // namespace mprdma::nic
