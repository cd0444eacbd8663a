// Lockstep of the MP-RDMA receiver: every operation goes to the Verilated
// engine and to the golden model (MpReceiver, one per context row); every
// output and the row's architectural fields after it are compared. The
// first divergence yields a report a designer can act on: the operation's
// number and inputs, both outcomes, both contexts field by field (the
// fields that differ marked) and the last operations on that row.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vp/nic/rtl/mp_rdma_rx_rtl.h"

namespace mprdma::nic::rtl {

// The fields in which two contexts differ ("rcv_nxt", "bitmap slot 5", ...).
std::vector<std::string> context_diff(const MpReceiverContext& golden,
                                      const MpReceiverContext& rtl);

class MpRxLockstep {
 public:
  // `history`: earlier operations on the row a report lists; `traceable`:
  // the RTL can write waveforms (MpRxRtl).
  explicit MpRxLockstep(MpOverflowNack overflow_nack, size_t history = 8, bool traceable = false);

  // One cycle with `op` (or none) issued; the outcome that comes out of the
  // RTL this cycle is compared with the golden model's. Returns the report
  // of the first divergence; after one, the run is over (further calls
  // throw). A data or read operation on a row never initialised throws
  // std::logic_error: that is the caller's bug, not the RTL's.
  std::optional<std::string> step(const RxOp* op);
  // Cycles without operations until every issued one is compared.
  std::optional<std::string> drain();

  // The RTL's outcome of the operation the last step() compared (equal to
  // the golden model's unless that step reported a divergence).
  const std::optional<RxOutcome>& last_outcome() const { return last_; }

  // After a divergence: replays the last operations (of any row, up to and
  // including the divergent one) on a fresh traceable engine whose rows are
  // loaded with the RTL's own contexts before them, and writes the cycles
  // into an FST (GTKWave), each operation at its original cycle, so a
  // designer sees the divergent operation go through the pipeline. Returns
  // the number of operations replayed. std::logic_error before a divergence.
  size_t replay_fst(const std::string& path, uint64_t period_ps = 4000) const;

  uint64_t operations() const { return issued_; }
  uint64_t compared() const { return compared_; }
  MpRxRtl& rtl() { return rtl_; }
  const MpReceiver* golden(uint32_t row) const;

 private:
  struct Pending {
    uint64_t number;
    RxOp op;
    RxOutcome golden;
    uint64_t cycle;  // the RTL cycle it was issued at
  };
  // An operation as replay_fst needs it: with its row's context, as the
  // RTL had it, before it (none before the row's first operation).
  struct Replayable {
    Pending p;
    std::optional<MpReceiverContext> before;
  };
  static constexpr size_t kReplayOps = 16;
  RxOutcome run_golden(const RxOp& op);
  std::optional<std::string> compare(const Pending& p, const RxOutcome& rtl);
  std::string report(const Pending& p, const RxOutcome& rtl, const std::vector<std::string>& why);

  MpOverflowNack mode_;
  size_t history_;
  MpRxRtl rtl_;
  std::map<uint32_t, MpReceiver> golden_;
  std::deque<Pending> pending_;
  std::map<uint32_t, std::deque<Pending>> recent_;  // per row, oldest first
  std::map<uint32_t, MpReceiverContext> rtl_rows_;  // the RTL's contexts as last read out
  std::deque<Replayable> replay_;                   // the last operations, every row
  std::optional<RxOutcome> last_;
  uint64_t issued_ = 0, compared_ = 0;
  bool diverged_ = false;
};

}  // namespace mprdma::nic::rtl
