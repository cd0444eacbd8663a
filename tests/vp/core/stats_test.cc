#include "vp/core/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "vp/core/random.h"

namespace mprdma::core {
namespace {

// Nearest-rank percentile of the exact samples.
double exact_percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
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
