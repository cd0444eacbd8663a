#include "vp/platform/histogram_windows.h"

namespace mprdma::platform {

void HistogramWindows::add(const std::string& path, uint64_t from_ps, uint64_t to_ps) {
  for (uint64_t t : {from_ps, to_ps})
    if (!tallies_.count({path, t})) pending_.insert({t, path});
}

sc_core::sc_time HistogramWindows::next_due() const {
  if (pending_.empty()) return sc_core::sc_max_time();
  return sc_core::sc_time::from_value(pending_.begin()->first);
}

void HistogramWindows::observe() {
  const uint64_t now = sc_core::sc_time_stamp().value();
  while (!pending_.empty() && pending_.begin()->first <= now) {
    const auto [t, path] = *pending_.begin();
    pending_.erase(pending_.begin());
    // A histogram not registered yet has recorded nothing: an empty tally.
    const core::Histogram* h = stats_.find_histogram(path);
    tallies_[{path, t}] = h ? h->tally() : core::Histogram::Tally{};
  }
}

std::optional<double> HistogramWindows::percentile(const std::string& path, uint64_t from_ps,
                                                   uint64_t to_ps, double p) const {
  const core::Histogram* h = stats_.find_histogram(path);
  const auto since = tallies_.find({path, from_ps});
  const auto until = tallies_.find({path, to_ps});
  if (!h || since == tallies_.end() || until == tallies_.end()) return std::nullopt;
  return h->percentile_between(since->second, until->second, p);
}

}  // namespace mprdma::platform
