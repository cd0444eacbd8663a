// Time-series figures behind the avg(...) and jain(...) metric terms:
// window means weighted by each sample's interval, and Jain's index.
#include <gtest/gtest.h>

#include "vp/platform/series_metrics.h"

namespace mprdma::platform {
namespace {

using Points = std::vector<core::TimeSeries::Point>;
constexpr uint64_t kUs = 1000000;  // ps

// Samples every 10 us: 0..10 us -> 1, 10..20 -> 2, 20..30 -> 3, 30..40 -> 4.
Points staircase() { return {{10 * kUs, 1}, {20 * kUs, 2}, {30 * kUs, 3}, {40 * kUs, 4}}; }

TEST(SeriesMean, WholeIntervalsAverageTheirSamples) {
  EXPECT_DOUBLE_EQ(*series_mean(staircase(), 10 * kUs, 0, 40 * kUs), 2.5);
  EXPECT_DOUBLE_EQ(*series_mean(staircase(), 10 * kUs, 10 * kUs, 30 * kUs), 2.5);
  EXPECT_DOUBLE_EQ(*series_mean(staircase(), 10 * kUs, 30 * kUs, 40 * kUs), 4.0);
}

TEST(SeriesMean, PartlyCoveredSamplesCountWithTheirOverlap) {
  // 5..20 us: 5 us of 1 and 10 us of 2.
  EXPECT_DOUBLE_EQ(*series_mean(staircase(), 10 * kUs, 5 * kUs, 20 * kUs), (5.0 + 20.0) / 15.0);
  // 15..25 us: half of 2, half of 3.
  EXPECT_DOUBLE_EQ(*series_mean(staircase(), 10 * kUs, 15 * kUs, 25 * kUs), 2.5);
}

TEST(SeriesMean, AWindowNotSampledInFullHasNoMean) {
  EXPECT_FALSE(series_mean(staircase(), 10 * kUs, 30 * kUs, 45 * kUs));  // run ended at 40 us
  EXPECT_FALSE(series_mean({}, 10 * kUs, 0, 10 * kUs));
  EXPECT_FALSE(series_mean(staircase(), 10 * kUs, 20 * kUs, 20 * kUs));  // empty window
  EXPECT_FALSE(series_mean(staircase(), 0, 0, 10 * kUs));
}

TEST(JainIndex, EqualSharesAreOneAndOneHogIsOneOverN) {
  EXPECT_DOUBLE_EQ(*jain_index({5, 5, 5, 5}), 1.0);
  EXPECT_DOUBLE_EQ(*jain_index({40, 0, 0, 0}), 0.25);
  EXPECT_DOUBLE_EQ(*jain_index({7}), 1.0);
  // (1 + 3)^2 / (2 * (1 + 9)) = 0.8
  EXPECT_DOUBLE_EQ(*jain_index({1, 3}), 0.8);
}

TEST(JainIndex, NoValuesOrAllZeroHaveNoIndex) {
  EXPECT_FALSE(jain_index({}));
  EXPECT_FALSE(jain_index({0, 0}));
}

}  // namespace
}  // namespace mprdma::platform
