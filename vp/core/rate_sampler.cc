#include "vp/core/rate_sampler.h"

#include <stdexcept>

namespace mprdma::core {

RateSampler::RateSampler(StatsRegistry& stats, Duration interval)
    : stats_(stats), interval_(interval) {
  if (interval.ps == 0) throw std::invalid_argument("RateSampler: zero interval");
}

void RateSampler::add(const std::string& counter, const std::string& series,
                      const std::string& unit, double per_unit, const std::string& desc) {
  const Counter* c = stats_.find_counter(counter);
  if (!c) throw std::invalid_argument("RateSampler: no counter '" + counter + "'");
  probes_.push_back(Probe{c, &stats_.series(series, unit, desc), per_unit, c->value()});
}

void RateSampler::add_gauge(const std::string& series, const std::string& unit,
                            const std::string& desc, std::function<double()> probe) {
  gauges_.push_back(Gauge{&stats_.series(series, unit, desc), std::move(probe)});
}

void RateSampler::start() {
  if (started_ || (probes_.empty() && gauges_.empty())) return;
  started_ = true;
  for (Probe& p : probes_) p.last = p.counter->value();
  due_ = sc_core::sc_time_stamp() + interval_.sc();
}

sc_core::sc_time RateSampler::next_due() const { return started_ ? due_ : sc_core::sc_max_time(); }

void RateSampler::observe() {
  const uint64_t now = sc_core::sc_time_stamp().value();
  const double seconds = interval_.seconds();
  for (Probe& p : probes_) {
    const uint64_t v = p.counter->value();
    p.series->sample(now, double(v - p.last) / seconds / p.per_unit);
    p.last = v;
  }
  for (Gauge& g : gauges_) g.series->sample(now, g.probe());
  due_ += interval_.sc();
}

}  // namespace mprdma::core
