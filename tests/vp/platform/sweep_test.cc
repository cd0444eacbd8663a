// The sweep: section and row metadata: points, seeds, metric templates and
// checks are parsed and validated, and bad keys are errors that name them.
#include "vp/platform/sweep.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/files.h"
#include "vp/core/config.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

using test::write_temp;

// A back-to-back scenario with two metrics; tests append a sweep.
const std::string kBase = R"(name: t
seed: 7
hosts:
  - {name: h0}
  - {name: h1}
links:
  - {name: wire, a: h0, b: h1}
jobs:
  - {name: w, app: write_bw, client: h0, server: h1, sizes: [4KiB], iterations: 10}
metrics:
  bw: w.4096.bw_gbps
  wire: link.wire.a2b.avg_gbps
)";

ScenarioConfig load_text(const std::string& text) {
  return load_scenario(write_temp("s.yaml", text));
}

std::string error_of(const std::string& text) {
  try {
    load_text(text);
  } catch (const core::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Sweep, ProductPointsSeedsAndMetricNames) {
  const ScenarioConfig cfg = load_text(kBase + R"(
row: X1
sweep:
  seeds: [3, 1, 2]
  parameters:
    - {name: it, key: jobs.0.iterations, values: [10, 20], labels: [short, long]}
    - {name: mtu, key: nic.mtu, values: [1024, 4096]}
  metrics:
    "bw.{it}.mtu_{mtu}": bw
    "wire_min.{it}.{mtu}": min(wire)
)");
  EXPECT_EQ(cfg.row, "X1");
  const std::vector<SweepPoint> points = sweep_points(cfg.sweep);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].id, "it-short_mtu-1024");
  EXPECT_EQ(points[1].id, "it-short_mtu-4096");
  EXPECT_EQ(points[3].id, "it-long_mtu-4096");
  EXPECT_EQ(points[3].overrides,
            (std::vector<std::string>{"jobs.0.iterations=20", "nic.mtu=4096"}));
  EXPECT_EQ(sweep_seeds(cfg.sweep, cfg.seed), (std::vector<int64_t>{3, 1, 2}));
  const auto inst = sweep_metric_instances(cfg.sweep);
  ASSERT_EQ(inst.size(), 8u);
  EXPECT_EQ(inst[0].name, "bw.short.mtu_1024");
  EXPECT_EQ(inst[0].source.stat, "mean");
  EXPECT_EQ(inst[1].name, "wire_min.short.1024");
  EXPECT_EQ(inst[1].source.stat, "min");
  EXPECT_EQ(inst[1].source.metric, "wire");
  EXPECT_EQ(inst[7].point, "it-long_mtu-4096");
}

TEST(Sweep, ZipSeedCountAndBasePoint) {
  ScenarioConfig cfg = load_text(kBase + R"(
sweep:
  seed_count: 3
  combine: zip
  parameters:
    - {name: a, key: jobs.0.iterations, values: [10, 20, 30]}
    - {name: b, key: nic.mtu, values: [1024, 2048, 4096]}
)");
  const auto points = sweep_points(cfg.sweep);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[2].id, "a-30_b-4096");
  EXPECT_EQ(sweep_seeds(cfg.sweep, cfg.seed), (std::vector<int64_t>{7, 8, 9}));
  cfg.sweep.parameters.clear();
  ASSERT_EQ(sweep_points(cfg.sweep).size(), 1u);
  EXPECT_EQ(sweep_points(cfg.sweep)[0].id, "base");
  EXPECT_TRUE(sweep_points(cfg.sweep)[0].overrides.empty());
}

// Zip may repeat a label within a parameter (a subset of a product: here
// no b = 2048 with a = x), as long as the zipped points differ.
TEST(Sweep, ZipMayRepeatALabelButNotAPoint) {
  const ScenarioConfig cfg = load_text(kBase + R"(
sweep:
  combine: zip
  parameters:
    - {name: a, key: jobs.0.iterations, values: [10, 10, 20], labels: [x, x, y]}
    - {name: b, key: nic.mtu, values: [1024, 4096, 4096]}
  metrics:
    "bw.{a}.{b}": bw
)");
  const auto points = sweep_points(cfg.sweep);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].id, "a-x_b-1024");
  EXPECT_EQ(points[1].id, "a-x_b-4096");
  EXPECT_EQ(points[2].id, "a-y_b-4096");
  const std::string twice = error_of(kBase + R"(
sweep:
  combine: zip
  parameters:
    - {name: a, key: jobs.0.iterations, values: [10, 10], labels: [x, x]}
    - {name: b, key: nic.mtu, values: [1024, 1024]}
)");
  EXPECT_NE(twice.find("combine: zip gives point 'a-x_b-1024' twice"), std::string::npos) << twice;
}

TEST(Sweep, AlsoKeysAndPerValueOverridesGoWithTheValue) {
  const ScenarioConfig cfg = load_text(kBase + R"(
sweep:
  parameters:
    - name: t
      key: nic.congestion_control
      values: [dcqcn, none]
      labels: [dcqcn, mprdma]
      with: ["nic.transport=gbn", " nic.transport=mprdma; nic.mprdma.delta=16 "]
    - {name: it, key: jobs.0.iterations, also: [jobs.0.tx_depth], values: [10, 20]}
)");
  const auto points = sweep_points(cfg.sweep);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[3].id, "t-mprdma_it-20");
  EXPECT_EQ(points[3].overrides,
            (std::vector<std::string>{"nic.congestion_control=none", "nic.transport=mprdma",
                                      "nic.mprdma.delta=16", "jobs.0.iterations=20",
                                      "jobs.0.tx_depth=20"}));
  EXPECT_EQ(points[0].overrides,
            (std::vector<std::string>{"nic.congestion_control=dcqcn", "nic.transport=gbn",
                                      "jobs.0.iterations=10", "jobs.0.tx_depth=10"}));
  // One 'with' per value, each key=value.
  EXPECT_NE(error_of(kBase + R"(
sweep:
  parameters:
    - {name: t, key: nic.transport, values: [gbn, irn], with: ["nic.ecn=true"]}
)")
                .find("'with' entries"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + R"(
sweep:
  parameters:
    - {name: t, key: nic.transport, values: [gbn], with: ["nic.ecn"]}
)")
                .find("not key=value"),
            std::string::npos);
  // An empty part (a doubled or trailing ';', or only blanks) is an error too.
  for (const char* w : {"nic.ecn=true;;nic.dcqcn.g=0.5", "nic.ecn=true;", "nic.ecn=true;  "})
    EXPECT_NE(error_of(kBase +
                       "\nsweep:\n  parameters:\n    - {name: t, key: nic.transport, "
                       "values: [gbn], with: [\"" +
                       std::string(w) + "\"]}\n")
                  .find("not key=value"),
              std::string::npos)
        << w;
}

TEST(Sweep, ScenarioWithoutSweepHasOnePointAndItsSeed) {
  const ScenarioConfig cfg = load_text(kBase);
  EXPECT_FALSE(cfg.sweep.enabled());
  EXPECT_EQ(sweep_seeds(cfg.sweep, cfg.seed), (std::vector<int64_t>{7}));
}

TEST(Sweep, UnknownParameterKeyIsAnErrorNamingItAndThePoint) {
  const std::string e = error_of(kBase + R"(
sweep:
  parameters:
    - {name: p, key: nic.mtuu, values: [1024]}
)");
  EXPECT_NE(e.find("sweep point p-1024 (nic.mtuu=1024)"), std::string::npos) << e;
  EXPECT_NE(e.find("mtuu"), std::string::npos) << e;
}

TEST(Sweep, BadParameterValueIsAnErrorNamingIt) {
  const std::string e = error_of(kBase + R"(
sweep:
  parameters:
    - {name: p, key: jobs.0.iterations, values: [10, lots]}
)");
  EXPECT_NE(e.find("sweep point p-lots (jobs.0.iterations=lots)"), std::string::npos) << e;
  EXPECT_EQ(e.find("p-10 "), std::string::npos) << e;
}

TEST(Sweep, EmptyValuesAndBadLabelsAreErrors) {
  EXPECT_NE(error_of(kBase + "sweep:\n  parameters:\n    - {name: p, key: nic.mtu, values: []}\n")
                .find("sweep parameter 'p' has no values"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "sweep:\n  parameters:\n    - {name: p, key: nic.mtu, values: [1024, "
                             "2048], labels: [a]}\n")
                .find("1 labels for 2 values"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "sweep:\n  parameters:\n    - {name: p, key: nic.mtu, values: [1024, "
                             "2048], labels: [a, a]}\n")
                .find("label 'a' is given twice"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "sweep:\n  parameters:\n    - {name: p, key: x, values: [\"a b\"]}\n")
                .find("label 'a b' may hold only"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "sweep:\n  combine: zip\n  parameters:\n    - {name: p, key: nic.mtu, "
                             "values: [1024, 2048]}\n    - {name: q, key: jobs.0.iterations, "
                             "values: [1]}\n")
                .find("combine: zip needs as many values"),
            std::string::npos);
}

TEST(Sweep, UnknownKeyInsideTheSweepSectionIsAnError) {
  const std::string e = error_of(kBase + "sweep:\n  seed: [1]\n");
  EXPECT_NE(e.find("sweep.seed"), std::string::npos) << e;
  EXPECT_NE(e.find("seeds"), std::string::npos) << e;  // the suggestion
}

TEST(Sweep, SeedsAreCheckedIntegers) {
  EXPECT_NE(error_of(kBase + "sweep:\n  seeds: [1, x]\n").find("seed 'x' is not"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "sweep:\n  seeds: [1, 1]\n").find("seed 1 is given twice"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + "sweep:\n  seeds: [1]\n  seed_count: 2\n").find("not both"),
            std::string::npos);
}

TEST(Sweep, MetricTemplatesAreChecked) {
  const std::string sweep =
      "sweep:\n  parameters:\n    - {name: p, key: jobs.0.iterations, values: [10, 20]}\n"
      "  metrics:\n";
  EXPECT_NE(error_of(kBase + sweep + "    \"bw.{q}\": bw\n").find("'{q}' is not a sweep parameter"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "    \"bw\": bw\n").find("sweep metric name 'bw' is made by"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "    \"bw.{p}\": nope\n")
                .find("names 'nope', which is not a metric of the scenario"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "    \"bw.{p}\": median(bw)\n").find("not mean, min or max"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "    \"bw.{p\": bw\n").find("unclosed"), std::string::npos);
}

TEST(Sweep, ChecksAndPublishedNameSweepMetrics) {
  const std::string sweep =
      "sweep:\n  parameters:\n    - {name: p, key: jobs.0.iterations, values: [10, 20]}\n"
      "  metrics: {\"bw.{p}\": bw}\n";
  EXPECT_EQ(error_of(kBase + sweep +
                     "published: {bw.10: \"~38 Gbps\"}\n"
                     "checks:\n  - {metric: bw.20, check: \">= 0.5 * bw.10\", tolerance: 0.05, "
                     "role: headline}\n"),
            "");
  EXPECT_NE(error_of(kBase + sweep + "published: {bw.30: x}\n")
                .find("published figure 'bw.30' is not a sweep metric"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "checks:\n  - {metric: bw.30, check: \"> 1\"}\n")
                .find("check names 'bw.30'"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "checks:\n  - {metric: bw.10, check: \"> 2 * bw.40\"}\n")
                .find("names 'bw.40', not a sweep metric"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "checks:\n  - {metric: bw.10, check: \"about 3\"}\n")
                .find("does not start with"),
            std::string::npos);
}

TEST(Sweep, ExtraSeedsNamePointsOfTheSweepAndNewSeeds) {
  const std::string sweep =
      "sweep:\n  seeds: [1, 2]\n  parameters:\n    - {name: p, key: jobs.0.iterations, values: "
      "[10, 20]}\n  metrics: {\"bw.{p}\": bw}\n";
  EXPECT_EQ(error_of(kBase + sweep + "  extra_seeds: [{points: [p-10], seeds: [3, 4]}]\n"), "");
  EXPECT_NE(error_of(kBase + sweep + "  extra_seeds: [{points: [p-30], seeds: [3]}]\n")
                .find("extra_seeds: point 'p-30' is not a point of the sweep"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "  extra_seeds: [{points: [p-10], seeds: [2]}]\n")
                .find("extra_seeds: seed 2 is already one of the row's seeds"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "  extra_seeds: [{points: [p-10], seeds: [-3]}]\n")
                .find("extra_seeds: seed '-3' is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "  extra_seeds: [{seeds: [3]}]\n")
                .find("extra_seeds: name the points that run them"),
            std::string::npos);
}

TEST(Sweep, SensitivityNamesPointsOfTheSweepAndTwoValuesThatValidate) {
  const std::string sweep =
      "sweep:\n  parameters:\n    - {name: p, key: jobs.0.iterations, values: [10, 20]}\n"
      "  metrics: {\"bw.{p}\": bw}\n";
  EXPECT_EQ(error_of(kBase + sweep +
                     "sensitivity: {key: nic.mtu, values: [2048, 4096], points: [p-10], why: x}\n"),
            "");
  EXPECT_NE(error_of(kBase + sweep + "sensitivity: {key: nic.mtu, values: [512], why: x}\n")
                .find("values must be two"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep +
                     "sensitivity: {key: nic.mtu, values: [512, 2048], "
                     "points: [p-30]}\n")
                .find("point 'p-30' is not a point of the sweep"),
            std::string::npos);
  // Its seeds must be seeds of the row (here the scenario's seed 7 only):
  // the as-run figure beside the variants is reduced over them.
  EXPECT_EQ(error_of(kBase + sweep +
                     "sensitivity: {key: nic.mtu, values: [2048, 4096], seeds: [7], why: x}\n"),
            "");
  EXPECT_NE(error_of(kBase + sweep +
                     "sensitivity: {key: nic.mtu, values: [2048, 4096], seeds: [2], why: x}\n")
                .find("seed 2 is not one of the row's seeds"),
            std::string::npos);
  EXPECT_NE(error_of(kBase + sweep +
                     "sensitivity: {key: nic.mtu, values: [2048, 4096], seeds: [x], why: x}\n")
                .find("seed 'x' is not a non-negative integer"),
            std::string::npos);
  // Each variant is validated like a sweep point: a bad value is named.
  const std::string bad =
      error_of(kBase + sweep + "sensitivity: {key: nic.mtu, values: [2048, 9000]}\n");
  EXPECT_NE(bad.find("p-10~double"), std::string::npos) << bad;
}

TEST(Sweep, EveryCheckHasARoleAndARowWithChecksHasAHeadline) {
  const std::string sweep =
      "sweep:\n  parameters:\n    - {name: p, key: jobs.0.iterations, values: [10, 20]}\n"
      "  metrics: {\"bw.{p}\": bw}\n";
  EXPECT_NE(error_of(kBase + sweep + "checks:\n  - {metric: bw.10, check: \"> 1\"}\n")
                .find("check of 'bw.10' (> 1) needs role: headline"),
            std::string::npos);
  EXPECT_NE(
      error_of(kBase + sweep + "checks:\n  - {metric: bw.10, check: \"> 1\", role: supporting}\n")
          .find("none has role: headline"),
      std::string::npos);
  EXPECT_NE(error_of(kBase + sweep + "checks:\n  - {metric: bw.10, check: \"> 1\", role: main}\n")
                .find("'main' is not allowed"),
            std::string::npos);
  EXPECT_EQ(error_of(kBase + sweep +
                     "checks:\n  - {metric: bw.10, check: \"> 1\", role: headline, "
                     "calibrated: \"x 52\"}\n  - {metric: bw.20, check: \"> 1\", role: "
                     "supporting}\n"),
            "");
}

TEST(Sweep, ParseCheckForms) {
  CheckExpr c = parse_check(">= 2 * goodput_gbps.dcqcn.loss_0.5");
  EXPECT_EQ(c.op, ">=");
  EXPECT_DOUBLE_EQ(c.factor, 2);
  EXPECT_EQ(c.ref, "goodput_gbps.dcqcn.loss_0.5");
  c = parse_check("<0");
  EXPECT_EQ(c.op, "<");
  EXPECT_DOUBLE_EQ(c.factor, 0);
  EXPECT_TRUE(c.ref.empty());
  c = parse_check("== m * 1.5");
  EXPECT_EQ(c.op, "==");
  EXPECT_DOUBLE_EQ(c.factor, 1.5);
  EXPECT_EQ(c.ref, "m");
  EXPECT_THROW(parse_check(">= 2 * 3"), std::invalid_argument);
  EXPECT_THROW(parse_check("="), std::invalid_argument);
  EXPECT_THROW(parse_check(">="), std::invalid_argument);
}

TEST(Sweep, DeadlockTermNeedsAFabric) {
  const std::string e = error_of(kBase + "  dl: fabric.deadlocks\n");
  EXPECT_NE(e.find("fabric.deadlocks needs a fabric"), std::string::npos) << e;
  const auto terms = parse_metric("fabric.deadlocks + w.4096.bw_gbps");
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0].kind, MetricTerm::Kind::kDeadlocks);
  EXPECT_EQ(terms[1].kind, MetricTerm::Kind::kJob);
}

}  // namespace
}  // namespace mprdma::platform
