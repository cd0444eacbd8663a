// The Verilated MP-RDMA receiver engine (mp_rdma_rx_engine.sv), driven one
// clock cycle at a time: an operation in, the outcome of the one before
// out, in the golden model's terms (MpRxResult, MpReceiverContext) so that
// lockstep and the NIC read both alike.
//
// Only this file's .cc sees the Verilated classes; users see the engine as
// plain C++.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "vp/nic/transport/mp_rdma/mp_rdma_receiver.h"

class VerilatedContext;
class VerilatedFstC;
class Vmp_rdma_rx_engine;

namespace mprdma::nic::rtl {

enum class RxOpKind : uint8_t { init, data, read };
const char* rx_op_name(RxOpKind k);

struct RxOp {
  RxOpKind kind = RxOpKind::data;
  uint32_t row = 0;  // context-RAM row: the connection
  MpData data;       // data: the packet; init: data.psn is the first PSN expected
};

// What the engine did with one operation.
struct RxOutcome {
  RxOpKind kind = RxOpKind::data;
  uint32_t row = 0;
  MpRxResult result;          // verdict, drop reason, ACK, completed messages
  uint32_t ood = 0;           // psn - rcv_nxt on arrival, 24 bits
  MpReceiverContext context;  // the row as written back (read: as it is)
};

class MpRxRtl {
 public:
  // `traceable`: the model keeps what waveforms need (trace_fst); off, it
  // saves that work on every cycle.
  explicit MpRxRtl(MpOverflowNack overflow_nack, bool traceable = false);
  ~MpRxRtl();
  MpRxRtl(const MpRxRtl&) = delete;
  MpRxRtl& operator=(const MpRxRtl&) = delete;

  // The RTL's build-time geometry (mprdma_rtl_pkg.sv).
  static uint32_t rows();
  static uint32_t slots();
  static uint32_t context_bits();

  // One clock cycle. `op` (may be null) is taken at this cycle's edge; the
  // outcome returned, if any, is that of the operation taken one cycle
  // earlier (the engine's latency is one cycle, its throughput one
  // operation per cycle).
  std::optional<RxOutcome> clock(const RxOp* op);
  // The engine's cycle count: cycles clocked, plus the idle ones skipped
  // by advance_to().
  uint64_t cycles() const { return cycles_; }
  // Idle until `cycle` (the NIC's clock): nothing is clocked, only the
  // count, and so the waveform's time, moves on. No effect if it is not
  // ahead.
  void advance_to(uint64_t cycle) {
    if (cycle > cycles_) cycles_ = cycle;
  }

  // Fault injection: inverts bit `bit` of context row `row` in the RAM.
  void flip_context_bit(uint32_t row, uint32_t bit);
  // Writes a whole context row into the RAM, as a debugger would (to
  // replay operations from a known state): no cycle passes.
  // std::invalid_argument when the context's bitmap is not slots() long.
  void load_context(uint32_t row, const MpReceiverContext& ctx);

  // Waveforms: every signal of the engine, from the next cycle on, into an
  // FST file (GTKWave opens it), one clock period `period_ps` long (the
  // NIC's clock; 4 ns = 250 MHz by default). Closed by close_trace() or
  // the destructor. std::runtime_error when the file cannot be written,
  // std::logic_error when the engine was not made traceable.
  void trace_fst(const std::string& path, uint64_t period_ps = 4000);
  void close_trace();
  bool tracing() const { return trace_ != nullptr; }

 private:
  std::unique_ptr<VerilatedContext> vctx_;
  std::unique_ptr<Vmp_rdma_rx_engine> top_;
  std::unique_ptr<VerilatedFstC> trace_;
  bool traceable_;
  uint64_t period_ps_ = 4000;
  uint64_t cycles_ = 0;
};

}  // namespace mprdma::nic::rtl
