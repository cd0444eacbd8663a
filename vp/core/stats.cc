#include "vp/core/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mprdma::core {
namespace {
constexpr int kSubBuckets = 64;
// Values below 2^-64 (in the registered unit) share bucket kZeroBucket.
// Buckets are sparse, so a low limit costs nothing, and it keeps the 1.6 %
// bound for small values in large units (e.g. latencies in seconds).
constexpr int kMinExp = -64;
constexpr int kZeroBucket = (kMinExp - 1) * kSubBuckets;
}  // namespace

int Histogram::bucket_of(double value) {
  if (!(value > std::ldexp(1.0, kMinExp))) return kZeroBucket;
  int exp = 0;
  double mant = std::frexp(value, &exp);  // value = mant * 2^exp, mant in [0.5, 1)
  int sub = static_cast<int>((mant - 0.5) * 2.0 * kSubBuckets);
  if (sub >= kSubBuckets) sub = kSubBuckets - 1;
  return exp * kSubBuckets + sub;
}

double Histogram::bucket_mid(int bucket) {
  if (bucket == kZeroBucket) return 0.0;
  int exp = bucket >= 0 ? bucket / kSubBuckets : -((-bucket + kSubBuckets - 1) / kSubBuckets);
  int sub = bucket - exp * kSubBuckets;
  double lo = std::ldexp(0.5 + 0.5 * sub / kSubBuckets, exp);
  double hi = std::ldexp(0.5 + 0.5 * (sub + 1) / kSubBuckets, exp);
  return 0.5 * (lo + hi);
}

void Histogram::set_exact_below(double cap) {
  if (!(cap > 0.0))
    throw std::invalid_argument("histogram " + info_.path + ": exact cap must be > 0");
  if (count_) throw std::logic_error("histogram " + info_.path + ": exact cap set after samples");
  exact_below_ = cap;
}

void Histogram::record(double value) {
  if (value < 0.0 || std::isnan(value))
    throw std::invalid_argument("histogram " + info_.path + ": negative or NaN sample");
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  sum_ += value;
  if (value < exact_below_)
    ++exact_[value];
  else
    ++buckets_[bucket_of(value)];
}

double Histogram::percentile(double p) const {
  if (count_ == 0) return 0.0;
  if (p <= 0.0) return min_;
  if (p >= 100.0) return max_;
  const uint64_t rank = rank_of(p, count_);
  uint64_t seen = 0;
  // Exact values all lie below the bucketed ones.
  for (const auto& [value, n] : exact_) {
    seen += n;
    if (seen >= rank) return value;
  }
  for (const auto& [bucket, n] : buckets_) {
    seen += n;
    if (seen >= rank) return std::min(max_, std::max(min_, bucket_mid(bucket)));
  }
  return max_;
}

uint64_t Histogram::rank_of(double p, uint64_t count) {
  // Nearest-rank definition: the smallest value with at least p % at or below.
  // p / 100 is not exact in binary: 99.9 / 100 * 1000 is 999.0000000000001,
  // and a plain ceil would take rank 1000. A relative slack of 1e-9 keeps
  // whole ranks whole (counts far below 10^9 are unaffected otherwise).
  const double r = std::min(std::max(p, 0.0), 100.0) / 100.0 * static_cast<double>(count);
  const uint64_t rank = static_cast<uint64_t>(std::ceil(r - 1e-9 * r));
  return std::max<uint64_t>(rank, 1);
}

std::optional<double> Histogram::percentile_between(const Tally& since, const Tally& until,
                                                    double p) const {
  if (until.count <= since.count) return std::nullopt;
  const uint64_t rank = rank_of(p, until.count - since.count);
  uint64_t seen = 0;
  // Counts only grow: a value's count in the window is its count at the
  // end less its count at the start.
  for (const auto& [value, n] : until.exact) {
    const auto before = since.exact.find(value);
    seen += n - (before == since.exact.end() ? 0 : before->second);
    if (seen >= rank) return value;
  }
  for (const auto& [bucket, n] : until.buckets) {
    const auto before = since.buckets.find(bucket);
    seen += n - (before == since.buckets.end() ? 0 : before->second);
    if (seen >= rank) return std::min(max_, std::max(min_, bucket_mid(bucket)));
  }
  return std::nullopt;  // tallies of another histogram
}

void StatsRegistry::check_free(const std::string& path, const char* kind) const {
  bool taken = (counters_.count(path) && std::string(kind) != "counter") ||
               (histograms_.count(path) && std::string(kind) != "histogram") ||
               (series_.count(path) && std::string(kind) != "series");
  if (taken) throw std::logic_error("statistic '" + path + "' already registered as another kind");
}

Counter& StatsRegistry::counter(const std::string& path, const std::string& unit,
                                const std::string& desc) {
  check_free(path, "counter");
  auto& slot = counters_[path];
  if (!slot) slot = std::make_unique<Counter>(StatInfo{path, unit, desc});
  return *slot;
}

Histogram& StatsRegistry::histogram(const std::string& path, const std::string& unit,
                                    const std::string& desc) {
  check_free(path, "histogram");
  auto& slot = histograms_[path];
  if (!slot) slot = std::make_unique<Histogram>(StatInfo{path, unit, desc});
  return *slot;
}

TimeSeries& StatsRegistry::series(const std::string& path, const std::string& unit,
                                  const std::string& desc) {
  check_free(path, "series");
  auto& slot = series_[path];
  if (!slot) slot = std::make_unique<TimeSeries>(StatInfo{path, unit, desc});
  return *slot;
}

const Counter* StatsRegistry::find_counter(const std::string& path) const {
  auto it = counters_.find(path);
  return it == counters_.end() ? nullptr : it->second.get();
}
const Histogram* StatsRegistry::find_histogram(const std::string& path) const {
  auto it = histograms_.find(path);
  return it == histograms_.end() ? nullptr : it->second.get();
}
const TimeSeries* StatsRegistry::find_series(const std::string& path) const {
  auto it = series_.find(path);
  return it == series_.end() ? nullptr : it->second.get();
}

}  // namespace mprdma::core
