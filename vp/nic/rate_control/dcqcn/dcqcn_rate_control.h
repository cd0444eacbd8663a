// DCQCN behind the RateControl seam: its reaction point (DcqcnRp) per QP,
// CNPs from the receiver's notification point (nic.dcqcn.min_cnp_interval).
#pragma once

#include <memory>

#include "vp/nic/rate_control/rate_control.h"

namespace mprdma::nic {

// Its entry in the NIC's table of congestion controls (rate_control.cc).
RateControlEntry dcqcn_entry();

}  // namespace mprdma::nic
