// The perftest job options row M12 relies on: `rate` (offered load, paced
// posting), `sync_ratio` (a seeded fraction of the WRITEs are synchronise
// messages) and `sync_mode` (flag: MPR_WQE_F_SYNC reaches the NIC;
// stop_wait: the application waits for every earlier message first).
// Validation, and runs on the MP-RDMA testbed (one host under each ToR).
#include <gtest/gtest.h>

#include <string>

#include "support/files.h"
#include "support/sim_test.h"
#include "vp/core/config.h"
#include "vp/platform/platform.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

const char* kBase = R"(name: t
end_time: 50ms
nic: {mtu: 1024, transport: mprdma, mprdma: {initial_window: 16, base_rtt: 3us, rto: 100us}}
fabric: {topology: mp_rdma_testbed, leaves: 2, spines: 4, hosts_per_leaf: 1}
jobs:
  - {name: f, app: write_bw, client: t0h0, server: t1h0, sizes: [16KiB], cq_mod: 1, JOB}
)";

std::string scenario(const std::string& job, const std::string& extra = "") {
  std::string t = kBase;
  t.replace(t.find("JOB"), 3, job);
  return t + extra;
}

std::string error_of(const std::string& text) {
  try {
    load_scenario(test::write_temp("sync.yaml", text));
  } catch (const core::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PerftestSyncConfig, OptionsAreReadAndChecked) {
  const ScenarioConfig cfg = load_scenario(test::write_temp(
      "sync.yaml", scenario("rate: 29Gbps, sync_ratio: 0.4, sync_mode: stop_wait")));
  EXPECT_DOUBLE_EQ(cfg.jobs.at(0).rate.gbps(), 29.0);
  EXPECT_DOUBLE_EQ(cfg.jobs.at(0).sync_ratio, 0.4);
  EXPECT_EQ(cfg.jobs.at(0).sync_mode, host::JobConfig::SyncMode::stop_wait);
  // Defaults: unpaced, no synchronise message, flag mode.
  const ScenarioConfig d = load_scenario(test::write_temp("sync.yaml", scenario("iterations: 4")));
  EXPECT_EQ(d.jobs.at(0).rate.bps, 0.0);
  EXPECT_EQ(d.jobs.at(0).sync_ratio, 0.0);
  EXPECT_EQ(d.jobs.at(0).sync_mode, host::JobConfig::SyncMode::flag);

  std::string e = error_of(scenario("sync_ratio: 1.5"));
  EXPECT_NE(e.find("sync_ratio"), std::string::npos) << e;
  e = error_of(scenario("sync_mode: sometimes"));
  EXPECT_NE(e.find("sync_mode"), std::string::npos) << e;
  std::string t = scenario("sync_ratio: 0.5");
  t.replace(t.find("app: write_bw"), 13, "app: read_bw");
  e = error_of(t);
  EXPECT_NE(e.find("sync_ratio applies to write_bw only"), std::string::npos) << e;
  t = scenario("rate: 10Gbps");
  t.replace(t.find("app: write_bw"), 13, "app: write_lat");
  e = error_of(t);
  EXPECT_NE(e.find("rate applies to write_bw, read_bw, send_bw and write_flows only"),
            std::string::npos)
      << e;
  // The metric fields exist.
  EXPECT_EQ(error_of(scenario("iterations: 4",
                              "metrics: {s: f.16384.sync_messages + "
                              "f.16384.sync_wait_us}\n")),
            "");
}

class PerftestSyncRun : public test::SimTest {
 protected:
  // Runs the scenario with a fresh kernel; returns the job's only result.
  host::SizeResult run(const std::string& text) {
    core::reset_kernel();
    core::Log::reset();
    env = std::make_unique<core::SimEnv>(1);
    cfg = load_scenario(test::write_temp("sync.yaml", text));
    auto p = std::make_unique<Platform>(cfg, *env);
    EXPECT_TRUE(p->run());
    EXPECT_TRUE(p->all_ok());
    const auto& o = p->outcomes().at(0);
    EXPECT_EQ(o.results.size(), 1u);
    sync_waits = counter("nic.t0h0.transport.sync_waits");
    has_sync_counter = env->stats.find_counter("nic.t0h0.transport.sync_waits") != nullptr;
    return o.results.empty() ? host::SizeResult{} : o.results[0];
  }
  uint64_t counter(const std::string& path) {
    const core::Counter* c = env->stats.find_counter(path);
    return c ? c->value() : 0;
  }
  ScenarioConfig cfg;
  uint64_t sync_waits = 0;
  bool has_sync_counter = false;
};

// The flag reaches the NIC: MP-RDMA holds synchronise messages
// (transport.sync_waits) only when some are flagged; the choice is the
// seeded stream's, the same in every run.
TEST_F(PerftestSyncRun, FlagReachesTheNicOnlyWithARatio) {
  const host::SizeResult none = run(scenario("iterations: 64"));
  EXPECT_TRUE(none.data_ok);
  EXPECT_EQ(none.sync_messages, 0u);
  EXPECT_EQ(sync_waits, 0u);
  ASSERT_TRUE(has_sync_counter);

  const host::SizeResult half = run(scenario("iterations: 64, sync_ratio: 0.5"));
  EXPECT_TRUE(half.data_ok);
  // Binomial(64, 0.5): far inside [16, 48].
  EXPECT_GE(half.sync_messages, 16u);
  EXPECT_LE(half.sync_messages, 48u);
  EXPECT_GT(sync_waits, 0u);
  EXPECT_EQ(half.sync_wait_us, 0.0);  // flag mode: the application never waits
  // The synchronise delay costs time over the unflagged run.
  EXPECT_GT(half.seconds, none.seconds);

  const host::SizeResult again = run(scenario("iterations: 64, sync_ratio: 0.5"));
  EXPECT_EQ(again.sync_messages, half.sync_messages);
  EXPECT_EQ(again.seconds, half.seconds);

  const host::SizeResult all = run(scenario("iterations: 64, sync_ratio: 1"));
  EXPECT_EQ(all.sync_messages, 64u);
}

// Go-back-N ignores the flag: the same run to the picosecond.
TEST_F(PerftestSyncRun, GoBackNIgnoresTheFlag) {
  std::string t0 = scenario("iterations: 64");
  std::string t1 = scenario("iterations: 64, sync_ratio: 0.5");
  for (std::string* t : {&t0, &t1})
    t->replace(t->find("transport: mprdma, "), 19, "transport: gbn, ");
  const host::SizeResult a = run(t0);
  const host::SizeResult b = run(t1);
  EXPECT_FALSE(has_sync_counter);
  EXPECT_GT(b.sync_messages, 0u);
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_TRUE(b.data_ok);
}

// Stop-wait waits: with every message synchronise, at most one is ever
// outstanding, so the run takes at least a one-message run per message,
// whereas the same messages pipelined take far less; the application's
// waiting time is counted.
TEST_F(PerftestSyncRun, StopWaitHoldsEachSynchroniseMessageUntilTheRestCompleted) {
  // On an ideal NIC (every context on chip): with the context caches the
  // first message also pays the cold misses, so a one-message run would be
  // longer than a message of a longer run.
  auto scenario = [](const std::string& job) {
    std::string t = ::mprdma::platform::scenario(job);
    t.replace(t.find("nic: {mtu: 1024, "), 17,
              "nic: {mtu: 1024, cache: {qpc: {enabled: false}, cqc: {enabled: false}, "
              "mpt: {enabled: false}, mtt: {enabled: false}}, ");
    return t;
  };
  const host::SizeResult one = run(scenario("iterations: 1"));
  const double t1 = one.seconds;
  ASSERT_GT(t1, 0.0);
  const int n = 40;
  const host::SizeResult piped = run(scenario("iterations: 40"));
  EXPECT_LT(piped.seconds, 0.5 * n * t1);
  const host::SizeResult sw = run(scenario("iterations: 40, sync_ratio: 1, sync_mode: stop_wait"));
  EXPECT_TRUE(sw.data_ok);
  EXPECT_EQ(sw.sync_messages, 40u);
  EXPECT_GE(sw.seconds, 0.9 * n * t1);
  EXPECT_GT(sw.sync_wait_us, 0.0);
  EXPECT_EQ(sync_waits, 0u);  // no flag: the NIC holds nothing
  // With no synchronise message it is the pipelined run.
  const host::SizeResult sw0 = run(scenario("iterations: 40, sync_mode: stop_wait"));
  EXPECT_EQ(sw0.seconds, piped.seconds);
  EXPECT_EQ(sw0.sync_wait_us, 0.0);
}

// `rate` paces the posts: goodput at (just under) the offered rate, and the
// run lasts about (iterations - 1) message intervals; unpaced it is faster.
TEST_F(PerftestSyncRun, RatePacesThePosts) {
  const host::SizeResult paced = run(scenario("iterations: 50, rate: 5Gbps"));
  const double interval = 16384.0 * 8 / 5e9;
  EXPECT_GE(paced.seconds, 49 * interval);
  EXPECT_LT(paced.seconds, 51 * interval);
  EXPECT_LE(paced.bw_gbps, 5.0 * 50 / 49);
  EXPECT_GT(paced.bw_gbps, 4.5);
  const host::SizeResult fast = run(scenario("iterations: 50"));
  EXPECT_GT(fast.bw_gbps, 20.0);
}

}  // namespace
}  // namespace mprdma::platform
