#include "vp/nic/rtl/gbn_qp_rtl.h"

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
#include "Vgbn_qp_engine.h"
#include "Vgbn_qp_engine___024root.h"
#pragma GCC diagnostic pop

namespace mprdma::nic::rtl {

namespace {

namespace p = mprdma::rtl;

static_assert(p::TIME_W < 63, "the golden model's stamps are 64-bit, kNever above them");

GbnContext decode_context(const uint32_t* row) {
  auto u = [row](uint32_t lsb, uint32_t w) { return bits(row, lsb, w); };
  GbnContext c;
  c.requester = u(p::GBN_CTX_REQUESTER_LSB, 1);
  c.una = static_cast<uint32_t>(u(p::GBN_CTX_UNA_LSB, p::PSN_W));
  c.nxt = static_cast<uint32_t>(u(p::GBN_CTX_NXT_LSB, p::PSN_W));
  c.max = static_cast<uint32_t>(u(p::GBN_CTX_MAX_LSB, p::PSN_W));
  c.high = static_cast<uint32_t>(u(p::GBN_CTX_HIGH_LSB, p::PSN_W));
  c.retry_left = static_cast<uint8_t>(u(p::GBN_CTX_RETRY_LEFT_LSB, p::GBN_RETRY_W));
  c.rnr_left = static_cast<uint8_t>(u(p::GBN_CTX_RNR_LEFT_LSB, p::GBN_RETRY_W));
  c.deadline = u(p::GBN_CTX_DEADLINE_VALID_LSB, 1) ? u(p::GBN_CTX_DEADLINE_LSB, p::TIME_W) : kNever;
  c.hold_until = u(p::GBN_CTX_HOLD_UNTIL_LSB, p::TIME_W);
  c.rewound_for_una = u(p::GBN_CTX_REWOUND_LSB, 1);
  c.epsn = static_cast<uint32_t>(u(p::GBN_CTX_EPSN_LSB, p::PSN_W));
  c.nak_sent = u(p::GBN_CTX_NAK_SENT_LSB, 1);
  c.since_ack = static_cast<uint32_t>(u(p::GBN_CTX_SINCE_ACK_LSB, p::GBN_COUNT_W));
  c.retry_cnt = static_cast<uint8_t>(u(p::GBN_CTX_RETRY_CNT_LSB, p::GBN_RETRY_W));
  c.rnr_retry = static_cast<uint8_t>(u(p::GBN_CTX_RNR_RETRY_LSB, p::GBN_RETRY_W));
  c.ack_timeout_cycles = u(p::GBN_CTX_ACK_TIMEOUT_LSB, p::TIME_W);
  c.udp_sport = static_cast<uint16_t>(u(p::GBN_CTX_SPORT_LSB, p::VP_W));
  c.ack_coalesce = static_cast<uint32_t>(u(p::GBN_CTX_ACK_COALESCE_LSB, p::GBN_COUNT_W));
  return c;
}

void encode_context(const GbnContext& c, uint32_t* row) {
  set_bits(row, p::GBN_CTX_REQUESTER_LSB, 1, c.requester);
  set_bits(row, p::GBN_CTX_UNA_LSB, p::PSN_W, c.una);
  set_bits(row, p::GBN_CTX_NXT_LSB, p::PSN_W, c.nxt);
  set_bits(row, p::GBN_CTX_MAX_LSB, p::PSN_W, c.max);
  set_bits(row, p::GBN_CTX_HIGH_LSB, p::PSN_W, c.high);
  set_bits(row, p::GBN_CTX_RETRY_LEFT_LSB, p::GBN_RETRY_W, c.retry_left);
  set_bits(row, p::GBN_CTX_RNR_LEFT_LSB, p::GBN_RETRY_W, c.rnr_left);
  set_bits(row, p::GBN_CTX_DEADLINE_VALID_LSB, 1, c.deadline != kNever);
  set_bits(row, p::GBN_CTX_DEADLINE_LSB, p::TIME_W, c.deadline == kNever ? 0 : c.deadline);
  set_bits(row, p::GBN_CTX_HOLD_UNTIL_LSB, p::TIME_W, c.hold_until);
  set_bits(row, p::GBN_CTX_REWOUND_LSB, 1, c.rewound_for_una);
  set_bits(row, p::GBN_CTX_EPSN_LSB, p::PSN_W, c.epsn);
  set_bits(row, p::GBN_CTX_NAK_SENT_LSB, 1, c.nak_sent);
  set_bits(row, p::GBN_CTX_SINCE_ACK_LSB, p::GBN_COUNT_W, c.since_ack);
  set_bits(row, p::GBN_CTX_RETRY_CNT_LSB, p::GBN_RETRY_W, c.retry_cnt);
  set_bits(row, p::GBN_CTX_RNR_RETRY_LSB, p::GBN_RETRY_W, c.rnr_retry);
  set_bits(row, p::GBN_CTX_ACK_TIMEOUT_LSB, p::TIME_W, c.ack_timeout_cycles);
  set_bits(row, p::GBN_CTX_SPORT_LSB, p::VP_W, c.udp_sport);
  set_bits(row, p::GBN_CTX_ACK_COALESCE_LSB, p::GBN_COUNT_W, c.ack_coalesce);
}

uint32_t op_code(GbnOpKind k) {
  switch (k) {
    case GbnOpKind::open:
      return p::GBN_OP_OPEN;
    case GbnOpKind::set_requester:
      return p::GBN_OP_SET_REQ;
    case GbnOpKind::set_snd_max:
      return p::GBN_OP_SET_MAX;
    case GbnOpKind::next_tx:
      return p::GBN_OP_NEXT_TX;
    case GbnOpKind::on_sent:
      return p::GBN_OP_ON_SENT;
    case GbnOpKind::on_ack:
      return p::GBN_OP_ON_ACK;
    case GbnOpKind::on_timer:
      return p::GBN_OP_ON_TIMER;
    case GbnOpKind::classify:
      return p::GBN_OP_CLASSIFY;
    case GbnOpKind::commit:
      return p::GBN_OP_COMMIT;
    case GbnOpKind::nak_sent:
      return p::GBN_OP_NAK_SENT;
    case GbnOpKind::read:
      return p::GBN_OP_READ;
  }
  return p::GBN_OP_READ;
}

GbnOpKind op_kind(uint32_t code) {
  for (GbnOpKind k :
       {GbnOpKind::open, GbnOpKind::set_requester, GbnOpKind::set_snd_max, GbnOpKind::next_tx,
        GbnOpKind::on_sent, GbnOpKind::on_ack, GbnOpKind::on_timer, GbnOpKind::classify,
        GbnOpKind::commit, GbnOpKind::nak_sent})
    if (op_code(k) == code) return k;
  return GbnOpKind::read;
}

}  // namespace

const char* gbn_op_name(GbnOpKind k) {
  switch (k) {
    case GbnOpKind::open:
      return "open";
    case GbnOpKind::set_requester:
      return "set_requester";
    case GbnOpKind::set_snd_max:
      return "set_snd_max";
    case GbnOpKind::next_tx:
      return "next_tx";
    case GbnOpKind::on_sent:
      return "on_sent";
    case GbnOpKind::on_ack:
      return "on_ack";
    case GbnOpKind::on_timer:
      return "on_timer";
    case GbnOpKind::classify:
      return "classify";
    case GbnOpKind::commit:
      return "commit";
    case GbnOpKind::nak_sent:
      return "nak_sent";
    case GbnOpKind::read:
      return "read";
  }
  return "?";
}

GbnQpRtl::GbnQpRtl(uint64_t go_back_delay_cycles, bool traceable)
    : vctx_(std::make_unique<VerilatedContext>()),
      top_((vctx_->traceEverOn(traceable),
            std::make_unique<Vgbn_qp_engine>(vctx_.get(), "gbn_qp_engine"))),
      traceable_(traceable) {
  if (go_back_delay_cycles > max_cycle())
    throw std::invalid_argument("go-back-N RTL: a go-back delay of " +
                                std::to_string(go_back_delay_cycles) +
                                " cycles is beyond its timestamps");
  auto& t = *top_;
  t.cfg_go_back_delay = go_back_delay_cycles;
  reset_engine(*top_);
}

GbnQpRtl::~GbnQpRtl() { destroy_engine(vctx_.get(), trace_, top_); }

uint32_t GbnQpRtl::rows() { return 1u << p::QP_IDX_W; }
uint32_t GbnQpRtl::context_bits() { return p::GBN_CTX_W; }
uint64_t GbnQpRtl::max_cycle() { return (uint64_t{1} << (p::TIME_W - 1)) - 1; }

std::optional<GbnOutcome> GbnQpRtl::clock(const GbnOp* op) {
  auto& t = *top_;
  t.in_valid = op != nullptr;
  if (op) {
    if (op->row >= rows())
      throw std::out_of_range("GbnQpRtl: context row " + std::to_string(op->row) +
                              " is beyond the RTL's " + std::to_string(rows()));
    const uint64_t longest = std::max(op->rnr_delay, op->params.ack_timeout_cycles);
    if (op->now > max_cycle() || longest > max_cycle())
      throw std::out_of_range(
          "GbnQpRtl: cycle " + std::to_string(op->now) + " or duration " + std::to_string(longest) +
          " is beyond the timestamps of the context (at most " + std::to_string(max_cycle()) + ")");
    t.in_op = op_code(op->kind);
    t.in_qp = op->row;
    t.in_now = op->now;
    t.in_psn = op->psn & kPsnMask;
    t.in_npsn = op->npsn & kPsnMask;
    t.in_kind = static_cast<uint32_t>(op->ack);
    t.in_ack_limit = op->ack_limit & kPsnMask;
    t.in_rnr_delay = op->rnr_delay;
    t.in_ack_req = op->ack_req;
    t.in_implicit = op->implicit_ack;
    t.in_retry_cnt = op->params.retry_cnt;
    t.in_rnr_retry = op->params.rnr_retry;
    t.in_ack_timeout = op->params.ack_timeout_cycles;
    t.in_udp_sport = op->params.udp_sport;
    t.in_ack_coalesce = op->params.ack_coalesce;
  }
  t.clk = 1;
  t.eval();
  if (trace_) trace_->dump(cycles_ * period_ps_);
  ++cycles_;
  std::optional<GbnOutcome> out;
  if (t.out_valid) {
    GbnOutcome o;
    o.kind = op_kind(t.out_op);
    o.row = t.out_qp;
    o.context = decode_context(t.out_ctx.data());
    o.wake = t.out_wake_valid ? t.out_wake : kNever;
    if (o.kind == GbnOpKind::next_tx) {
      o.grant.send = t.out_send;
      if (o.grant.send) {
        o.grant.psn = t.out_tx_psn;
        o.grant.udp_sport = t.out_tx_sport;
        o.grant.retransmit = t.out_retransmit;
      }
    }
    o.result.progress = t.out_progress;
    o.result.accept = t.out_accept;
    o.result.rewound = t.out_rewound;
    o.result.error = static_cast<AckResult::Error>(t.out_error);
    o.verdict = static_cast<RxVerdict>(t.out_verdict);
    o.decision.send = t.out_ack;
    if (o.decision.send) o.decision.psn = t.out_ack_psn;
    out = o;
  }
  t.clk = 0;
  t.eval();
  if (trace_) trace_->dump(cycles_ * period_ps_ - period_ps_ / 2);
  return out;
}

GbnOutcome GbnQpRtl::run(const GbnOp& op) {
  clock(&op);
  std::optional<GbnOutcome> o = clock(nullptr);
  if (!o) throw std::logic_error("GbnQpRtl: the engine gave no outcome");
  return *o;
}

void GbnQpRtl::flip_context_bit(uint32_t row, uint32_t bit) {
  flip_row_bit("GbnQpRtl", top_->rootp->gbn_qp_engine__DOT__ctx_ram__DOT__mem, rows(), p::GBN_CTX_W,
               row, bit);
}

void GbnQpRtl::load_context(uint32_t row, const GbnContext& ctx) {
  if (row >= rows()) throw std::out_of_range("GbnQpRtl: no context row " + std::to_string(row));
  auto& mem = top_->rootp->gbn_qp_engine__DOT__ctx_ram__DOT__mem;
  encode_context(ctx, mem[row].data());
}

void GbnQpRtl::trace_fst(const std::string& path, uint64_t period_ps) {
  open_fst("GbnQpRtl", traceable_, *top_, trace_, path);
  period_ps_ = period_ps ? period_ps : 1;
}

void GbnQpRtl::close_trace() { close_fst(trace_); }

}  // namespace mprdma::nic::rtl
