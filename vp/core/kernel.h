// SystemC kernel set-up shared by the simulator and the tests.
#pragma once

namespace mprdma::core {

// Sets the 1 ps time resolution (once per process, before any sc_time).
void init_kernel();
// Discards the current SystemC kernel (all modules must be destroyed first)
// and starts a fresh one, so one process can run several simulations.
void reset_kernel();

}  // namespace mprdma::core
