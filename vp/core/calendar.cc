#include "vp/core/calendar.h"

#include <stdexcept>

namespace mprdma::core {

uint64_t Calendar::total_dispatched_ = 0;
uint64_t Calendar::total_activations_ = 0;

Calendar::Calendar(sc_core::sc_module_name name) : sc_core::sc_module(name) {
  SC_METHOD(dispatch);
  sensitive << wake_;
  dont_initialize();
}

void Calendar::at(const sc_core::sc_time& when, Action action) {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  if (when < now)
    throw std::logic_error(std::string(name()) + ": action scheduled in the past (" +
                           when.to_string() + " < " + now.to_string() + ")");
  const bool new_head = queue_.empty() || when < queue_.top().when;
  queue_.push(Entry{when, seq_++, std::move(action)});
  // An earlier notification overrides a pending later one; a later one is
  // ignored by SystemC, so only a new head needs notifying.
  if (new_head && !dispatching_) wake_.notify(when - now);
}

void Calendar::dispatch() {
  ++total_activations_;
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  // Re-arms wake_ for the head however dispatch() ends: an action that
  // throws must not leave the calendar unable to wake again.
  struct Rearm {
    Calendar& c;
    sc_core::sc_time now;
    ~Rearm() {
      c.dispatching_ = false;
      if (!c.queue_.empty()) c.wake_.notify(c.queue_.top().when - now);
    }
  } rearm{*this, now};
  dispatching_ = true;
  while (!queue_.empty() && queue_.top().when <= now) {
    Action action = std::move(const_cast<Entry&>(queue_.top()).action);
    queue_.pop();
    ++total_dispatched_;
    action();
  }
}

}  // namespace mprdma::core
