// Statistics registry: counters, histograms and time series that every block
// registers under a dotted path.
//
// Path convention (the results writer groups by it):
//   nic.<nic>.<block>.<stat>     per-NIC figures
//   link.<link>.<dir>.<stat>     per-link figures
//   flow.<job>.<stat>            per-flow (application) figures
//   pcie.<nic>.<stat>            per-PCIe-link figures
// Units are part of the registration and are written to results.json.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mprdma::core {

struct StatInfo {
  std::string path;
  std::string unit;
  std::string desc;
};

class Counter {
 public:
  explicit Counter(StatInfo info) : info_(std::move(info)) {}
  void add(uint64_t n = 1) { value_ += n; }
  Counter& operator++() {
    ++value_;
    return *this;
  }
  void set(uint64_t v) { value_ = v; }
  uint64_t value() const { return value_; }
  const StatInfo& info() const { return info_; }

 private:
  StatInfo info_;
  uint64_t value_ = 0;
};

// Log-linear histogram of non-negative values: 64 sub-buckets per power of
// two, so a percentile is within 1.6 % of the true value; count, sum, min
// and max are exact.
//
// With set_exact_below(cap), every distinct value below cap gets its own
// count, so percentiles that fall there are exact (nearest rank): meant for
// integer values such as packet counts, where the memory is one map entry
// per distinct value (at most cap). Values at or above cap still go to the
// log-linear buckets.
class Histogram {
 public:
  explicit Histogram(StatInfo info) : info_(std::move(info)) {}
  // Before the first sample (throws std::logic_error after it); cap > 0.
  void set_exact_below(double cap);
  double exact_below() const { return exact_below_; }
  void record(double value);
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  double min() const { return count_ ? min_ : 0.0; }
  double max() const { return count_ ? max_ : 0.0; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  // p in [0, 100]; returns 0 when empty. Exact at p = 0 and p = 100.
  double percentile(double p) const;
  const StatInfo& info() const { return info_; }

  // The counts so far. A percentile over a window of time is the
  // percentile of the samples recorded between two tallies (the window's
  // start and end): percentile_between().
  struct Tally {
    uint64_t count = 0;
    std::map<double, uint64_t> exact;  // values below exact_below()
    std::map<int, uint64_t> buckets;
  };
  Tally tally() const { return {count_, exact_, buckets_}; }
  // Nearest rank over the samples recorded after `since` and up to `until`
  // (tallies of this histogram, `since` the earlier); nullopt when there
  // were none. Exact for values below exact_below(), else within 1.6 %.
  std::optional<double> percentile_between(const Tally& since, const Tally& until, double p) const;

 private:
  static int bucket_of(double value);
  static double bucket_mid(int bucket);
  // Nearest rank of percentile p among `count` samples (at least 1).
  static uint64_t rank_of(double p, uint64_t count);
  StatInfo info_;
  std::map<int, uint64_t> buckets_;
  std::map<double, uint64_t> exact_;  // values below exact_below_
  double exact_below_ = 0.0;
  uint64_t count_ = 0;
  double sum_ = 0.0, min_ = 0.0, max_ = 0.0;
};

// Samples (time in picoseconds, value). Blocks sample at their own events or
// on a period they choose; the writer emits one CSV per series.
class TimeSeries {
 public:
  explicit TimeSeries(StatInfo info) : info_(std::move(info)) {}
  void sample(uint64_t time_ps, double value) { points_.push_back({time_ps, value}); }
  struct Point {
    uint64_t time_ps;
    double value;
  };
  const std::vector<Point>& points() const { return points_; }
  const StatInfo& info() const { return info_; }

 private:
  StatInfo info_;
  std::vector<Point> points_;
};

class StatsRegistry {
 public:
  // Registering a path twice returns the same object if the kind matches;
  // a path registered with another kind throws std::logic_error.
  Counter& counter(const std::string& path, const std::string& unit, const std::string& desc);
  Histogram& histogram(const std::string& path, const std::string& unit, const std::string& desc);
  TimeSeries& series(const std::string& path, const std::string& unit, const std::string& desc);

  const Counter* find_counter(const std::string& path) const;
  const Histogram* find_histogram(const std::string& path) const;
  const TimeSeries* find_series(const std::string& path) const;

  const std::map<std::string, std::unique_ptr<Counter>>& counters() const { return counters_; }
  const std::map<std::string, std::unique_ptr<Histogram>>& histograms() const {
    return histograms_;
  }
  const std::map<std::string, std::unique_ptr<TimeSeries>>& series() const { return series_; }

 private:
  void check_free(const std::string& path, const char* kind) const;
  std::map<std::string, std::unique_ptr<Counter>> counters_;
  std::map<std::string, std::unique_ptr<Histogram>> histograms_;
  std::map<std::string, std::unique_ptr<TimeSeries>> series_;
};

}  // namespace mprdma::core
