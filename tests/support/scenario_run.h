// Fixture for tests that run whole scenarios given as YAML text: each run()
// loads the text, starts a fresh kernel and SimEnv (seed from the scenario)
// and runs the platform to the end; counter() reads a statistic that must
// exist (a missing one fails the test).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "support/files.h"
#include "support/sim_test.h"
#include "vp/core/config.h"
#include "vp/core/kernel.h"
#include "vp/platform/platform.h"
#include "vp/platform/scenario.h"

namespace mprdma::test {

class ScenarioRun : public SimTest {
 protected:
  void TearDown() override { platform.reset(); }

  // True if every job finished.
  bool run(const std::string& text) {
    const platform::ScenarioConfig cfg = platform::load_scenario(write_temp("scenario.yaml", text));
    platform.reset();
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
    platform = std::make_unique<platform::Platform>(cfg, *env);
    return platform->run();
  }
  // The first size's result of job `job` of the last run.
  const host::SizeResult& result(size_t job = 0) const {
    return platform->outcomes().at(job).results.at(0);
  }
  uint64_t counter(const std::string& path) {
    const core::Counter* c = env->stats.find_counter(path);
    EXPECT_NE(c, nullptr) << "no counter " << path;
    return c ? c->value() : 0;
  }
  // The message of the ConfigError loading `text` raises, or "".
  static std::string config_error(const std::string& text) {
    try {
      platform::load_scenario(write_temp("invalid.yaml", text));
    } catch (const core::ConfigError& e) {
      return e.what();
    }
    return "";
  }

  std::unique_ptr<platform::Platform> platform;
};

}  // namespace mprdma::test
