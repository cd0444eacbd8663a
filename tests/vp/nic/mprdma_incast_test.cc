// Integration: MP-RDMA's congestion control closes its loop through the
// fabric. Four MP-RDMA writers into one receiver through one switch (PFC on),
// with the testbed's step marking (RED (1.0, 20 KB, 20 KB), NSDI'18 §5.1) and
// with marking off. With marking, the switch marks CE, the receiving NIC
// echoes it as ECE in the ACK of that packet (§3.2.1), every sender takes
// ECE ACKs and lowers its window: the bottleneck queue stays near the
// marking threshold, below what it reaches without marking (where only PFC
// holds the senders back and PAUSE frames keep coming), the bottleneck stays
// busy and the four share it near fairly. Figures are taken over a window
// after the warm-up (counters read between kernel runs).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/sim_test.h"
#include "vp/platform/platform.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

constexpr int kSenders = 4;
constexpr double kBottleneckBps = 40e9;
constexpr uint64_t kWarmupPs = 3'000'000'000;  // 3 ms
constexpr uint64_t kStepMarkBytes = 20'000;    // K of the step marking

std::string scenario_text(bool marking) {
  std::string jobs;
  for (int i = 1; i <= kSenders; ++i)
    jobs += "  - {name: f" + std::to_string(i) + ", app: write_bw, client: l0h" +
            std::to_string(i) + ", server: l0h0, sizes: [64KiB], iterations: 1000000, " +
            "after_previous: false}\n";
  return "name: mprdma-incast\n"
         "seed: 1\n"
         "end_time: 8ms\n"
         "nic: {mtu: 1024, transport: mprdma}\n"
         "fabric:\n"
         "  topology: leaf_spine\n"
         "  leaves: 1\n"
         "  spines: 1\n"
         "  hosts_per_leaf: 5\n"
         "  access_rate: 40Gbps\n"
         "  uplink_rate: 40Gbps\n"
         "  link: {delay: 200ns}\n"
         "  switch:\n"
         "    ecn: {enabled: " + std::string(marking ? "true" : "false") +
         ", kmin: 20KB, kmax: 20KB, pmax: 1.0}\n"
         "    pfc: {enabled: true, lossless_mask: 1}\n"
         "jobs:\n" + jobs;
}

struct Figures {
  std::vector<uint64_t> ece_acks;  // per sender, whole run
  uint64_t marks = 0;              // bottleneck egress, whole run
  double rx_bps = 0;               // receiver frame bits / window
  std::vector<double> flow_bps;    // per sender, frame bits / window
  uint64_t queue_max = 0;          // bottleneck egress, in the window
  uint64_t pauses = 0;             // PAUSE frames to the senders, in the window
};

class MprdmaIncast : public test::SimTest {
 protected:
  void TearDown() override { platform.reset(); }

  core::Counter& counter(const std::string& path) {
    // Existing counters are returned as they are (unit and text unused).
    return env->stats.counter(path, "", "");
  }

  Figures run(bool marking) {
    ScenarioConfig cfg = load_scenario(test::write_temp("scenario.yaml", scenario_text(marking)));
    platform.reset();
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
    platform = std::make_unique<Platform>(cfg, *env);

    uint64_t t0 = 0, rx0 = 0, pause0 = 0;
    std::vector<uint64_t> tx0(kSenders);
    auto pauses = [this] {
      uint64_t n = 0;
      for (int i = 1; i <= kSenders; ++i)
        n += counter("switch.l0.port" + std::to_string(i) + ".pause_tx").value();
      return n;
    };
    platform->run([&](uint64_t now_ps) {
      if (t0 || now_ps < kWarmupPs) return;
      t0 = now_ps;
      rx0 = counter("nic.l0h0.mac.rx_bytes").value();
      for (int i = 0; i < kSenders; ++i)
        tx0[i] = counter("nic.l0h" + std::to_string(i + 1) + ".mac.tx_bytes").value();
      pause0 = pauses();
      counter("switch.l0.port0.queue_max_bytes").set(0);  // the peak after the warm-up
    });
    const uint64_t t1 = static_cast<uint64_t>(sc_core::sc_time_stamp().value());
    EXPECT_GT(t0, 0u) << "the run ended before the warm-up";
    Figures f;
    const double window_s = static_cast<double>(t1 - t0) * 1e-12;
    f.rx_bps = static_cast<double>(counter("nic.l0h0.mac.rx_bytes").value() - rx0) * 8 / window_s;
    for (int i = 0; i < kSenders; ++i) {
      const std::string h = "nic.l0h" + std::to_string(i + 1);
      f.flow_bps.push_back(static_cast<double>(counter(h + ".mac.tx_bytes").value() - tx0[i]) *
                           8 / window_s);
      f.ece_acks.push_back(counter(h + ".transport.ece_acks").value());
    }
    f.marks = counter("switch.l0.port0.ecn_marks").value();
    f.queue_max = counter("switch.l0.port0.queue_max_bytes").value();
    f.pauses = pauses() - pause0;
    return f;
  }

  std::unique_ptr<Platform> platform;
};

double jain(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return s2 > 0 ? s * s / (static_cast<double>(x.size()) * s2) : 0;
}

TEST_F(MprdmaIncast, EcnMarksComeBackAsEceAndKeepTheQueueNearTheThreshold) {
  const Figures off = run(false);
  const Figures on = run(true);
  std::string flows;
  for (double b : on.flow_bps) flows += " " + std::to_string(b / 1e9);
  const std::string trace =
      "marking: rx " + std::to_string(on.rx_bps / 1e9) + " Gb/s, flows" + flows + ", marks " +
      std::to_string(on.marks) + ", queue max " + std::to_string(on.queue_max) + " B, pauses " +
      std::to_string(on.pauses) + "; off: rx " + std::to_string(off.rx_bps / 1e9) +
      " Gb/s, queue max " + std::to_string(off.queue_max) + " B, pauses " +
      std::to_string(off.pauses);
  SCOPED_TRACE(trace);

  // The switch marked, and every sender heard of it through ECE ACKs.
  EXPECT_GT(on.marks, 0u);
  for (int i = 0; i < kSenders; ++i) EXPECT_GT(on.ece_acks[i], 0u) << "sender l0h" << i + 1;
  EXPECT_EQ(off.marks, 0u);
  for (int i = 0; i < kSenders; ++i) EXPECT_EQ(off.ece_acks[i], 0u) << "sender l0h" << i + 1;

  // Without marking only PFC holds the windows back: the queue sits at the
  // PAUSE threshold. With it, -1/2 per ECE ACK keeps the queue within a few
  // thresholds (four senders, each reacting one RTT late) and PFC idle.
  EXPECT_GT(off.pauses, 0u);
  EXPECT_LT(on.queue_max, off.queue_max);
  EXPECT_LT(on.queue_max, 4 * kStepMarkBytes);
  EXPECT_EQ(on.pauses, 0u);

  // The bottleneck stays busy (frame bits) and the four share it near fairly.
  EXPECT_GT(on.rx_bps, 0.85 * kBottleneckBps);
  EXPECT_GT(jain(on.flow_bps), 0.95);
  RecordProperty("figures", trace);
}

}  // namespace
}  // namespace mprdma::platform
