// Figures of an N-to-1 incast through one switch, over a window after a
// warm-up: senders l<leaf>h1..hN write to l<leaf>h0, which hangs off port 0
// of switch l<leaf> (the leaf_spine topology with one leaf). The counters are
// read between kernel runs: at the first stop after the warm-up, and at the
// end. Shared by the congestion-control incast tests (DCQCN, MP-RDMA).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "support/sim_test.h"
#include "vp/core/sim_env.h"
#include "vp/platform/platform.h"
#include "vp/platform/scenario.h"

namespace mprdma::test {

struct IncastWindow {
  double window_s = 0;
  double rx_bps = 0;             // receiver frame bits / window
  std::vector<double> flow_bps;  // per sender, frame bits / window
  uint64_t queue_max = 0;        // bottleneck egress, in the window
  uint64_t pauses = 0;           // PAUSE frames to the senders, in the window
  uint64_t pauses_total = 0;     // over the whole run
  bool warmed_up = false;        // false: the run ended before the warm-up
};

// Runs `platform` to its end and measures the window from the first stop at
// or after `warmup_ps`.
inline IncastWindow run_incast_window(platform::Platform& platform, core::SimEnv& env, int senders,
                                      uint64_t warmup_ps) {
  // Existing counters are returned as they are (unit and text unused).
  auto counter = [&env](const std::string& path) -> core::Counter& {
    return env.stats.counter(path, "", "");
  };
  auto host = [](int i) { return "nic.l0h" + std::to_string(i); };
  auto pauses = [&] {
    uint64_t n = 0;
    for (int i = 1; i <= senders; ++i)
      n += counter("switch.l0.port" + std::to_string(i) + ".pause_tx").value();
    return n;
  };
  IncastWindow w;
  uint64_t t0 = 0, rx0 = 0, pause0 = 0;
  std::vector<uint64_t> tx0(static_cast<size_t>(senders));
  platform.run([&](uint64_t now_ps) {
    if (t0 || now_ps < warmup_ps) return;
    t0 = now_ps;
    rx0 = counter(host(0) + ".mac.rx_bytes").value();
    for (int i = 0; i < senders; ++i) tx0[i] = counter(host(i + 1) + ".mac.tx_bytes").value();
    pause0 = pauses();
    counter("switch.l0.port0.queue_max_bytes").set(0);  // the peak after the warm-up
  });
  w.warmed_up = t0 > 0;
  const uint64_t t1 = static_cast<uint64_t>(sc_core::sc_time_stamp().value());
  w.window_s = static_cast<double>(t1 - t0) * 1e-12;
  w.rx_bps = static_cast<double>(counter(host(0) + ".mac.rx_bytes").value() - rx0) * 8 / w.window_s;
  for (int i = 0; i < senders; ++i)
    w.flow_bps.push_back(
        static_cast<double>(counter(host(i + 1) + ".mac.tx_bytes").value() - tx0[i]) * 8 /
        w.window_s);
  w.queue_max = counter("switch.l0.port0.queue_max_bytes").value();
  w.pauses_total = pauses();
  w.pauses = w.pauses_total - pause0;
  return w;
}

// Fixture of the incast tests: each run() builds the scenario's platform in
// a fresh kernel and measures its window.
class IncastTest : public SimTest {
 protected:
  void TearDown() override { platform.reset(); }

  IncastWindow run_window(const platform::ScenarioConfig& cfg, int senders, uint64_t warmup_ps) {
    platform.reset();
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
    platform = std::make_unique<platform::Platform>(cfg, *env);
    IncastWindow w = run_incast_window(*platform, *env, senders, warmup_ps);
    EXPECT_TRUE(w.warmed_up) << "the run ended before the warm-up";
    return w;
  }

  std::unique_ptr<platform::Platform> platform;
};

// Jain's fairness index of the rates: 1 when all are equal, 1/n when one
// takes everything.
inline double jain_index(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return s2 > 0 ? s * s / (static_cast<double>(x.size()) * s2) : 0;
}

}  // namespace mprdma::test
