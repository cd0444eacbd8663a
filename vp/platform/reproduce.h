// `reproduce`: runs every point x seed of a scenario's sweep as a separate
// simulator process, aggregates the per-run metrics into the sweep metrics,
// judges them with the scenario's checks and writes the row's results.json
// (docs/results-schema.md, "Reproduction results").
//
// The aggregation and verdict functions work on plain records so they can
// be tested on hand-made results; run_reproduce() is the process runner.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vp/platform/scenario.h"
#include "vp/platform/sweep.h"

namespace mprdma::platform {

// One run: a sweep point with one seed.
struct RunRecord {
  std::string point;
  int64_t seed = 0;
  std::string dir;     // run directory, relative to the reproduce out dir
  int exit_code = -1;  // the child's exit status; -1 when it did not exit normally
  // ok: exit 0; incomplete: exit 1 with a results.json (a job did not finish
  // or failed; its metrics still count, e.g. a deadlocked run); failed: no
  // results (crash, signal, bad arguments).
  std::string status = "failed";
  std::string error;  // why it failed
  double wall_s = 0;
  std::map<std::string, double> metrics;      // results.json "metrics" that are numbers
  std::map<std::string, std::string> labels;  // ... and those that are names
};

// A sweep metric of one point, reduced over the point's seeds.
struct AggregatedMetric {
  std::string name, point;
  SweepMetricSource source;
  double value = 0;  // source.stat of the values
  double mean = 0, min = 0, max = 0;
  double stddev = 0;                   // sample standard deviation (n - 1); 0 for one value
  std::vector<int64_t> seeds;          // seeds that gave a value, in run order
  std::vector<double> values;          // their values
  std::vector<int64_t> missing_seeds;  // seeds whose run failed or lacked the metric
  // A name-valued metric (a bottleneck): the names per seed and the one
  // most seeds gave (the earliest seed's on a tie); no numbers then.
  std::vector<std::string> labels;
  std::string label;
  bool is_label() const { return !labels.empty(); }
  bool measured() const { return !values.empty() || !labels.empty(); }
};

// Every sweep metric instance of `sweep` over `runs` (runs of other points
// or seeds are ignored), in point order.
std::vector<AggregatedMetric> aggregate(const SweepConfig& sweep, const std::vector<int64_t>& seeds,
                                        const std::vector<RunRecord>& runs);

struct CheckVerdict {
  std::string metric, check;
  std::string verdict;  // match | partial | mismatch | not-run
  std::string reason;
  bool headline = false;   // the check's role
  std::string calibrated;  // Check::calibrated
  // "<metric> <check>": how the row table names a failing check.
  std::string name() const { return metric + " " + check; }
};
// Judges one check against the measured sweep metrics (name -> value;
// name-valued ones in `labels`, name -> the names per seed).
CheckVerdict evaluate_check(const Check& c, const std::map<std::string, double>& measured,
                            const std::map<std::string, std::vector<std::string>>& labels = {});
// The row's verdict, from its headline checks only:
//   not-run   no checks, or no headline check could be judged;
//   mismatch  a headline check mismatches;
//   match     every headline check matches ("match (calibrated)" when one
//             of them rests on a value fitted to its own figure);
//   partial   otherwise (a headline check partial or not judged).
// Supporting checks never change it; failing_checks() lists them.
std::string row_verdict(const std::vector<CheckVerdict>& verdicts);
// The checks that did not match, headline ones first, each as
// "<name> (<verdict>)", with " [headline]" on headline checks.
std::vector<std::string> failing_checks(const std::vector<CheckVerdict>& verdicts);

// The sensitivity's figures: for every metric a headline check reads (on
// either side) at a chosen point, its value as run, with the parameter
// halved and doubled (null where not measured); null without a
// sensitivity.
nlohmann::json sensitivity_document(const ScenarioConfig& cfg, const std::vector<int64_t>& seeds,
                                    const std::vector<RunRecord>& runs);

// The row's results document (docs/results-schema.md).
nlohmann::json reproduce_document(const ScenarioConfig& cfg, const std::string& scenario_file,
                                  const std::vector<SweepPoint>& points,
                                  const std::vector<int64_t>& seeds,
                                  const std::vector<RunRecord>& runs,
                                  const std::vector<AggregatedMetric>& metrics,
                                  const std::vector<CheckVerdict>& verdicts);
// "metric | measured (mean ± sd over seeds) | published | verdict", then
// the reasons, failed runs and the row's verdict.
void print_reproduce_table(std::ostream& os, const nlohmann::json& doc);

// The scenario under `scenarios_dir` (searched recursively, *.yaml) whose
// `row:` is `row`; "" when there is none. Throws std::runtime_error when
// two scenarios claim the row.
std::string find_row_scenario(const std::string& scenarios_dir, const std::string& row);

struct ReproduceOptions {
  std::string scenario;                // file
  std::string out;                     // default: out/reproduce/<row or name>
  int jobs = 2;                        // children at a time
  std::string sim;                     // simulator executable run for every point
  std::vector<std::string> overrides;  // --set, applied before each point's overrides
};
// Runs the sweep; progress and the table go to `os`. Returns 0 when every
// run produced results, 1 when some failed, 2 for a bad scenario. The
// verdict does not change the exit code.
int run_reproduce(const ReproduceOptions& o, std::ostream& os);

}  // namespace mprdma::platform
