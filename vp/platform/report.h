// What a run prints and writes: perftest-style tables per job, and the
// results.json document (core::build_results plus the per-flow results and
// the scenario's metrics).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "vp/core/sim_env.h"
#include "vp/platform/platform.h"

namespace mprdma::platform {

// One table per job in perftest's layout, sizes as rows.
void print_job_tables(std::ostream& os, const Platform& platform);

// The full results document of a finished run (deterministic: simulated
// figures only).
nlohmann::json results_document(const Platform& platform, const core::SimEnv& env,
                                const std::string& scenario_file);

}  // namespace mprdma::platform
