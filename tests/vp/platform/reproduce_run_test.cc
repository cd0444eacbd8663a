// `mprdma-vp-sim reproduce` end to end on a tiny sweep (2 points x 2
// seeds of a short back-to-back WRITE run): every run is a child process,
// the aggregate is the mean of the per-run results.json figures, and a
// child that fails is reported by name while the others still count.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string sim_path() { return MPRDMA_SIM_PATH; }

struct Output {
  int rc = -1;
  std::string text;
};

// Runs a shell command, stdout and stderr together.
Output run(const std::string& cmd) {
  Output o;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.text.append(buf.data(), n);
  const int status = pclose(p);
  o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

const char* kScenario = R"(name: tiny-sweep
description: two modeled hosts, a few 4 KiB WRITEs
seed: 1
sample_interval: 0s
hosts:
  - {name: h0}
  - {name: h1}
links:
  - {name: wire, a: h0, b: h1}
jobs:
  - {name: w, app: write_bw, client: h0, server: h1, sizes: [4KiB], iterations: 20}
metrics:
  bw: w.4096.bw_gbps
row: T1
sweep:
  seeds: [1, 2]
  parameters:
    - {name: n, key: jobs.0.iterations, values: [20, 40], labels: [short, long]}
  metrics:
    "bw.{n}": bw
    "bw_min.{n}": min(bw)
checks:
  - {metric: bw.short, check: "> 0", role: headline}
)";

class ReproduceRun : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::path(testing::TempDir()) /
        ("reproduce_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) +
         "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    scenario_ = dir_ / "tiny.yaml";
    std::ofstream(scenario_) << kScenario;
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  fs::path dir_, scenario_;
};

TEST_F(ReproduceRun, ConfigPrintsTheEffectiveScenarioWithOverridesAndGroupsApplied) {
  const fs::path groups = dir_ / "groups.yaml";
  std::ofstream(groups) << "name: g\nfabric: {topology: leaf_spine, spines: 2, leaves: 2, "
                           "hosts_per_leaf: 2}\njob_groups:\n  - job: {app: write_bw}\n";
  const Output o = run("'" + sim_path() + "' config '" + groups.string() +
                       "' --set job_groups.0.job.iterations=7 --set nic.mtu=2048");
  ASSERT_EQ(o.rc, 0) << o.text;
  const nlohmann::json cfg = nlohmann::json::parse(o.text);
  ASSERT_EQ(cfg["jobs"].size(), 12u) << "every ordered pair of four hosts";
  EXPECT_EQ(cfg["jobs"][0]["name"], "l0h0_l0h1");
  EXPECT_EQ(cfg["jobs"][11]["iterations"], 7);
  EXPECT_EQ(cfg["nic"]["mtu"], "2KiB");
  EXPECT_EQ(cfg["jobs"][0]["tx_depth"], 128) << "defaults are filled in";
  // A bad scenario prints its error, not a configuration.
  const Output bad = run("'" + sim_path() + "' config '" + groups.string() +
                         "' --set job_groups.0.job.colour=red");
  EXPECT_EQ(bad.rc, 2) << bad.text;
  EXPECT_NE(bad.text.find("colour"), std::string::npos) << bad.text;
}

TEST_F(ReproduceRun, SeedDecidesWhatTheScenarioDrawsWhenItIsRead) {
  // A permutation group draws its pairs when the scenario is read, so
  // --seed (which reproduce passes to each run) must be known by then.
  const fs::path perm = dir_ / "perm.yaml";
  std::ofstream(perm) << "name: p\nfabric: {topology: leaf_spine, spines: 2, leaves: 2, "
                         "hosts_per_leaf: 4}\njob_groups:\n  - {pairs: permutation, "
                         "job: {app: write_bw}}\n";
  auto servers = [&](const std::string& args) {
    const Output o = run("'" + sim_path() + "' config '" + perm.string() + "' " + args);
    EXPECT_EQ(o.rc, 0) << o.text;
    const nlohmann::json cfg = nlohmann::json::parse(o.text);
    std::string out;
    for (const auto& j : cfg["jobs"]) out += j["server"].get<std::string>() + " ";
    EXPECT_EQ(cfg["seed"], std::stoi(args.substr(args.find_last_of(" =") + 1))) << args;
    return out;
  };
  const std::string two = servers("--seed 2");
  EXPECT_EQ(two, servers("--set seed=2"));
  bool differ = false;
  for (int s = 3; s <= 6 && !differ; ++s) differ = servers("--seed " + std::to_string(s)) != two;
  EXPECT_TRUE(differ) << "other seeds draw other pairs; seed 2: " << two;
}

TEST_F(ReproduceRun, AggregatesSeedsAndReportsAFailedChildWithoutLosingTheOthers) {
  // A stand-in simulator that fails the long point's seed 2 and runs the
  // real one otherwise.
  const fs::path wrapper = dir_ / "sim-wrapper.sh";
  std::ofstream(wrapper) << "#!/bin/sh\n"
                         << "case \"$*\" in *jobs.0.iterations=40*--seed\\ 2\\ *) "
                         << "echo 'stand-in failure' >&2; exit 3;; esac\n"
                         << "exec '" << sim_path() << "' \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  const fs::path out = dir_ / "out";
  const Output o = run("'" + sim_path() + "' reproduce '" + scenario_.string() + "' --out '" +
                       out.string() + "' --jobs 2 --sim '" + wrapper.string() + "'");
  EXPECT_EQ(o.rc, 1) << "a failed run makes the command fail\n" << o.text;
  EXPECT_NE(o.text.find("n-long seed 2: FAILED"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("stand-in failure"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("verdict: match"), std::string::npos) << o.text;

  const nlohmann::json doc = read_json(out / "results.json");
  EXPECT_EQ(doc["row"], "T1");
  ASSERT_EQ(doc["points"].size(), 2u);
  ASSERT_EQ(doc["failed_runs"].size(), 1u);
  EXPECT_NE(doc["failed_runs"][0].get<std::string>().find("n-long seed 2: exit 3"),
            std::string::npos);

  // The aggregate is the mean of what each run wrote in its own results.json.
  for (const char* point : {"n-short", "n-long"}) {
    std::vector<double> per_run;
    for (int seed : {1, 2}) {
      const fs::path r = out / "runs" / point / std::to_string(seed) / "results.json";
      if (std::string(point) == "n-long" && seed == 2) {
        EXPECT_FALSE(fs::exists(r));
        continue;
      }
      ASSERT_TRUE(fs::exists(r)) << r;
      const nlohmann::json run_doc = read_json(r);
      EXPECT_EQ(run_doc["seed"], seed) << r;
      per_run.push_back(run_doc["metrics"]["bw"].get<double>());
    }
    double mean = 0;
    for (double v : per_run) mean += v;
    mean /= static_cast<double>(per_run.size());
    const std::string tail = std::string(point) == "n-short" ? "short" : "long";
    const nlohmann::json& m = doc["metrics"]["bw." + tail];
    ASSERT_TRUE(m["measured"].get<bool>()) << m.dump();
    EXPECT_GT(mean, 0);
    EXPECT_DOUBLE_EQ(m["mean"].get<double>(), mean);
    EXPECT_EQ(m["values"].size(), per_run.size());
    EXPECT_DOUBLE_EQ(doc["metrics"]["bw_min." + tail]["value"].get<double>(),
                     *std::min_element(per_run.begin(), per_run.end()));
  }
  EXPECT_EQ(doc["metrics"]["bw.long"]["missing_seeds"], nlohmann::json::array({2}));
  // The points really differ: the long point ran twice the iterations.
  const nlohmann::json long1 = read_json(out / "runs/n-long/1/results.json");
  EXPECT_EQ(long1["flows"]["w"]["sizes"]["4096"]["iterations"], 40);
}

// extra_seeds runs the named point with more seeds, and only that point.
TEST_F(ReproduceRun, ExtraSeedsRunOnlyTheirPoint) {
  const fs::path out = dir_ / "out";
  const Output o =
      run("'" + sim_path() + "' reproduce '" + scenario_.string() + "' --out '" + out.string() +
          "' --jobs 2 --set 'sweep.extra_seeds=[{points: [n-long], " + "seeds: [3]}]'");
  EXPECT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("(5 runs)"), std::string::npos) << o.text;
  EXPECT_TRUE(fs::exists(out / "runs/n-long/3/results.json"));
  EXPECT_FALSE(fs::exists(out / "runs/n-short/3"));
  const nlohmann::json doc = read_json(out / "results.json");
  EXPECT_EQ(doc["metrics"]["bw.long"]["seeds"], nlohmann::json::array({1, 2, 3}));
  EXPECT_EQ(doc["metrics"]["bw.short"]["seeds"], nlohmann::json::array({1, 2}));
}

TEST_F(ReproduceRun, RowIsFoundByIdAndRunRunsTheBasePoint) {
  const Output none = run("'" + sim_path() + "' reproduce T9 --scenarios '" + dir_.string() + "'");
  EXPECT_EQ(none.rc, 2);
  EXPECT_NE(none.text.find("no scenario under"), std::string::npos) << none.text;

  const Output o = run("'" + sim_path() + "' run '" + scenario_.string() + "' --out '" +
                       (dir_ / "base").string() + "'");
  EXPECT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("has a sweep (2 points x 2 seeds); running its base scenario with seed 1"),
            std::string::npos)
      << o.text;
  const nlohmann::json doc = read_json(dir_ / "base" / "results.json");
  EXPECT_EQ(doc["flows"]["w"]["sizes"]["4096"]["iterations"], 20);
}

}  // namespace
