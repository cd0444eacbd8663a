// Aggregation of per-run metrics into sweep metrics, verdicts and the
// results document, on hand-made run records (no simulation).
#include "vp/platform/reproduce.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "vp/platform/sweep.h"

namespace mprdma::platform {
namespace {

std::string source_dir() {
  const char* s = std::getenv("MPRDMA_SOURCE_DIR");
  return s ? s : ".";
}

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

// A point with extra seeds is reduced over the row's seeds and its own;
// the other points over the row's only.
TEST(Reproduce, ExtraSeedsWidenOnlyTheirPoints) {
  SweepConfig s = two_transports();
  ExtraSeeds e;
  e.points = {"t-dcqcn_pct-0.5"};
  e.seeds = {"4", "5"};
  s.extra_seeds = {e};
  EXPECT_EQ(point_seeds(s, "t-dcqcn_pct-0.5", {1, 2}), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(point_seeds(s, "t-mprdma_pct-0.5", {1, 2}), (std::vector<int64_t>{1, 2}));
  const std::vector<RunRecord> runs = {
      run("t-mprdma_pct-0.5", 1, 38), run("t-mprdma_pct-0.5", 2, 36),
      run("t-mprdma_pct-0.5", 4, 99),  // not one of this point's seeds: ignored
      run("t-dcqcn_pct-0.5", 1, 10),  run("t-dcqcn_pct-0.5", 2, 20),
      run("t-dcqcn_pct-0.5", 4, 30),  run("t-dcqcn_pct-0.5", 5, 0, "failed")};
  const auto all = aggregate(s, {1, 2}, runs);
  const AggregatedMetric& d = find(all, "goodput_gbps.dcqcn.loss_0.5");
  EXPECT_DOUBLE_EQ(d.value, 20);
  EXPECT_EQ(d.seeds, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(d.missing_seeds, (std::vector<int64_t>{5}));
  EXPECT_DOUBLE_EQ(find(all, "goodput_gbps.mprdma.loss_0.5").value, 37);
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
  c.role = "headline";
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

// A check's verdict with its role: "h:match" is a headline check that
// matched, "s:mismatch" a supporting one that did not, "c:match" a
// calibrated headline check.
std::vector<CheckVerdict> judged(std::initializer_list<const char*> list) {
  std::vector<CheckVerdict> out;
  int i = 0;
  for (const char* text : list) {
    const std::string t = text;
    CheckVerdict v;
    v.metric = "m" + std::to_string(i++);
    v.check = "> 0";
    v.verdict = t.substr(2);
    v.headline = t[0] == 'h' || t[0] == 'c';
    if (t[0] == 'c') v.calibrated = "x 52";
    out.push_back(v);
  }
  return out;
}

TEST(Reproduce, RowVerdictWithoutChecksIsNotRun) {
  EXPECT_EQ(row_verdict({}), "reported");
  EXPECT_EQ(row_verdict(judged({"h:not-run", "s:match"})), "not-run");
}

TEST(Reproduce, RowVerdictFollowsTheHeadlineChecksOnly) {
  EXPECT_EQ(row_verdict(judged({"h:match", "h:match"})), "match");
  // A supporting check that fails leaves the row a match, listed by name.
  EXPECT_EQ(row_verdict(judged({"h:match", "s:mismatch", "s:partial"})), "match");
  // One headline mismatch makes the row a mismatch, however many match.
  EXPECT_EQ(row_verdict(judged({"h:match", "h:match", "h:mismatch", "s:match"})), "mismatch");
  EXPECT_EQ(row_verdict(judged({"h:partial", "h:mismatch"})), "mismatch");
  // Neither: partial (a headline check partial, or one not judged).
  EXPECT_EQ(row_verdict(judged({"h:match", "h:partial", "s:match"})), "partial");
  EXPECT_EQ(row_verdict(judged({"h:match", "h:not-run"})), "partial");
  // Supporting checks cannot rescue the row.
  EXPECT_EQ(row_verdict(judged({"h:partial", "s:match", "s:match"})), "partial");
}

TEST(Reproduce, RowVerdictSaysWhenAHeadlineMatchIsCalibrated) {
  EXPECT_EQ(row_verdict(judged({"c:match", "h:match"})), "match (calibrated)");
  // A calibrated check that fails is judged as any other.
  EXPECT_EQ(row_verdict(judged({"c:mismatch", "h:match"})), "mismatch");
  EXPECT_EQ(row_verdict(judged({"c:partial", "h:match"})), "partial");
  // A calibrated supporting check does not mark the row.
  std::vector<CheckVerdict> v = judged({"h:match", "s:match"});
  v[1].calibrated = "y 23";
  EXPECT_EQ(row_verdict(v), "match");
}

TEST(Reproduce, FailingChecksNameEveryCheckThatDidNotMatchHeadlineFirst) {
  const std::vector<std::string> f =
      failing_checks(judged({"s:partial", "h:match", "h:mismatch", "s:not-run", "s:match"}));
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], "m2 > 0 (mismatch) [headline]");
  EXPECT_EQ(f[1], "m0 > 0 (partial)");
  EXPECT_EQ(f[2], "m3 > 0 (not-run)");
  EXPECT_TRUE(failing_checks(judged({"h:match", "s:match"})).empty());
}

TEST(Reproduce, CheckVerdictCarriesTheRoleAndCalibration) {
  Check c = check("mp", ">= 1");
  c.role = "headline";
  c.calibrated = "pcie.posted_header_credits 52";
  const CheckVerdict v = evaluate_check(c, {{"mp", 2}});
  EXPECT_TRUE(v.headline);
  EXPECT_EQ(v.calibrated, "pcie.posted_header_credits 52");
  c.role = "supporting";
  EXPECT_FALSE(evaluate_check(c, {{"mp", 2}}).headline);
}

// A sensitivity runs the chosen points with the key at half and double
// its value, and reports only what the headline checks read, per value.
TEST(Reproduce, SensitivityRunsTheChosenPointsAtHalfAndDoubleAndReportsTheHeadline) {
  ScenarioConfig cfg;
  cfg.sweep = two_transports();
  cfg.sensitivity.key = "nic.mprdma.rto";
  cfg.sensitivity.values = {"160us", "640us"};
  cfg.sensitivity.points = {"t-mprdma_pct-0.5"};
  cfg.sensitivity.why = "the paper gives no RTO";
  const std::vector<SweepPoint> variants =
      sensitivity_points(cfg.sensitivity, sweep_points(cfg.sweep));
  ASSERT_EQ(variants.size(), 2u);
  EXPECT_EQ(variants[0].id, "t-mprdma_pct-0.5~half");
  EXPECT_EQ(variants[1].id, "t-mprdma_pct-0.5~double");
  EXPECT_EQ(variants[0].overrides.back(), "nic.mprdma.rto=160us");
  EXPECT_EQ(variants[1].overrides.back(), "nic.mprdma.rto=640us");
  // The variant keeps the point's own overrides first.
  EXPECT_EQ(variants[0].overrides.size(), sweep_points(cfg.sweep)[2].overrides.size() + 1);
  // A parameter stated in two places moves in both.
  cfg.sensitivity.also = {"jobs.*.rto"};
  const SweepPoint both = sensitivity_points(cfg.sensitivity, sweep_points(cfg.sweep))[1];
  EXPECT_EQ(both.overrides[both.overrides.size() - 2], "nic.mprdma.rto=640us");
  EXPECT_EQ(both.overrides.back(), "jobs.*.rto=640us");
  cfg.sensitivity.also.clear();
  // Every point when none is named.
  cfg.sensitivity.points.clear();
  EXPECT_EQ(sensitivity_points(cfg.sensitivity, sweep_points(cfg.sweep)).size(), 8u);
  cfg.sensitivity.points = {"t-mprdma_pct-0.5"};

  Check headline = check("goodput_gbps.mprdma.loss_0.5", ">= 2 * goodput_gbps.dcqcn.loss_0.5");
  Check supporting = check("goodput_gbps.mprdma.loss_1", "> 1");
  supporting.role = "supporting";
  cfg.checks = {headline, supporting};
  const std::vector<RunRecord> runs = {
      run("t-mprdma_pct-0.5", 1, 38),        run("t-mprdma_pct-0.5", 2, 36),
      run("t-dcqcn_pct-0.5", 1, 17),         run("t-mprdma_pct-1", 1, 30),
      run("t-mprdma_pct-0.5~half", 1, 30),   run("t-mprdma_pct-0.5~half", 2, 32),
      run("t-mprdma_pct-0.5~double", 1, 20), run("t-mprdma_pct-0.5~double", 2, 0, "failed")};
  const nlohmann::json doc = sensitivity_document(cfg, {1, 2}, runs);
  ASSERT_FALSE(doc.is_null());
  EXPECT_EQ(doc["key"], "nic.mprdma.rto");
  EXPECT_EQ(doc["why"], "the paper gives no RTO");
  const nlohmann::json& m = doc["metrics"];
  // The headline check's metric at the chosen point; the dcqcn point it
  // compares with was not chosen, the supporting check's metric is not
  // reported.
  ASSERT_TRUE(m.contains("goodput_gbps.mprdma.loss_0.5"));
  EXPECT_EQ(m.size(), 1u);
  const nlohmann::json& g = m["goodput_gbps.mprdma.loss_0.5"];
  EXPECT_DOUBLE_EQ(g["as_run"].get<double>(), 37);
  EXPECT_DOUBLE_EQ(g["half"].get<double>(), 31);
  EXPECT_DOUBLE_EQ(g["double"].get<double>(), 20);  // the failed seed left out
  EXPECT_EQ(doc["runs"].size(), 4u);
  EXPECT_EQ(doc["seeds"], nlohmann::json::array({1, 2}));
  // Variants run with fewer seeds than the row compare with the as-run
  // figure over the same seeds (38, not the two seeds' 37).
  cfg.sensitivity.seeds = {"1"};
  const nlohmann::json one = sensitivity_document(cfg, {1, 2}, runs);
  EXPECT_EQ(one["seeds"], nlohmann::json::array({1}));
  EXPECT_DOUBLE_EQ(one["metrics"]["goodput_gbps.mprdma.loss_0.5"]["as_run"].get<double>(), 38);
  EXPECT_DOUBLE_EQ(one["metrics"]["goodput_gbps.mprdma.loss_0.5"]["half"].get<double>(), 30);
  cfg.sensitivity.seeds.clear();
  // A row without headline checks (one that only reports) shows every
  // metric of the chosen points.
  cfg.checks.clear();
  const nlohmann::json all = sensitivity_document(cfg, {1, 2}, runs);
  EXPECT_TRUE(all["metrics"].contains("goodput_gbps.mprdma.loss_0.5"));
  EXPECT_FALSE(all["metrics"].contains("goodput_gbps.dcqcn.loss_0.5"));  // not a chosen point
  // No sensitivity, no document.
  cfg.sensitivity = SensitivityConfig();
  EXPECT_TRUE(sensitivity_document(cfg, {1, 2}, runs).is_null());
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
  EXPECT_EQ(doc["checks"][0]["role"], "headline");
  EXPECT_EQ(doc["verdict"], "match");
  EXPECT_TRUE(doc["failing_checks"].empty());
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

// Values a metric could take on either side of a check: `outside` makes
// the check fail (a mismatch, beyond any tolerance), `inside` makes it
// hold. Metrics here are rates, sizes, counts and times: never negative, so
// a witness below zero does not count. The right-hand metric of a ratio
// check is taken as 10.
struct Witness {
  std::map<std::string, double> measured;
  std::map<std::string, std::vector<std::string>> labels;
};

std::optional<Witness> check_witness(const Check& c, bool holds) {
  const CheckExpr e = parse_check(c.check);
  Witness w;
  if (e.text) {
    w.labels[c.metric] = {holds ? *e.text : *e.text + ".other"};
    return w;
  }
  double rhs = e.factor;
  if (!e.ref.empty()) {
    w.measured[e.ref] = 10;
    rhs = e.factor * 10;
  }
  const double slack = c.tolerance * std::fabs(rhs);
  const double step = std::max(1.0, std::fabs(rhs));
  double v = 0;
  if (e.op == "==") {
    v = holds ? rhs : rhs + 2 * slack + step;
  } else if (e.op == "<" || e.op == "<=") {
    v = holds ? (e.op == "<=" ? rhs : rhs - step / 2) : rhs + slack + step;
  } else {
    // Failing ">" needs v <= rhs - slack; failing ">=" needs v < rhs - slack.
    const double edge = rhs - slack;
    v = holds ? rhs + step : e.op == ">" ? edge : edge > 0 ? edge / 2 : -1;
  }
  if (v < 0) return std::nullopt;
  w.measured[c.metric] = v;
  return w;
}

TEST(Reproduce, EveryShippedCheckCanFailAndCanHold) {
  int checks = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(source_dir() + "/scenarios")) {
    if (entry.path().extension() != ".yaml") continue;
    const ScenarioConfig cfg = load_scenario(entry.path().string());
    for (const Check& c : cfg.checks) {
      ++checks;
      const std::string where = entry.path().filename().string() + ": " + c.metric + " " + c.check;
      const std::optional<Witness> out = check_witness(c, false);
      ASSERT_TRUE(out.has_value()) << where << ": no non-negative value fails it";
      const CheckVerdict bad = evaluate_check(c, out->measured, out->labels);
      EXPECT_EQ(bad.verdict, "mismatch") << where << ": " << bad.reason;
      const std::optional<Witness> in = check_witness(c, true);
      ASSERT_TRUE(in.has_value()) << where << ": no non-negative value satisfies it";
      const CheckVerdict good = evaluate_check(c, in->measured, in->labels);
      EXPECT_EQ(good.verdict, "match") << where << ": " << good.reason;
    }
  }
  EXPECT_GE(checks, 100);
}

TEST(Reproduce, CheckWitnessesFindChecksThatCannotFail) {
  // ">= 0" holds for every rate: no non-negative value fails it.
  EXPECT_FALSE(check_witness(check("rate", ">= 0"), false).has_value());
  EXPECT_FALSE(check_witness(check("rate", ">= 1", 1.0), false).has_value());
  EXPECT_TRUE(check_witness(check("rate", "> 1", 1.0), false).has_value());
  // "< 0" can never hold.
  EXPECT_FALSE(check_witness(check("rate", "< 0"), true).has_value());
  EXPECT_TRUE(check_witness(check("rate", "<= 0"), false).has_value());
  EXPECT_TRUE(check_witness(check("rate", "> 0", 0), false).has_value());
}

}  // namespace
}  // namespace mprdma::platform
