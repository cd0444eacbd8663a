// Periodic sampling of counters as rates into time series: every `interval`
// the sampler reads each counter, and records (delta * scale / interval) at
// the end of the interval. One Calendar action per interval for all series.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <systemc>

#include "vp/core/calendar.h"
#include "vp/core/stats.h"
#include "vp/core/units.h"

namespace mprdma::core {

class RateSampler : public sc_core::sc_module {
 public:
  RateSampler(sc_core::sc_module_name name, StatsRegistry& stats, Duration interval);
  // Samples counter `counter` (which must exist) as `series` in `unit`;
  // `per_unit` is how many counter units make one unit of the series per
  // second (e.g. 1.25e8 bytes/s per Gb/s).
  void add(const std::string& counter, const std::string& series, const std::string& unit,
           double per_unit, const std::string& desc);
  // Samples a level (a queue length, a buffer occupancy) as `series`: the
  // value of `probe` at the end of each interval.
  void add_gauge(const std::string& series, const std::string& unit, const std::string& desc,
                 std::function<double()> probe);
  void start();

 private:
  struct Probe {
    const Counter* counter;
    TimeSeries* series;
    double per_unit;
    uint64_t last;
  };
  void sample();

  StatsRegistry& stats_;
  Duration interval_;
  Calendar calendar_;
  std::vector<Probe> probes_;
  struct Gauge {
    TimeSeries* series;
    std::function<double()> probe;
  };
  std::vector<Gauge> gauges_;
  bool started_ = false;
};

}  // namespace mprdma::core
