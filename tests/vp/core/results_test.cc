#include "vp/core/results.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mprdma::core {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh, empty directory per test.
fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) /
                 ("mprdma_results_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

void fill(StatsRegistry& s) {
  s.counter("flow.job1.bytes", "B", "payload").set(1000);
  s.counter("nic.nic0.requester.wqes", "", "WQEs").set(7);
  s.counter("link.h0-sw.tx.packets", "packets", "").set(12);
  s.counter("pcie.nic0.tlps", "", "").set(3);
  s.counter("sim.events", "", "").set(99);
  s.counter("flow.short", "", "").set(1);  // too short to group
  Histogram& h = s.histogram("flow.job1.fct", "us", "completion time");
  for (int i = 1; i <= 1000; ++i) h.record(i);
  TimeSeries& ts = s.series("link.h0-sw.tx.queue", "B", "queue depth");
  ts.sample(0, 0);
  ts.sample(1500000, 4096);           // 1.5 us
  ts.sample(1000000000000ull, 0.25);  // 1 s
}

nlohmann::json build(const StatsRegistry& s) {
  RunMeta meta{"incast", "scenarios/incast.yaml", 42, 2500000000ull};
  return build_results(meta, s, {{"goodput_gbps", 37.5}, {"p99_us", 12.0}},
                       nlohmann::json{{"seed", 42}, {"hosts", {{"n", 2}}}});
}

TEST(Results, TopLevelAndGrouping) {
  StatsRegistry s;
  fill(s);
  nlohmann::json r = build(s);
  EXPECT_EQ(r["schema"], "mprdma-vp/results/1");
  EXPECT_EQ(r["scenario"]["name"], "incast");
  EXPECT_EQ(r["scenario"]["file"], "scenarios/incast.yaml");
  EXPECT_EQ(r["seed"], 42);
  EXPECT_DOUBLE_EQ(r["sim_time_s"].get<double>(), 0.0025);
  EXPECT_EQ(r["metrics"]["goodput_gbps"], 37.5);
  EXPECT_EQ(r["flows"]["job1"]["bytes"], 1000);
  EXPECT_EQ(r["nics"]["nic0"]["requester.wqes"], 7);
  EXPECT_EQ(r["links"]["h0-sw"]["tx.packets"], 12);
  EXPECT_EQ(r["pcie"]["nic0"]["tlps"], 3);
  EXPECT_EQ(r["other"]["sim.events"], 99);
  EXPECT_EQ(r["other"]["flow.short"], 1);
  EXPECT_EQ(r["config"]["hosts"]["n"], 2);

  const nlohmann::json& h = r["flows"]["job1"]["fct"];
  EXPECT_EQ(h["unit"], "us");
  EXPECT_EQ(h["count"], 1000);
  EXPECT_DOUBLE_EQ(h["mean"].get<double>(), 500.5);
  EXPECT_EQ(h["min"], 1.0);
  EXPECT_EQ(h["max"], 1000.0);
  EXPECT_NEAR(h["p50"].get<double>(), 500, 500 * 0.016);
  EXPECT_NEAR(h["p99"].get<double>(), 990, 990 * 0.016);
  EXPECT_NEAR(h["p999"].get<double>(), 999, 999 * 0.016);

  const nlohmann::json& ts = r["links"]["h0-sw"]["tx.queue"];
  EXPECT_EQ(ts, (nlohmann::json{
                    {"unit", "B"}, {"points", 3}, {"csv", "series/link.h0-sw.tx.queue.csv"}}));
  for (const char* key : {"schema", "scenario", "seed", "sim_time_s", "metrics", "flows", "nics",
                          "links", "pcie", "switches", "other", "config"})
    EXPECT_TRUE(r.contains(key)) << key;
  EXPECT_EQ(r.size(), 12u);
}

TEST(Results, EmptyGroupsArePresentAsObjects) {
  StatsRegistry s;
  nlohmann::json r = build_results(RunMeta{}, s, {}, nullptr);
  for (const char* key :
       {"metrics", "flows", "nics", "links", "pcie", "switches", "other", "config"}) {
    EXPECT_TRUE(r[key].is_object()) << key;
    EXPECT_TRUE(r[key].empty()) << key;
  }
}

TEST(Results, WritesByteIdenticalFilesAndCsv) {
  fs::path a = fresh_dir("a"), b = fresh_dir("b") / "nested";
  StatsRegistry first;
  fill(first);
  write_results(a.string(), build(first), first);
  {
    StatsRegistry s;
    fill(s);
    write_results(b.string(), build(s), s);
  }
  const std::string ja = read(a / "results.json");
  ASSERT_FALSE(ja.empty());
  EXPECT_EQ(ja, read(b / "results.json"));
  // Pretty, 2-space, sorted keys, final newline.
  EXPECT_EQ(ja.rfind("{\n  \"config\": {", 0), 0u) << ja.substr(0, 40);
  EXPECT_EQ(ja.back(), '\n');
  EXPECT_LT(ja.find("\"flows\""), ja.find("\"links\""));
  EXPECT_EQ(nlohmann::json::parse(ja), build(first));

  const std::string csv = read(a / "series" / "link.h0-sw.tx.queue.csv");
  EXPECT_EQ(csv, "time_s,B\n0,0\n0.0000015,4096\n1,0.25\n");
  EXPECT_EQ(csv, read(b / "series" / "link.h0-sw.tx.queue.csv"));
}

// A second run into the same directory replaces the first's series: none of
// them stays beside the new ones, and a run without series leaves none.
TEST(Results, ARunReplacesTheSeriesOfAnEarlierRunInItsDirectory) {
  fs::path d = fresh_dir("rerun");
  StatsRegistry first;
  first.series("old.only", "B", "").sample(0, 1);
  first.series("both", "B", "").sample(0, 1);
  write_results(d.string(), build(first), first);
  ASSERT_TRUE(fs::exists(d / "series" / "old.only.csv"));
  std::ofstream(d / "series" / "notes.txt") << "a user's file";
  StatsRegistry second;
  second.series("both", "B", "").sample(0, 2);
  write_results(d.string(), build(second), second);
  EXPECT_FALSE(fs::exists(d / "series" / "old.only.csv"));
  EXPECT_EQ(read(d / "series" / "both.csv"), "time_s,B\n0,2\n");
  EXPECT_TRUE(fs::exists(d / "series" / "notes.txt")) << "only CSVs are replaced";
  StatsRegistry none;
  write_results(d.string(), build(none), none);
  EXPECT_FALSE(fs::exists(d / "series" / "both.csv"));
  fs::remove(d / "series" / "notes.txt");
  write_results(d.string(), build(none), none);
  EXPECT_FALSE(fs::exists(d / "series")) << "an empty series/ goes too";
}

TEST(Results, RunInfoGoesToItsOwnFile) {
  fs::path dir = fresh_dir("run");
  write_run_info(dir.string(), {{"wall_time_s", 1.25}, {"host", "x"}});
  nlohmann::json info = nlohmann::json::parse(read(dir / "run.json"));
  EXPECT_EQ(info["wall_time_s"], 1.25);
  EXPECT_FALSE(fs::exists(dir / "results.json"));
}

TEST(Results, IoFailureNamesThePath) {
  fs::path dir = fresh_dir("blocked");
  fs::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  const std::string target = (dir / "file" / "out").string();
  StatsRegistry s;
  try {
    write_results(target, build_results(RunMeta{}, s, {}, nullptr), s);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
  }
}

TEST(Results, SecondsTextIsExact) {
  EXPECT_EQ(ps_to_seconds_text(0), "0");
  EXPECT_EQ(ps_to_seconds_text(1), "0.000000000001");
  EXPECT_EQ(ps_to_seconds_text(1234000000000ull), "1.234");
  EXPECT_EQ(ps_to_seconds_text(18000000000000000000ull), "18000000");
}

TEST(Results, SeriesCsvPathIsSanitised) {
  EXPECT_EQ(series_csv_path("nic.n0.q"), "series/nic.n0.q.csv");
  EXPECT_EQ(series_csv_path("a/b c"), "series/a_b_c.csv");
  EXPECT_EQ(series_csv_path(".."), "series/_...csv");
}

}  // namespace
}  // namespace mprdma::core
