// Periodic sampling of counters as rates, and of levels, into time series:
// every `interval` the sampler reads each counter and records
// (delta * scale / interval), and each gauge's value, at the end of the
// interval. It is an Observer (observer.h): it runs between kernel runs and
// adds no events, so sampling never changes the model's results.
#pragma once

#include <functional>
#include <string>
#include <systemc>
#include <vector>

#include "vp/core/observer.h"
#include "vp/core/stats.h"
#include "vp/core/units.h"

namespace mprdma::core {

class RateSampler : public Observer {
 public:
  // Throws std::invalid_argument for a zero interval.
  RateSampler(StatsRegistry& stats, Duration interval);
  // Samples counter `counter` (which must exist) as `series` in `unit`;
  // `per_unit` is how many counter units make one unit of the series per
  // second (e.g. 1.25e8 bytes/s per Gb/s).
  void add(const std::string& counter, const std::string& series, const std::string& unit,
           double per_unit, const std::string& desc);
  // Samples a level (a queue length, a buffer occupancy) as `series`: the
  // value of `probe` at the end of each interval.
  void add_gauge(const std::string& series, const std::string& unit, const std::string& desc,
                 std::function<double()> probe);
  // Starts the intervals now: the first sample is due one interval later.
  void start();
  size_t series_count() const { return probes_.size() + gauges_.size(); }
  Duration interval() const { return interval_; }

  sc_core::sc_time next_due() const override;
  void observe() override;

 private:
  struct Probe {
    const Counter* counter;
    TimeSeries* series;
    double per_unit;
    uint64_t last;
  };
  struct Gauge {
    TimeSeries* series;
    std::function<double()> probe;
  };

  StatsRegistry& stats_;
  Duration interval_;
  std::vector<Probe> probes_;
  std::vector<Gauge> gauges_;
  bool started_ = false;
  sc_core::sc_time due_;
};

}  // namespace mprdma::core
