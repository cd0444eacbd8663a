// Histogram tallies at the edges of time windows, for the metric term
// pct(<histogram>,<p>,<from>,<to>) (scenario.h): the percentile of the
// samples a histogram recorded in [from, to), e.g. the OOD tail in steady
// state without the start-up's transient.
//
// An observer (core/observer.h): the run loop stops the kernel at each
// window edge and it copies the histogram's counts; it adds no events, so
// asking for a window does not change the run.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "vp/core/observer.h"
#include "vp/core/stats.h"

namespace mprdma::platform {

class HistogramWindows : public core::Observer {
 public:
  explicit HistogramWindows(const core::StatsRegistry& stats) : stats_(stats) {}

  // Tally histogram `path` at `from_ps` and `to_ps` (absolute simulated time).
  void add(const std::string& path, uint64_t from_ps, uint64_t to_ps);
  bool empty() const { return pending_.empty() && tallies_.empty(); }

  sc_core::sc_time next_due() const override;
  void observe() override;

  // The p-th percentile of the samples recorded in [from_ps, to_ps); empty
  // when the run did not reach `to_ps`, the histogram does not exist or it
  // recorded nothing in the window.
  std::optional<double> percentile(const std::string& path, uint64_t from_ps, uint64_t to_ps,
                                   double p) const;

 private:
  const core::StatsRegistry& stats_;
  std::set<std::pair<uint64_t, std::string>> pending_;                          // (time, path)
  std::map<std::pair<std::string, uint64_t>, core::Histogram::Tally> tallies_;  // taken
};

}  // namespace mprdma::platform
