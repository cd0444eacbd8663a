// Aggregation of per-run metrics into sweep metrics, verdicts and the
// results document, on hand-made run records (no simulation).
#include "vp/platform/reproduce.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "vp/platform/sweep.h"

namespace mprdma::platform {
namespace {

SweepConfig two_transports() {
  SweepConfig s;
  SweepParameter t;
  t.name = "t";
  t.key = "nic.transport";
  t.values = {"mprdma", "dcqcn"};
  SweepParameter pct;
  pct.name = "pct";
  pct.key = "fabric.link.loss";
  pct.values = {"0.5%", "1%"};
  pct.labels = {"0.5", "1"};
  s.parameters = {t, pct};
  s.metrics["goodput_gbps.{t}.loss_{pct}"] = "goodput";
  s.metrics["goodput_min.{t}.loss_{pct}"] = "min(goodput)";
  return s;
}

RunRecord run(const std::string& point, int64_t seed, double goodput,
              const std::string& status = "ok") {
  RunRecord r;
  r.point = point;
  r.seed = seed;
  r.status = status;
  r.exit_code = status == "ok" ? 0 : status == "incomplete" ? 1 : 3;
  if (status != "failed") r.metrics["goodput"] = goodput;
  return r;
}

const AggregatedMetric& find(const std::vector<AggregatedMetric>& all, const std::string& name) {
  for (const AggregatedMetric& a : all)
    if (a.name == name) return a;
  throw std::runtime_error("no " + name);
}

TEST(Reproduce, MeanMinMaxStddevOverSeedsPerPoint) {
  const SweepConfig s = two_transports();
  std::vector<RunRecord> runs = {
      run("t-mprdma_pct-0.5", 1, 38), run("t-mprdma_pct-0.5", 2, 36),
      run("t-mprdma_pct-0.5", 3, 40), run("t-dcqcn_pct-0.5", 1, 17),
      run("t-dcqcn_pct-0.5", 2, 18),  run("t-dcqcn_pct-0.5", 3, 0, "failed"),
  };
  const auto all = aggregate(s, {1, 2, 3}, runs);
  ASSERT_EQ(all.size(), 8u);  // 4 points x 2 templates
  const AggregatedMetric& m = find(all, "goodput_gbps.mprdma.loss_0.5");
  EXPECT_EQ(m.point, "t-mprdma_pct-0.5");
  EXPECT_DOUBLE_EQ(m.value, 38);
  EXPECT_DOUBLE_EQ(m.mean, 38);
  EXPECT_DOUBLE_EQ(m.min, 36);
  EXPECT_DOUBLE_EQ(m.max, 40);
  EXPECT_DOUBLE_EQ(m.stddev, 2);  // sample stddev of 36, 38, 40
  EXPECT_EQ(m.values, (std::vector<double>{38, 36, 40}));
  EXPECT_TRUE(m.missing_seeds.empty());
  EXPECT_DOUBLE_EQ(find(all, "goodput_min.mprdma.loss_0.5").value, 36);
  // A failed run is missing, not a zero.
  const AggregatedMetric& d = find(all, "goodput_gbps.dcqcn.loss_0.5");
  EXPECT_DOUBLE_EQ(d.value, 17.5);
  EXPECT_EQ(d.missing_seeds, (std::vector<int64_t>{3}));
  // A point without runs is not measured.
  EXPECT_FALSE(find(all, "goodput_gbps.dcqcn.loss_1").measured());
}

TEST(Reproduce, IncompleteRunsCountAndMissingMetricsDoNot) {
  SweepConfig s;
  s.metrics["g"] = "goodput";
  RunRecord no_metric = run("base", 2, 0);
  no_metric.metrics.clear();
  const auto all = aggregate(s, {1, 2}, {run("base", 1, 5, "incomplete"), no_metric});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_DOUBLE_EQ(all[0].value, 5);
  EXPECT_DOUBLE_EQ(all[0].stddev, 0);
  EXPECT_EQ(all[0].missing_seeds, (std::vector<int64_t>{2}));
}

Check check(const std::string& metric, const std::string& text, double tol = 0.1) {
  Check c;
  c.metric = metric;
  c.check = text;
  c.tolerance = tol;
  return c;
}

TEST(Reproduce, InequalityVerdicts) {
  const std::map<std::string, double> m = {{"mp", 38}, {"dc", 17.5}, {"zero", 0}};
  EXPECT_EQ(evaluate_check(check("mp", ">= 2 * dc"), m).verdict, "match");
  // 38 >= 2.2 * 17.5 = 38.5 fails, but holds against 38.5 - 10 %.
  CheckVerdict v = evaluate_check(check("mp", ">= 2.2 * dc"), m);
  EXPECT_EQ(v.verdict, "partial");
  EXPECT_NE(v.reason.find("mp = 38"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("2.2 * dc = 38.5"), std::string::npos) << v.reason;
  EXPECT_EQ(evaluate_check(check("mp", ">= 2.2 * dc", 0), m).verdict, "mismatch");
  EXPECT_EQ(evaluate_check(check("mp", ">= 3 * dc"), m).verdict, "mismatch");
  EXPECT_EQ(evaluate_check(check("zero", "<= 0"), m).verdict, "match");
  EXPECT_EQ(evaluate_check(check("zero", "> 0"), m).verdict, "mismatch");
  EXPECT_EQ(evaluate_check(check("dc", "< 17.5"), m).verdict, "partial");
  EXPECT_EQ(evaluate_check(check("dc", "< 17.5", 0), m).verdict, "mismatch");
}

TEST(Reproduce, ApproximateEqualityVerdicts) {
  const std::map<std::string, double> m = {{"total", 110}};
  EXPECT_EQ(evaluate_check(check("total", "== 102.46"), m).verdict, "match");  // 7.4 %
  EXPECT_EQ(evaluate_check(check("total", "== 102.46", 0.05), m).verdict, "partial");
  EXPECT_EQ(evaluate_check(check("total", "== 150.68"), m).verdict, "mismatch");  // 27 %
  const CheckVerdict v = evaluate_check(check("total", "== 150.68"), m);
  EXPECT_NE(v.reason.find("off by"), std::string::npos) << v.reason;
}

TEST(Reproduce, NameValuedMetricsTakeTheNameMostSeedsGave) {
  SweepConfig s;
  SweepParameter mode;
  mode.name = "mode";
  mode.key = "jobs.0.post_list";
  mode.values = {"16", "1"};
  mode.labels = {"batched", "unbatched"};
  s.parameters = {mode};
  s.metrics["bottleneck.{mode}"] = "bottleneck";
  auto labelled = [](const std::string& point, int64_t seed, const std::string& name) {
    RunRecord r;
    r.point = point;
    r.seed = seed;
    r.status = "ok";
    r.exit_code = 0;
    r.labels["bottleneck"] = name;
    return r;
  };
  const std::vector<RunRecord> runs = {
      labelled("mode-batched", 1, "pcie.downstream.dma_read_completion"),
      labelled("mode-batched", 2, "pcie.downstream.mmio_write"),
      labelled("mode-batched", 3, "pcie.downstream.dma_read_completion"),
      labelled("mode-unbatched", 1, "port.tx"),
      labelled("mode-unbatched", 2, "pcie.downstream.mmio_write"),
  };
  const auto all = aggregate(s, {1, 2, 3}, runs);
  const AggregatedMetric& b = find(all, "bottleneck.batched");
  ASSERT_TRUE(b.is_label());
  EXPECT_TRUE(b.measured());
  EXPECT_EQ(b.label, "pcie.downstream.dma_read_completion");
  EXPECT_TRUE(b.values.empty());
  const AggregatedMetric& u = find(all, "bottleneck.unbatched");
  EXPECT_EQ(u.label, "port.tx") << "a tie goes to the earliest seed";
  EXPECT_EQ(u.missing_seeds, std::vector<int64_t>{3});

  // Checks compare names: match when every seed gave it, partial for a
  // majority, mismatch otherwise.
  const std::map<std::string, std::vector<std::string>> labels = {
      {"bottleneck.batched", b.labels}, {"bottleneck.unbatched", u.labels}};
  const std::map<std::string, double> none;
  CheckVerdict v = evaluate_check(
      check("bottleneck.batched", "== 'pcie.downstream.dma_read_completion'"), none, labels);
  EXPECT_EQ(v.verdict, "partial") << v.reason;
  EXPECT_NE(v.reason.find("2 of 3 seeds"), std::string::npos) << v.reason;
  EXPECT_EQ(evaluate_check(check("bottleneck.batched", "== 'port.tx'"), none, labels).verdict,
            "mismatch");
  EXPECT_EQ(evaluate_check(check("bottleneck.unbatched", "== 'port.tx'"), none, labels).verdict,
            "mismatch")
      << "1 of 2 is no majority";
  const std::map<std::string, std::vector<std::string>> one = {{"x", {"a", "a"}}};
  EXPECT_EQ(evaluate_check(check("x", "== 'a'"), none, one).verdict, "match");
  // A name against a number, or a number against a name: not judged.
  EXPECT_EQ(evaluate_check(check("x", "> 3"), none, one).verdict, "not-run");
  EXPECT_EQ(evaluate_check(check("n", "== 'a'"), {{"n", 3.0}}, one).verdict, "not-run");

  EXPECT_EQ(*parse_check("== 'pcie.upstream'").text, "pcie.upstream");
  for (const char* bad : {"< 'a'", "== 'a", "== ''", "== 'a'b'"})
    EXPECT_THROW(parse_check(bad), std::invalid_argument) << bad;
}

TEST(Reproduce, MissingMeasurementIsNotRun) {
  const std::map<std::string, double> m = {{"a", 1}};
  CheckVerdict v = evaluate_check(check("b", "> 0"), m);
  EXPECT_EQ(v.verdict, "not-run");
  EXPECT_NE(v.reason.find("no measurement of b"), std::string::npos);
  v = evaluate_check(check("a", "> 2 * c"), m);
  EXPECT_EQ(v.verdict, "not-run");
  EXPECT_NE(v.reason.find("no measurement of c"), std::string::npos);
}

TEST(Reproduce, RowVerdict) {
  auto vs = [](std::initializer_list<const char*> list) {
    std::vector<CheckVerdict> out;
    for (const char* s : list) out.push_back(CheckVerdict{"m", "> 0", s, ""});
    return out;
  };
  EXPECT_EQ(row_verdict({}), "not-run");
  EXPECT_EQ(row_verdict(vs({"not-run", "not-run"})), "not-run");
  EXPECT_EQ(row_verdict(vs({"match", "match"})), "match");
  EXPECT_EQ(row_verdict(vs({"mismatch", "mismatch"})), "mismatch");
  EXPECT_EQ(row_verdict(vs({"match", "mismatch"})), "partial");
  EXPECT_EQ(row_verdict(vs({"match", "not-run"})), "partial");
  EXPECT_EQ(row_verdict(vs({"partial", "match"})), "partial");
}

TEST(Reproduce, DocumentAndTable) {
  ScenarioConfig cfg;
  cfg.row = "M2";
  cfg.sweep = two_transports();
  cfg.published["goodput_gbps.mprdma.loss_0.5"] = "~38 Gbps";
  cfg.checks = {check("goodput_gbps.mprdma.loss_0.5", ">= 2 * goodput_gbps.dcqcn.loss_0.5")};
  const auto points = sweep_points(cfg.sweep);
  std::vector<RunRecord> runs = {run("t-mprdma_pct-0.5", 1, 38), run("t-dcqcn_pct-0.5", 1, 17),
                                 run("t-dcqcn_pct-1", 1, 0, "failed")};
  runs[2].error = "exit 3";
  const auto metrics = aggregate(cfg.sweep, {1}, runs);
  std::map<std::string, double> measured;
  for (const auto& a : metrics)
    if (a.measured()) measured[a.name] = a.value;
  const std::vector<CheckVerdict> verdicts = {evaluate_check(cfg.checks[0], measured)};
  const nlohmann::json doc =
      reproduce_document(cfg, "s.yaml", points, {1}, runs, metrics, verdicts);
  EXPECT_EQ(doc["row"], "M2");
  EXPECT_EQ(doc["points"].size(), 4u);
  EXPECT_EQ(doc["points"][0]["id"], "t-mprdma_pct-0.5");
  EXPECT_EQ(doc["points"][0]["runs"][0]["metrics"]["goodput"], 38.0);
  EXPECT_EQ(doc["metrics"]["goodput_gbps.mprdma.loss_0.5"]["mean"], 38.0);
  EXPECT_EQ(doc["metrics"]["goodput_gbps.mprdma.loss_1"]["measured"], false);
  EXPECT_EQ(doc["published"]["goodput_gbps.mprdma.loss_0.5"], "~38 Gbps");
  EXPECT_EQ(doc["checks"][0]["verdict"], "match");
  EXPECT_EQ(doc["verdict"], "match");
  ASSERT_EQ(doc["failed_runs"].size(), 1u);
  EXPECT_NE(doc["failed_runs"][0].get<std::string>().find("t-dcqcn_pct-1 seed 1: exit 3"),
            std::string::npos);
  std::ostringstream table;
  print_reproduce_table(table, doc);
  EXPECT_NE(table.str().find("goodput_gbps.mprdma.loss_0.5 | 38 ± 0 over 1 seed"),
            std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("~38 Gbps"), std::string::npos);
  EXPECT_NE(table.str().find("FAILED run t-dcqcn_pct-1 seed 1"), std::string::npos);
  EXPECT_NE(table.str().find("verdict: match"), std::string::npos);
}

TEST(Reproduce, FindsTheScenarioOfARow) {
  const std::string dir = testing::TempDir() + "rows_" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/sub");
  std::ofstream(dir + "/a.yaml") << "name: a\nrow: M4\n";
  std::ofstream(dir + "/sub/b.yaml") << "name: b\nrow: D1\n";
  std::ofstream(dir + "/sub/c.yaml") << "name: c\n";
  EXPECT_EQ(find_row_scenario(dir, "D1"), dir + "/sub/b.yaml");
  EXPECT_EQ(find_row_scenario(dir, "M2"), "");
  std::ofstream(dir + "/sub/d.yaml") << "name: d\nrow: M4\n";
  EXPECT_THROW(find_row_scenario(dir, "M4"), std::runtime_error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mprdma::platform
