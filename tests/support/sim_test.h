// Base fixture for tests that elaborate SystemC modules: every test starts
// with a fresh kernel at time zero, and a fresh SimEnv.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

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
  // A counter of `env` that must exist: a misspelt name fails the test
  // instead of reading 0.
  uint64_t counter_value(const std::string& path) const {
    const core::Counter* c = env->stats.find_counter(path);
    EXPECT_NE(c, nullptr) << "no counter " << path;
    return c ? c->value() : 0;
  }
  std::unique_ptr<core::SimEnv> env;
};

}  // namespace mprdma::test
