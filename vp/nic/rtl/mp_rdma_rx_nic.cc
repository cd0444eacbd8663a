#include "vp/nic/rtl/mp_rdma_rx_nic.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "vp/core/log.h"
#include "vp/nic/rtl/mp_rdma_rx_lockstep.h"
#include "vp/nic/rtl/mp_rdma_rx_rtl.h"
#include "vp/nic/rtl/rtl_nic_support.h"

namespace mprdma::nic::rtl {

namespace {

class RxNic : public MpRxImpl {
 public:
  RxNic(RxImplMode mode, MpOverflowNack overflow_nack, const std::string& nic, core::SimEnv& env,
        uint64_t period_ps)
      : nic_(nic),
        env_(env),
        waveform_(env, nic, "rtl-" + nic + ".fst"),
        ops_(&env.stats.counter("nic." + nic + ".transport.rtl.operations", "operations",
                                "Operations the RTL receiver engine decided")),
        cycles_(&env.stats.counter("nic." + nic + ".transport.rtl.cycles", "cycles",
                                   "Cycles the RTL receiver engine was clocked (only while an "
                                   "operation was in it)")) {
    const bool traceable = waveform_.wanted();
    period_ps_ = period_ps ? period_ps : 1;
    if (mode == RxImplMode::lockstep)
      lockstep_ = std::make_unique<MpRxLockstep>(overflow_nack, 8, traceable);
    else
      rtl_ = std::make_unique<MpRxRtl>(overflow_nack, traceable);
    for (uint32_t r = 0; r < MpRxRtl::rows(); ++r) free_.insert(r);
  }

  void open(uint32_t qpn, uint32_t epsn) override {
    close(qpn);
    if (free_.empty())
      throw EngineContextExhausted(
          "nic " + nic_ + ": QP " + std::to_string(qpn) + " opens an MP-RDMA receiver, but the " +
          "RTL engine's context RAM has only " + std::to_string(MpRxRtl::rows()) +
          " rows, all in use (QP_IDX_W in vp/nic/rtl/mprdma_rtl_pkg.sv; or run this NIC with "
          "nic.transport_impl model)");
    const uint32_t row = *free_.begin();
    free_.erase(free_.begin());
    rows_[qpn] = {row, epsn & kPsnMask};
    RxOp op;
    op.kind = RxOpKind::init;
    op.row = row;
    op.data.psn = epsn & kPsnMask;
    run(qpn, op, last_cycle_);
  }

  void close(uint32_t qpn) override {
    auto it = rows_.find(qpn);
    if (it == rows_.end()) return;
    free_.insert(it->second.row);
    rows_.erase(it);
  }

  MpRxResult on_data(uint32_t qpn, const MpData& d, uint64_t now) override {
    RxOp op;
    op.kind = RxOpKind::data;
    op.row = row(qpn).row;
    op.data = d;
    return run(qpn, op, now).result;
  }

  MpRxRtl& engine() { return rtl_ ? *rtl_ : lockstep_->rtl(); }

  uint32_t rcv_nxt(uint32_t qpn) const override {
    auto it = rows_.find(qpn);
    if (it == rows_.end())
      throw std::logic_error("nic " + nic_ + ": QP " + std::to_string(qpn) +
                             " has no MP-RDMA receiver in the RTL engine");
    return it->second.rcv_nxt;
  }

 private:
  struct Row {
    uint32_t row;
    uint32_t rcv_nxt;  // as the engine last wrote it back (the NIC's copy of the field)
  };
  Row& row(uint32_t qpn) {
    auto it = rows_.find(qpn);
    if (it == rows_.end())
      throw std::logic_error("nic " + nic_ + ": QP " + std::to_string(qpn) +
                             " has no MP-RDMA receiver in the RTL engine");
    return it->second;
  }

  // One operation through the engine: issued at NIC cycle `now`, read out
  // a cycle later.
  RxOutcome run(uint32_t qpn, const RxOp& op, uint64_t now) {
    last_cycle_ = std::max(last_cycle_, now);
    ++*ops_;
    RxOutcome out;
    MpRxRtl& e = engine();
    waveform_.before(e, now, period_ps_);
    e.advance_to(now);  // idle cycles are skipped, not clocked or counted
    const uint64_t c0 = e.cycles();
    if (rtl_) {
      rtl_->clock(&op);
      std::optional<RxOutcome> o = rtl_->clock(nullptr);
      if (!o) throw std::logic_error("nic " + nic_ + ": the RTL receiver gave no outcome");
      out = std::move(*o);
    } else {
      std::optional<std::string> bad = lockstep_->step(&op);
      if (!bad) bad = lockstep_->drain();
      if (bad) diverged(qpn, op, *bad);
      out = *lockstep_->last_outcome();
    }
    cycles_->add(e.cycles() - c0);
    rows_.at(qpn).rcv_nxt = out.context.rcv_nxt;
    return out;
  }

  [[noreturn]] void diverged(uint32_t qpn, const RxOp& op, const std::string& report) {
    throw_divergence(env_, nic_, qpn, "context row", op.row, report, "lockstep-" + nic_ + ".fst",
                     period_ps_, [this](const std::string& path, uint64_t period_ps) {
                       return lockstep_->replay_fst(path, period_ps);
                     });
  }

  std::string nic_;
  core::SimEnv& env_;
  RtlWaveformWindow waveform_;
  core::Counter* ops_;
  core::Counter* cycles_;
  std::unique_ptr<MpRxRtl> rtl_;
  std::unique_ptr<MpRxLockstep> lockstep_;
  std::set<uint32_t> free_;
  std::unordered_map<uint32_t, Row> rows_;
  uint64_t last_cycle_ = 0;
  uint64_t period_ps_ = 4000;
};

}  // namespace

MpRxRtl* rx_impl_engine(MpRxImpl& impl) {
  auto* n = dynamic_cast<RxNic*>(&impl);
  return n ? &n->engine() : nullptr;
}

std::unique_ptr<MpRxImpl> make_rx_impl(RxImplMode mode, const std::string& transport,
                                       uint32_t bitmap_slots, MpOverflowNack overflow_nack,
                                       const std::string& nic, core::SimEnv& env,
                                       uint64_t period_ps) {
  if (bitmap_slots != MpRxRtl::slots())
    throw std::invalid_argument(
        "nic " + nic + ": " + transport + ".bitmap_slots is " + std::to_string(bitmap_slots) +
        ", but the RTL receiver is built with L = " + std::to_string(MpRxRtl::slots()) +
        " (RX_SLOTS in vp/nic/rtl/mprdma_rtl_pkg.sv): set " + transport + ".bitmap_slots " +
        std::to_string(MpRxRtl::slots()) + " or run transport_impl model");
  return std::make_unique<RxNic>(mode, overflow_nack, nic, env, period_ps);
}

}  // namespace mprdma::nic::rtl
