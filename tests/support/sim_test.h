// Base fixture for tests that elaborate SystemC modules: every test starts
// with a fresh kernel at time zero, and a fresh SimEnv.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "vp/core/kernel.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"

namespace mprdma::test {

class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::reset_kernel();
    core::Log::reset();
    env = std::make_unique<core::SimEnv>(1);
  }
  void TearDown() override {
    // Modules owned by the test must be destroyed before the next reset;
    // tests keep them in members destroyed before this base.
  }
  std::unique_ptr<core::SimEnv> env;
};

}  // namespace mprdma::test
