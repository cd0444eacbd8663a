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
#include "support/incast_window.h"
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
         "    ecn: {enabled: " +
         std::string(marking ? "true" : "false") +
         ", kmin: 20KB, kmax: 20KB, pmax: 1.0}\n"
         "    pfc: {enabled: true, lossless_mask: 1}\n"
         "jobs:\n" +
         jobs;
}

struct Figures : test::IncastWindow {
  std::vector<uint64_t> ece_acks;  // per sender, whole run
  uint64_t marks = 0;              // bottleneck egress, whole run
};

class MpRdmaIncast : public test::IncastTest {
 protected:
  Figures run(bool marking) {
    ScenarioConfig cfg = load_scenario(test::write_temp("scenario.yaml", scenario_text(marking)));
    Figures f;
    static_cast<test::IncastWindow&>(f) = run_window(cfg, kSenders, kWarmupPs);
    for (int i = 1; i <= kSenders; ++i)
      f.ece_acks.push_back(counter_value("nic.l0h" + std::to_string(i) + ".transport.ece_acks"));
    f.marks = counter_value("switch.l0.port0.ecn_marks");
    return f;
  }
};

TEST_F(MpRdmaIncast, EcnMarksComeBackAsEceAndKeepTheQueueNearTheThreshold) {
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
  EXPECT_GT(test::jain_index(on.flow_bps), 0.95);
  RecordProperty("figures", trace);
}

}  // namespace
}  // namespace mprdma::platform
