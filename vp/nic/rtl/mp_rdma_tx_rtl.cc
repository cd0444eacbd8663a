#include "vp/nic/rtl/mp_rdma_tx_rtl.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string>

#include "mprdma/rtl_params.h"
#include "vp/nic/rtl/rtl_words.h"
#include "vp/nic/rtl/verilated_engine.h"
// Verilator's headers and the code it generates are not ours to fix.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
#include "Vmp_rdma_tx_engine.h"
#include "Vmp_rdma_tx_engine___024root.h"
#pragma GCC diagnostic pop

namespace mprdma::nic::rtl {

namespace {

namespace p = mprdma::rtl;

static_assert(p::PSN_W == 24, "the golden models' PSNs are 24 bits (kPsnMask)");
static_assert(p::TIME_W < 63, "the golden model's stamps are 64-bit, kNever above them");

uint32_t u32(const uint32_t* row, uint32_t lsb, uint32_t width) {
  return static_cast<uint32_t>(bits(row, lsb, width));
}

MpSenderContext decode_context(const uint32_t* row) {
  MpSenderContext c;
  c.una = u32(row, p::TX_CTX_UNA_LSB, p::PSN_W);
  c.nxt = u32(row, p::TX_CTX_NXT_LSB, p::PSN_W);
  c.max = u32(row, p::TX_CTX_MAX_LSB, p::PSN_W);
  c.cwnd_q = u32(row, p::TX_CTX_CWND_LSB, p::TX_CWND_W);
  c.inflate = static_cast<int32_t>(u32(row, p::TX_CTX_INFLATE_LSB, p::TX_INFLATE_W));
  c.ooh = u32(row, p::TX_CTX_OOH_LSB, p::PSN_W);
  c.recovering = bits(row, p::TX_CTX_RECOVERING_LSB, 1) != 0;
  c.recovery = u32(row, p::TX_CTX_RECOVERY_LSB, p::PSN_W);
  c.retx = u32(row, p::TX_CTX_RETX_LSB, p::PSN_W);
  c.nack_head = u32(row, p::TX_CTX_NACK_HEAD_LSB, p::PSN_W);
  c.early = u32(row, p::TX_CTX_EARLY_LSB, p::PSN_W);
  c.last_send = bits(row, p::TX_CTX_LAST_SEND_LSB, p::TIME_W);
  c.burst_at = bits(row, p::TX_CTX_BURST_VALID_LSB, 1)
                   ? bits(row, p::TX_CTX_BURST_AT_LSB, p::TIME_W)
                   : kNever;
  c.next_probe = bits(row, p::TX_CTX_NEXT_PROBE_LSB, p::TIME_W);
  c.rto_at =
      bits(row, p::TX_CTX_RTO_VALID_LSB, 1) ? bits(row, p::TX_CTX_RTO_AT_LSB, p::TIME_W) : kNever;
  c.ever_sent = bits(row, p::TX_CTX_EVER_SENT_LSB, 1) != 0;
  c.hold_until = bits(row, p::TX_CTX_HOLD_UNTIL_LSB, p::TIME_W);
  c.prev_msg_sent = bits(row, p::TX_CTX_PREV_MSG_SENT_LSB, p::TIME_W);
  c.sync_armed = bits(row, p::TX_CTX_SYNC_ARMED_LSB, 1) != 0;
  return c;
}

void encode_context(const MpSenderContext& c, uint32_t* row) {
  set_bits(row, p::TX_CTX_UNA_LSB, p::PSN_W, c.una);
  set_bits(row, p::TX_CTX_NXT_LSB, p::PSN_W, c.nxt);
  set_bits(row, p::TX_CTX_MAX_LSB, p::PSN_W, c.max);
  set_bits(row, p::TX_CTX_CWND_LSB, p::TX_CWND_W, c.cwnd_q);
  set_bits(row, p::TX_CTX_INFLATE_LSB, p::TX_INFLATE_W, static_cast<uint32_t>(c.inflate));
  set_bits(row, p::TX_CTX_OOH_LSB, p::PSN_W, c.ooh);
  set_bits(row, p::TX_CTX_RECOVERING_LSB, 1, c.recovering);
  set_bits(row, p::TX_CTX_RECOVERY_LSB, p::PSN_W, c.recovery);
  set_bits(row, p::TX_CTX_RETX_LSB, p::PSN_W, c.retx);
  set_bits(row, p::TX_CTX_NACK_HEAD_LSB, p::PSN_W, c.nack_head);
  set_bits(row, p::TX_CTX_EARLY_LSB, p::PSN_W, c.early);
  set_bits(row, p::TX_CTX_LAST_SEND_LSB, p::TIME_W, c.last_send);
  set_bits(row, p::TX_CTX_BURST_VALID_LSB, 1, c.burst_at != kNever);
  set_bits(row, p::TX_CTX_BURST_AT_LSB, p::TIME_W, c.burst_at == kNever ? 0 : c.burst_at);
  set_bits(row, p::TX_CTX_NEXT_PROBE_LSB, p::TIME_W, c.next_probe);
  set_bits(row, p::TX_CTX_RTO_VALID_LSB, 1, c.rto_at != kNever);
  set_bits(row, p::TX_CTX_RTO_AT_LSB, p::TIME_W, c.rto_at == kNever ? 0 : c.rto_at);
  set_bits(row, p::TX_CTX_EVER_SENT_LSB, 1, c.ever_sent);
  set_bits(row, p::TX_CTX_HOLD_UNTIL_LSB, p::TIME_W, c.hold_until);
  set_bits(row, p::TX_CTX_PREV_MSG_SENT_LSB, p::TIME_W, c.prev_msg_sent);
  set_bits(row, p::TX_CTX_SYNC_ARMED_LSB, 1, c.sync_armed);
}

uint32_t op_code(TxOpKind k) {
  switch (k) {
    case TxOpKind::init:
      return p::TX_OP_INIT;
    case TxOpKind::set_max:
      return p::TX_OP_SET_MAX;
    case TxOpKind::ack:
      return p::TX_OP_ACK;
    case TxOpKind::rnr:
      return p::TX_OP_RNR;
    case TxOpKind::timer:
      return p::TX_OP_TIMER;
    case TxOpKind::read:
      return p::TX_OP_READ;
  }
  return p::TX_OP_READ;
}

// Durations the engine adds to a cycle must keep the sum in 32 bits.
constexpr uint64_t kMaxDuration = uint64_t{1} << 30;

void check_params(const MpSenderParams& s) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("MP-RDMA sender RTL: " + what);
  };
  need(s.rtt_cycles < kMaxDuration, "base RTT of " + std::to_string(s.rtt_cycles) +
                                        " cycles does not fit its 30-bit timer arithmetic");
  need(s.rto_cycles < kMaxDuration, "RTO of " + std::to_string(s.rto_cycles) +
                                        " cycles does not fit its 30-bit timer arithmetic");
  need(s.delta <= kPsnMask,
       "delta of " + std::to_string(s.delta) + " is not a 24-bit PSN distance");
}

}  // namespace

const char* tx_op_name(TxOpKind k) {
  switch (k) {
    case TxOpKind::init:
      return "init";
    case TxOpKind::set_max:
      return "set_max";
    case TxOpKind::ack:
      return "ack";
    case TxOpKind::rnr:
      return "rnr";
    case TxOpKind::timer:
      return "timer";
    case TxOpKind::read:
      return "read";
  }
  return "?";
}

MpTxRtl::MpTxRtl(const MpSenderParams& s, uint32_t seed, bool traceable)
    : vctx_(std::make_unique<VerilatedContext>()),
      top_((check_params(s), vctx_->traceEverOn(traceable),
            std::make_unique<Vmp_rdma_tx_engine>(vctx_.get(), "mp_rdma_tx_engine"))),
      traceable_(traceable) {
  auto& t = *top_;
  t.cfg_iw = s.iw;
  t.cfg_delta = s.delta;
  t.cfg_ooo_control = s.ooo_control;
  t.cfg_strict_recovery = s.strict_recovery;
  t.cfg_window_reduction = s.window_reduction;
  t.cfg_probe_ppm = s.probe_ppm;
  t.cfg_max_per_ack = s.max_per_ack;
  t.cfg_rtt = static_cast<uint32_t>(s.rtt_cycles);
  t.cfg_idle_cycles = uint64_t{s.idle_rtts} * s.rtt_cycles;
  // What firmware would program: the synchronise delay's numerator over
  // 1000, floor(floor(n / 1000) / c) being floor(n / (1000 c)).
  t.cfg_sync_num = (uint64_t{s.sync_alpha_milli} * s.delta * s.rtt_cycles << 16) / 1000u;
  t.cfg_rto = static_cast<uint32_t>(s.rto_cycles);
  t.cfg_vp_mask = s.vp_mask;
  t.cfg_seed = seed;
  t.in_sync_valid = 0;
  reset_engine(*top_);
}

MpTxRtl::~MpTxRtl() { destroy_engine(vctx_.get(), trace_, top_); }

uint32_t MpTxRtl::rows() { return 1u << p::QP_IDX_W; }
uint32_t MpTxRtl::context_bits() { return p::TX_CTX_W; }
uint64_t MpTxRtl::max_cycle() { return (uint64_t{1} << (p::TIME_W - 1)) - 1; }

void MpTxRtl::add_sync(uint32_t row, uint32_t psn) { sync_[row].push_back(psn & kPsnMask); }

size_t MpTxRtl::sync_pending(uint32_t row) const {
  auto it = sync_.find(row);
  return it == sync_.end() ? 0 : it->second.size();
}

void MpTxRtl::show_sync_head(uint32_t row) {
  auto it = sync_.find(row);
  const bool any = it != sync_.end() && !it->second.empty();
  top_->in_sync_valid = any;
  top_->in_sync_psn = any ? it->second.front() : 0;
}

void MpTxRtl::tick() {
  top_->clk = 1;
  top_->eval();
  if (trace_) trace_->dump(cycles_ * period_ps_);
  ++cycles_;
}

void MpTxRtl::fall() {
  top_->clk = 0;
  top_->eval();
  if (trace_) trace_->dump(cycles_ * period_ps_ - period_ps_ / 2);
}

void MpTxRtl::settle() {
  if (!in_last_) return;
  // The edge that ends the last operation's last cycle, with nothing to
  // take: the row is written back.
  top_->in_valid = 0;
  tick();
  fall();
  in_last_ = false;
}

void MpTxRtl::advance_to(uint64_t cycle) {
  if (cycle <= cycles_) return;
  settle();
  cycles_ = std::max(cycles_, cycle);
}

TxOutcome MpTxRtl::run(const TxOp& op) {
  if (op.row >= rows())
    throw std::out_of_range("MpTxRtl: context row " + std::to_string(op.row) +
                            " is beyond the RTL's " + std::to_string(rows()));
  if (op.now > max_cycle() || (op.kind == TxOpKind::rnr && op.until > max_cycle()))
    throw std::out_of_range("MpTxRtl: cycle " + std::to_string(std::max(op.now, op.until)) +
                            " is beyond the timestamps of the sender's context (at most " +
                            std::to_string(max_cycle()) + ")");
  if (op.kind == TxOpKind::init) sync_.erase(op.row);
  auto& t = *top_;
  t.in_valid = 1;
  t.in_op = op_code(op.kind);
  t.in_qp = op.row;
  t.in_now = op.now;
  t.in_vp_base = op.vp_base;
  t.in_psn = op.psn & kPsnMask;
  t.in_vp = op.ack.vp;
  t.in_sack = op.ack.sack & kPsnMask;
  t.in_aack = op.ack.aack & kPsnMask;
  t.in_ece = op.ack.ece;
  t.in_retx = op.ack.retx;
  t.in_nack = op.ack.nack;
  t.in_backlog = op.backlog;
  t.in_until = op.until;
  // Until the edge that takes this operation, the engine may still be in
  // the last cycle of the one before, whose row's synchronise head it
  // reads: this row's head is shown once the operation is in.
  if (!in_last_) show_sync_head(op.row);
  const bool overlapped = in_last_;
  TxOutcome o;
  o.kind = op.kind;
  o.row = op.row;
  const uint64_t start = cycles_;
  // An operation ends within 3 cycles plus one per packet it may send and
  // a second run's: far fewer than this unless the engine hangs.
  const uint64_t limit = start + 3 * (uint64_t{1} << 17);
  for (bool taken = false;;) {
    tick();
    t.in_valid = 0;
    if (!taken) {
      taken = true;
      if (overlapped) {
        ++overlapped_;
        forwarded_ += t.rootp->mp_rdma_tx_engine__DOT__fwd;
      }
      show_sync_head(op.row);
    }
    if (t.out_tx_valid) {
      TxPacket pk;
      pk.tx.psn = t.out_tx_psn;
      pk.tx.vp = t.out_tx_vp;
      pk.kind = t.out_tx_kind == p::TX_KIND_RECOVERY ? TxPacket::Kind::recovery
                : t.out_tx_kind == p::TX_KIND_EARLY  ? TxPacket::Kind::early
                                                     : TxPacket::Kind::fresh;
      pk.tx.retx = pk.kind != TxPacket::Kind::fresh;
      pk.probe = t.out_tx_probe;
      pk.timer = t.out_tx_timer;
      pk.cycle = cycles_;
      o.packets.push_back(pk);
    }
    if (t.out_sync_pop) {
      auto& q = sync_[op.row];
      if (!q.empty()) q.pop_front();
      show_sync_head(op.row);
    }
    const bool done = t.out_done;
    if (done) {
      o.context = decode_context(t.out_ctx.data());
      o.wake = t.out_wake_valid ? t.out_wake : kNever;
      o.rng = t.out_rng;
      o.rnr_fresh = t.out_ev_rnr_fresh;
      MpSender::Counters& c = o.counts;
      c.acks = op.kind == TxOpKind::ack;
      c.rnr_nacks = op.kind == TxOpKind::rnr;
      c.nacks = op.kind == TxOpKind::ack && op.ack.nack && !t.out_ev_ignored;
      c.ece_acks = t.out_ev_ece;
      c.pruned_acks = t.out_ev_pruned;
      c.recoveries = t.out_ev_recovery;
      c.rtos = t.out_ev_rto;
      c.restarts = t.out_ev_restart;
      c.window_reductions = t.out_ev_window_reduction;
      c.sync_waits = t.out_ev_sync_waits;
      c.rnr_waits = t.out_ev_rnr_fresh;
      for (const TxPacket& pk : o.packets) {
        c.retransmits += pk.kind == TxPacket::Kind::recovery;
        c.early_retransmits += pk.kind == TxPacket::Kind::early;
        c.probes += pk.probe;
        c.burst_timer_sends += pk.timer;
      }
    }
    fall();
    // The engine stays in the operation's last cycle: the next operation
    // is taken at its edge, or settle() clocks it alone.
    if (done) break;
    if (cycles_ > limit)
      throw std::logic_error("MpTxRtl: the " + std::string(tx_op_name(op.kind)) +
                             " operation on row " + std::to_string(op.row) + " did not end");
  }
  in_last_ = true;
  o.sync_pending = sync_pending(op.row);
  o.cycles = cycles_ - start;
  return o;
}

uint32_t MpTxRtl::rng() const { return top_->rootp->mp_rdma_tx_engine__DOT__rng; }

void MpTxRtl::flip_context_bit(uint32_t row, uint32_t bit) {
  settle();
  flip_row_bit("MpTxRtl", top_->rootp->mp_rdma_tx_engine__DOT__ctx_ram__DOT__mem, rows(),
               p::TX_CTX_W, row, bit);
}

void MpTxRtl::load_context(uint32_t row, const MpSenderContext& ctx) {
  if (row >= rows()) throw std::out_of_range("MpTxRtl: no context row " + std::to_string(row));
  settle();
  auto& mem = top_->rootp->mp_rdma_tx_engine__DOT__ctx_ram__DOT__mem;
  encode_context(ctx, mem[row].data());
}

void MpTxRtl::trace_fst(const std::string& path, uint64_t period_ps) {
  open_fst("MpTxRtl", traceable_, *top_, trace_, path);
  period_ps_ = period_ps ? period_ps : 1;
}

void MpTxRtl::close_trace() { close_fst(trace_); }

}  // namespace mprdma::nic::rtl
