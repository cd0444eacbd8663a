#include "vp/nic/uarch/pu_array.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mprdma::nic::uarch {

const char* to_string(PuOp op) {
  switch (op) {
    case PuOp::doorbell:
      return "doorbell";
    case PuOp::tx_wqe:
      return "tx_wqe";
    case PuOp::tx_packet:
      return "tx_packet";
    case PuOp::rx_packet:
      return "rx_packet";
    case PuOp::ack:
      return "ack";
    case PuOp::cqe:
      return "cqe";
    case PuOp::atomic:
      return "atomic";
  }
  return "?";
}

uint32_t PuOpCycles::of(PuOp op) const {
  switch (op) {
    case PuOp::doorbell:
      return doorbell;
    case PuOp::tx_wqe:
      return tx_wqe;
    case PuOp::tx_packet:
      return tx_packet;
    case PuOp::rx_packet:
      return rx_packet;
    case PuOp::ack:
      return ack;
    case PuOp::cqe:
      return cqe;
    case PuOp::atomic:
      return atomic;
  }
  throw std::invalid_argument("PuOpCycles: unknown operation");
}

PuArray::PuArray(const PuArrayParams& p) : p_(p) {
  if (p_.pus == 0) throw std::invalid_argument("PU array: pus must be at least 1");
  for (size_t i = 0; i < kPuOpCount; ++i) {
    const PuOp op = static_cast<PuOp>(i);
    // A zero cost would let two ops of one QP complete in the same cycle,
    // and a PU that does work must be seen busy.
    if (p_.cycles.of(op) == 0) {
      throw std::invalid_argument(std::string("PU array: cycles.") + to_string(op) +
                                  " must be at least 1");
    }
  }
  units_.resize(p_.pus);
}

uint64_t PuArray::submit(uint32_t qpn, PuOp op, uint64_t now_cycle, uint64_t extra_cycles) {
  Unit& u = units_[pu_of(qpn)];
  const uint64_t cost = p_.cycles.of(op) + extra_cycles;
  const uint64_t start = std::max(now_cycle, u.free_at);
  const uint64_t done = start + cost;
  u.free_at = done;
  if (u.busy.size() > u.first && u.busy.back().end == start) {
    u.busy.back().end = done;  // back-to-back: one longer busy period
  } else {
    u.busy.push_back(Interval{start, done});
  }
  PuCounters& c = u.counters;
  ++c.ops;
  ++c.ops_by_type[static_cast<size_t>(op)];
  c.busy_cycles += cost;
  c.wait_cycles += start - now_cycle;
  c.max_wait_cycles = std::max(c.max_wait_cycles, start - now_cycle);
  return done;
}

uint64_t PuArray::backlog_cycles(uint32_t pu, uint64_t now_cycle) const {
  const uint64_t free = units_.at(pu).free_at;
  return free > now_cycle ? free - now_cycle : 0;
}

void PuArray::check_interval(uint64_t from_cycle, uint64_t to_cycle) const {
  if (to_cycle <= from_cycle) {
    throw std::out_of_range("PU array: empty interval [" + std::to_string(from_cycle) + ", " +
                            std::to_string(to_cycle) + ")");
  }
  if (from_cycle < forgotten_before_) {
    throw std::out_of_range("PU array: interval starts at " + std::to_string(from_cycle) +
                            ", before the history forgotten up to " +
                            std::to_string(forgotten_before_));
  }
}

uint64_t PuArray::busy_cycles(uint32_t pu, uint64_t from_cycle, uint64_t to_cycle) const {
  check_interval(from_cycle, to_cycle);
  const Unit& u = units_.at(pu);
  // First interval that ends after from_cycle; intervals are sorted.
  auto it = std::upper_bound(u.busy.begin() + static_cast<std::ptrdiff_t>(u.first), u.busy.end(),
                             from_cycle, [](uint64_t t, const Interval& iv) { return t < iv.end; });
  uint64_t sum = 0;
  for (; it != u.busy.end() && it->start < to_cycle; ++it) {
    sum += std::min(it->end, to_cycle) - std::max(it->start, from_cycle);
  }
  return sum;
}

double PuArray::utilisation(uint32_t pu, uint64_t from_cycle, uint64_t to_cycle) const {
  return static_cast<double>(busy_cycles(pu, from_cycle, to_cycle)) /
         static_cast<double>(to_cycle - from_cycle);
}

double PuArray::mean_utilisation(uint64_t from_cycle, uint64_t to_cycle) const {
  double sum = 0.0;
  for (uint32_t pu = 0; pu < p_.pus; ++pu) sum += utilisation(pu, from_cycle, to_cycle);
  return sum / p_.pus;
}

uint32_t PuArray::busiest(uint64_t from_cycle, uint64_t to_cycle) const {
  uint32_t best = 0;
  uint64_t best_busy = busy_cycles(0, from_cycle, to_cycle);
  for (uint32_t pu = 1; pu < p_.pus; ++pu) {
    const uint64_t b = busy_cycles(pu, from_cycle, to_cycle);
    if (b > best_busy) {
      best = pu;
      best_busy = b;
    }
  }
  return best;
}

void PuArray::forget_before(uint64_t cycle) {
  forgotten_before_ = std::max(forgotten_before_, cycle);
  for (Unit& u : units_) {
    while (u.first < u.busy.size() && u.busy[u.first].end <= forgotten_before_) ++u.first;
    // Compact once the dead prefix dominates, so erasing stays amortised O(1).
    if (u.first > 64 && u.first * 2 > u.busy.size()) {
      u.busy.erase(u.busy.begin(), u.busy.begin() + static_cast<std::ptrdiff_t>(u.first));
      u.first = 0;
    }
  }
}

}  // namespace mprdma::nic::uarch
