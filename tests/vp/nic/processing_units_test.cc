// Integration: the processing-unit array in the NIC (vp/nic/processing_units.h).
// Two WRITE streams of small messages run at once from h0 to h1, on QPs 2
// and 3. With packet building made expensive (latency.tx_packet 200 cycles,
// 1.25 Mpps per PU) the PUs are the bottleneck: on two PUs (pu.count 8:
// QP 2 -> PU 2, QP 3 -> PU 3) the streams run in parallel and the NIC sends
// about twice the packets per second it sends when both share one PU
// (pu.count 1). The per-PU counters show where the work ran, and the data
// of both streams arrives intact (each QP's packets stay in order).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

std::string scenario(int pus) {
  std::string s =
      "name: pus\n"
      "end_time: 100ms\n"
      "nic: {mtu: 1024, pu: {count: " +
      std::to_string(pus) +
      "}, latency: {tx_packet: 200}}\n"
      "hosts: [{name: h0}, {name: h1}]\n"
      "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
      "jobs:\n";
  for (int j = 0; j < 2; ++j)
    s += "  - {name: w" + std::to_string(j) +
         ", app: write_bw, client: h0, server: h1, sizes: [64], iterations: 400, "
         "tx_depth: 32, cq_mod: 1, inline_size: 64, run_at: 1ms, after_previous: false}\n";
  return s;
}

class ProcessingUnits : public test::ScenarioRun {
 protected:
  double run_rate(int pus) {
    EXPECT_TRUE(run(scenario(pus)));
    double seconds = 0, messages = 0;
    for (const JobOutcome& o : platform->outcomes()) {
      const host::SizeResult& r = o.results.at(0);
      EXPECT_TRUE(r.data_ok) << o.name;
      EXPECT_EQ(r.error, "") << o.name;
      messages += static_cast<double>(r.iterations);
      seconds = std::max(seconds, r.seconds);
    }
    return messages / seconds / 1e6;  // Mmsg/s of both streams
  }
};

TEST_F(ProcessingUnits, QpsOnDifferentPusRunInParallel) {
  const double shared = run_rate(1);
  EXPECT_EQ(counter("nic.h0.pu.0.ops"),
            counter("nic.h0.tx.packets") + counter("nic.h0.mac.rx_packets"))
      << "one PU built every packet and processed every received one";
  EXPECT_GT(counter("nic.h0.pu.0.wait_cycles"), 0u) << "the two QPs queued behind each other";
  // A PU building a 64 B WRITE every 200 cycles (800 ns): at most 1.25 M/s.
  EXPECT_LT(shared, 1.25 * 1.02);

  const double parallel = run_rate(8);
  EXPECT_GT(counter("nic.h0.pu.2.ops"), 400u);
  EXPECT_GT(counter("nic.h0.pu.3.ops"), 400u);
  EXPECT_EQ(counter("nic.h0.pu.0.ops"), 0u);
  EXPECT_GT(parallel, 1.8 * shared) << "two PUs build packets in parallel";
}

}  // namespace
}  // namespace mprdma::platform
