// Figures computed from the platform's time series (rate_sampler.h), for
// the scenario metric terms avg(...), stdev(...), reach_us(...),
// settle_us(...) and jain(...) (scenario.h): the mean and the standard
// deviation of a series over a window of simulated time, when it reaches or
// settles in a band, and Jain's fairness index; and the percentile of a
// histogram statistic behind pct(...).
// Plain functions over sample points, so they can be tested on hand-made
// series.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "vp/core/stats.h"

namespace mprdma::platform {

// The time-weighted mean of a sampled series over [from_ps, to_ps). Sample
// k, taken at time t_k, stands for the interval (t_k - interval_ps, t_k]
// (the RateSampler's convention: a rate over the interval that ends at its
// time); a sample partly inside the window counts with the overlap. Empty
// when the samples do not cover the whole window (the run ended, or
// sampling was off, before `to_ps`) or the window is empty.
std::optional<double> series_mean(const std::vector<core::TimeSeries::Point>& points,
                                  uint64_t interval_ps, uint64_t from_ps, uint64_t to_ps);

// The time-weighted (population) standard deviation of a sampled series
// over [from_ps, to_ps): sqrt(sum w_k (x_k - m)^2 / sum w_k), with w_k the
// overlap of sample k's interval with the window (as in series_mean) and m
// that weighted mean; 0 for a constant series. A sample stands for its
// whole interval, so variation within an interval is not seen: the sample
// interval must be short against the oscillation it measures. Empty when
// series_mean is.
std::optional<double> series_stdev(const std::vector<core::TimeSeries::Point>& points,
                                   uint64_t interval_ps, uint64_t from_ps, uint64_t to_ps);

// When a sampled series is in the band [lo, hi] after from_ps, as a time
// from from_ps to the start of a sample interval (intervals as in
// series_mean, a sample straddling from_ps counting from from_ps):
// - kReach: the first interval whose sample lies in the band (the first
//   passage, e.g. a restored path first carrying its share);
// - kSettle: the first interval from which every sample up to to_ps lies in
//   the band (the settling time of control theory).
// 0 when the first sample is in the band (kReach) or all are (kSettle).
// Empty when the samples do not cover [from_ps, to_ps), or the band was not
// reached (kReach) or the window's last sample is outside it (kSettle).
enum class BandTime { kReach, kSettle };
std::optional<uint64_t> series_band_time_ps(const std::vector<core::TimeSeries::Point>& points,
                                            uint64_t interval_ps, double lo, double hi,
                                            uint64_t from_ps, uint64_t to_ps, BandTime kind);

// The Jain index of several series sampled together, sample by sample
// (jain_index of the k-th values), for reach_us/settle_us of
// jain(<series>|...). A sample where every series is 0 has no index and
// gets -1 (outside any band of a Jain index). Empty when the series are
// not sampled at the same times.
std::optional<std::vector<core::TimeSeries::Point>> jain_series(
    const std::vector<const std::vector<core::TimeSeries::Point>*>& series);

// Jain's fairness index of `x`: (sum x)^2 / (n * sum x^2), in [1/n, 1]; 1
// when every value is equal, 1/n when one value has everything. Empty for
// no values or when every value is zero (no share to judge).
std::optional<double> jain_index(const std::vector<double>& x);

// The p-th percentile (nearest rank, core::Histogram::percentile) of a
// histogram statistic, for the metric term pct(<histogram>,<p>). Empty when
// there is no histogram or it has no samples (no figure to report, rather
// than the histogram's 0).
std::optional<double> histogram_percentile(const core::Histogram* h, double p);

}  // namespace mprdma::platform
