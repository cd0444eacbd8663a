// bottleneck(<host>,<from>,<to>) metrics on real runs: the named resource
// follows the configuration that limits the run (a slow PCIe link, the
// Ethernet port, a thrashing QP-context cache), and results carry every
// resource's utilisation.
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

// Two hosts back to back; jobs WRITE from h0 to h1 from 1 ms on, so the
// window [1.2 ms, 1.4 ms) sees only the measured transfer.
std::string scenario(const std::string& pcie, const std::string& nic_extra, int jobs,
                     const std::string& size, int iterations) {
  std::string s = "name: bn\nseed: 1\nend_time: 30ms\n" + pcie + "nic:\n  mtu: 1024\n" + nic_extra +
                  "hosts: [{name: h0}, {name: h1}]\n"
                  "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
                  "metrics:\n"
                  "  client: bottleneck(h0,1.2ms,1.4ms)\n"
                  "  server: bottleneck(h1,1.2ms,1.4ms)\n"
                  "  client_run: bottleneck(h0)\n"
                  "jobs:\n";
  for (int j = 0; j < jobs; ++j)
    s += "  - {name: w" + std::to_string(j) + ", app: write_bw, client: h0, server: h1, sizes: [" +
         size + "], iterations: " + std::to_string(iterations) +
         ", tx_depth: 8, run_at: 1ms, after_previous: false}\n";
  return s;
}

class BottleneckRun : public test::ScenarioRun {
 protected:
  // The run must cover the window, or the names mean nothing.
  void expect_window_covered() {
    for (const JobOutcome& o : platform->outcomes()) {
      ASSERT_TRUE(o.finished) << o.name;
      EXPECT_GT(o.end_s, 1.4e-3) << o.name << " ended inside the window";
    }
  }
  double utilisation(const std::string& metric, const std::string& resource) {
    const nlohmann::json all = platform->bottlenecks_json();
    for (const auto& u : all[metric]["utilisation"])
      if (u["resource"] == resource) return u["utilisation"].get<double>();
    ADD_FAILURE() << metric << " has no " << resource;
    return -1;
  }
};

TEST_F(BottleneckRun, SlowPcieThenTheEthernetPortLimitLargeWrites) {
  // Gen1 x1 carries 250 MB/s: the client NIC's DMA reads of the payload.
  ASSERT_TRUE(run(scenario("pcie: {gen: 1, lanes: 1}\n", "", 1, "64KiB", 12)));
  expect_window_covered();
  auto l = platform->labels();
  EXPECT_EQ(l.at("client"), "pcie.downstream.dma_read_completion");
  EXPECT_GT(utilisation("client", "pcie.downstream.dma_read_completion"), 0.9);
  // Over the whole measured run (1 ms to the job's end) too.
  EXPECT_EQ(l.at("client_run"), "pcie.downstream.dma_read_completion");
  const nlohmann::json b = platform->bottlenecks_json();
  EXPECT_TRUE(b["client_run"]["until_jobs_end"].get<bool>());
  EXPECT_DOUBLE_EQ(b["client_run"]["from_s"].get<double>(), 1e-3);
  EXPECT_LT(utilisation("client", "port.tx"), 0.1);
  // The server writes what arrives into memory, upstream.
  EXPECT_EQ(l.at("server"), "pcie.upstream.dma_write");

  // Gen3 x16 (126 Gb/s) outruns the 40 Gb/s port.
  ASSERT_TRUE(run(scenario("pcie: {gen: 3, lanes: 16}\n", "", 1, "64KiB", 200)));
  expect_window_covered();
  l = platform->labels();
  EXPECT_EQ(l.at("client"), "port.tx");
  EXPECT_GT(utilisation("client", "port.tx"), 0.9);
  EXPECT_EQ(l.at("server"), "port.rx");
}

TEST_F(BottleneckRun, ThrashingQpContextsStallTheServersReceiveStage) {
  // Eight QPs through one QP-context line: nearly every WRITE packet the
  // server receives waits for a context fill over PCIe.
  ASSERT_TRUE(run(scenario("pcie: {gen: 3, lanes: 16}\n", "  cache: {qpc: {sets: 1, ways: 1}}\n", 8,
                           "1KiB", 300)));
  expect_window_covered();
  EXPECT_EQ(platform->labels().at("server"), "rx_stage.qpc_miss");
  EXPECT_GT(counter("nic.h1.rx.stall_ps.qpc"), 0u);
  EXPECT_EQ(counter("nic.h1.rx.stall_ps.wqe"), 0u) << "WRITEs need no WQE";
}

TEST_F(BottleneckRun, PostedCreditsHoldBackWqesByMmio) {
  // Four threads post 60 B inline WRITEs by MMIO (two 64 B lines each).
  // With 8 posted-header credits at the NIC the lines wait for credits
  // (8 per ~0.32 us loop: ~25 M lines/s, below the 40 Gb/s port): the
  // client's downstream PCIe is the bottleneck although it mostly idles,
  // and the ranking says so.
  auto mmio = [&](const std::string& pcie) {
    std::string s = scenario(pcie, "", 4, "60", 8000);
    for (size_t at = s.find("tx_depth: 8,"); at != std::string::npos;
         at = s.find("tx_depth: 8,", at + 1))
      s.replace(at, 12, "tx_depth: 64, inline_size: 60, wqe_by_mmio: true,");
    return s;
  };
  ASSERT_TRUE(run(mmio("pcie: {gen: 3, lanes: 16, endpoint: {posted_header: 8}}\n")));
  expect_window_covered();
  EXPECT_EQ(platform->labels().at("client"), "pcie.downstream.mmio_write");
  nlohmann::json top = platform->bottlenecks_json()["client"]["utilisation"][0];
  EXPECT_GT(top["utilisation"].get<double>(), 0.95);
  ASSERT_TRUE(top.contains("credit_stall"));
  EXPECT_GT(top["credit_stall"].get<double>(), 0.5) << "the link mostly waits for credits";
  EXPECT_GT(counter("pcie.h0.downstream.credit_waits"), 1000u);

  // The platform's 127 credits cover the loop: the lines flow and the port
  // or the receive side limits instead, with no credit stall.
  ASSERT_TRUE(run(mmio("pcie: {gen: 3, lanes: 16}\n")));
  expect_window_covered();
  EXPECT_NE(platform->labels().at("client"), "pcie.downstream.mmio_write");
  for (const auto& u : platform->bottlenecks_json()["client"]["utilisation"])
    EXPECT_FALSE(u.contains("credit_stall")) << u["resource"];
}

TEST_F(BottleneckRun, ScenarioChecksTheMetric) {
  std::string e =
      config_error(scenario("", "", 1, "4KiB", 1) +
                   "  - {name: x, app: write_bw, client: h0, server: h1, sizes: [64]}\n");
  EXPECT_EQ(e, "");
  std::string bad = scenario("", "", 1, "4KiB", 1);
  bad.replace(bad.find("bottleneck(h1"), 13, "bottleneck(h9");
  e = config_error(bad);
  EXPECT_NE(e.find("metric 'server' names unknown host 'h9'"), std::string::npos) << e;
  bad = scenario("", "", 1, "4KiB", 1);
  bad.replace(bad.find("1.2ms,1.4ms)\n  server"), 11, "1.2ms,40ms");
  e = config_error(bad);
  EXPECT_NE(e.find("metric 'client': its window ends after end_time"), std::string::npos) << e;
}

}  // namespace
}  // namespace mprdma::platform
