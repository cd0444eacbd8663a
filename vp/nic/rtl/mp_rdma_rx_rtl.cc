#include "vp/nic/rtl/mp_rdma_rx_rtl.h"

#include <fstream>
#include <stdexcept>
#include <string>

#include "mprdma/rtl_params.h"
#include "vp/nic/rtl/rtl_words.h"
#include "vp/nic/rtl/verilated_engine.h"
// Verilator's headers and the code it generates are not ours to fix.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
#include "Vmp_rdma_rx_engine.h"
#include "Vmp_rdma_rx_engine___024root.h"
#pragma GCC diagnostic pop

namespace mprdma::nic::rtl {

namespace {

namespace p = mprdma::rtl;

static_assert(p::PSN_W == 24, "the golden models' PSNs are 24 bits (kPsnMask)");
static_assert(p::RX_SLOTS <= 64, "out_tails and out_cmpls are read as one 64-bit word");

MpReceiverContext decode_context(const uint32_t* row) {
  MpReceiverContext c;
  c.slots.resize(p::RX_SLOTS);
  for (uint32_t i = 0; i < p::RX_SLOTS; ++i)
    c.slots[i] = static_cast<MpSlot>(bits(row, p::RX_CTX_BITMAP_LSB + 2 * i, 2));
  c.rcv_nxt = static_cast<uint32_t>(bits(row, p::RX_CTX_RCV_NXT_LSB, p::PSN_W));
  c.sync_nacked = bits(row, p::RX_CTX_SYNC_NACKED_LSB, 1) != 0;
  c.sync_nacked_for = static_cast<uint32_t>(bits(row, p::RX_CTX_SYNC_NACKED_FOR_LSB, p::PSN_W));
  c.overflow_nacked = bits(row, p::RX_CTX_OVERFLOW_NACKED_LSB, 1) != 0;
  c.overflow_nacked_for =
      static_cast<uint32_t>(bits(row, p::RX_CTX_OVERFLOW_NACKED_FOR_LSB, p::PSN_W));
  return c;
}

uint32_t op_code(RxOpKind k) {
  switch (k) {
    case RxOpKind::init:
      return p::RX_OP_INIT;
    case RxOpKind::data:
      return p::RX_OP_DATA;
    case RxOpKind::read:
      return p::RX_OP_READ;
  }
  return p::RX_OP_READ;
}

void encode_context(const MpReceiverContext& c, uint32_t* row) {
  for (uint32_t i = 0; i < p::RX_SLOTS; ++i)
    set_bits(row, p::RX_CTX_BITMAP_LSB + 2 * i, 2, static_cast<uint64_t>(c.slots[i]));
  set_bits(row, p::RX_CTX_RCV_NXT_LSB, p::PSN_W, c.rcv_nxt);
  set_bits(row, p::RX_CTX_SYNC_NACKED_LSB, 1, c.sync_nacked);
  set_bits(row, p::RX_CTX_SYNC_NACKED_FOR_LSB, p::PSN_W, c.sync_nacked_for);
  set_bits(row, p::RX_CTX_OVERFLOW_NACKED_LSB, 1, c.overflow_nacked);
  set_bits(row, p::RX_CTX_OVERFLOW_NACKED_FOR_LSB, p::PSN_W, c.overflow_nacked_for);
}

RxOpKind op_kind(uint32_t code) {
  if (code == p::RX_OP_INIT) return RxOpKind::init;
  if (code == p::RX_OP_DATA) return RxOpKind::data;
  return RxOpKind::read;
}

}  // namespace

const char* rx_op_name(RxOpKind k) {
  switch (k) {
    case RxOpKind::init:
      return "init";
    case RxOpKind::data:
      return "data";
    case RxOpKind::read:
      return "read";
  }
  return "?";
}

MpRxRtl::MpRxRtl(MpOverflowNack overflow_nack, bool traceable)
    : vctx_(std::make_unique<VerilatedContext>()),
      // Before the model is made: it decides what the model can trace.
      top_((vctx_->traceEverOn(traceable),
            std::make_unique<Vmp_rdma_rx_engine>(vctx_.get(), "mp_rdma_rx_engine"))),
      traceable_(traceable) {
  top_->cfg_overflow_nack_once = overflow_nack == MpOverflowNack::once_per_head;
  reset_engine(*top_);
}

MpRxRtl::~MpRxRtl() { destroy_engine(vctx_.get(), trace_, top_); }

void MpRxRtl::trace_fst(const std::string& path, uint64_t period_ps) {
  open_fst("MpRxRtl", traceable_, *top_, trace_, path);
  period_ps_ = period_ps ? period_ps : 1;
}

void MpRxRtl::close_trace() { close_fst(trace_); }

uint32_t MpRxRtl::rows() { return 1u << p::QP_IDX_W; }
uint32_t MpRxRtl::slots() { return p::RX_SLOTS; }
uint32_t MpRxRtl::context_bits() { return p::RX_CTX_W; }

std::optional<RxOutcome> MpRxRtl::clock(const RxOp* op) {
  auto& t = *top_;
  t.in_valid = op != nullptr;
  if (op) {
    if (op->row >= rows())
      throw std::out_of_range("MpRxRtl: context row " + std::to_string(op->row) +
                              " is beyond the RTL's " + std::to_string(rows()));
    const MpData& d = op->data;
    t.in_op = op_code(op->kind);
    t.in_qp = op->row;
    t.in_psn = d.psn & kPsnMask;
    t.in_vp = d.vp;
    t.in_ce = d.ce;
    t.in_retx = d.retx;
    t.in_tail = d.tail;
    t.in_cmpl = d.completion;
    t.in_sync = d.sync;
    t.in_ipsn = d.ipsn & kPsnMask;
  }
  t.clk = 1;
  t.eval();
  if (trace_) trace_->dump(cycles_ * period_ps_);
  ++cycles_;
  std::optional<RxOutcome> out;
  if (t.out_valid) {
    RxOutcome o;
    o.kind = op_kind(t.out_op);
    o.row = t.out_qp;
    o.context = decode_context(t.out_ctx.data());
    if (o.kind == RxOpKind::data) {
      MpRxResult& r = o.result;
      r.verdict = t.out_verdict == p::RX_VERDICT_PLACE       ? MpRxResult::Verdict::place
                  : t.out_verdict == p::RX_VERDICT_DUPLICATE ? MpRxResult::Verdict::duplicate
                                                             : MpRxResult::Verdict::drop;
      r.sync_drop = t.out_sync_drop;
      o.ood = t.out_ood;
      r.send_ack = t.out_ack;
      if (r.send_ack) {
        r.ack.vp = t.out_ack_vp;
        r.ack.sack = t.out_ack_sack;
        r.ack.aack = t.out_ack_aack;
        r.ack.ece = t.out_ack_ece;
        r.ack.retx = t.out_ack_retx;
        r.ack.nack = t.out_nack;
      }
      // The completion stage: one message per tail the head passed.
      const uint64_t tails = t.out_tails, cmpls = t.out_cmpls;
      for (uint32_t i = 0; i < t.out_advance && i < p::RX_SLOTS; ++i)
        if ((tails >> i) & 1u)
          r.completed.emplace_back(psn_add(t.out_head_from, i), ((cmpls >> i) & 1u) != 0);
    }
    out = std::move(o);
  }
  t.clk = 0;
  t.eval();
  if (trace_) trace_->dump(cycles_ * period_ps_ - period_ps_ / 2);
  return out;
}

void MpRxRtl::flip_context_bit(uint32_t row, uint32_t bit) {
  flip_row_bit("MpRxRtl", top_->rootp->mp_rdma_rx_engine__DOT__ctx_ram__DOT__mem, rows(),
               p::RX_CTX_W, row, bit);
}

void MpRxRtl::load_context(uint32_t row, const MpReceiverContext& ctx) {
  if (row >= rows()) throw std::out_of_range("MpRxRtl: no context row " + std::to_string(row));
  if (ctx.slots.size() != p::RX_SLOTS)
    throw std::invalid_argument("MpRxRtl: a context of " + std::to_string(ctx.slots.size()) +
                                " bitmap slots for an engine of " + std::to_string(p::RX_SLOTS));
  auto& mem = top_->rootp->mp_rdma_rx_engine__DOT__ctx_ram__DOT__mem;
  encode_context(ctx, mem[row].data());
}

}  // namespace mprdma::nic::rtl
