// The flow-size distributions of write_flows: the CDF's arithmetic, the
// sampler against it, and the checks on a hand-written CDF.
#include "vp/host/flow_sizes.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace mprdma::host {
namespace {

TEST(FlowSizes, WebSearchMeanIsTheInterpolatedCdfsMean) {
  const FlowSizes& w = FlowSizes::named("web_search");
  EXPECT_DOUBLE_EQ(w.mean_bytes(), 1711250.0);
  EXPECT_EQ(w.max_bytes(), 30000000u);
}

TEST(FlowSizes, DrawsFollowTheCdf) {
  const FlowSizes& w = FlowSizes::named("web_search");
  core::RandomStream rng(7, "test.flow_sizes");
  constexpr int kDraws = 200000;
  double sum = 0;
  int below_100k = 0, above_10m = 0, below_10k = 0;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t b = w.draw(rng);
    ASSERT_GE(b, 1u);
    ASSERT_LE(b, 30000000u);
    sum += double(b);
    below_100k += b < 100000;
    below_10k += b <= 10000;
    above_10m += b > 10000000;
  }
  // Standard error of the mean here is ~0.5 % (the CDF's deviation ~3.5 MB).
  EXPECT_NEAR(sum / kDraws, w.mean_bytes(), 0.02 * w.mean_bytes());
  // P(< 100 KB) = 0.53 + 0.07 * 20/120 (linear between 80 KB and 200 KB).
  EXPECT_NEAR(double(below_100k) / kDraws, 0.53 + 0.07 * 20.0 / 120.0, 0.005);
  EXPECT_NEAR(double(below_10k) / kDraws, 0.15, 0.005);
  EXPECT_NEAR(double(above_10m) / kDraws, 0.03, 0.002);
}

TEST(FlowSizes, TheSameStreamGivesTheSameSizes) {
  const FlowSizes& w = FlowSizes::named("web_search");
  core::RandomStream a(3, "job.f.flow_sizes"), b(3, "job.f.flow_sizes"), c(4, "job.f.flow_sizes");
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = w.draw(a);
    EXPECT_EQ(x, w.draw(b));
    differs |= x != w.draw(c);
  }
  EXPECT_TRUE(differs) << "another seed draws other sizes";
}

TEST(FlowSizes, AHandWrittenCdfIsChecked) {
  using P = FlowSizes::Point;
  EXPECT_THROW(FlowSizes({}), std::invalid_argument);
  EXPECT_THROW(FlowSizes({{100, 0.5}, {50, 1.0}}), std::invalid_argument) << "sizes decrease";
  EXPECT_THROW(FlowSizes({{100, 0.5}, {200, 0.4}, {300, 1.0}}), std::invalid_argument);
  EXPECT_THROW(FlowSizes({{100, 0.5}, {200, 0.9}}), std::invalid_argument) << "ends below 1";
  EXPECT_THROW(FlowSizes({{100, 1.5}}), std::invalid_argument);
  EXPECT_THROW(FlowSizes::named("data_mining"), std::invalid_argument);
  // A step at 1000 B (all flows one size): mean and draws are exact.
  const FlowSizes one({P{1000, 1.0}});
  core::RandomStream rng(1, "t");
  EXPECT_DOUBLE_EQ(one.mean_bytes(), 1000.0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(one.draw(rng), 1000u);
  // Uniform between 0 and 2000: mean 1000.
  EXPECT_DOUBLE_EQ(FlowSizes({P{0, 0.0}, P{2000, 1.0}}).mean_bytes(), 1000.0);
}

}  // namespace
}  // namespace mprdma::host
