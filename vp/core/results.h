// Results of one run: results.json (deterministic: the same scenario, seed
// and code give a byte-identical file), one CSV per time series, and
// run.json for what is not deterministic (wall-clock time, host name, ...).
// docs/results-schema.md describes the format.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "vp/core/stats.h"

namespace mprdma::core {

// Identifies the schema; bumped when a consumer would have to change.
inline constexpr const char* kResultsSchema = "mprdma-vp/results/1";

struct RunMeta {
  std::string scenario_name, scenario_file;
  uint64_t seed = 0;
  uint64_t sim_time_ps = 0;
};

// The results document: metadata, the flat `metrics`, every statistic
// grouped by its path prefix (flows, nics, links, pcie, other) and the
// effective configuration. Contains no wall-clock figures.
nlohmann::json build_results(const RunMeta& meta, const StatsRegistry& stats,
                             const std::map<std::string, double>& metrics,
                             const nlohmann::json& config);

// Path of a time series' CSV relative to the results directory:
// "series/<path>.csv", with characters other than letters, digits, '.', '_'
// and '-' replaced by '_'.
std::string series_csv_path(const std::string& stat_path);

// Writes dir/results.json (2-space indent, sorted keys, final newline) and
// dir/series/<path>.csv for every time series ("time_s,<unit>" header, time
// in exact decimal seconds). Creates the directories; throws
// std::runtime_error naming the path on any I/O failure.
void write_results(const std::string& dir, const nlohmann::json& results,
                   const StatsRegistry& stats);

// Writes dir/run.json: wall-clock and host information, kept out of
// results.json so that file stays byte-identical between runs.
void write_run_info(const std::string& dir, const nlohmann::json& info);

// Exact decimal seconds of a picosecond count ("0.000001234", "12", ...).
std::string ps_to_seconds_text(uint64_t ps);

}  // namespace mprdma::core
