#include "vp/core/observer.h"

#include <algorithm>
#include <stdexcept>

namespace mprdma::core {

sc_core::sc_time ObserverSet::next_due() const {
  sc_core::sc_time t = sc_core::sc_max_time();
  for (const Observer* o : observers_) t = std::min(t, o->next_due());
  return t;
}

void ObserverSet::run_due() {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  for (Observer* o : observers_)
    if (o->next_due() <= now) {
      o->observe();
      if (o->next_due() <= now)
        throw std::logic_error("an observer stayed due after observing (zero period?)");
    }
}

void run_observed(ObserverSet& set, const sc_core::sc_time& duration) {
  const sc_core::sc_time end = sc_core::sc_time_stamp() + duration;
  while (sc_core::sc_time_stamp() < end) {
    const sc_core::sc_time due = set.next_due();
    const sc_core::sc_time stop = std::min(end, std::max(due, sc_core::sc_time_stamp()));
    if (stop > sc_core::sc_time_stamp()) sc_core::sc_start(stop - sc_core::sc_time_stamp());
    set.run_due();
    if (sc_core::sc_get_status() == sc_core::SC_STOPPED) break;
  }
}

}  // namespace mprdma::core
