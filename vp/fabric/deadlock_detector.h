// PFC deadlock detector: finds cyclic buffer dependencies that have
// formed, and names the switches and ports on the cycle. It is an Observer
// (vp/core/observer.h): the run loop lets it look every `interval`, between
// kernel runs, so checking adds no events and cannot change the run.
//
// Every `interval` it builds the wait-for graph of the fabric's egress
// queues: queue (S, P, prio) waits for queue (S', Q, prio) when P's peer S'
// holds P off with PFC (its ingress P' is in XOFF for prio), S' egress Q
// holds packets that came in on P', and (S', Q, prio) is itself non-empty
// and paused. A cycle of such queues cannot drain by itself: the packets
// of each wait for space that only the next one can free. A cycle seen in
// `confirm` consecutive checks is reported once (log error, counter
// fabric.deadlocks, and records for results.json); a transient cycle that
// clears on its own is not a deadlock.
#pragma once

#include <cstdint>
#include <string>
#include <systemc>
#include <vector>

#include "vp/core/log.h"
#include "vp/core/observer.h"
#include "vp/core/sim_env.h"
#include "vp/core/units.h"
#include "vp/fabric/switch.h"
#include "vp/fabric/topology.h"

namespace mprdma::fabric {

struct DeadlockRecord {
  double at_s = 0;                 // simulated time of the report
  std::vector<std::string> cycle;  // "<switch> port <p> (to <peer>) prio <q>", in wait-for order
};

class DeadlockDetector : public core::Observer {
 public:
  // `switch_of_node[n]` is node n's Switch (nullptr for hosts).
  DeadlockDetector(const Topology& topo, const std::vector<Switch*>& switch_of_node,
                   core::Duration interval, int confirm, core::SimEnv& env);

  // One analysis now: the queues of one cycle, or empty.
  std::vector<std::string> find_cycle() const;
  const std::vector<DeadlockRecord>& deadlocks() const { return records_; }

  // Observer: a check every `interval` (never when it is zero).
  sc_core::sc_time next_due() const override;
  void observe() override;

 private:
  struct Queue {
    int node, port, prio;
  };

  const Topology& topo_;
  const std::vector<Switch*>& switch_of_node_;
  core::Duration interval_;
  int confirm_;
  sc_core::sc_time due_;
  core::LogChannel& log_;
  core::Counter& found_;
  std::vector<std::string> candidate_;
  int seen_ = 0;
  std::vector<std::vector<std::string>> reported_;
  std::vector<DeadlockRecord> records_;
};

}  // namespace mprdma::fabric
