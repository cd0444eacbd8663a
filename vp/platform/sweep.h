// Sweeps and reproduction rows in the scenario format.
//
// A scenario may carry a `sweep:` section: seeds, and named parameters that
// each give one scenario key (a path as for --set) a list of values. The
// points of the sweep are the product of the parameters' values (or, with
// `combine: zip`, their i-th values together); a point is the base scenario
// with "key=value" overrides applied by apply_override() (scenario.h), the
// same mechanism as --set. Every point runs once per seed.
//
// Sweep metrics are templates over the points: "goodput_gbps.{t}.loss_{pct}"
// -> "goodput" names, for every point, the per-run metric `goodput` of that
// point's runs, reduced over the seeds (mean by default, or min(...) /
// max(...)), with {t} and {pct} replaced by the point's labels.
//
// Row metadata ties a scenario to a row of the reproduction table: `row`
// (its id, e.g. M2), `published` (metric -> the paper's figure, a number or
// text) and `checks` (verdict rules, see Check).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vp/core/config.h"

namespace mprdma::platform {

struct SweepParameter {
  std::string name;                 // placeholder in metric templates: {name}
  std::string key;                  // scenario key path, e.g. fabric.switch.pfc.enabled
  std::vector<std::string> values;  // YAML text of each value
  std::vector<std::string> labels;  // one per value; empty: the values themselves
  std::vector<std::string> also;    // further key paths set to the same value
  std::vector<std::string> with;    // per value: more "key=value" overrides, ';'-separated
  void bind(core::Binder& b);
  // The label of value i.
  std::string label(size_t i) const { return i < labels.size() ? labels[i] : values.at(i); }
};

// Seeds some points run beyond the row's: a point whose figure spreads
// widely from seed to seed, where running every point that often would make
// the row too long (M8).
struct ExtraSeeds {
  std::vector<std::string> points;  // sweep point ids
  std::vector<std::string> seeds;   // integers, none of them the row's
  void bind(core::Binder& b);
};

struct SweepConfig {
  std::vector<std::string> seeds;  // explicit seeds (integers)
  int64_t seed_count = 0;          // without seeds: seed .. seed + count - 1
  std::string combine = "product";
  std::vector<SweepParameter> parameters;
  std::map<std::string, std::string> metrics;  // name template -> [mean|min|max](metric)
  std::vector<ExtraSeeds> extra_seeds;
  void bind(core::Binder& b);
  bool enabled() const {
    return !seeds.empty() || seed_count > 0 || !parameters.empty() || !metrics.empty() ||
           !extra_seeds.empty();
  }
};

// A verdict rule: `metric` compared with `check` = "<op> <rhs>", op one of
// < <= > >= ==, rhs a number, a sweep metric, or "<number> * <metric>".
// A check matches when it holds; it is partial when it holds only once the
// right-hand side is relaxed by `tolerance` (a fraction of |rhs|); == holds
// within tolerance and is partial within twice that. A metric without a
// measurement (its runs failed or produced no figure) is not-run.
//
// Every check says what it judges (`role`): the row's headline claim, the
// figure or shape the paper's text leads with, or a supporting detail. The
// row's verdict follows its headline checks only (row_verdict); supporting
// checks that fail are listed beside it. A check whose figure rests on a
// value chosen because of that same figure names that value in
// `calibrated` (declared in docs/calibration.md); a row matched through such
// a headline check reads "match (calibrated)".
struct Check {
  std::string metric;
  std::string check;
  double tolerance = 0.1;
  std::string role;        // headline | supporting
  std::string calibrated;  // "" or the fitted value the figure rests on
  bool headline() const { return role == "headline"; }
  void bind(core::Binder& b);
};

// One point of a sweep.
struct SweepPoint {
  std::string id;                             // "base" or "<name>-<label>_<name>-<label>"
  std::vector<std::string> overrides;         // "key=value", for apply_override / --set
  std::map<std::string, std::string> labels;  // parameter name -> label
};

// One sensitivity of a row: a parameter the paper does not state, moved to
// half and to double its value; `reproduce` runs the named sweep points
// (every point when none is named) with each value and every seed, and
// reports their headline metrics beside the figures as run.
struct SensitivityConfig {
  std::string key;                  // scenario key, as for --set
  std::vector<std::string> also;    // keys set to the same value (e.g. jobs.*.mtu)
  std::vector<std::string> values;  // [half, double], YAML text
  std::vector<std::string> points;  // sweep point ids; empty: every point
  std::vector<std::string> seeds;   // seeds of the variant runs (integers); empty: the row's
  std::string why;                  // why this parameter
  bool enabled() const { return !key.empty(); }
  void bind(core::Binder& b);
};
// The variant points of a sensitivity: for each chosen point, "<id>~half"
// and "<id>~double" with key=value added to its overrides.
std::vector<SweepPoint> sensitivity_points(const SensitivityConfig& s,
                                           const std::vector<SweepPoint>& points);
// The seeds the variant runs take (and the as-run figure is reduced over):
// the sensitivity's own, or the row's.
std::vector<int64_t> sensitivity_seeds(const SensitivityConfig& s,
                                       const std::vector<int64_t>& row_seeds);

// The points in order (the first parameter varies slowest); one point
// "base" without parameters; none when a parameter has no values (zip: as
// many as the shortest parameter).
std::vector<SweepPoint> sweep_points(const SweepConfig& s);
// The seeds every point runs with.
std::vector<int64_t> sweep_seeds(const SweepConfig& s, int64_t scenario_seed);
// The seeds point `id` runs with, and its metrics are reduced over: the
// row's, then the extra seeds given for it.
std::vector<int64_t> point_seeds(const SweepConfig& s, const std::string& id,
                                 const std::vector<int64_t>& row_seeds);

// A sweep metric's right-hand side: "x", "mean(x)", "min(x)" or "max(x)".
struct SweepMetricSource {
  std::string stat = "mean";
  std::string metric;
};
// Throws std::invalid_argument naming the text when it is none of those.
SweepMetricSource parse_sweep_metric(const std::string& expr);
// Replaces every {name} of `tmpl` with labels.at(name); throws
// std::invalid_argument naming an unknown or unclosed placeholder.
std::string expand_template(const std::string& tmpl,
                            const std::map<std::string, std::string>& labels);
// The sweep metric names of every point, with their source, in point order.
struct SweepMetricInstance {
  std::string name, point;
  SweepMetricSource source;
};
std::vector<SweepMetricInstance> sweep_metric_instances(const SweepConfig& s);

// A parsed Check::check.
struct CheckExpr {
  std::string op;     // < <= > >= ==
  double factor = 1;  // rhs = factor * ref, or factor alone when ref is empty
  std::string ref;
  // == 'text': the metric is a name (e.g. a bottleneck) that must equal text.
  std::optional<std::string> text;
};
// Throws std::invalid_argument naming the text.
CheckExpr parse_check(const std::string& text);

}  // namespace mprdma::platform
