// The Verilated go-back-N engine (gbn_qp_engine.sv) as plain C++: one
// operation per clock, its outcome a cycle later, in the golden model's
// types (TxGrant, AckResult, RxVerdict, AckDecision, GbnContext), so that
// lockstep and the NIC read both alike. Only the .cc sees the Verilated
// classes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "vp/nic/transport/gbn/gbn_engine.h"

class VerilatedContext;
class VerilatedFstC;
class Vgbn_qp_engine;

namespace mprdma::nic::rtl {

enum class GbnOpKind : uint8_t {
  open,
  set_requester,
  set_snd_max,
  next_tx,
  on_sent,
  on_ack,
  on_timer,
  classify,
  commit,
  nak_sent,
  read
};
const char* gbn_op_name(GbnOpKind k);

struct GbnOp {
  GbnOpKind kind = GbnOpKind::read;
  uint32_t row = 0;
  uint64_t now = 0;
  uint32_t psn = 0;   // open: rq_psn; set_requester: sq_psn; set_snd_max, on_sent, on_ack, classify
  uint32_t npsn = 0;  // on_sent, commit
  AckEvent::Kind ack = AckEvent::Kind::ack;
  uint32_t ack_limit = 0;
  uint64_t rnr_delay = 0;
  bool ack_req = false, implicit_ack = false;  // commit
  ConnParams params;                           // open, set_requester
};

struct GbnOutcome {
  GbnOpKind kind = GbnOpKind::read;
  uint32_t row = 0;
  TxGrant grant;                        // next_tx
  AckResult result;                     // on_ack, on_timer
  RxVerdict verdict = RxVerdict::drop;  // classify
  AckDecision decision;                 // commit
  uint64_t wake = kNever;
  GbnContext context;  // the row as written back
};

class GbnQpRtl {
 public:
  // `go_back_delay_cycles`: nic.gbn.go_back_delay. std::invalid_argument
  // when the engine's timestamps cannot hold it.
  explicit GbnQpRtl(uint64_t go_back_delay_cycles, bool traceable = false);
  ~GbnQpRtl();
  GbnQpRtl(const GbnQpRtl&) = delete;
  GbnQpRtl& operator=(const GbnQpRtl&) = delete;

  static uint32_t rows();
  static uint32_t context_bits();
  // The largest NIC cycle, and duration (timeouts, RNR waits), an
  // operation may carry: their sums must fit the row's timestamps.
  static uint64_t max_cycle();

  // One clock cycle: `op` (may be null) taken now; the outcome returned is
  // that of the operation taken a cycle earlier. std::out_of_range for a
  // row, cycle or duration beyond the engine's.
  std::optional<GbnOutcome> clock(const GbnOp* op);
  // An operation and the cycle that gives its outcome.
  GbnOutcome run(const GbnOp& op);
  uint64_t cycles() const { return cycles_; }
  void advance_to(uint64_t cycle) {
    if (cycle > cycles_) cycles_ = cycle;
  }

  void flip_context_bit(uint32_t row, uint32_t bit);
  // Writes a whole row into the RAM (replays from a known state); no cycle
  // passes.
  void load_context(uint32_t row, const GbnContext& ctx);
  void trace_fst(const std::string& path, uint64_t period_ps = 4000);
  void close_trace();
  bool tracing() const { return trace_ != nullptr; }

 private:
  std::unique_ptr<VerilatedContext> vctx_;
  std::unique_ptr<Vgbn_qp_engine> top_;
  std::unique_ptr<VerilatedFstC> trace_;
  bool traceable_;
  uint64_t period_ps_ = 4000;
  uint64_t cycles_ = 0;
};

}  // namespace mprdma::nic::rtl
