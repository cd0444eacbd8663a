// Calendar: a block's queue of timed actions, woken by one sc_event.
//
// Blocks do not run free-running clocks or one SC_THREAD per activity:
// each owns a Calendar, schedules an action at the cycle it is due, and the
// Calendar's single SC_METHOD runs every due action in (time, insertion)
// order. One activation handles all actions due at the same instant.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <systemc>
#include <vector>

namespace mprdma::core {

class Calendar : public sc_core::sc_module {
 public:
  using Action = std::function<void()>;

  SC_HAS_PROCESS(Calendar);
  explicit Calendar(sc_core::sc_module_name name);

  // Runs `action` at absolute time `when` (>= now).
  void at(const sc_core::sc_time& when, Action action);
  // Runs `action` after `delay`.
  void after(const sc_core::sc_time& delay, Action action) {
    at(sc_core::sc_time_stamp() + delay, std::move(action));
  }
  size_t pending() const { return queue_.size(); }

  // Actions run by all calendars since process start (progress reporting).
  static uint64_t total_dispatched() { return total_dispatched_; }
  // SystemC activations of all calendars since process start.
  static uint64_t total_activations() { return total_activations_; }

 private:
  struct Entry {
    sc_core::sc_time when;
    uint64_t seq;
    Action action;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.when != b.when ? a.when > b.when : a.seq > b.seq;
    }
  };
  void dispatch();

  std::priority_queue<Entry, std::vector<Entry>, Later> queue_;
  sc_core::sc_event wake_;
  uint64_t seq_ = 0;
  // True while dispatch() runs: it re-arms wake_ for the new head itself,
  // so at() must not add a notification (a delta one would cost an empty
  // extra activation).
  bool dispatching_ = false;
  static uint64_t total_dispatched_;
  static uint64_t total_activations_;
};

}  // namespace mprdma::core
