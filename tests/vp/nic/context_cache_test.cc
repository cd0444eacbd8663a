// Integration: the QP-context cache over ICM (vp/nic/context_cache.h) in a
// NIC with two modeled hosts back to back. Six WRITE streams run at once
// (six QPs per NIC) through a QPC cache of 1 set x 2 ways, so contexts
// thrash: every miss must be one DMA read of a line from ICM, a modified
// evicted line one DMA write, a receive-side miss must stall the receive
// pipeline, the per-QP counters must add up to the totals, and the data
// must still arrive intact. The MPT/MTT and CQ-context caches likewise. The same run with the cache
// disabled (an ideal NIC) has no misses and is faster. A budget that cannot hold the cache is an
// error that names the region and the excess.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "mprdma/hw.h"
#include "support/scenario_run.h"
#include "vp/nic/transport/gbn/gbn_engine.h"

namespace mprdma::platform {
namespace {

constexpr int kJobs = 6;
constexpr int kIters = 40;

std::string scenario(const std::string& nic_extra) {
  std::string s =
      "name: qpc-cache\n"
      "seed: 1\n"
      "end_time: 50ms\n"
      "nic:\n"
      "  mtu: 1024\n" +
      nic_extra +
      "hosts:\n"
      "  - {name: h0}\n"
      "  - {name: h1}\n"
      "links:\n"
      "  - {name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}\n"
      "jobs:\n";
  for (int j = 0; j < kJobs; ++j)
    s += "  - {name: w" + std::to_string(j) +
         ", app: write_bw, client: h0, server: h1, sizes: [16KiB], iterations: " +
         std::to_string(kIters) + ", tx_depth: 4, after_previous: false}\n";
  return s;
}

class QpcCache : public test::ScenarioRun {
 protected:
  double total_seconds() {
    double s = 0;
    for (const JobOutcome& o : platform->outcomes()) s = std::max(s, o.results.at(0).seconds);
    return s;
  }
  void expect_data_ok() {
    ASSERT_EQ(platform->outcomes().size(), size_t{kJobs});
    for (const JobOutcome& o : platform->outcomes()) {
      ASSERT_EQ(o.results.size(), 1u);
      EXPECT_EQ(o.results[0].error, "") << o.name;
      EXPECT_TRUE(o.results[0].data_ok) << o.name;
      EXPECT_EQ(o.results[0].iterations, uint64_t{kIters}) << o.name;
    }
  }
};

TEST_F(QpcCache, ThrashingContextsMissToIcmAndStallReceive) {
  ASSERT_TRUE(run(scenario("  cache: {qpc: {sets: 1, ways: 2}}\n")));
  expect_data_ok();
  const uint64_t line = sizeof(mpr_qpc) + nic::GbnEngine::kStateBytes;
  for (const std::string h : {"h0", "h1"}) {
    SCOPED_TRACE(h);
    const std::string p = "nic." + h + ".cache.qpc.";
    const uint64_t misses = counter(p + "misses");
    const uint64_t evictions = counter(p + "evictions");
    const uint64_t writebacks = counter(p + "writebacks");
    // Six QPs through two lines: far more misses than compulsory ones.
    EXPECT_GT(misses, uint64_t{10 * kJobs});
    EXPECT_GT(counter(p + "hits"), 0u);
    // Every miss but the first two (empty lines) replaced a line; every
    // line was written (each access is a write), so each eviction writes back.
    EXPECT_EQ(evictions, misses - 2);
    EXPECT_EQ(writebacks, evictions);
    // One fill (DMA read of a line) per miss, one DMA write per write-back
    // (the MPT, MTT and CQ-context caches read lines of 48, 64 and 64 B).
    const std::string c = "nic." + h + ".cache.";
    EXPECT_EQ(counter("nic." + h + ".dma.icm_read_bytes"),
              misses * line + counter(c + "mpt.misses") * 48 + counter(c + "mtt.misses") * 64 +
                  counter(c + "cqc.misses") * 64);
    EXPECT_EQ(counter("nic." + h + ".dma.icm_write_bytes"),
              writebacks * line + counter(c + "cqc.writebacks") * 64);
    const core::Histogram* fill = env->stats.find_histogram(p + "fill_latency");
    ASSERT_NE(fill, nullptr);
    EXPECT_EQ(fill->count(), misses);
    EXPECT_GT(fill->min(), 300.0) << "a fill is a PCIe round trip (ns)";
    // Per-QP counters add up to the totals.
    uint64_t qp_misses = 0, qp_evictions = 0;
    for (uint32_t qpn = 2; qpn < 2 + kJobs; ++qpn) {
      const std::string q = p + "qp" + std::to_string(qpn) + ".";
      qp_misses += counter(q + "misses");
      qp_evictions += counter(q + "evictions");
    }
    EXPECT_EQ(qp_misses, misses);
    EXPECT_EQ(qp_evictions, evictions);
    EXPECT_EQ(counter("nic." + h + ".sram.connections_on_chip"), 2u);
    EXPECT_EQ(counter("nic." + h + ".sram.bytes_per_connection"),
              line + 2 /* 12-bit tag (4096 QPs, one set), valid, dirty, 1 LRU bit */);
  }
  // The server's NIC receives the WRITEs: its misses stall reception.
  EXPECT_GT(counter("nic.h1.mac.rx_stalls"), 0u);
  const double thrashing = total_seconds();

  ASSERT_TRUE(
      run(scenario("  cache: {qpc: {enabled: false}, cqc: {enabled: false}, "
                   "mpt: {enabled: false}, mtt: {enabled: false}}\n")));
  expect_data_ok();
  EXPECT_EQ(counter("nic.h1.cache.qpc.misses"), 0u);
  EXPECT_EQ(counter("nic.h1.dma.icm_read_bytes"), 0u);
  EXPECT_EQ(counter("nic.h1.mac.rx_stalls"), 0u);
  EXPECT_LT(total_seconds(), thrashing) << "misses cost time";
}

TEST_F(QpcCache, ContextsThatFitOnlyMissOnce) {
  ASSERT_TRUE(run(scenario("")));  // default: 64 sets x 4 ways
  expect_data_ok();
  for (const std::string h : {"h0", "h1"}) {
    EXPECT_EQ(counter("nic." + h + ".cache.qpc.misses"), uint64_t{kJobs}) << h;
    EXPECT_EQ(counter("nic." + h + ".cache.qpc.evictions"), 0u) << h;
  }
}

// The MPT/MTT caches: the requester translates each WQE's SGE, the responder
// each WRITE's RETH range, through the MPT line of the MR and the MTT lines
// of its pages. With one MTT line on chip the six streams thrash it; the
// CQ-context cache (one line) is thrashed by their CQs. Disabling both
// removes those misses and the time they cost.
TEST_F(QpcCache, TranslationAndCqContextMissesAreFetchedFromIcm) {
  ASSERT_TRUE(run(scenario("  cache: {mtt: {sets: 1, ways: 1}, cqc: {sets: 1, ways: 1}}\n")));
  expect_data_ok();
  for (const std::string h : {"h0", "h1"}) {
    SCOPED_TRACE(h);
    const std::string c = "nic." + h + ".cache.";
    EXPECT_EQ(counter(c + "mtt.writebacks"), 0u) << "translations are only read";
    EXPECT_GT(counter(c + "mpt.hits"), 0u);
    EXPECT_EQ(counter(c + "mpt.misses"), uint64_t{kJobs}) << "one MR per side and stream";
    const core::Histogram* fill = env->stats.find_histogram(c + "mtt.fill_latency");
    ASSERT_NE(fill, nullptr);
    EXPECT_EQ(fill->count(), counter(c + "mtt.misses"));
  }
  // Requester: each batch of 4 WQEs (16 KiB SGEs in one MTT line) misses
  // once, as the six QPs take turns on the one line; the other three hit.
  EXPECT_GE(counter("nic.h0.cache.mtt.misses"), uint64_t{kJobs * kIters / 4});
  EXPECT_GT(counter("nic.h0.cache.mtt.hits"), counter("nic.h0.cache.mtt.misses"));
  // Responder: every WRITE FIRST checks its RETH range; the streams'
  // messages interleave, so nearly every check misses.
  EXPECT_GT(counter("nic.h1.cache.mtt.misses"), uint64_t{kJobs * kIters * 9 / 10});
  // CQEs (one per 4 WRITEs, on the client) of six CQs through one line.
  EXPECT_GT(counter("nic.h0.cache.cqc.misses"), uint64_t{2 * kJobs});
  EXPECT_EQ(counter("nic.h0.cache.cqc.misses"), counter("nic.h0.cq.cqes"));
  // The responder's MTT misses stall its receive pipeline.
  EXPECT_GT(counter("nic.h1.mac.rx_stalls"), 0u);
  const double thrashing = total_seconds();

  ASSERT_TRUE(run(scenario("  cache: {mtt: {enabled: false}, cqc: {enabled: false}}\n")));
  expect_data_ok();
  EXPECT_EQ(counter("nic.h1.cache.mtt.misses"), 0u);
  EXPECT_EQ(counter("nic.h1.cache.cqc.misses"), 0u);
  EXPECT_LT(total_seconds(), thrashing);
}

TEST_F(QpcCache, SramThatCannotHoldTheCacheIsAnErrorNamingTheRegion) {
  try {
    run(scenario("  sram: {size: 16KiB}\n"));  // 256 lines of ~160 B need ~40 KiB
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("16384 B exceeded by"), std::string::npos) << msg;
    EXPECT_NE(msg.find("qpc."), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace mprdma::platform
