// Scenario parameters of one plug-in of the NIC (nic.irn).
#pragma once

#include <cstdint>
#include <string>

#include "vp/core/config.h"
#include "vp/core/units.h"

namespace mprdma::nic {

// IRN (SIGCOMM'18) parameters; RTO_low/RTO_high and N from the paper.
struct IrnConfig {
  // Its section: nic.irn (the registry names the plug-in after it).
  static constexpr const char* kName = "irn";
  int64_t bdp_packets = 64;  // BDP-FC cap and bitmap length (power of two)
  bool bdp_fc = true;
  core::Duration rto_low = core::Duration::from_us(100);
  core::Duration rto_high = core::Duration::from_us(320);
  int64_t rto_low_threshold = 3;  // N: RTO_low with at most N packets in flight
  bool read_acks = true;          // explicit READ acknowledgements (responder recovers)
  void bind(core::Binder& b);
};

}  // namespace mprdma::nic
