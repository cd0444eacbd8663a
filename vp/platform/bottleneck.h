// Bottleneck analysis: which resource of one host's NIC (its PCIe link,
// Ethernet port, processing units, scheduler, receive stage) was busiest
// over a window of simulated time, and what kept it busy.
//
// A scenario metric "bottleneck(<host>,<from>,<to>)" is a string: the name
// of the busiest resource, e.g. "pcie.downstream.dma_read_completion" (the
// host-to-NIC PCIe direction, mostly carrying DMA read completions) or
// "rx_stage.qpc_miss" (the in-order receive stage, mostly waiting for QP
// context fills). results.json also lists every resource's utilisation
// (docs/results-schema.md, "bottlenecks").
//
// Utilisation of each resource over the window (T = to - from):
//   pcie.<dir>       (TLP bytes + DLLP bytes) / (link bytes per second * T)
//                    + the time its transmitter waited for flow-control
//                    credits / T (a direction held up by credits is as
//                    full as a busy one: it cannot send more); named after
//                    the TLP kind with the most bytes
//   port.tx/port.rx  (frame bytes + 20 B preamble and gap per frame) * 8 /
//                    (line rate * T)
//   pu.<i>           busy cycles of the busiest PU / (clock * T)
//   tx_scheduler     packets sent * latency.tx_schedule / (clock * T)
//   rx_stage         (packets received * latency.rx_parse cycles + time
//                    stalled on cache fills) / T; named rx_stage.parse or
//                    rx_stage.<cache>_miss after the larger part
//   completion_unit  (CQEs + EQEs written) * latency.cqe cycles / (clock * T):
//                    the one serial builder of completions
//   atomics.lock     time the busiest lock bucket was held / T (a hold is
//                    counted when it ends)
//   atomics.buffers  time atomics held read-modify-write buffers /
//                    (nic.atomics.max_outstanding * T): 1 when every buffer
//                    is taken all the time (counted when each hold ends)
// When no resource is busy at least kSaturated of the window, the metric
// names "latency": the rate is set by the operations outstanding and their
// round trips (a window), not by a full resource.
// Not counted: host CPUs, switches. Utilisations may exceed 1 while a
// backlog builds: PCIe bytes count when they are handed to the link.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <systemc>
#include <unordered_map>
#include <vector>

#include "vp/core/observer.h"
#include "vp/core/stats.h"
#include "vp/core/units.h"

namespace mprdma::platform {

struct BottleneckSpec {
  std::string host;
  core::Duration from, to;
  // "bottleneck(<host>)": from `from` (the platform sets it to the latest
  // run_at of the jobs) to when the last job ended; `to` unused.
  bool until_jobs_end = false;
};
// "bottleneck(<host>,<from>,<to>)" or "bottleneck(<host>)" -> its parts;
// nullopt for any other expression. Throws std::invalid_argument naming the
// text when it starts like one but is malformed (wrong arity, bad
// durations, empty window).
std::optional<BottleneckSpec> parse_bottleneck_metric(const std::string& expr);

// What the utilisations are relative to, for one host.
struct HostCapacity {
  double pcie_bytes_per_s = 0;  // one direction, after line encoding
  double port_tx_bps = 0, port_rx_bps = 0;
  double clock_hz = 0;
  uint32_t pus = 0;
  int64_t tx_schedule_cycles = 0, rx_parse_cycles = 0, cqe_cycles = 0;
  int64_t atomic_buffers = 0;  // nic.atomics.max_outstanding
};

struct ResourceUse {
  std::string resource;  // e.g. pcie.downstream.mmio_write
  double utilisation = 0;
  // pcie.<dir> only: the part of `utilisation` its transmitter spent
  // waiting for the receiver's flow-control credits, link idle.
  double credit_stall = 0;
};

// The host's resources ranked busiest first (ties, to 1e-9: the order above), from
// the counters' increments over a window of `window_s` seconds (keys are
// full statistic paths, e.g. "pcie.s.downstream.mmio_write.bytes").
inline constexpr double kSaturated = 0.8;

// The metric's value for a ranking: the busiest resource, or "latency" when
// none is busy kSaturated of the time; "" for an empty ranking.
std::string bottleneck_name(const std::vector<ResourceUse>& ranking);

// `lock_busy_s`: seconds the busiest atomic lock bucket was held in the window.
std::vector<ResourceUse> rank_resources(const std::map<std::string, uint64_t>& delta,
                                        const std::string& host, const HostCapacity& cap,
                                        double window_s, double lock_busy_s = 0);

// Takes the host's counters (nic.<host>.* and pcie.<host>.*) at the
// window's start and end, and the NIC's per-bucket lock hold times
// (`lock_held_ps`, may be null; it must outlive the probe); ranking() once
// the end has passed.
class BottleneckProbe : public core::Observer {
 public:
  using LockHeld = std::unordered_map<uint32_t, uint64_t>;
  BottleneckProbe(const core::StatsRegistry& stats, BottleneckSpec spec, HostCapacity cap,
                  const LockHeld* lock_held_ps = nullptr);
  sc_core::sc_time next_due() const override;
  void observe() override;
  // The jobs have all ended: the end snapshot of an until_jobs_end window.
  void jobs_ended();
  // Empty until the window has ended.
  std::vector<ResourceUse> ranking() const;
  const BottleneckSpec& spec() const { return spec_; }

 private:
  std::map<std::string, uint64_t> snapshot() const;

  const core::StatsRegistry& stats_;
  BottleneckSpec spec_;
  HostCapacity cap_;
  const LockHeld* lock_held_ps_;
  int taken_ = 0;        // snapshots taken: 0, 1 (start), 2 (end)
  uint64_t end_ps_ = 0;  // when the end snapshot was taken
  std::map<std::string, uint64_t> start_, end_;
  LockHeld locks_start_, locks_end_;
};

}  // namespace mprdma::platform
