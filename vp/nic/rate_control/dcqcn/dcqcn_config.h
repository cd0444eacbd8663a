// Scenario parameters of one plug-in of the NIC (nic.dcqcn).
#pragma once

#include <cstdint>
#include <string>

#include "vp/core/config.h"
#include "vp/core/units.h"

namespace mprdma::nic {

// DCQCN (Zhu et al., SIGCOMM 2015) parameters; defaults are the paper's
// where it gives one (sources in vp/nic/transport/transport.md, "DCQCN").
struct DcqcnConfig {
  // Its section: nic.dcqcn (the registry names the plug-in after it).
  static constexpr const char* kName = "dcqcn";
  // Notification point: at most one CNP per flow per this interval (N).
  core::Duration min_cnp_interval = core::Duration::from_us(50);
  // Reaction point.
  double g = 1.0 / 256;                                                // alpha gain
  double initial_alpha = 1.0;                                          // before the first CNP
  core::Duration alpha_update_interval = core::Duration::from_us(55);  // K
  core::Duration rate_increase_timer = core::Duration::from_us(55);    // T
  core::Bytes byte_counter{10000000};                                  // B, 10 MB
  int64_t fast_recovery_stages = 5;                                    // F
  core::Bandwidth rate_ai{40e6};                                       // R_AI
  core::Bandwidth rate_hai{400e6};                                     // R_HAI
  core::Bandwidth min_rate{10e6};                                      // floor of Rc
  void bind(core::Binder& b);
};

}  // namespace mprdma::nic
