// Observers: code that looks at the model at fixed simulated times (time
// series, deadlock checks) without being part of it.
//
// They run between kernel runs, never inside one: the driver runs the
// kernel up to the next due time (sc_start), then lets every due observer
// look. They add no SystemC events, so observing a run cannot reorder the
// model's simultaneous events: a scenario gives the same results with any
// sample interval, or with none. An observer sees the model after every
// event before its due time and before any event at it.
#pragma once

#include <systemc>
#include <vector>

namespace mprdma::core {

class Observer {
 public:
  virtual ~Observer() = default;
  // Absolute simulated time of the next look; sc_core::sc_max_time() for
  // never.
  virtual sc_core::sc_time next_due() const = 0;
  // Called with the kernel stopped at next_due().
  virtual void observe() = 0;
};

class ObserverSet {
 public:
  void add(Observer* o) { observers_.push_back(o); }
  bool empty() const { return observers_.empty(); }
  // The earliest due time, sc_core::sc_max_time() when none is due.
  sc_core::sc_time next_due() const;
  // Lets every observer due now (or earlier) look, until none is.
  void run_due();

 private:
  std::vector<Observer*> observers_;
};

// Runs the kernel for `duration` (from now), stopping at each due time of
// `set` to let its observers look. For tests and tools that drive
// sc_start themselves; the platform's run loop does the same.
void run_observed(ObserverSet& set, const sc_core::sc_time& duration);

}  // namespace mprdma::core
