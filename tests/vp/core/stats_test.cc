#include "vp/core/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "vp/core/random.h"

namespace mprdma::core {
namespace {

// Nearest-rank percentile of the exact samples (rank = ceil(p N / 100),
// with p N / 100 formed so that whole ranks stay whole for the p used here).
double exact_percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p * 10.0 * static_cast<double>(v.size()) / 1000.0));
  return v[std::max<size_t>(rank, 1) - 1];
}

void expect_accurate(const std::vector<double>& samples, const char* what) {
  Histogram h(StatInfo{"h", "us", ""});
  for (double v : samples) h.record(v);
  for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9}) {
    const double truth = exact_percentile(samples, p);
    EXPECT_LE(std::fabs(h.percentile(p) - truth), 0.016 * truth)
        << what << " p" << p << ": " << h.percentile(p) << " vs " << truth;
  }
  EXPECT_EQ(h.percentile(0), *std::min_element(samples.begin(), samples.end()));
  EXPECT_EQ(h.percentile(100), *std::max_element(samples.begin(), samples.end()));
}

TEST(Stats, HistogramPercentilesWithin1Point6Percent) {
  RandomStream r(1, "stats");
  std::vector<double> uniform, expo, wide, tiny;
  for (int i = 0; i < 20000; ++i) {
    uniform.push_back(1 + r.uniform() * 1000);
    expo.push_back(r.exponential(50));
    wide.push_back(std::pow(10.0, r.uniform() * 9));  // 1 .. 1e9
    tiny.push_back(1e-9 * (1 + r.uniform()));         // e.g. seconds
  }
  expect_accurate(uniform, "uniform");
  expect_accurate(expo, "exponential");
  expect_accurate(wide, "log-uniform");
  expect_accurate(tiny, "tiny");
}

TEST(Stats, HistogramExactBelowCapGivesExactIntegerPercentiles) {
  // 1000 samples: 0 x 900, 1 x 50, 300 x 40, 1001 x 9, 5000 x 1. Nearest
  // rank: p90 -> rank 900 -> 0, p95 -> 950 -> 1, p99 -> 990 -> 300,
  // p99.9 -> 999 -> 1001, p100 -> 5000.
  std::vector<double> v;
  for (int i = 0; i < 900; ++i) v.push_back(0);
  for (int i = 0; i < 50; ++i) v.push_back(1);
  for (int i = 0; i < 40; ++i) v.push_back(300);
  for (int i = 0; i < 9; ++i) v.push_back(1001);
  v.push_back(5000);
  Histogram exact(StatInfo{"ood", "packets", ""});
  exact.set_exact_below(65536);
  EXPECT_EQ(exact.exact_below(), 65536.0);
  Histogram coarse(StatInfo{"ood", "packets", ""});
  for (double x : v) {
    exact.record(x);
    coarse.record(x);
  }
  EXPECT_EQ(exact.percentile(90), 0.0);
  EXPECT_EQ(exact.percentile(95), 1.0);
  EXPECT_EQ(exact.percentile(95.1), 300.0);
  EXPECT_EQ(exact.percentile(99), 300.0);
  EXPECT_EQ(exact.percentile(99.1), 1001.0);
  EXPECT_EQ(exact.percentile(99.9), 1001.0);
  EXPECT_EQ(exact.percentile(99.95), 5000.0);
  EXPECT_EQ(exact.percentile(100), 5000.0);
  for (double p : {50.0, 95.0, 99.0, 99.9})
    EXPECT_EQ(exact.percentile(p), exact_percentile(v, p)) << "p" << p;
  // The log-linear buckets alone only come within 1.6 %: the bucket of 1001
  // is 8 wide.
  EXPECT_NE(coarse.percentile(99.9), 1001.0);
  EXPECT_NEAR(coarse.percentile(99.9), 1001.0, 0.016 * 1001);
  EXPECT_EQ(exact.count(), 1000u);
  EXPECT_EQ(exact.sum(), coarse.sum());
  EXPECT_THROW(exact.set_exact_below(10), std::logic_error);  // after samples
  Histogram bad(StatInfo{"b", "", ""});
  EXPECT_THROW(bad.set_exact_below(0), std::invalid_argument);
}

TEST(Stats, HistogramValuesAtOrAboveTheExactCapStillCount) {
  // Exact below 100; 100.. go to the log-linear buckets, and a percentile
  // there is within 1.6 %.
  Histogram h(StatInfo{"h", "", ""});
  h.set_exact_below(100);
  for (int i = 0; i < 98; ++i) h.record(7);
  h.record(1000);
  h.record(200000);
  EXPECT_EQ(h.percentile(98), 7.0);
  EXPECT_NEAR(h.percentile(99), 1000.0, 16.0);
  EXPECT_EQ(h.percentile(100), 200000.0);
  EXPECT_EQ(h.min(), 7.0);
}

TEST(Stats, HistogramExactMoments) {
  Histogram h(StatInfo{"lat", "ns", "latency"});
  EXPECT_EQ(h.percentile(50), 0.0);
  EXPECT_EQ(h.mean(), 0.0);
  for (double v : {3.0, 1.0, 8.0, 0.0}) h.record(v);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.sum(), 12.0);
  EXPECT_EQ(h.mean(), 3.0);
  EXPECT_EQ(h.min(), 0.0);
  EXPECT_EQ(h.max(), 8.0);
  EXPECT_THROW(h.record(-1), std::invalid_argument);
  EXPECT_THROW(h.record(std::nan("")), std::invalid_argument);
  EXPECT_EQ(h.count(), 4u);
}

TEST(Stats, RegistryReturnsSameObjectAndRejectsKindClash) {
  StatsRegistry s;
  Counter& c = s.counter("nic.n0.tx.packets", "packets", "sent");
  c.add();
  c.add(4);
  EXPECT_EQ(&s.counter("nic.n0.tx.packets", "packets", "sent"), &c);
  EXPECT_EQ(s.find_counter("nic.n0.tx.packets")->value(), 5u);
  EXPECT_EQ(c.info().unit, "packets");
  EXPECT_THROW(s.histogram("nic.n0.tx.packets", "", ""), std::logic_error);
  EXPECT_THROW(s.series("nic.n0.tx.packets", "", ""), std::logic_error);
  s.histogram("h", "us", "");
  EXPECT_THROW(s.counter("h", "", ""), std::logic_error);
  s.series("q", "B", "").sample(10, 2.5);
  EXPECT_THROW(s.histogram("q", "", ""), std::logic_error);
  ASSERT_NE(s.find_series("q"), nullptr);
  EXPECT_EQ(s.find_series("q")->points().size(), 1u);
  EXPECT_EQ(s.find_histogram("nope"), nullptr);
  EXPECT_EQ(s.find_counter("h"), nullptr);
  EXPECT_EQ(s.counters().size(), 1u);
}

}  // namespace
}  // namespace mprdma::core
