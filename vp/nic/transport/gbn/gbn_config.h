// Scenario parameters of one plug-in of the NIC (nic.gbn).
#pragma once

#include <cstdint>
#include <string>

#include "vp/core/config.h"
#include "vp/core/units.h"

namespace mprdma::nic {

// Go-back-N (RoCEv2 baseline) parameters.
struct GbnConfig {
  // Its section: nic.gbn (the registry names the plug-in after it).
  static constexpr const char* kName = "gbn";
  // From the event that sends the requester back (a sequence NAK, a timeout,
  // a missing READ response) to its first resent packet; the QP sends
  // nothing meanwhile. 0: a hardware go-back that turns around at once.
  core::Duration go_back_delay{};
  void bind(core::Binder& b);
};

}  // namespace mprdma::nic
