// The Verilated MP-RDMA sender engine (mp_rdma_tx_engine.sv) as plain C++:
// one operation in, clocked until the engine is done, its packets, events,
// next deadline and context row out in the golden model's terms (MpTx,
// MpSender::Counters, MpSenderContext), so that lockstep and the NIC read
// both alike.
//
// The synchronise PSNs are the message layer's: this wrapper keeps one
// FIFO per row (add_sync) and shows its head to the engine, as the NIC's
// message layer would.
//
// Only the .cc sees the Verilated classes.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vp/nic/transport/mp_rdma/mp_rdma_sender.h"

class VerilatedContext;
class VerilatedFstC;
class Vmp_rdma_tx_engine;

namespace mprdma::nic::rtl {

enum class TxOpKind : uint8_t { init, set_max, ack, rnr, timer, read };
const char* tx_op_name(TxOpKind k);

struct TxOp {
  TxOpKind kind = TxOpKind::timer;
  uint32_t row = 0;           // context-RAM row: the connection
  uint64_t now = 0;           // the NIC cycle
  uint32_t psn = 0;           // init: first PSN; set_max: end of data
  MpAck ack;                  // ack, rnr
  uint32_t backlog = 0;       // ack: packets clocked out, not yet on the wire
  uint64_t until = 0;         // rnr: end of the receiver's wait
  uint16_t vp_base = 0xC000;  // the QP's virtual-path base (MpSenderParams::vp_base)
};

// A packet the engine clocked out, and why.
struct TxPacket {
  MpTx tx;
  enum class Kind : uint8_t { fresh, recovery, early } kind = Kind::fresh;
  bool probe = false;  // its path is a probe
  bool timer = false;  // clocked out by a timer, on a random path
  uint64_t cycle = 0;  // the engine's cycle count when it came out
};

struct TxOutcome {
  TxOpKind kind = TxOpKind::timer;
  uint32_t row = 0;
  std::vector<TxPacket> packets;
  // What the golden model counts, derived from the engine's events.
  MpSender::Counters counts;
  bool rnr_fresh = false;   // rnr: the NACK started a wait (MpSender::on_rnr)
  uint64_t wake = kNever;   // the connection's next deadline (MpSender::wake_at)
  uint32_t rng = 0;         // the NIC's path LFSR after the operation
  size_t sync_pending = 0;  // the row's synchronise PSNs not yet sent
  MpSenderContext context;  // the row as written back
  // Engine cycles the operation occupied: from the edge that took it to its
  // last cycle, in which the next operation may be taken.
  uint64_t cycles = 0;
};

class MpTxRtl {
 public:
  // `seed`: the NIC's path LFSR (as MpRandom). std::invalid_argument for a
  // parameter the engine's widths cannot hold. The virtual-path base comes
  // with each operation (TxOp::vp_base), not from `params`.
  MpTxRtl(const MpSenderParams& params, uint32_t seed, bool traceable = false);
  ~MpTxRtl();
  MpTxRtl(const MpTxRtl&) = delete;
  MpTxRtl& operator=(const MpTxRtl&) = delete;

  static uint32_t rows();
  static uint32_t context_bits();
  // The largest NIC cycle an operation may carry: the context's timestamps
  // (TIME_W bits) must hold it plus an RTO.
  static uint64_t max_cycle();

  // One operation, clocked through to its last cycle, whose edge is left
  // for the next operation to be taken at (back to back; forwarded when it
  // is on the same row) or for settle(). std::out_of_range for a row or
  // cycle beyond the engine's.
  TxOutcome run(const TxOp& op);
  // Clocks the edge that ends the last operation (its row written back)
  // if no operation was taken at it yet.
  void settle();
  // The message layer: PSN `psn` of row `row` starts a synchronise message.
  void add_sync(uint32_t row, uint32_t psn);
  size_t sync_pending(uint32_t row) const;
  // Replaces row `row`'s FIFO (replays).
  void set_sync(uint32_t row, const std::deque<uint32_t>& psns) { sync_[row] = psns; }
  // The NIC's path LFSR as it is now.
  uint32_t rng() const;

  // The cycle at which the next operation would be taken.
  uint64_t cycles() const { return cycles_; }
  // Idle until `cycle` (settling the last operation first): only the count
  // (and the waveform's time) moves.
  void advance_to(uint64_t cycle);
  // Operations taken in the last cycle of the one before, and of those the
  // ones on the same row, whose row came from the write-back register.
  uint64_t overlapped_ops() const { return overlapped_; }
  uint64_t forwarded_ops() const { return forwarded_; }

  // Fault injection: inverts bit `bit` of context row `row` in the RAM.
  void flip_context_bit(uint32_t row, uint32_t bit);
  // Writes a whole row into the RAM (replays from a known state); no cycle
  // passes.
  void load_context(uint32_t row, const MpSenderContext& ctx);

  // Waveforms: every signal of the engine into an FST file from the next
  // cycle on (see MpRxRtl::trace_fst).
  void trace_fst(const std::string& path, uint64_t period_ps = 4000);
  void close_trace();
  bool tracing() const { return trace_ != nullptr; }

 private:
  void tick();
  void fall();
  void show_sync_head(uint32_t row);
  std::unique_ptr<VerilatedContext> vctx_;
  std::unique_ptr<Vmp_rdma_tx_engine> top_;
  std::unique_ptr<VerilatedFstC> trace_;
  bool traceable_;
  uint64_t period_ps_ = 4000;
  uint64_t cycles_ = 0;
  bool in_last_ = false;  // the engine is in an operation's last cycle
  uint64_t overlapped_ = 0, forwarded_ = 0;
  std::map<uint32_t, std::deque<uint32_t>> sync_;
};

}  // namespace mprdma::nic::rtl
