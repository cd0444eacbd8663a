#include "vp/platform/histogram_windows.h"

#include <gtest/gtest.h>

#include "support/sim_test.h"
#include "vp/core/calendar.h"

namespace mprdma::platform {
namespace {

class HistogramWindowsTest : public test::SimTest {
 protected:
  static uint64_t us(uint64_t n) { return n * 1000000; }
  // Records `value` `n` times at `at_us` microseconds.
  void record_at(core::Calendar& cal, uint64_t at_us, double value, int n = 1) {
    cal.at(sc_core::sc_time(static_cast<double>(at_us), sc_core::SC_US), [this, value, n] {
      for (int i = 0; i < n; ++i) h->record(value);
    });
  }
  void SetUp() override {
    test::SimTest::SetUp();
    h = &env->stats.histogram("nic.a.transport.rx_ood", "packets", "test");
    h->set_exact_below(1 << 20);
  }
  core::Histogram* h = nullptr;
};

// A start-up transient of large values, then a steady state of small ones
// with one outlier: the window sees only what was recorded inside it, and
// a sample at a window's edge belongs to the window that starts there.
TEST_F(HistogramWindowsTest, PercentileCountsOnlyTheSamplesInsideTheWindow) {
  core::Calendar cal("cal");
  record_at(cal, 1, 500, 100);  // start-up
  for (uint64_t t = 10; t < 100; t += 10) record_at(cal, t, 3, 100);
  record_at(cal, 50, 40);       // one outlier in steady state
  record_at(cal, 100, 900, 5);  // at the window's end: not in it
  HistogramWindows w(env->stats);
  w.add("nic.a.transport.rx_ood", us(10), us(100));
  w.add("nic.a.transport.rx_ood", us(0), us(100));
  core::ObserverSet set;
  set.add(&w);
  core::run_observed(set, sc_core::sc_time(150, sc_core::SC_US));

  // [10 us, 100 us): 900 samples of 3 and one of 40.
  EXPECT_EQ(w.percentile("nic.a.transport.rx_ood", us(10), us(100), 99), 3.0);     // rank 892
  EXPECT_EQ(w.percentile("nic.a.transport.rx_ood", us(10), us(100), 99.9), 40.0);  // rank 901
  EXPECT_EQ(w.percentile("nic.a.transport.rx_ood", us(10), us(100), 100), 40.0);
  EXPECT_EQ(w.percentile("nic.a.transport.rx_ood", us(10), us(100), 0), 3.0);
  // [0, 100 us) has the start-up: 100 of 1001 samples are 500 (rank 1000).
  EXPECT_EQ(w.percentile("nic.a.transport.rx_ood", 0, us(100), 99.9), 500.0);
  EXPECT_EQ(w.percentile("nic.a.transport.rx_ood", 0, us(100), 50), 3.0);
  // The whole histogram, for comparison, also has the late values.
  EXPECT_EQ(h->percentile(100), 900.0);
}

TEST_F(HistogramWindowsTest, AWindowTheRunDidNotReachOrThatIsEmptyHasNoPercentile) {
  core::Calendar cal("cal");
  record_at(cal, 5, 7, 10);
  HistogramWindows w(env->stats);
  EXPECT_TRUE(w.empty());
  w.add("nic.a.transport.rx_ood", us(0), us(20));
  w.add("nic.a.transport.rx_ood", us(10), us(20));  // nothing recorded in it
  w.add("nic.a.transport.rx_ood", us(10), us(80));  // ends after the run
  w.add("nic.b.transport.rx_ood", us(0), us(20));   // no such histogram
  EXPECT_FALSE(w.empty());
  core::ObserverSet set;
  set.add(&w);
  core::run_observed(set, sc_core::sc_time(50, sc_core::SC_US));
  EXPECT_EQ(w.percentile("nic.a.transport.rx_ood", us(0), us(20), 99.9), 7.0);
  EXPECT_FALSE(w.percentile("nic.a.transport.rx_ood", us(10), us(20), 99.9));
  EXPECT_FALSE(w.percentile("nic.a.transport.rx_ood", us(10), us(80), 99.9));
  EXPECT_FALSE(w.percentile("nic.b.transport.rx_ood", us(0), us(20), 99.9));
  EXPECT_FALSE(w.percentile("nic.a.transport.rx_ood", us(0), us(30), 99.9)) << "never asked for";
  EXPECT_EQ(w.next_due(), sc_core::sc_time(80, sc_core::SC_US));
}

// Values above the exact range fall in log-linear buckets: the window's
// percentile is the bucket's middle, as for the whole histogram.
TEST_F(HistogramWindowsTest, BucketedValuesAreWithinTheBucketPrecision) {
  core::Calendar cal("cal");
  core::Histogram& lat = env->stats.histogram("pcie.a.dma_read_latency", "ns", "test");
  cal.at(sc_core::sc_time(1, sc_core::SC_US), [&] { lat.record(100000); });
  cal.at(sc_core::sc_time(20, sc_core::SC_US), [&] {
    for (int i = 1; i <= 1000; ++i) lat.record(400 + i);
  });
  HistogramWindows w(env->stats);
  w.add("pcie.a.dma_read_latency", us(10), us(30));
  core::ObserverSet set;
  set.add(&w);
  core::run_observed(set, sc_core::sc_time(40, sc_core::SC_US));
  const auto p50 = w.percentile("pcie.a.dma_read_latency", us(10), us(30), 50);
  const auto p100 = w.percentile("pcie.a.dma_read_latency", us(10), us(30), 100);
  ASSERT_TRUE(p50 && p100);
  EXPECT_NEAR(*p50, 900.0, 0.016 * 900);
  EXPECT_NEAR(*p100, 1400.0, 0.016 * 1400) << "not the 100000 before the window";
}

}  // namespace
}  // namespace mprdma::platform
