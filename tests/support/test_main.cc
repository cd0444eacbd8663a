// GoogleTest entry point for test executables that use SystemC.
//
// libsystemc provides main() and expects sc_main(); we provide both so that
// SystemC's own start-up runs and gtest parses its flags. Tests that build
// modules derive from SimTest (sim_test.h), which gives each test a fresh
// SystemC kernel.
#include <gtest/gtest.h>

#include <cstdlib>
#include <systemc>

#include "vp/core/kernel.h"

int sc_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mprdma::core::init_kernel();
  return RUN_ALL_TESTS();
}

int main(int argc, char** argv) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  return sc_core::sc_elab_and_sim(argc, argv);
}
