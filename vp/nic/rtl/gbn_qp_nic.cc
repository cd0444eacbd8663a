#include "vp/nic/rtl/gbn_qp_nic.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "vp/nic/rtl/gbn_qp_lockstep.h"
#include "vp/nic/rtl/gbn_qp_rtl.h"
#include "vp/nic/rtl/rtl_nic_support.h"

namespace mprdma::nic::rtl {

namespace {

class GbnRtlEngine : public TransportEngine {
 public:
  GbnRtlEngine(RxImplMode mode, uint64_t go_back_delay, const std::string& nic, core::SimEnv& env,
               uint64_t period_ps)
      : nic_(nic),
        env_(env),
        waveform_(env, nic, "rtl-" + nic + ".fst"),
        ops_(&env.stats.counter("nic." + nic + ".transport.rtl.operations", "operations",
                                "Operations the RTL go-back-N engine performed")),
        cycles_(&env.stats.counter("nic." + nic + ".transport.rtl.cycles", "cycles",
                                   "Cycles the RTL go-back-N engine was clocked (only while an "
                                   "operation was in it)")) {
    const bool traceable = waveform_.wanted();
    period_ps_ = period_ps ? period_ps : 1;
    if (mode == RxImplMode::lockstep)
      lockstep_ = std::make_unique<GbnQpLockstep>(go_back_delay, 8, traceable);
    else
      rtl_ = std::make_unique<GbnQpRtl>(go_back_delay, traceable);
    for (uint32_t r = 0; r < GbnQpRtl::rows(); ++r) free_.insert(r);
  }

  GbnQpRtl& engine() { return rtl_ ? *rtl_ : lockstep_->rtl(); }

  const char* name() const override { return "gbn"; }
  size_t state_bytes() const override { return GbnEngine::kStateBytes; }

  void open(const ConnParams& p) override {
    close(p.qpn);
    if (free_.empty())
      throw EngineContextExhausted(
          "nic " + nic_ + ": QP " + std::to_string(p.qpn) + " opens a go-back-N connection, " +
          "but the RTL engine's context RAM has only " + std::to_string(GbnQpRtl::rows()) +
          " rows, all in use (QP_IDX_W in vp/nic/rtl/mprdma_rtl_pkg.sv; or run this NIC with "
          "nic.transport_impl model)");
    qps_[p.qpn].row = *free_.begin();
    free_.erase(free_.begin());
    GbnOp op = base(GbnOpKind::open, p.qpn, last_cycle_);
    op.psn = p.rq_psn;
    op.params = p;
    run(op);
  }

  void set_requester(const ConnParams& p) override {
    if (!qps_.count(p.qpn)) open(p);  // (a requester without a responder side)
    GbnOp op = base(GbnOpKind::set_requester, p.qpn, last_cycle_);
    op.psn = p.sq_psn;
    op.params = p;
    run(op);
  }

  void close(uint32_t qpn) override {
    auto it = qps_.find(qpn);
    if (it == qps_.end()) return;
    free_.insert(it->second.row);
    qps_.erase(it);
  }

  void set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t now) override {
    GbnOp op = base(GbnOpKind::set_snd_max, qpn, now);
    op.psn = snd_max;
    run(op);
  }
  TxGrant next_tx(uint32_t qpn, uint64_t now) override {
    return run(base(GbnOpKind::next_tx, qpn, now)).grant;
  }
  void on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) override {
    GbnOp op = base(GbnOpKind::on_sent, qpn, now);
    op.psn = psn;
    op.npsn = npsn;
    run(op);
  }
  AckResult on_ack(uint32_t qpn, const AckEvent& a, uint64_t now) override {
    GbnOp op = base(GbnOpKind::on_ack, qpn, now);
    op.ack = a.kind;
    op.psn = a.psn;
    op.ack_limit = a.ack_limit;
    op.rnr_delay = a.rnr_delay_cycles;
    return run(op).result;
  }
  uint64_t wake_at(uint32_t qpn) const override { return qp(qpn).wake; }
  AckResult on_timer(uint32_t qpn, uint64_t now) override {
    return run(base(GbnOpKind::on_timer, qpn, now)).result;
  }
  uint32_t snd_una(uint32_t qpn) const override { return qp(qpn).ctx.una; }
  uint32_t snd_nxt(uint32_t qpn) const override { return qp(qpn).ctx.nxt; }
  RxVerdict classify(uint32_t qpn, uint32_t psn, uint64_t now) override {
    GbnOp op = base(GbnOpKind::classify, qpn, now);
    op.psn = psn;
    return run(op).verdict;
  }
  AckDecision commit(uint32_t qpn, uint32_t npsn, bool ack_req, bool implicit_ack,
                     uint64_t now) override {
    GbnOp op = base(GbnOpKind::commit, qpn, now);
    op.npsn = npsn;
    op.ack_req = ack_req;
    op.implicit_ack = implicit_ack;
    return run(op).decision;
  }
  uint32_t epsn(uint32_t qpn) const override { return qp(qpn).ctx.epsn; }
  void nak_sent(uint32_t qpn) override { run(base(GbnOpKind::nak_sent, qpn, last_cycle_)); }

 private:
  struct Qp {
    uint32_t row = 0;
    uint64_t wake = kNever;
    GbnContext ctx;  // as the engine last wrote it back (the NIC's copy)
  };
  const Qp& qp(uint32_t qpn) const {
    auto it = qps_.find(qpn);
    if (it == qps_.end())
      throw std::logic_error("nic " + nic_ + ": QP " + std::to_string(qpn) +
                             " has no go-back-N connection in the RTL engine");
    return it->second;
  }
  GbnOp base(GbnOpKind k, uint32_t qpn, uint64_t now) const {
    GbnOp op;
    op.kind = k;
    op.row = qp(qpn).row;
    op.now = now;
    return op;
  }

  // One operation through the engine: issued at its NIC cycle, read out a
  // cycle later; the QP's copy of its row follows.
  GbnOutcome run(const GbnOp& op) {
    last_cycle_ = std::max(last_cycle_, op.now);
    ++*ops_;
    GbnQpRtl& e = engine();
    waveform_.before(e, op.now, period_ps_);
    e.advance_to(op.now);
    const uint64_t c0 = e.cycles();
    GbnOutcome o;
    if (rtl_) {
      o = rtl_->run(op);
    } else {
      std::optional<std::string> bad = lockstep_->step(&op);
      if (!bad) bad = lockstep_->drain();
      if (bad) diverged(op, *bad);
      o = *lockstep_->last_outcome();
    }
    cycles_->add(e.cycles() - c0);
    for (auto& [qpn, q] : qps_)
      if (q.row == op.row) {
        q.ctx = o.context;
        q.wake = o.wake;
      }
    return o;
  }

  [[noreturn]] void diverged(const GbnOp& op, const std::string& report) {
    uint32_t qpn = 0;
    for (auto& [n, q] : qps_)
      if (q.row == op.row) qpn = n;
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
  std::unique_ptr<GbnQpRtl> rtl_;
  std::unique_ptr<GbnQpLockstep> lockstep_;
  std::set<uint32_t> free_;
  std::unordered_map<uint32_t, Qp> qps_;
  uint64_t last_cycle_ = 0;
  uint64_t period_ps_ = 4000;
};

}  // namespace

GbnQpRtl* gbn_engine_rtl(TransportEngine& engine) {
  auto* e = dynamic_cast<GbnRtlEngine*>(&engine);
  return e ? &e->engine() : nullptr;
}

std::unique_ptr<TransportEngine> make_gbn_engine(RxImplMode mode, uint64_t go_back_delay_cycles,
                                                 const std::string& nic, core::SimEnv& env,
                                                 uint64_t period_ps) {
  return std::make_unique<GbnRtlEngine>(mode, go_back_delay_cycles, nic, env, period_ps);
}

}  // namespace mprdma::nic::rtl
