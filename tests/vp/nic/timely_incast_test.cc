// Integration: TIMELY (the RateControl seam's RTT-driven control) on the
// 4-to-1 incast of scenarios/mp-rdma/dcqcn-incast.yaml, against no
// congestion control. Each sender's requester times one packet at a time
// and feeds the RTT to its QP's TIMELY reaction point: the RTT grows with
// the bottleneck queue, the senders cut their rates and their packets wait
// for them. No CNP is sent (TIMELY needs no switch or receiver support).
// T_low is 0 here, as TIMELY's authors advise for a NIC that paces every
// packet (timely.md): the queueing delay of this incast stays below the
// paper's 50 us, which would only ever raise the rate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/incast_window.h"
#include "support/sim_test.h"
#include "vp/nic/rate_control/timely/timely_config.h"
#include "vp/platform/platform.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

constexpr int kSenders = 4;
constexpr uint64_t kWarmupPs = 10'000'000'000;  // 10 ms
constexpr uint64_t kEndPs = 20'000'000'000;     // 20 ms

struct Figures : test::IncastWindow {
  std::vector<uint64_t> samples, cuts, paced;  // per sender
  bool cnp_counters = false;                   // any NIC registered CNP statistics
};

class TimelyIncast : public test::IncastTest {
 protected:
  Figures run(const std::string& cc) {
    const char* src = std::getenv("MPRDMA_SOURCE_DIR");
    ScenarioConfig cfg =
        load_scenario(std::string(src ? src : ".") + "/scenarios/mp-rdma/dcqcn-incast.yaml");
    cfg.nic.congestion_control = cc;
    cfg.nic.rate_controls.get<nic::TimelyConfig>().t_low = core::Duration{};
    cfg.end_time = core::Duration::from_ps(kEndPs);
    for (host::JobConfig& j : cfg.jobs) j.iterations = 1000000;  // stream to the end
    Figures f;
    static_cast<test::IncastWindow&>(f) = run_window(cfg, kSenders, kWarmupPs);
    if (cc == "timely") {
      for (int i = 1; i <= kSenders; ++i) {
        const std::string h = "nic.l0h" + std::to_string(i) + ".timely.";
        f.samples.push_back(counter_value(h + "rtt_samples"));
        f.cuts.push_back(counter_value(h + "rate_cuts"));
        f.paced.push_back(counter_value(h + "paced"));
      }
      for (int i = 0; i <= kSenders; ++i)
        for (const char* c : {".timely.cnp_tx", ".timely.cnp_rx", ".dcqcn.cnp_tx"})
          if (env->stats.find_counter("nic.l0h" + std::to_string(i) + c)) f.cnp_counters = true;
    }
    return f;
  }
};

TEST_F(TimelyIncast, RttSamplesCutTheSendersRatesAndShortenTheQueue) {
  const Figures none = run("none");
  const Figures t = run("timely");
  std::string flows;
  for (double b : t.flow_bps) flows += " " + std::to_string(b / 1e9);
  const std::string trace = "timely: rx " + std::to_string(t.rx_bps / 1e9) + " Gb/s, flows" +
                            flows + ", queue max " + std::to_string(t.queue_max) + " B; none: rx " +
                            std::to_string(none.rx_bps / 1e9) + " Gb/s, queue max " +
                            std::to_string(none.queue_max) + " B";
  SCOPED_TRACE(trace);
  ASSERT_TRUE(t.warmed_up);
  ASSERT_EQ(t.samples.size(), static_cast<size_t>(kSenders));
  for (int i = 0; i < kSenders; ++i) {
    EXPECT_GT(t.samples[i], 0u) << "sender l0h" << i + 1;
    EXPECT_GT(t.cuts[i], 0u) << "sender l0h" << i + 1;
    EXPECT_GT(t.paced[i], 0u) << "sender l0h" << i + 1;
  }
  EXPECT_FALSE(t.cnp_counters) << "TIMELY takes no CNPs";
  EXPECT_LT(t.queue_max, none.queue_max);
  EXPECT_GT(t.rx_bps, 0.0);
  RecordProperty("figures", trace);
}

}  // namespace
}  // namespace mprdma::platform
