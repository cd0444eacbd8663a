#include "vp/nic/rate_control/dcqcn/dcqcn_config.h"

namespace mprdma::nic {

void DcqcnConfig::bind(core::Binder& b) {
  const core::Duration us1 = core::Duration::from_ps(1000000);
  const core::Duration s1 = core::Duration::from_ps(1000000000000ull);
  b.field("min_cnp_interval", min_cnp_interval,
          "Notification point: at most one CNP per QP per this interval, sent for the first "
          "CE-marked packet after it (paper: N = 50 us).",
          core::Duration{}, s1);
  b.field("g", g, "Reaction point: gain of the alpha average (paper: 1/256).", 1e-6, 1.0);
  b.field("initial_alpha", initial_alpha,
          "Alpha of a QP before its first CNP; the first cut is Rc * (1 - alpha/2) (not in "
          "the paper: 1, the first CNP halves the rate).",
          0.0, 1.0);
  b.field("alpha_update_interval", alpha_update_interval,
          "K: alpha <- (1-g) alpha once per interval without a CNP (paper: 55 us).", us1, s1);
  b.field("rate_increase_timer", rate_increase_timer,
          "T: one rate-increase event per interval since the last CNP (paper: 55 us).", us1, s1);
  b.field("byte_counter", byte_counter,
          "B: one rate-increase event per this many bytes sent (wire bytes) since the last "
          "CNP (paper: 10 MB).",
          1, uint64_t{1} << 40);
  b.field("fast_recovery_stages", fast_recovery_stages,
          "F: rate-increase events of fast recovery, Rc <- (Rt + Rc)/2, before additive "
          "increase (paper: 5).",
          0, 1000, "events");
  b.field("rate_ai", rate_ai,
          "R_AI: additive increase of the target rate per event (paper: "
          "40 Mbps).");
  b.field("rate_hai", rate_hai,
          "R_HAI: hyper increase of the target rate, times the events beyond F of the slower "
          "counter (not given by the paper: 10 R_AI, QCN's ratio).");
  b.field("min_rate", min_rate, "Floor of the current rate (not in the paper: 10 Mbps).");
  if (rate_ai.bps <= 0 || rate_hai.bps <= 0 || min_rate.bps <= 0)
    b.error("rate_ai, rate_hai and min_rate must be positive");
}

}  // namespace mprdma::nic
