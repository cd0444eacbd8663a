// Platform features the path-avoidance and fairness rows (M9, M10) rely on,
// run on the MP-RDMA testbed: a job forced onto one spine with `via`, a
// per-host NIC override (go-back-N hosts beside MP-RDMA ones), jobs that run
// for a `duration`, and metrics over the time series (avg, stdev, jain,
// reach_us, settle_us, factors, min/max).
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/sim_test.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_engine.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_sender.h"
#include "vp/nic/transport/transport_mux.h"
#include "vp/platform/platform.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

const char* kBase = R"(name: t
end_time: 2ms
nic: {transport: mprdma, mprdma: {initial_window: 16, base_rtt: 3us}}
fabric: {topology: mp_rdma_testbed, leaves: 2, spines: 4, hosts_per_leaf: 2}
hosts:
  - {name: t0h1, nic: {transport: gbn}}
  - {name: t1h1, nic: {transport: gbn}}
)";

const char* kSpJob =
    "  - {name: sp, app: write_bw, client: t0h1, server: t1h1, sizes: [64KiB], iterations: 1,\n"
    "     tx_depth: 16, cq_mod: 2, duration: 200us, after_previous: false, via: VIA}\n";

class SeriesMetricsRun : public test::SimTest {
 protected:
  std::unique_ptr<Platform> run(const std::string& text) {
    cfg = load_scenario(test::write_temp("run.yaml", text));
    auto p = std::make_unique<Platform>(cfg, *env);
    EXPECT_TRUE(p->run());
    EXPECT_TRUE(p->all_ok());
    return p;
  }
  uint64_t counter(const std::string& path) {
    const core::Counter* c = env->stats.find_counter(path);
    return c ? c->value() : 0;
  }
  // The uplinks t0 -> s<i>: the one of `spine` carried more than `payload`
  // bytes, every other under 1 % of it.
  void expect_only_spine(int spine, double payload) {
    for (int s = 0; s < 4; ++s) {
      const uint64_t bytes = counter("link.t0-s" + std::to_string(s) + ".a2b.tx_bytes");
      if (s == spine)
        EXPECT_GT(double(bytes), payload) << "spine " << s;
      else
        EXPECT_LT(double(bytes), 0.01 * payload) << "spine " << s;
    }
  }
  ScenarioConfig cfg;
};

std::string sp_job(const std::string& via) {
  std::string j = kSpJob;
  j.replace(j.find("VIA"), 3, via);
  return j;
}

// The go-back-N flow takes the spine its `via` names, for two spines (a
// fixed default port would land on one spine for both), and every metric
// form reads the series.
class ViaSpine : public SeriesMetricsRun, public ::testing::WithParamInterface<int> {};

TEST_P(ViaSpine, FlowCrossesTheNamedSpineOnlyAndSeriesMetricsSeeIt) {
  const int spine = GetParam();
  const std::string on = "link.t0-s" + std::to_string(spine) + ".a2b";
  const std::string off = "link.t0-s" + std::to_string((spine + 1) % 4) + ".a2b";
  const std::string text = std::string(kBase) + "jobs:\n" + sp_job("t0-s" + std::to_string(spine)) +
                           "metrics:\n"
                           "  on: avg(" +
                           on +
                           ".gbps,100us,200us)\n"
                           "  off: avg(" +
                           off +
                           ".gbps,100us,200us)\n"
                           "  diff: avg(" +
                           on + ".gbps,100us,200us) + -1*avg(" + off +
                           ".gbps,100us,200us)\n"
                           "  fair: jain(" +
                           on + ".gbps|" + off +
                           ".gbps,100us,200us)\n"
                           "  sd: stdev(" +
                           on +
                           ".gbps,100us,200us)\n"
                           "  lo: min(on, off)\n"
                           "  hi: max(o*)\n"
                           "  mid: average(on, off, o*)\n"
                           "  late: avg(" +
                           on +
                           ".gbps,100us,1900us)\n"
                           "  placed: 8e-9*rate(nic.t1h1.responder.bytes,100us,200us)\n"
                           "  gone: rate(nic.t1h1.responder.no_such_counter,100us,200us)\n"
                           "  up: settle_us(" +
                           on +
                           ".gbps,30,45,0s,200us)\n"
                           "  never: settle_us(" +
                           off +
                           ".gbps,30,45,100us,200us)\n"
                           "  first: reach_us(" +
                           on +
                           ".gbps,30,45,0s,200us)\n"
                           "  fair_never: reach_us(jain(" +
                           on + ".gbps|" + off +
                           ".gbps),0.6,1,100us,200us)\n"
                           "  lopsided: settle_us(jain(" +
                           on + ".gbps|" + off + ".gbps),0.45,0.55,100us,200us)\n";
  auto p = run(text);
  const auto& o = p->outcomes().at(0);
  ASSERT_EQ(o.results.size(), 1u);
  const host::SizeResult& r = o.results[0];
  // Duration: posting stopped at 200 us (after ~60 us of QP set-up) and the
  // count posted is the run's.
  EXPECT_GT(r.iterations, 20u);
  EXPECT_GE(r.seconds, 200e-6);
  EXPECT_LT(r.seconds, 200e-6 + 16 * 65536 * 8 / 30e9);  // at most tx_depth to drain
  EXPECT_TRUE(r.data_ok);
  const double payload = double(r.iterations) * 65536;
  expect_only_spine(spine, payload);
  std::vector<std::string> missing;
  const auto m = p->metrics(&missing);
  EXPECT_GT(m.at("on"), 35.0);
  EXPECT_LT(m.at("off"), 0.5);
  EXPECT_NEAR(m.at("diff"), m.at("on") - m.at("off"), 1e-9);
  EXPECT_NEAR(m.at("fair"), 0.5, 0.01);  // one of two series has everything
  // stdev reads the named series over the window: the samples at 110..200
  // us (10 us apart, each standing for the 10 us before it) by hand.
  const core::TimeSeries* ts = env->stats.find_series(on + ".gbps");
  ASSERT_NE(ts, nullptr);
  std::vector<double> in;
  for (const core::TimeSeries::Point& pt : ts->points())
    if (pt.time_ps > 100000000u && pt.time_ps <= 200000000u) in.push_back(pt.value);
  ASSERT_EQ(in.size(), 10u);
  double mean = 0, var = 0;
  for (double v : in) mean += v / 10;
  for (double v : in) var += (v - mean) * (v - mean) / 10;
  EXPECT_NEAR(mean, m.at("on"), 1e-9);
  EXPECT_NEAR(m.at("sd"), std::sqrt(var), 1e-9);
  EXPECT_DOUBLE_EQ(m.at("lo"), m.at("off"));
  EXPECT_DOUBLE_EQ(m.at("hi"), m.at("on"));
  EXPECT_DOUBLE_EQ(m.at("mid"), (m.at("on") + m.at("off")) / 2) << "each metric counted once";
  // rate(): the payload the responder placed per second over the window,
  // by hand from its sampled series; below the wire rate of the flow's link
  // by the headers (1024 B of payload per 1130 B on the wire) and above 80 %
  // of it.
  const core::TimeSeries* placed = env->stats.find_series("nic.t1h1.responder.bytes.per_s");
  ASSERT_NE(placed, nullptr);
  double bytes_per_s = 0;
  int samples = 0;
  for (const core::TimeSeries::Point& pt : placed->points())
    if (pt.time_ps > 100000000u && pt.time_ps <= 200000000u) {
      bytes_per_s += pt.value;
      ++samples;
    }
  ASSERT_EQ(samples, 10);
  EXPECT_NEAR(m.at("placed"), 8e-9 * bytes_per_s / samples, 1e-9);
  EXPECT_LT(m.at("placed"), m.at("on"));
  EXPECT_GT(m.at("placed"), 0.8 * m.at("on"));
  // The run ended before 1.9 ms: that window was not sampled in full. A
  // counter the NIC does not have gives no figure either.
  EXPECT_FALSE(m.count("late"));
  EXPECT_FALSE(m.count("gone"));
  // settle_us: the flow's link carries nothing while the QPs are set up
  // (~60 us) and runs above 30 Gb/s for good well before 200 us; the time is
  // a whole number of 10 us sample intervals. The other spine never does.
  EXPECT_GT(m.at("up"), 10.0);
  EXPECT_LT(m.at("up"), 150.0);
  EXPECT_NEAR(std::fmod(m.at("up"), 10.0), 0.0, 1e-9);
  for (const core::TimeSeries::Point& pt : ts->points()) {
    if (pt.time_ps > m.at("up") * 1e6 && pt.time_ps <= 200000000u) {
      EXPECT_GE(pt.value, 30.0) << "at " << pt.time_ps << " ps";
    }
  }
  EXPECT_FALSE(m.count("never"));
  // Of two series of which one has everything, the index is 1/2 in every
  // sample: in [0.45, 0.55] from the start, never above 0.6.
  EXPECT_EQ(m.at("lopsided"), 0.0);
  EXPECT_FALSE(m.count("fair_never"));
  // reach_us: the first sample above 30 Gb/s, which settle_us cannot precede.
  EXPECT_GT(m.at("first"), 10.0);
  EXPECT_LE(m.at("first"), m.at("up"));
  for (const core::TimeSeries::Point& pt : ts->points()) {
    if (pt.time_ps <= m.at("first") * 1e6) {
      EXPECT_LT(pt.value, 30.0) << "at " << pt.time_ps << " ps";
    }
  }
  EXPECT_EQ(missing, (std::vector<std::string>{"fair_never", "gone", "late", "never"}));
}

INSTANTIATE_TEST_SUITE_P(Spines, ViaSpine, ::testing::Values(1, 2));

// With one virtual path an MP-RDMA connection sends on its QP's own UDP
// source port, so `via` pins it to a spine (the paper's SP-RDMA), and it
// still runs MP-RDMA (ACK trailers, its window), not go-back-N.
TEST_F(SeriesMetricsRun, OneVirtualPathPinsAnMpRdmaConnectionToItsViaSpine) {
  for (int spine : {1, 2}) {
    SCOPED_TRACE("via t0-s" + std::to_string(spine));
    const std::string text =
        "name: t\n"
        "end_time: 2ms\n"
        "nic: {transport: mprdma, mprdma: {initial_window: 16, base_rtt: 3us, "
        "virtual_paths: 1}}\n"
        "fabric: {topology: mp_rdma_testbed, leaves: 2, spines: 4, hosts_per_leaf: 2}\n"
        "jobs:\n" +
        sp_job("t0-s" + std::to_string(spine));
    SetUp();  // a fresh simulation environment for each run
    auto p = run(text);
    const host::SizeResult& r = p->outcomes().at(0).results.at(0);
    EXPECT_TRUE(r.data_ok);
    const double payload = double(r.iterations) * 65536;
    expect_only_spine(spine, payload);
    EXPECT_GE(counter("nic.t0h1.transport.acks"), r.iterations * 64)
        << "MP-RDMA acknowledges every packet (go-back-N would coalesce)";
  }
}

TEST_F(SeriesMetricsRun, PerHostNicOverrideRunsGoBackNBesideMpRdma) {
  const std::string text =
      std::string(kBase) + "jobs:\n" + sp_job("t0-s3") +
      "  - {name: mp, app: write_bw, client: t0h0, server: t1h0, sizes: [64KiB], iterations: 30,\n"
      "     after_previous: false}\n"
      "metrics:\n"
      "  ood_max: pct(nic.t1h0.transport.rx_ood,100)\n"
      "  ood_p50: pct(nic.t1h0.transport.rx_ood,50)\n"
      "  ood_gbn: pct(nic.t1h1.transport.rx_ood,99.9)\n"
      "  ood_early: pct(nic.t1h0.transport.rx_ood,100,0s,200us)\n"
      "  ood_after_end: pct(nic.t1h0.transport.rx_ood,50,1s,2s)\n";
  auto p = run(text);
  EXPECT_EQ(p->host("t0h0").nic().config().transport, "mprdma");
  EXPECT_EQ(p->host("t0h1").nic().config().transport, "gbn");
  EXPECT_EQ(p->host("t1h1").nic().config().transport, "gbn");
  // MP-RDMA's NIC-wide counters move only on the MP-RDMA hosts.
  EXPECT_GT(counter("nic.t0h0.transport.acks"), 0u);
  EXPECT_GT(counter("nic.t1h0.transport.rx_placed"), 0u);
  EXPECT_EQ(counter("nic.t0h1.transport.acks"), 0u);
  EXPECT_EQ(counter("nic.t1h1.transport.rx_placed"), 0u);
  EXPECT_GT(counter("nic.t0h1.requester.acks"), 0u);
  // The MP-RDMA receiver's OOD histogram: one sample per new data packet,
  // its top the rx_max_ood counter; the go-back-N host has none.
  const core::Histogram* ood = env->stats.find_histogram("nic.t1h0.transport.rx_ood");
  ASSERT_NE(ood, nullptr);
  EXPECT_EQ(ood->count(), counter("nic.t1h0.transport.rx_placed") +
                              counter("nic.t1h0.transport.rx_overflow_drops") +
                              counter("nic.t1h0.transport.rx_sync_drops"));
  std::vector<std::string> missing;
  const auto m = p->metrics(&missing);
  EXPECT_EQ(m.at("ood_max"), double(counter("nic.t1h0.transport.rx_max_ood")));
  EXPECT_EQ(m.at("ood_p50"), ood->percentile(50));
  EXPECT_EQ(m.at("ood_p50"), std::floor(m.at("ood_p50")));  // exact: an integer
  EXPECT_EQ(env->stats.find_histogram("nic.t1h1.transport.rx_ood"), nullptr);
  // Over a window: only what was recorded in it (the largest OOD of the
  // first 200 us is at most the run's); a window after the end has none.
  ASSERT_TRUE(m.count("ood_early"));
  EXPECT_LE(m.at("ood_early"), m.at("ood_max"));
  EXPECT_EQ(missing, (std::vector<std::string>{"ood_after_end", "ood_gbn"}));
}

// <engine>.base_rtt_us: the smallest requester.rtt sample of the NICs that
// run that engine, in us; the go-back-N hosts beside MP-RDMA ones keep
// their own; an engine no NIC runs leaves the metric out.
TEST_F(SeriesMetricsRun, BaseRttIsTheSmallestSampleOfTheEnginesNics) {
  const std::string text =
      std::string(kBase) + "jobs:\n" + sp_job("t0-s3") +
      "  - {name: mp, app: write_bw, client: t0h0, server: t1h0, sizes: [64KiB], iterations: 30,\n"
      "     after_previous: false}\n"
      "metrics:\n"
      "  mp_rtt: mprdma.base_rtt_us\n"
      "  gbn_rtt: gbn.base_rtt_us\n"
      "  irn_rtt: irn.base_rtt_us\n";
  auto p = run(text);
  const core::Histogram* mp = env->stats.find_histogram("nic.t0h0.requester.rtt");
  const core::Histogram* gbn = env->stats.find_histogram("nic.t0h1.requester.rtt");
  ASSERT_NE(mp, nullptr);
  ASSERT_NE(gbn, nullptr);
  ASSERT_GT(mp->count(), 0u);
  ASSERT_GT(gbn->count(), 0u);
  std::vector<std::string> missing;
  const auto m = p->metrics(&missing);
  // The receivers (t1h*) send no requests of their own: the senders' minima.
  EXPECT_DOUBLE_EQ(m.at("mp_rtt"), mp->min() * 1e-3);
  EXPECT_DOUBLE_EQ(m.at("gbn_rtt"), gbn->min() * 1e-3);
  // Four 200 ns links each way and the frames' serialization: a few us.
  EXPECT_GT(m.at("mp_rtt"), 1.6);
  EXPECT_LT(m.at("mp_rtt"), 10.0);
  EXPECT_EQ(missing, (std::vector<std::string>{"irn_rtt"}));
}

// MP-RDMA's windows as sampled series: the requester's summed cwnd (at
// least one packet once its connection has sent), the server's 0 (its QP,
// in RTS too, never sends), and no series on a go-back-N NIC.
TEST_F(SeriesMetricsRun, MpRdmaWindowsAreSampledPerNic) {
  const std::string text =
      std::string(kBase) +
      "sample_interval: 50us\njobs:\n"
      "  - {name: mp, app: write_bw, client: t0h0, server: t1h0, sizes: [64KiB], "
      "iterations: 30}\n";
  auto p = run(text);
  const core::TimeSeries* cwnd = env->stats.find_series("nic.t0h0.transport.cwnd");
  const core::TimeSeries* idle = env->stats.find_series("nic.t1h0.transport.cwnd");
  const core::TimeSeries* rec = env->stats.find_series("nic.t0h0.transport.recovering");
  ASSERT_NE(cwnd, nullptr);
  ASSERT_NE(idle, nullptr);
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(env->stats.find_series("nic.t0h1.transport.cwnd"), nullptr) << "a go-back-N NIC";
  ASSERT_GT(cwnd->points().size(), 3u);
  size_t open = 0;
  for (const core::TimeSeries::Point& pt : cwnd->points()) {
    if (pt.value == 0) continue;  // before the connection is set up
    ++open;
    EXPECT_GE(pt.value, 1.0) << "the window's floor is one packet";
    EXPECT_LT(pt.value, 65536.0);
  }
  EXPECT_GT(open, 0u);
  for (const core::TimeSeries::Point& pt : idle->points()) EXPECT_EQ(pt.value, 0.0);
  for (const core::TimeSeries::Point& pt : rec->points())
    EXPECT_TRUE(pt.value == 0.0 || pt.value == 1.0) << pt.value;
  // The window now, from the model, is what the series would read.
  const auto* mux = dynamic_cast<const nic::TransportMux*>(&p->host("t0h0").nic().engine());
  ASSERT_NE(mux, nullptr);
  const auto* mp = dynamic_cast<const nic::MpRdmaEngine*>(mux->find(MPR_TRANSPORT_MP_RDMA));
  ASSERT_NE(mp, nullptr);
  EXPECT_GE(mp->cwnd_sum(), 1.0);
  EXPECT_EQ(mp->recovering(), 0u) << "a clean run ends out of recovery";
}

// The window totals the sampler reads are running sums kept by the
// transport; checked every 5 us of a run against a walk over the
// connections' own models, with losses (recoveries, RTOs), several
// connections per NIC and connections that end before others.
TEST_F(SeriesMetricsRun, WindowTotalsFollowEveryConnectionsModel) {
  const std::string text =
      std::string(kBase) +
      "jobs:\n"
      "  - {name: a, app: write_bw, client: t0h0, server: t1h0, sizes: [64KiB],"
      " iterations: 40, qps: 3, after_previous: false}\n"
      "  - {name: b, app: write_bw, client: t1h0, server: t0h0, sizes: [64KiB],"
      " iterations: 10, qps: 2, after_previous: false}\n";
  cfg = load_scenario(test::write_temp("run.yaml", text),
                      {"fabric.events=[{at: 0s, link: t0-s1, action: loss, value: '0.05', "
                       "dir: a2b}]",
                       "end_time=20ms"});
  auto p = std::make_unique<Platform>(cfg, *env);
  const auto* mux = dynamic_cast<const nic::TransportMux*>(&p->host("t0h0").nic().engine());
  ASSERT_NE(mux, nullptr);
  const auto* mp = dynamic_cast<const nic::MpRdmaEngine*>(mux->find(MPR_TRANSPORT_MP_RDMA));
  ASSERT_NE(mp, nullptr);
  int checks = 0, with_windows = 0, in_recovery = 0, mismatches = 0;
  sc_core::sc_spawn(
      [&] {
        for (;;) {
          sc_core::wait(sc_core::sc_time(5, sc_core::SC_US));
          uint64_t q = 0;
          uint32_t recovering = 0;
          for (uint32_t qpn : mp->qpns()) {
            const nic::MpSender* tx = mp->sender(qpn);
            if (!tx) continue;
            if (tx->ever_sent()) q += tx->cwnd_q16();
            recovering += tx->in_recovery();
          }
          ++checks;
          with_windows += q > 0;
          in_recovery += recovering > 0;
          if (mp->cwnd_sum() != static_cast<double>(q) / 65536.0 || mp->recovering() != recovering)
            ++mismatches;
        }
      },
      "window_totals_check");
  EXPECT_TRUE(p->run());
  EXPECT_TRUE(p->all_ok());
  EXPECT_EQ(mismatches, 0) << "of " << checks << " checks";
  EXPECT_GT(with_windows, 20) << "the check saw connections sending";
  EXPECT_GT(in_recovery, 0) << "and some of them recovering from the losses";
  EXPECT_GT(counter("nic.t0h0.transport.recoveries"), 0u);
}

// Time series stay in memory until the run ends: an interval that would
// need more than 4 GiB is refused before the run, with the interval that
// fits (found by fuzzing scenarios: 10 ps over 3 ms took 23 GiB and the
// kernel killed the simulator).
TEST_F(SeriesMetricsRun, SampleIntervalThatWouldFillMemoryIsRefused) {
  cfg = load_scenario(test::write_temp("tiny_interval.yaml",
                                       std::string(kBase) + "sample_interval: 10ps\njobs: []\n"));
  try {
    Platform p(cfg, *env);
    FAIL() << "a 10 ps interval over 2 ms was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("sample_interval 10ps"), std::string::npos) << m;
    EXPECT_NE(m.find("use an interval of at least"), std::string::npos) << m;
  }
}

// The bound is not in the way of fine sampling: 1 ns over 2 ms fits.
TEST_F(SeriesMetricsRun, NanosecondSampleIntervalIsAccepted) {
  cfg = load_scenario(test::write_temp("small_interval.yaml",
                                       std::string(kBase) + "sample_interval: 1ns\njobs: []\n"));
  EXPECT_NO_THROW(Platform(cfg, *env));
}

// The jobs' buffers are this process's memory: jobs that need more than the
// machine has (here 4 TiB: 16 connections of 1 GiB messages per job, 64
// jobs) are refused before the run instead of being killed by the kernel.
TEST_F(SeriesMetricsRun, JobsNeedingMoreMemoryThanTheMachineHasAreRefused) {
  // (NIC tables large enough for the 1024 connection ends per host: the
  // scenario check would refuse the MTT entries first.)
  std::string text = std::string(kBase) + "jobs:\n";
  text.replace(text.find("nic: {"), 6, "nic: {limits: {max_mtt: 4294967295}, ");
  for (int j = 0; j < 64; ++j)
    text += "  - {name: j" + std::to_string(j) +
            ", app: write_bw, client: t0h0, server: t1h0, sizes: [1GiB], qps: 16}\n";
  cfg = load_scenario(test::write_temp("huge_jobs.yaml", text));
  try {
    Platform p(cfg, *env);
    FAIL() << "4 TiB of buffers were accepted";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the jobs' buffers need about 4.1e+03 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("job 'j0' alone 64 GiB"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace mprdma::platform
