// The write_flows workload (flow sizes from a CDF, Poisson arrivals, flow
// completion times): validation of its keys and metric terms, and runs of
// three modeled hosts on one switch.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "support/scenario_run.h"
#include "vp/host/perftest.h"

namespace mprdma::platform {
namespace {

// Two flows jobs into h1 and one out of it, 12 Gb/s offered each for 20 ms:
// web-search flows (mean 1.71 MB), ~17.5 arrivals per job.
const char* kBase = R"(name: t
seed: SEED
end_time: 400ms
nic: {mtu: 1024}
fabric:
  topology: explicit
  nodes: [{name: h0}, {name: h1}, {name: h2}, {name: sw, kind: switch}]
  links: [{a: h0, b: sw}, {a: h1, b: sw}, {a: h2, b: sw}]
  switch: {pfc: {lossless_mask: 1}}
jobs:
  - {name: a, app: write_flows, client: h0, server: h1, rate: RATE, duration: 20ms, JOB}
  - {name: b, app: write_flows, client: h2, server: h1, rate: RATE, duration: 20ms, JOB}
  - {name: c, app: write_flows, client: h1, server: h0, rate: RATE, duration: 20ms, JOB}
metrics:
  fct_avg: mean(flows.all.fct_us)
  fct_p99: pct(flows.all.fct_us,99)
  slowdown_avg: mean(flows.all.slowdown)
)";

std::string scenario(const std::string& job, int seed = 1, const std::string& rate = "12Gbps") {
  std::string t = kBase;
  t.replace(t.find("SEED"), 4, std::to_string(seed));
  for (size_t at; (at = t.find("RATE")) != std::string::npos;) t.replace(at, 4, rate);
  for (size_t at; (at = t.find("JOB")) != std::string::npos;) t.replace(at, 3, job);
  return t;
}

// The flows' time alone: 40 Gb/s of payload and no latency, a bound no flow
// can beat, so that every slowdown is at least 1.
const char* kIdeal = "after_previous: false, tx_depth: 4, ideal_rate: 40Gbps";

class WriteFlows : public test::ScenarioRun {
 protected:
  const core::Histogram& hist(const std::string& path) {
    const core::Histogram* h = env->stats.find_histogram(path);
    EXPECT_NE(h, nullptr) << path;
    static const core::Histogram empty(core::StatInfo{"", "", ""});
    return h ? *h : empty;
  }
};

TEST_F(WriteFlows, KeysAndTermsAreChecked) {
  const ScenarioConfig cfg = load_scenario(test::write_temp("f.yaml", scenario(kIdeal)));
  EXPECT_EQ(cfg.jobs.at(0).sizes.at(0).n, 30000000u) << "the largest web-search flow";
  EXPECT_EQ(cfg.jobs.at(0).flow_group, "all");
  std::string e = config_error(R"(name: t
hosts: [{name: h0}, {name: h1}]
links: [{name: w, a: h0, b: h1}]
jobs: [{name: a, app: write_flows, client: h0, server: h1, duration: 1ms}])");
  EXPECT_NE(e.find("write_flows needs rate"), std::string::npos) << e;
  e = config_error(R"(name: t
hosts: [{name: h0}, {name: h1}]
links: [{name: w, a: h0, b: h1}]
jobs: [{name: a, app: write_flows, client: h0, server: h1, rate: 1Gbps}])");
  EXPECT_NE(e.find("write_flows needs duration"), std::string::npos) << e;
  e = config_error(R"(name: t
hosts: [{name: h0}, {name: h1}]
links: [{name: w, a: h0, b: h1}]
jobs: [{name: a, app: write_bw, client: h0, server: h1, flow_group: x}])");
  EXPECT_NE(e.find("apply to write_flows only"), std::string::npos) << e;
  e = config_error(scenario("after_previous: false, ideal_base: 3us"));
  EXPECT_NE(e.find("ideal_base needs ideal_rate"), std::string::npos) << e;
  e = config_error(scenario("after_previous: false, flow_sizes: data_mining"));
  EXPECT_NE(e.find("data_mining"), std::string::npos) << e;
  std::string bad = scenario(kIdeal);
  bad.replace(bad.find("mean(flows.all.fct_us)"), 22, "mean(flows.other.fct_us)");
  e = config_error(bad);
  EXPECT_NE(e.find("flow group 'other'"), std::string::npos) << e;
  bad = scenario(kIdeal);
  bad.replace(bad.find("mean(flows.all.fct_us)"), 22, "mean(flows.all.fct_us,5)");
  e = config_error(bad);
  EXPECT_NE(e.find("mean(<histogram>)"), std::string::npos) << e;
}

TEST_F(WriteFlows, EveryFlowCompletesAndIsTimedFromItsArrival) {
  ASSERT_TRUE(run(scenario(kIdeal)));
  uint64_t flows = 0;
  double payload = 0;
  for (size_t j = 0; j < 3; ++j) {
    const host::SizeResult& r = result(j);
    EXPECT_EQ(r.error, "");
    EXPECT_TRUE(r.data_ok);
    EXPECT_GT(r.iterations, 0u);
    const std::string name = platform->outcomes().at(j).name;
    EXPECT_EQ(hist("flow." + name + ".fct_us").count(), r.iterations) << name;
    EXPECT_NEAR(r.t_avg, hist("flow." + name + ".fct_us").mean(), 1e-6 * r.t_avg);
    flows += r.iterations;
    payload += double(r.payload);
    // The job's payload is what the receiver's NIC placed for it.
  }
  EXPECT_EQ(double(counter("nic.h1.responder.bytes") + counter("nic.h0.responder.bytes")), payload);
  // Arrivals: Poisson at 12e9 / (8 * 1.71125 MB) = 877 per s per job, 52.6
  // expected in all over 20 ms (standard deviation 7.3).
  EXPECT_GE(flows, 25u);
  EXPECT_LE(flows, 85u);
  const core::Histogram& all = hist("flows.all.fct_us");
  EXPECT_EQ(all.count(), flows);
  EXPECT_EQ(hist("flows.all.fct_us.small").count() + hist("flows.all.fct_us.medium").count() +
                (env->stats.find_histogram("flows.all.fct_us.large")
                     ? hist("flows.all.fct_us.large").count()
                     : 0),
            flows);
  // No flow beats its own serialisation at the line rate.
  const core::Histogram& slow = hist("flows.all.slowdown");
  EXPECT_EQ(slow.count(), flows);
  EXPECT_GE(slow.min(), 1.0);
  const auto m = platform->metrics();
  EXPECT_NEAR(m.at("fct_avg"), all.mean(), 1e-9 * all.mean());
  EXPECT_NEAR(m.at("slowdown_avg"), slow.mean(), 1e-9 * slow.mean());
  EXPECT_GE(m.at("fct_p99"), all.mean());
}

// A write_flows end maps one buffer half (the client its source, the
// server its destination), as the scenario's NIC-table check assumes: each
// NIC's MTT holds exactly the pages of its connection ends' MRs.
TEST_F(WriteFlows, EachEndRegistersOneHalfOfTheBufferTheTableCheckCounts) {
  ASSERT_TRUE(run(scenario(kIdeal)));
  const uint64_t per_end = host::PerfTest::end_tables(platform->config().jobs.at(0)).mtt_entries;
  EXPECT_EQ(per_end, (30000000u + 4095) / 4096) << "one 30 MB half (the largest flow)";
  // h1 is an end of all three jobs, h0 of two and h2 of one.
  const std::pair<const char*, uint64_t> ends[] = {{"h0", 2}, {"h1", 3}, {"h2", 1}};
  for (const auto& [h, n] : ends)
    EXPECT_EQ(platform->host(h).nic().contexts().mtt_in_use(), n * per_end) << h;
}

TEST_F(WriteFlows, ConnectionsShareTheJobsRateAndItsResult) {
  // qps 4: four connections per job, each a Poisson process of a quarter
  // of the rate; the job's result sums their flows and payload, and its
  // completion-time figures are those of all its flows.
  ASSERT_TRUE(run(scenario(std::string(kIdeal) + ", qps: 4")));
  uint64_t flows = 0;
  for (size_t j = 0; j < 3; ++j) {
    const host::SizeResult& r = result(j);
    EXPECT_EQ(r.error, "");
    EXPECT_TRUE(r.data_ok);
    const std::string name = platform->outcomes().at(j).name;
    const core::Histogram& h = hist("flow." + name + ".fct_us");
    EXPECT_EQ(h.count(), r.iterations) << name;
    EXPECT_DOUBLE_EQ(r.t_avg, h.mean()) << name;
    EXPECT_DOUBLE_EQ(r.t_p99, h.percentile(99)) << name;
    EXPECT_NEAR(r.bw_gbps, double(r.payload) * 8 / r.seconds / 1e9, 1e-9 * r.bw_gbps);
    flows += r.iterations;
  }
  // The same offered load as with one connection: 52.6 flows expected.
  EXPECT_GE(flows, 25u);
  EXPECT_LE(flows, 85u);
  EXPECT_EQ(hist("flows.all.fct_us").count(), flows);
}

TEST_F(WriteFlows, ASeedGivesItsOwnFlowsAndTheSameSeedTheSame) {
  ASSERT_TRUE(run(scenario(kIdeal, 5)));
  const double sum5 = hist("flows.all.fct_us").sum();
  const uint64_t n5 = hist("flows.all.fct_us").count();
  ASSERT_TRUE(run(scenario(kIdeal, 5)));
  EXPECT_EQ(hist("flows.all.fct_us").sum(), sum5);
  EXPECT_EQ(hist("flows.all.fct_us").count(), n5);
  ASSERT_TRUE(run(scenario(kIdeal, 6)));
  EXPECT_NE(hist("flows.all.fct_us").sum(), sum5);
}

// A scenario's own flow-size distribution: uniform between 1000 and 3000
// bytes (mean 2000).
const char* kUniformCdf = R"(flow_size_cdfs:
  - name: uniform_small
    points: [{bytes: 1000, cdf: 0}, {bytes: 3KB, cdf: 1}]
)";

TEST_F(WriteFlows, AScenarioNamesItsOwnFlowSizeCdf) {
  const std::string own = std::string(kIdeal) + ", flow_sizes: uniform_small";
  const ScenarioConfig cfg = load_scenario(test::write_temp("f.yaml", scenario(own) + kUniformCdf));
  EXPECT_EQ(cfg.jobs.at(0).sizes.at(0).n, 3000u) << "the largest flow of the CDF";
  EXPECT_EQ(cfg.jobs.at(0).flow_size_cdf.size(), 2u);

  auto with_cdfs = [&](const std::string& cdfs) {
    return config_error(scenario(own) + "flow_size_cdfs:\n" + cdfs);
  };
  std::string e =
      config_error(scenario(std::string(kIdeal) + ", flow_sizes: hadoop") + kUniformCdf);
  EXPECT_NE(e.find("flow_sizes 'hadoop' is neither built in nor in flow_size_cdfs"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("known: web_search, uniform_small"), std::string::npos) << e;
  e = with_cdfs(
      "  - {name: uniform_small, points: [{bytes: 1000, cdf: 1}]}\n"
      "  - {name: uniform_small, points: [{bytes: 2000, cdf: 1}]}\n");
  EXPECT_NE(e.find("'uniform_small' is defined twice"), std::string::npos) << e;
  e = with_cdfs(
      "  - {name: web_search, points: [{bytes: 1000, cdf: 1}]}\n"
      "  - {name: uniform_small, points: [{bytes: 2000, cdf: 1}]}\n");
  EXPECT_NE(e.find("would hide the built-in"), std::string::npos) << e;
  e = with_cdfs(
      "  - {name: uniform_small, points: [{bytes: 3000, cdf: 0.5}, "
      "{bytes: 2000, cdf: 1}]}\n");
  EXPECT_NE(e.find("flow_size_cdfs 'uniform_small': flow-size CDF point 1"), std::string::npos)
      << e;
  e = with_cdfs("  - {name: uniform_small, points: [{bytes: 3000, cdf: 0.9}]}\n");
  EXPECT_NE(e.find("must end at probability 1"), std::string::npos) << e;
  e = with_cdfs("  - {name: uniform_small, points: [{bytes: 3000, p: 1}]}\n");
  EXPECT_NE(e.find("'p'"), std::string::npos) << e;
  e = with_cdfs("  - {name: uniform_small, points: [{bytes: 3000, cdf: 1.5}]}\n");
  EXPECT_NE(e.find("cdf"), std::string::npos) << e;
}

TEST_F(WriteFlows, FlowsFollowTheScenariosOwnCdf) {
  // 0.5 Gb/s of 2000-byte flows on average: 31 250 arrivals per s per job,
  // ~625 in 20 ms; their mean size is within a few percent of 2000.
  ASSERT_TRUE(run(scenario(std::string(kIdeal) + ", flow_sizes: uniform_small", 3, "0.5Gbps") +
                  kUniformCdf));
  for (size_t j = 0; j < 3; ++j) {
    const host::SizeResult& r = result(j);
    EXPECT_EQ(r.error, "");
    EXPECT_TRUE(r.data_ok);
    ASSERT_GT(r.iterations, 400u);
    EXPECT_LT(r.iterations, 850u);
    const double mean = double(r.payload) / double(r.iterations);
    EXPECT_NEAR(mean, 2000.0, 100.0) << platform->outcomes().at(j).name;
  }
  // Every flow is below 100 KB.
  EXPECT_EQ(hist("flows.all.fct_us.small").count(), hist("flows.all.fct_us").count());
  const core::Histogram* medium = env->stats.find_histogram("flows.all.fct_us.medium");
  EXPECT_TRUE(!medium || medium->count() == 0);
}

TEST_F(WriteFlows, AFlowThatFindsTheWindowFullWaitsAndItsWaitCounts) {
  // One flow outstanding at a time and 15 Gb/s offered on one connection:
  // flows queue in the application, and their completion times (from
  // arrival) exceed what the same flows take with room to post at once.
  ASSERT_TRUE(run(scenario("after_previous: false, tx_depth: 1", 2, "15Gbps")));
  const double queued = hist("flow.a.fct_us").mean();
  const uint64_t n = hist("flow.a.fct_us").count();
  ASSERT_TRUE(run(scenario("after_previous: false, tx_depth: 64", 2, "15Gbps")));
  EXPECT_EQ(hist("flow.a.fct_us").count(), n) << "the same arrivals";
  EXPECT_GT(queued, hist("flow.a.fct_us").mean());
}

}  // namespace
}  // namespace mprdma::platform
