// mprdma-vp-sim: the simulator executable. SystemC's own main() calls
// sc_main(); we run the command line there.
#include <csignal>
#include <cstdlib>
#include <systemc>

#include "vp/core/kernel.h"
#include "vp/sim/cli.h"

int sc_main(int argc, char** argv) {
  mprdma::core::init_kernel();
  return mprdma::sim::run_cli(argc, argv);
}

int main(int argc, char** argv) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  // A guest that goes away must not kill the simulator through a write to
  // its closed socket or pipe: the write fails and is reported instead.
  std::signal(SIGPIPE, SIG_IGN);
  return sc_core::sc_elab_and_sim(argc, argv);
}
