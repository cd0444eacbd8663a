// The perftest job options rows M15 and R1 rely on: `qps` (the job runs as
// N connections, each a copy of the test with its own QP, CQs and buffers,
// started together, one aggregate result) and `run_at` (the measured part
// starts no earlier than this time, after set-up). Validation, and runs of
// two modeled hosts back to back.
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

const char* kBase = R"(name: t
end_time: 50ms
nic: {mtu: 1024}
hosts: [{name: h0}, {name: h1}]
links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]
jobs:
  - {name: f, client: h0, server: h1, cq_mod: 1, tx_depth: 2, JOB}
)";

std::string scenario(const std::string& job) {
  std::string t = kBase;
  t.replace(t.find("JOB"), 3, job);
  return t;
}

class PerftestQps : public test::ScenarioRun {};

TEST_F(PerftestQps, OptionsAreReadAndChecked) {
  const ScenarioConfig cfg = load_scenario(
      test::write_temp("qps.yaml", scenario("app: write_bw, sizes: [4KiB], qps: 8, run_at: 3ms")));
  EXPECT_EQ(cfg.jobs.at(0).qps, 8);
  EXPECT_EQ(cfg.jobs.at(0).run_at.ps, 3'000'000'000ull);
  const ScenarioConfig d =
      load_scenario(test::write_temp("qps.yaml", scenario("app: write_bw, sizes: [4KiB]")));
  EXPECT_EQ(d.jobs.at(0).qps, 1);
  EXPECT_EQ(d.jobs.at(0).run_at.ps, 0u);

  std::string e = config_error(scenario("app: write_bw, sizes: [4KiB, 8KiB], qps: 2"));
  EXPECT_NE(e.find("qps > 1 needs exactly one size"), std::string::npos) << e;
  e = config_error(scenario("app: write_lat, sizes: [64], qps: 2"));
  EXPECT_NE(e.find("qps applies to the bandwidth tests only"), std::string::npos) << e;
  e = config_error(scenario("app: write_bw, sizes: [4KiB], qps: 0"));
  EXPECT_NE(e.find("qps"), std::string::npos) << e;
}

TEST_F(PerftestQps, ConnectionsEachGetAQpAndTheResultAggregatesThem) {
  ASSERT_TRUE(run(scenario("app: write_bw, sizes: [8KiB], iterations: 30, qps: 3")));
  const JobOutcome& o = platform->outcomes().at(0);
  ASSERT_EQ(o.results.size(), 1u);
  const host::SizeResult& r = o.results[0];
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.data_ok);
  EXPECT_EQ(r.iterations, 90u) << "30 messages on each of 3 connections";
  EXPECT_NEAR(r.bw_gbps, 90.0 * 8192 * 8 / r.seconds / 1e9, 1e-9);
  // Three QPs on each NIC (QPNs 2, 3, 4), each of which carried traffic.
  for (const std::string h : {"h0", "h1"})
    for (int qpn = 2; qpn <= 4; ++qpn)
      EXPECT_GT(counter("nic." + h + ".cache.qpc.qp" + std::to_string(qpn) + ".hits"), 10u)
          << h << " QP " << qpn;
  EXPECT_EQ(env->stats.find_counter("nic.h1.cache.qpc.qp5.hits"), nullptr) << "no 4th QP";
}

TEST_F(PerftestQps, MeasuredPartStartsAtRunAt) {
  ASSERT_TRUE(run(scenario("app: write_bw, sizes: [8KiB], iterations: 30, qps: 2, run_at: 5ms")));
  const JobOutcome& o = platform->outcomes().at(0);
  const host::SizeResult& r = o.results.at(0);
  EXPECT_TRUE(r.data_ok);
  // Set-up ends long before 5 ms; the run is timed from 5 ms to its end.
  EXPECT_GE(o.end_s, 5e-3);
  EXPECT_NEAR(r.seconds, o.end_s - 5e-3, 1e-9);
}

TEST_F(PerftestQps, RunAtAlsoDelaysASingleConnection) {
  ASSERT_TRUE(run(scenario("app: read_bw, sizes: [4KiB], iterations: 20, run_at: 2ms")));
  const JobOutcome& o = platform->outcomes().at(0);
  const host::SizeResult& r = o.results.at(0);
  EXPECT_TRUE(r.data_ok);
  EXPECT_GE(o.end_s - r.seconds, 2e-3 - 1e-9) << "the timed part began at 2 ms or later";
}

}  // namespace
}  // namespace mprdma::platform
