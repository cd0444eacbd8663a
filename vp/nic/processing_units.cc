#include "vp/nic/processing_units.h"

#include <algorithm>

namespace mprdma::nic {

namespace {

uarch::PuArrayParams params_of(const NicConfig& cfg) {
  uarch::PuArrayParams p;
  p.pus = static_cast<uint32_t>(cfg.pu.count);
  const NicLatencies& l = cfg.latency;
  auto at_least_1 = [](int64_t c) { return static_cast<uint32_t>(std::max<int64_t>(1, c)); };
  p.cycles.doorbell = at_least_1(l.doorbell);
  p.cycles.tx_wqe = at_least_1(l.wqe_parse);
  p.cycles.tx_packet = at_least_1(l.tx_packet);
  p.cycles.rx_packet = at_least_1(l.rx_packet);
  p.cycles.ack = at_least_1(l.ack_process);
  p.cycles.cqe = at_least_1(l.cqe);
  return p;
}

// The busy history behind PuArray's interval queries is trimmed every this
// many operations: the NIC reports only cumulative counters.
constexpr uint64_t kForgetEvery = 4096;

}  // namespace

ProcessingUnits::ProcessingUnits(const NicConfig& cfg, const core::ClockDomain& clock,
                                 core::SimEnv& env)
    : params_(params_of(cfg)), clock_(clock), array_(params_) {
  for (uint32_t i = 0; i < params_.pus; ++i) {
    const std::string p = "nic." + cfg.name + ".pu." + std::to_string(i) + ".";
    stats_.push_back(
        Stats{&env.stats.counter(p + "ops", "operations", "Operations this PU ran"),
              &env.stats.counter(p + "busy_cycles", "cycles",
                                 "Cycles this PU was busy (utilisation = busy / elapsed)"),
              &env.stats.counter(p + "wait_cycles", "cycles",
                                 "Cycles operations waited in this PU's queue, summed"),
              &env.stats.counter(p + "max_wait_cycles", "cycles",
                                 "Longest wait of one operation in this PU's queue")});
  }
}

sc_core::sc_time ProcessingUnits::run(uint32_t qpn, uarch::PuOp op) {
  // Work starts on a clock edge: the cycle at or after now.
  const uint64_t now = clock_.cycle_at(clock_.edge_at_or_after(sc_core::sc_time_stamp()));
  const uint64_t done = array_.submit(qpn, op, now);
  const uint64_t cost = params_.cycles.of(op);
  const uint64_t wait = done - cost - now;
  Stats& s = stats_[array_.pu_of(qpn)];
  ++*s.ops;
  s.busy->add(cost);
  s.wait->add(wait);
  if (wait > s.max_wait->value()) s.max_wait->set(wait);
  if (++runs_ % kForgetEvery == 0) array_.forget_before(now);
  return clock_.cycles(done);
}

void ProcessingUnits::reset() { array_ = uarch::PuArray(params_); }

}  // namespace mprdma::nic
