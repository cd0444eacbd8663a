// The NIC's processing units in simulated time: uarch::PuArray (plain C++,
// in cycles) with the NIC's clock, its cycle costs (nic.latency) and its
// statistics. Per-QP work that the model charges to PUs: building each
// outgoing packet (TxScheduler, latency.tx_packet) and processing each
// received packet (Nic, latency.rx_packet). See nic.md "Processing units".
#pragma once

#include <cstdint>
#include <string>
#include <systemc>
#include <vector>

#include "vp/core/clock_domain.h"
#include "vp/core/sim_env.h"
#include "vp/nic/nic_config.h"
#include "vp/nic/uarch/pu_array.h"

namespace mprdma::nic {

class ProcessingUnits {
 public:
  ProcessingUnits(const NicConfig& cfg, const core::ClockDomain& clock, core::SimEnv& env);

  // Queues `op` of QP `qpn` on its PU now; returns when it completes. The
  // operations of one QP complete in the order they were run.
  sc_core::sc_time run(uint32_t qpn, uarch::PuOp op);
  // Device reset: every PU is idle (work in flight belongs to the old run).
  void reset();

  uint32_t count() const { return array_.pus(); }
  uint32_t pu_of(uint32_t qpn) const { return array_.pu_of(qpn); }

 private:
  struct Stats {
    core::Counter* ops;
    core::Counter* busy;
    core::Counter* wait;
    core::Counter* max_wait;
  };
  uarch::PuArrayParams params_;
  const core::ClockDomain& clock_;
  uarch::PuArray array_;
  std::vector<Stats> stats_;
  uint64_t runs_ = 0;
};

}  // namespace mprdma::nic
