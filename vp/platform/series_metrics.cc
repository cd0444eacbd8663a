#include "vp/platform/series_metrics.h"

#include <algorithm>
#include <cmath>

namespace mprdma::platform {

std::optional<double> series_mean(const std::vector<core::TimeSeries::Point>& points,
                                  uint64_t interval_ps, uint64_t from_ps, uint64_t to_ps) {
  if (to_ps <= from_ps || interval_ps == 0) return std::nullopt;
  double weighted = 0;
  uint64_t covered = 0;
  for (const core::TimeSeries::Point& p : points) {
    const uint64_t begin = p.time_ps >= interval_ps ? p.time_ps - interval_ps : 0;
    const uint64_t lo = std::max(begin, from_ps), hi = std::min(p.time_ps, to_ps);
    if (hi <= lo) continue;
    weighted += p.value * static_cast<double>(hi - lo);
    covered += hi - lo;
  }
  if (covered < to_ps - from_ps) return std::nullopt;
  return weighted / static_cast<double>(covered);
}

std::optional<double> series_stdev(const std::vector<core::TimeSeries::Point>& points,
                                   uint64_t interval_ps, uint64_t from_ps, uint64_t to_ps) {
  const std::optional<double> mean = series_mean(points, interval_ps, from_ps, to_ps);
  if (!mean) return std::nullopt;
  double weighted = 0, covered = 0;
  for (const core::TimeSeries::Point& p : points) {
    const uint64_t begin = p.time_ps >= interval_ps ? p.time_ps - interval_ps : 0;
    const uint64_t lo = std::max(begin, from_ps), hi = std::min(p.time_ps, to_ps);
    if (hi <= lo) continue;
    const double d = p.value - *mean;
    weighted += d * d * static_cast<double>(hi - lo);
    covered += static_cast<double>(hi - lo);
  }
  return std::sqrt(weighted / covered);
}

std::optional<uint64_t> series_band_time_ps(const std::vector<core::TimeSeries::Point>& points,
                                            uint64_t interval_ps, double lo, double hi,
                                            uint64_t from_ps, uint64_t to_ps, BandTime kind) {
  if (to_ps <= from_ps || interval_ps == 0 || !(lo <= hi)) return std::nullopt;
  uint64_t covered = 0;
  bool in_band = false, reached = false;
  uint64_t since = 0;  // kSettle: the latest sample and all since lie in the band
  uint64_t first = 0;  // kReach: the first in-band interval
  for (const core::TimeSeries::Point& p : points) {
    const uint64_t begin = p.time_ps >= interval_ps ? p.time_ps - interval_ps : 0;
    const uint64_t a = std::max(begin, from_ps), b = std::min(p.time_ps, to_ps);
    if (b <= a) continue;
    covered += b - a;
    const bool in = p.value >= lo && p.value <= hi;
    if (in && !in_band) since = a;
    if (in && !reached) first = a;
    in_band = in;
    reached = reached || in;
  }
  if (covered < to_ps - from_ps) return std::nullopt;
  if (kind == BandTime::kReach)
    return reached ? std::optional<uint64_t>(first - from_ps) : std::nullopt;
  return in_band ? std::optional<uint64_t>(since - from_ps) : std::nullopt;
}

std::optional<std::vector<core::TimeSeries::Point>> jain_series(
    const std::vector<const std::vector<core::TimeSeries::Point>*>& series) {
  if (series.empty()) return std::nullopt;
  const size_t n = series.front()->size();
  for (const auto* s : series)
    if (s->size() != n) return std::nullopt;
  std::vector<core::TimeSeries::Point> out(n);
  std::vector<double> x(series.size());
  for (size_t i = 0; i < n; ++i) {
    const uint64_t when = (*series.front())[i].time_ps;
    for (size_t k = 0; k < series.size(); ++k) {
      if ((*series[k])[i].time_ps != when) return std::nullopt;
      x[k] = (*series[k])[i].value;
    }
    out[i].time_ps = when;
    out[i].value = jain_index(x).value_or(-1.0);
  }
  return out;
}

std::optional<double> jain_index(const std::vector<double>& x) {
  double sum = 0, squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  if (x.empty() || squares == 0) return std::nullopt;
  return sum * sum / (static_cast<double>(x.size()) * squares);
}

std::optional<double> histogram_percentile(const core::Histogram* h, double p) {
  if (!h || h->count() == 0) return std::nullopt;
  return h->percentile(p);
}

}  // namespace mprdma::platform
