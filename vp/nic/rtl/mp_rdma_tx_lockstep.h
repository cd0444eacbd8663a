// Lockstep of the MP-RDMA sender: every operation goes to the Verilated
// engine and to the golden model (MpSender, one per context row, sharing
// one MpRandom as the RTL's connections share its LFSR); the packets (PSN,
// path, ReTx), the counters they imply, the RNR verdict, the next deadline,
// the LFSR and every field of the row after the operation are compared.
// The first divergence yields a report: the operation's number and inputs,
// both outcomes, both contexts field by field (the fields that differ
// marked) and the last operations on that row; replay_fst() writes the
// cycles of the last operations into an FST.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vp/nic/rtl/mp_rdma_tx_rtl.h"

namespace mprdma::nic::rtl {

// The fields in which two sender contexts differ ("snd_nxt", "cwnd_q16"...).
std::vector<std::string> context_diff(const MpSenderContext& golden, const MpSenderContext& rtl);

class MpTxLockstep {
 public:
  MpTxLockstep(const MpSenderParams& params, uint32_t seed, size_t history = 8,
               bool traceable = false);

  // One operation on both; the report of the first divergence, if this is
  // it. After one, the run is over (further calls throw). An operation on a
  // row no init started throws std::logic_error (the caller's bug).
  std::optional<std::string> run(const TxOp& op);
  // The message layer: PSN `psn` of `row` starts a synchronise message.
  void add_sync(uint32_t row, uint32_t psn);

  // The RTL's outcome of the last operation.
  const TxOutcome& last_outcome() const { return last_; }
  const MpSender* golden(uint32_t row) const;
  MpTxRtl& rtl() { return rtl_; }
  uint64_t operations() const { return ops_; }

  // After a divergence: the last operations (any row, the divergent one
  // last) replayed on a fresh traceable engine loaded with the RTL's own
  // contexts, LFSR and synchronise FIFOs before them, each at its original
  // cycle, into an FST. Returns the operations replayed.
  size_t replay_fst(const std::string& path, uint64_t period_ps = 4000) const;

 private:
  struct Done {
    uint64_t number;
    TxOp op;
    TxOutcome golden;
  };
  struct Replayable {
    TxOp op;
    uint64_t cycle;
    uint32_t rng_before;
    std::optional<MpSenderContext> before;
    std::deque<uint32_t> sync_before;
  };
  static constexpr size_t kReplayOps = 16;
  TxOutcome run_golden(const TxOp& op);
  std::string report(const Done& d, const TxOutcome& rtl, const std::vector<std::string>& why);

  MpSenderParams params_;
  size_t history_;
  MpTxRtl rtl_;
  MpRandom rng_;
  std::map<uint32_t, MpSender> golden_;
  std::map<uint32_t, std::deque<uint32_t>> sync_;  // the FIFOs as the RTL's side holds them
  std::map<uint32_t, std::deque<Done>> recent_;    // per row, oldest first
  std::map<uint32_t, MpSenderContext> rtl_rows_;   // the RTL's rows as last read out
  std::deque<Replayable> replay_;
  TxOutcome last_;
  uint64_t ops_ = 0;
  bool diverged_ = false;
};

}  // namespace mprdma::nic::rtl
