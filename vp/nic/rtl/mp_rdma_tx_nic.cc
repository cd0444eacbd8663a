#include "vp/nic/rtl/mp_rdma_tx_nic.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "vp/nic/rtl/mp_rdma_tx_lockstep.h"
#include "vp/nic/rtl/mp_rdma_tx_rtl.h"
#include "vp/nic/rtl/rtl_nic_support.h"

namespace mprdma::nic::rtl {

namespace {

class TxNic : public MpTxImpl {
 public:
  TxNic(RxImplMode mode, const MpSenderParams& params, uint32_t seed, const std::string& nic,
        core::SimEnv& env, const TxTiming& timing, uint64_t period_ps)
      : nic_(nic),
        env_(env),
        waveform_(env, nic, "rtl-tx-" + nic + ".fst"),
        timing_(timing),
        ops_(&env.stats.counter("nic." + nic + ".transport.rtl.tx_operations", "operations",
                                "Operations the RTL sender engine performed")),
        cycles_(&env.stats.counter("nic." + nic + ".transport.rtl.tx_cycles", "cycles",
                                   "Cycles the RTL sender engine was clocked (only while an "
                                   "operation was in it)")),
        held_(&env.stats.counter("nic." + nic + ".transport.rtl.tx_held_cycles", "cycles",
                                 "Cycles the RTL sender's packets left after the NIC's call "
                                 "for them (nic.rtl_timing charged): the engine's cycles beyond "
                                 "the ACK stage and its waits for itself, summed over packets")),
        back_to_back_(&env.stats.counter(
            "nic." + nic + ".transport.rtl.tx_back_to_back", "operations",
            "Sender operations the engine took in the last cycle of the one before")),
        forwarded_(&env.stats.counter("nic." + nic + ".transport.rtl.tx_forwarded", "operations",
                                      "Back-to-back sender operations on the row being written "
                                      "back, which took it from the write-back register")) {
    const bool traceable = waveform_.wanted();
    period_ps_ = period_ps ? period_ps : 1;
    if (mode == RxImplMode::lockstep)
      lockstep_ = std::make_unique<MpTxLockstep>(params, seed, 8, traceable);
    else
      rtl_ = std::make_unique<MpTxRtl>(params, seed, traceable);
    for (uint32_t r = 0; r < MpTxRtl::rows(); ++r) free_.insert(r);
  }

  MpTxRtl& engine() { return rtl_ ? *rtl_ : lockstep_->rtl(); }

  void reserve(uint32_t qpn) override {
    release(qpn);
    if (free_.empty())
      throw EngineContextExhausted(
          "nic " + nic_ + ": QP " + std::to_string(qpn) + " opens an MP-RDMA sender, but the " +
          "RTL engine's context RAM has only " + std::to_string(MpTxRtl::rows()) +
          " rows, all in use (QP_IDX_W in vp/nic/rtl/mprdma_rtl_pkg.sv; or run this NIC with "
          "nic.transport_impl model)");
    rows_[qpn] = {*free_.begin(), 0, false};
    free_.erase(free_.begin());
  }

  void release(uint32_t qpn) override {
    auto it = rows_.find(qpn);
    if (it == rows_.end()) return;
    free_.insert(it->second.row);
    rows_.erase(it);
  }

  void start(uint32_t qpn, MpSender& s, const MpSenderParams& params, uint32_t isn) override {
    if (!rows_.count(qpn)) reserve(qpn);  // a requester without a responder side
    Row& r = rows_.at(qpn);
    r.vp_base = params.vp_base;
    r.started = true;
    TxOp op;
    op.kind = TxOpKind::init;
    op.now = last_cycle_;
    op.psn = isn & kPsnMask;
    run(qpn, op, s, nullptr);
  }

  void set_snd_max(uint32_t qpn, MpSender& s, uint32_t snd_max, uint64_t now,
                   std::vector<MpTx>& out) override {
    TxOp op;
    op.kind = TxOpKind::set_max;
    op.now = now;
    op.psn = snd_max & kPsnMask;
    run(qpn, op, s, &out);
  }

  void add_sync(uint32_t qpn, MpSender& s, uint32_t psn) override {
    s.add_sync(psn);
    const uint32_t r = row(qpn).row;
    if (rtl_)
      rtl_->add_sync(r, psn);
    else
      lockstep_->add_sync(r, psn);
  }

  void on_ack(uint32_t qpn, MpSender& s, const MpAck& ack, uint64_t now, std::vector<MpTx>& out,
              uint32_t egress_backlog) override {
    TxOp op;
    op.kind = TxOpKind::ack;
    op.now = now;
    op.ack = ack;
    op.backlog = egress_backlog;
    run(qpn, op, s, &out);
  }

  bool on_rnr(uint32_t qpn, MpSender& s, const MpAck& ack, uint64_t until, uint64_t now) override {
    TxOp op;
    op.kind = TxOpKind::rnr;
    op.now = now;
    op.ack = ack;
    op.until = until;
    return run(qpn, op, s, nullptr).rnr_fresh;
  }

  void on_timer(uint32_t qpn, MpSender& s, uint64_t now, std::vector<MpTx>& out) override {
    TxOp op;
    op.kind = TxOpKind::timer;
    op.now = now;
    run(qpn, op, s, &out);
  }

 private:
  struct Row {
    uint32_t row;
    uint16_t vp_base;
    bool started;
  };
  Row& row(uint32_t qpn) {
    auto it = rows_.find(qpn);
    if (it == rows_.end() || !it->second.started)
      throw std::logic_error("nic " + nic_ + ": QP " + std::to_string(qpn) +
                             " has no MP-RDMA sender in the RTL engine");
    return it->second;
  }

  // One operation through the engine, issued at the op's NIC cycle; the
  // outcome is copied into the QP's view `s`.
  TxOutcome run(uint32_t qpn, TxOp op, MpSender& s, std::vector<MpTx>* out) {
    const Row& r = op.kind == TxOpKind::init ? rows_.at(qpn) : row(qpn);
    op.row = r.row;
    op.vp_base = r.vp_base;
    last_cycle_ = std::max(last_cycle_, op.now);
    ++*ops_;
    MpTxRtl& e = engine();
    waveform_.before(e, op.now, period_ps_);
    // The cycle the operation enters the engine (if it is free by then):
    // an ACK's when its ACK stage starts, which the decision overlaps.
    const bool in_ack_stage = op.kind == TxOpKind::ack || op.kind == TxOpKind::rnr;
    const uint64_t overlap = timing_.charged && in_ack_stage ? timing_.ack_stage_cycles : 0;
    e.advance_to(op.now - std::min(op.now, overlap));
    const uint64_t c0 = e.cycles(), b0 = e.overlapped_ops(), f0 = e.forwarded_ops();
    TxOutcome o;
    if (rtl_) {
      o = rtl_->run(op);
    } else {
      if (auto bad = lockstep_->run(op)) diverged(qpn, op, *bad);
      o = lockstep_->last_outcome();
    }
    cycles_->add(e.cycles() - c0);
    back_to_back_->add(e.overlapped_ops() - b0);
    forwarded_->add(e.forwarded_ops() - f0);
    s.load(o.context, o.counts, o.sync_pending);
    if (out)
      for (const TxPacket& p : o.packets) {
        MpTx t = p.tx;
        t.at = 0;
        if (timing_.charged && p.cycle > op.now) {
          t.at = p.cycle;
          held_->add(p.cycle - op.now);
        }
        out->push_back(t);
      }
    return o;
  }

  [[noreturn]] void diverged(uint32_t qpn, const TxOp& op, const std::string& report) {
    throw_divergence(env_, nic_, qpn, "sender context row", op.row, report,
                     "lockstep-tx-" + nic_ + ".fst", period_ps_,
                     [this](const std::string& path, uint64_t period_ps) {
                       return lockstep_->replay_fst(path, period_ps);
                     });
  }

  std::string nic_;
  core::SimEnv& env_;
  RtlWaveformWindow waveform_;
  TxTiming timing_;
  core::Counter* ops_;
  core::Counter* cycles_;
  core::Counter* held_;
  core::Counter* back_to_back_;
  core::Counter* forwarded_;
  std::unique_ptr<MpTxRtl> rtl_;
  std::unique_ptr<MpTxLockstep> lockstep_;
  std::set<uint32_t> free_;
  std::unordered_map<uint32_t, Row> rows_;
  uint64_t last_cycle_ = 0;
  uint64_t period_ps_ = 4000;
};

}  // namespace

MpTxRtl* tx_impl_engine(MpTxImpl& impl) {
  auto* n = dynamic_cast<TxNic*>(&impl);
  return n ? &n->engine() : nullptr;
}

std::unique_ptr<MpTxImpl> make_tx_impl(RxImplMode mode, const MpSenderParams& params, uint32_t seed,
                                       const std::string& nic, core::SimEnv& env,
                                       const TxTiming& timing, uint64_t period_ps) {
  try {
    return std::make_unique<TxNic>(mode, params, seed, nic, env, timing, period_ps);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("nic " + nic + ": " + e.what() +
                                "; run this NIC with nic.transport_impl model");
  }
}

}  // namespace mprdma::nic::rtl
