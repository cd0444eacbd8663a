// The NIC's array of processing units (issue 6, item 3; Kalia et al.,
// ATC'16, §3.3). Every piece of per-QP work (a doorbell, a WQE, a packet,
// an ACK, a CQE, an atomic) runs on one PU for a documented number of
// cycles. A QP is bound to PU qpn % pus, so its operations queue in that
// PU's FIFO and complete in submission order without any cross-PU
// synchronisation; QPs on different PUs run in parallel. This is why one QP
// per core ties a core to one PU (the multi-queue optimisation in the
// paper) and why a few busy QPs that share a PU slow each other down.
//
// Timing is in NIC clock cycles passed in by the caller (the SystemC glue
// converts), so the block stays plain C++ and exactly reproducible.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mprdma::nic::uarch {

enum class PuOp : uint8_t {
  doorbell,   // decode a doorbell, schedule the QP
  tx_wqe,     // parse and validate one WQE (after its fetch)
  tx_packet,  // build one outgoing request or response packet
  rx_packet,  // parse, look up and check one incoming packet
  ack,        // process one ACK/NAK/read response in the requester
  cqe,        // build one CQE or EQE
  atomic,     // compute one atomic's result (the PCIe RMW is the caller's)
};
constexpr size_t kPuOpCount = 7;
const char* to_string(PuOp op);

// Cycles one operation keeps its PU busy, each >= 1. The defaults equal the
// NIC's current pipeline costs (nic.latency.*: doorbell 4, wqe_parse 8,
// tx_packet 4, rx_packet 8, ack_process 4, cqe 4), so a QP alone sees the
// same per-operation time once the array is wired in; atomic (8) is our
// choice, an ALU operation like a WQE parse. They are starting points, to
// be calibrated against the paper's per-NIC rates in rows K1-K6.
struct PuOpCycles {
  uint32_t doorbell = 4;
  uint32_t tx_wqe = 8;
  uint32_t tx_packet = 4;
  uint32_t rx_packet = 8;
  uint32_t ack = 4;
  uint32_t cqe = 4;
  uint32_t atomic = 8;
  uint32_t of(PuOp op) const;
};

struct PuArrayParams {
  // Number of PUs, >= 1. Our choice: 8. Vendors do not publish it; the
  // paper only assumes "several" (§2, multiple PUs), and rows K1-K6 will
  // calibrate it together with the cycle costs.
  uint32_t pus = 8;
  PuOpCycles cycles;
};

// What one PU did.
struct PuCounters {
  uint64_t ops = 0;
  std::array<uint64_t, kPuOpCount> ops_by_type{};
  uint64_t busy_cycles = 0;  // sum of the costs of its operations
  uint64_t wait_cycles = 0;  // sum over ops of (start - submit): queueing in its FIFO
  uint64_t max_wait_cycles = 0;
};

class PuArray {
 public:
  // Throws std::invalid_argument if pus is 0 or a cost is 0.
  explicit PuArray(const PuArrayParams& p);

  uint32_t pus() const { return p_.pus; }
  uint32_t pu_of(uint32_t qpn) const { return qpn % p_.pus; }
  const PuArrayParams& params() const { return p_; }

  // Queues `op` of QP `qpn`, submitted at cycle `now_cycle`, behind the
  // operations already queued on the QP's PU; returns the cycle at which it
  // completes: max(now_cycle, PU free) + cost + extra_cycles. `extra_cycles`
  // lengthens this one operation (e.g. payload-dependent work). Operations
  // of one QP therefore complete in the order they were submitted, each
  // strictly after the previous one.
  uint64_t submit(uint32_t qpn, PuOp op, uint64_t now_cycle, uint64_t extra_cycles = 0);

  // Cycle from which the PU is free (everything submitted is done).
  uint64_t free_at(uint32_t pu) const { return units_.at(pu).free_at; }
  // Work queued on the PU and not yet done at `now_cycle`, in cycles.
  uint64_t backlog_cycles(uint32_t pu, uint64_t now_cycle) const;

  const PuCounters& counters(uint32_t pu) const { return units_.at(pu).counters; }
  // Busy cycles of `pu` inside [from_cycle, to_cycle), and that divided by
  // the interval. Work already submitted but in the future counts when it
  // falls inside the interval. Throws std::out_of_range if the interval
  // starts before what forget_before() dropped, or is empty or reversed.
  uint64_t busy_cycles(uint32_t pu, uint64_t from_cycle, uint64_t to_cycle) const;
  double utilisation(uint32_t pu, uint64_t from_cycle, uint64_t to_cycle) const;
  // Mean utilisation over all PUs, and the PU with the most busy cycles in
  // the interval (the lowest index on a tie): the one that names a bottleneck.
  double mean_utilisation(uint64_t from_cycle, uint64_t to_cycle) const;
  uint32_t busiest(uint64_t from_cycle, uint64_t to_cycle) const;
  // Drops the busy history that ends at or before `cycle` (memory stays
  // bounded in long runs); later queries must start at or after it.
  void forget_before(uint64_t cycle);

 private:
  struct Interval {
    uint64_t start, end;  // busy in [start, end)
  };
  struct Unit {
    uint64_t free_at = 0;
    std::vector<Interval> busy;  // sorted, disjoint, merged when contiguous
    size_t first = 0;            // busy[0, first) was forgotten
    PuCounters counters;
  };

  void check_interval(uint64_t from_cycle, uint64_t to_cycle) const;

  PuArrayParams p_;
  std::vector<Unit> units_;
  uint64_t forgotten_before_ = 0;
};

}  // namespace mprdma::nic::uarch
