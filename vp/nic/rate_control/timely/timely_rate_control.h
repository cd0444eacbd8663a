// TIMELY behind the RateControl seam: its reaction point (TimelyRp) per QP,
// driven by the requester's RTT samples; no CNPs, no switch support.
#pragma once

#include <memory>

#include "vp/nic/rate_control/rate_control.h"

namespace mprdma::nic {

std::unique_ptr<RateControlKind> make_timely_kind(const NicConfig& cfg);

}  // namespace mprdma::nic
