// Time-series figures behind the avg(...), stdev(...), reach_us(...),
// settle_us(...) and jain(...) metric terms: window means and standard
// deviations weighted by each sample's interval, the times a series reaches
// and settles in a band, and Jain's index.
#include "vp/platform/series_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

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

std::optional<uint64_t> settle(const Points& p, double lo, double hi, uint64_t from, uint64_t to) {
  return series_band_time_ps(p, 10 * kUs, lo, hi, from, to, BandTime::kSettle);
}
std::optional<uint64_t> reach(const Points& p, double lo, double hi, uint64_t from, uint64_t to) {
  return series_band_time_ps(p, 10 * kUs, lo, hi, from, to, BandTime::kReach);
}

// In the band at 0..20 us, out at 20..30, in again from 30 us on.
const Points kDip = {{10 * kUs, 9}, {20 * kUs, 10}, {30 * kUs, 6}, {40 * kUs, 9.5}, {50 * kUs, 10}};

TEST(SeriesBandTime, SettleIsTheFirstIntervalFromWhichEverySampleStaysInTheBand) {
  // The staircase enters [2.5, 4] with the sample for 20..30 us.
  EXPECT_EQ(*settle(staircase(), 2.5, 4, 0, 40 * kUs), 20 * kUs);
  // Measured from the window's start, and a straddling sample counts from it.
  EXPECT_EQ(*settle(staircase(), 2.5, 4, 5 * kUs, 40 * kUs), 15 * kUs);
  EXPECT_EQ(*settle(staircase(), 2.5, 4, 25 * kUs, 40 * kUs), 0u);
  // In the band from the start; the bounds belong to the band.
  EXPECT_EQ(*settle(staircase(), 1, 4, 0, 40 * kUs), 0u);
}

TEST(SeriesBandTime, ALeavingSampleStartsTheSettlingCountAgainButNotTheReach) {
  EXPECT_EQ(*settle(kDip, 9, 11, 0, 50 * kUs), 30 * kUs);
  EXPECT_EQ(*reach(kDip, 9, 11, 0, 50 * kUs), 0u);
  // From 20 us: the dip first, then in the band.
  EXPECT_EQ(*reach(kDip, 9, 11, 20 * kUs, 50 * kUs), 10 * kUs);
  // A window that ends before the dip: settled at 0.
  EXPECT_EQ(*settle(kDip, 9, 11, 0, 20 * kUs), 0u);
}

TEST(SeriesBandTime, ReachIsTheFirstIntervalInTheBand) {
  EXPECT_EQ(*reach(staircase(), 2.5, 4, 0, 40 * kUs), 20 * kUs);
  EXPECT_EQ(*reach(staircase(), 2, 2, 0, 40 * kUs), 10 * kUs);  // and leaves it again
  EXPECT_EQ(*reach(staircase(), 2, 2, 15 * kUs, 40 * kUs), 0u);
  EXPECT_FALSE(reach(staircase(), 5, 6, 0, 40 * kUs));  // never reached
}

TEST(SeriesBandTime, NotSettledOrNotSampledHasNoFigure) {
  // The last sample is outside the band: not settled by the window's end.
  EXPECT_FALSE(settle(staircase(), 0, 3, 0, 40 * kUs));
  EXPECT_FALSE(settle(staircase(), 5, 6, 0, 40 * kUs));
  for (BandTime k : {BandTime::kReach, BandTime::kSettle}) {
    // The run ended at 40 us, before the window did.
    EXPECT_FALSE(series_band_time_ps(staircase(), 10 * kUs, 2.5, 4, 30 * kUs, 45 * kUs, k));
    EXPECT_FALSE(series_band_time_ps({}, 10 * kUs, 0, 1, 0, 10 * kUs, k));
    EXPECT_FALSE(series_band_time_ps(staircase(), 10 * kUs, 4, 2.5, 0, 40 * kUs, k));  // no band
    EXPECT_FALSE(series_band_time_ps(staircase(), 0, 0, 5, 0, 40 * kUs, k));
  }
}

TEST(JainSeries, SampleBySampleIndexOfSeriesSampledTogether) {
  const Points a = {{10 * kUs, 10}, {20 * kUs, 0}, {30 * kUs, 5}, {40 * kUs, 0}};
  const Points b = {{10 * kUs, 0}, {20 * kUs, 0}, {30 * kUs, 5}, {40 * kUs, 3}};
  const auto j = jain_series({&a, &b});
  ASSERT_TRUE(j);
  ASSERT_EQ(j->size(), 4u);
  EXPECT_DOUBLE_EQ((*j)[0].value, 0.5);   // one has everything
  EXPECT_DOUBLE_EQ((*j)[1].value, -1.0);  // nobody sends: no index
  EXPECT_DOUBLE_EQ((*j)[2].value, 1.0);
  EXPECT_EQ((*j)[2].time_ps, 30 * kUs);
  // Fair from 20 us on? The idle sample keeps it out of the band; 30..40
  // us only: the last sample is one-sided again.
  EXPECT_EQ(*series_band_time_ps(*j, 10 * kUs, 0.9, 1, 0, 30 * kUs, BandTime::kSettle), 20 * kUs);
  EXPECT_FALSE(series_band_time_ps(*j, 10 * kUs, 0.9, 1, 0, 40 * kUs, BandTime::kSettle));
  // Series not sampled together have no index series.
  const Points late = {{15 * kUs, 1}, {25 * kUs, 1}, {35 * kUs, 1}, {45 * kUs, 1}};
  EXPECT_FALSE(jain_series({&a, &late}));
  const Points shorter = {{10 * kUs, 1}};
  EXPECT_FALSE(jain_series({&a, &shorter}));
}

TEST(SeriesStdev, WholeIntervalsGiveThePopulationDeviation) {
  // 1, 2, 3, 4 for equal times: mean 2.5, variance (2.25 + 0.25) / 2 = 1.25.
  EXPECT_DOUBLE_EQ(*series_stdev(staircase(), 10 * kUs, 0, 40 * kUs), std::sqrt(1.25));
  // 2 and 3: 0.5 either side.
  EXPECT_DOUBLE_EQ(*series_stdev(staircase(), 10 * kUs, 10 * kUs, 30 * kUs), 0.5);
  // One sample, or a constant series: no spread.
  EXPECT_DOUBLE_EQ(*series_stdev(staircase(), 10 * kUs, 30 * kUs, 40 * kUs), 0.0);
  const Points flat = {{10 * kUs, 7}, {20 * kUs, 7}, {30 * kUs, 7}};
  EXPECT_DOUBLE_EQ(*series_stdev(flat, 10 * kUs, 0, 30 * kUs), 0.0);
}

TEST(SeriesStdev, PartlyCoveredSamplesWeighWithTheirOverlap) {
  // 5..20 us: 5 us of 1 and 10 us of 2; mean 5/3, weights 1/3 and 2/3:
  // variance (1/3)(2/3)^2 + (2/3)(1/3)^2 = 2/9.
  EXPECT_NEAR(*series_stdev(staircase(), 10 * kUs, 5 * kUs, 20 * kUs), std::sqrt(2.0 / 9.0), 1e-12);
  // An oscillation 0, 10, 0, 10: deviation 5 (a square wave's half swing),
  // and its mean 5 (the mean alone does not see it).
  const Points square = {{10 * kUs, 0}, {20 * kUs, 10}, {30 * kUs, 0}, {40 * kUs, 10}};
  EXPECT_DOUBLE_EQ(*series_stdev(square, 10 * kUs, 0, 40 * kUs), 5.0);
  EXPECT_DOUBLE_EQ(*series_mean(square, 10 * kUs, 0, 40 * kUs), 5.0);
}

TEST(SeriesStdev, AWindowNotSampledInFullHasNoDeviation) {
  EXPECT_FALSE(series_stdev(staircase(), 10 * kUs, 30 * kUs, 45 * kUs));
  EXPECT_FALSE(series_stdev({}, 10 * kUs, 0, 10 * kUs));
  EXPECT_FALSE(series_stdev(staircase(), 10 * kUs, 20 * kUs, 20 * kUs));
  EXPECT_FALSE(series_stdev(staircase(), 0, 0, 10 * kUs));
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

// pct(<histogram>,<p>): nearest rank over a hand-made histogram of integer
// OOD values, exact per value.
TEST(HistogramPercentile, NearestRankOfAHandMadeHistogram) {
  core::Histogram h(core::StatInfo{"nic.a.transport.rx_ood", "packets", ""});
  h.set_exact_below(1 << 20);
  // 2000 samples: 0 x 1900, 3 x 80, 17 x 18, 250 x 1, 4000 x 1.
  for (int i = 0; i < 1900; ++i) h.record(0);
  for (int i = 0; i < 80; ++i) h.record(3);
  for (int i = 0; i < 18; ++i) h.record(17);
  h.record(250);
  h.record(4000);
  EXPECT_EQ(*histogram_percentile(&h, 50), 0.0);
  EXPECT_EQ(*histogram_percentile(&h, 95), 0.0);       // rank 1900
  EXPECT_EQ(*histogram_percentile(&h, 95.05), 3.0);    // rank 1901
  EXPECT_EQ(*histogram_percentile(&h, 99), 3.0);       // rank 1980
  EXPECT_EQ(*histogram_percentile(&h, 99.5), 17.0);    // rank 1990
  EXPECT_EQ(*histogram_percentile(&h, 99.9), 17.0);    // rank 1998
  EXPECT_EQ(*histogram_percentile(&h, 99.95), 250.0);  // rank 1999
  EXPECT_EQ(*histogram_percentile(&h, 100), 4000.0);
  EXPECT_EQ(*histogram_percentile(&h, 0), 0.0);
}

TEST(HistogramPercentile, NoHistogramOrNoSamplesHaveNoPercentile) {
  EXPECT_FALSE(histogram_percentile(nullptr, 99.9));
  const core::Histogram empty(core::StatInfo{"h", "", ""});
  EXPECT_FALSE(histogram_percentile(&empty, 99.9));
}

}  // namespace
}  // namespace mprdma::platform
