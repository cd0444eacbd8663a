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

#include "vp/nic/transport/mp_rdma/mp_rdma_receiver.h"

class VerilatedContext;
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
  MpRxResult result;          // verdict, ACK, completed messages
  bool sync_drop = false;     // a drop of an early synchronise message (else overflow)
  uint32_t ood = 0;           // psn - rcv_nxt on arrival, 24 bits
  MpReceiverContext context;  // the row as written back (read: as it is)
};

class MpRxRtl {
 public:
  explicit MpRxRtl(MpOverflowNack overflow_nack);
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
  uint64_t cycles() const { return cycles_; }

  // Fault injection: inverts bit `bit` of context row `row` in the RAM.
  void flip_context_bit(uint32_t row, uint32_t bit);

 private:
  std::unique_ptr<VerilatedContext> vctx_;
  std::unique_ptr<Vmp_rdma_rx_engine> top_;
  uint64_t cycles_ = 0;
};

}  // namespace mprdma::nic::rtl
