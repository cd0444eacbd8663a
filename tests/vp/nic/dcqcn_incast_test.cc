// Integration: DCQCN on the 4-to-1 incast of scenarios/mp-rdma/dcqcn-incast.yaml
// (four senders into one receiver through one switch, PFC on, RED marking),
// run with nic.congestion_control dcqcn and none. With DCQCN the receiver
// sends CNPs and every sender cuts its rate; after a warm-up the bottleneck
// queue is shorter and the switch sends fewer PAUSE frames than without,
// the bottleneck stays busy (> 85 % of 40 Gb/s) and the four flows share it
// near fairly (Jain index > 0.95). The figures are measured over a window
// after the warm-up (counters read between kernel runs). The same holds when
// the receiver READs from the four instead (read_bw, l0h0 the client): the
// data are READ responses, which its notification point answers with CNPs
// and the senders' rate limiters pace (their QPs answer from RTR).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/incast_window.h"
#include "support/sim_test.h"
#include "vp/platform/platform.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

constexpr int kSenders = 4;
constexpr double kBottleneckBps = 40e9;
constexpr uint64_t kWarmupPs = 30'000'000'000;  // 30 ms
constexpr uint64_t kEndPs = 40'000'000'000;     // 40 ms

std::string scenario_path(const std::string& rel) {
  const char* src = std::getenv("MPRDMA_SOURCE_DIR");
  return std::string(src ? src : ".") + "/scenarios/" + rel;
}

struct Figures : test::IncastWindow {
  uint64_t cnp_tx = 0;          // receiver
  std::vector<uint64_t> cuts;   // per sender
  std::vector<uint64_t> paced;  // per sender: waits for the rate
};

class DcqcnIncast : public test::IncastTest {
 protected:
  Figures run(const std::string& cc, bool read = false, const std::string& transport = "gbn") {
    ScenarioConfig cfg = load_scenario(scenario_path("mp-rdma/dcqcn-incast.yaml"));
    cfg.nic.congestion_control = cc;
    cfg.nic.transport = transport;
    cfg.end_time = core::Duration::from_ps(kEndPs);
    for (host::JobConfig& j : cfg.jobs) {
      j.iterations = 1000000;  // stream to the end
      if (read) {              // l0h0 fetches from the four
        j.app = host::JobConfig::App::read_bw;
        std::swap(j.client, j.server);
      }
    }
    Figures f;
    static_cast<test::IncastWindow&>(f) = run_window(cfg, kSenders, kWarmupPs);
    if (cc == "dcqcn") {
      f.cnp_tx = counter_value("nic.l0h0.dcqcn.cnp_tx");
      for (int i = 1; i <= kSenders; ++i) {
        const std::string h = "nic.l0h" + std::to_string(i);
        f.cuts.push_back(counter_value(h + ".dcqcn.rate_cuts"));
        f.paced.push_back(counter_value(h + ".dcqcn.paced"));
      }
    }
    return f;
  }
};

// (READ?, engine): DCQCN beside go-back-N, and beside IRN for READs (its
// READ responses, resent by its own recovery, are paced the same way).
class DcqcnIncastOp : public DcqcnIncast,
                      public ::testing::WithParamInterface<std::pair<bool, std::string>> {};

TEST_P(DcqcnIncastOp, CutsRatesAndKeepsTheQueueShortWithFairHighThroughput) {
  const Figures none = run("none", GetParam().first, GetParam().second);
  const Figures d = run("dcqcn", GetParam().first, GetParam().second);
  std::string flows;
  for (double b : d.flow_bps) flows += " " + std::to_string(b / 1e9);
  const std::string trace = "dcqcn: rx " + std::to_string(d.rx_bps / 1e9) + " Gb/s, flows" + flows +
                            ", queue max " + std::to_string(d.queue_max) + " B, pauses " +
                            std::to_string(d.pauses) + "/" + std::to_string(d.pauses_total) +
                            "; none: rx " + std::to_string(none.rx_bps / 1e9) +
                            " Gb/s, queue max " + std::to_string(none.queue_max) + " B, pauses " +
                            std::to_string(none.pauses) + "/" + std::to_string(none.pauses_total);
  SCOPED_TRACE(trace);

  // The receiver notified, every sender cut its rate.
  EXPECT_GT(d.cnp_tx, 0u);
  ASSERT_EQ(d.cuts.size(), static_cast<size_t>(kSenders));
  for (int i = 0; i < kSenders; ++i) {
    EXPECT_GT(d.cuts[i], 0u) << "sender l0h" << i + 1;
    // ... and its data really waited for the rate (READ: the responses).
    EXPECT_GT(d.paced[i], 0u) << "sender l0h" << i + 1;
  }

  // Without congestion control only PFC holds the senders back: the queue
  // sits at the PAUSE threshold and PAUSE frames keep coming.
  EXPECT_GT(none.pauses, 0u);
  EXPECT_LT(d.queue_max, none.queue_max);
  EXPECT_LT(d.pauses, none.pauses);
  EXPECT_LT(d.pauses_total, none.pauses_total);

  // The bottleneck stays busy (frame bits, FCS/preamble/gap excluded) and
  // the four flows share it near fairly.
  EXPECT_GT(d.rx_bps, 0.85 * kBottleneckBps);
  EXPECT_GT(test::jain_index(d.flow_bps), 0.95);
  RecordProperty("figures", trace);
}

INSTANTIATE_TEST_SUITE_P(Op, DcqcnIncastOp,
                         ::testing::Values(std::make_pair(false, std::string("gbn")),
                                           std::make_pair(true, std::string("gbn")),
                                           std::make_pair(true, std::string("irn"))),
                         [](const ::testing::TestParamInfo<std::pair<bool, std::string>>& i) {
                           return std::string(i.param.first ? "Read" : "Write") + "_" +
                                  i.param.second;
                         });

}  // namespace
}  // namespace mprdma::platform
