// TIMELY behind the RateControl seam: its reaction point (TimelyRp) per QP,
// driven by the requester's RTT samples; no CNPs, no switch support.
#pragma once

#include <memory>

#include "vp/nic/rate_control/rate_control.h"

namespace mprdma::nic {

// Its entry in the NIC's table of congestion controls (rate_control.cc).
RateControlEntry timely_entry();

}  // namespace mprdma::nic
