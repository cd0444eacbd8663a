// Lockstep of the go-back-N engine: every operation goes to the Verilated
// engine and to the golden model (GbnEngine, QP number = context row); the
// outcome of each kind (grant, ACK result, verdict, ACK decision), the QP's
// next deadline and every field of the row after it are compared. The
// first divergence yields a report: the operation's number and inputs,
// both outcomes, both rows field by field (the differing ones marked) and
// the last operations on that row.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vp/nic/rtl/gbn_qp_rtl.h"

namespace mprdma::nic::rtl {

std::vector<std::string> context_diff(const GbnContext& golden, const GbnContext& rtl);

class GbnQpLockstep {
 public:
  explicit GbnQpLockstep(uint64_t go_back_delay_cycles, size_t history = 8, bool traceable = false);

  // One cycle with `op` (or none) issued; the outcome the RTL gives this
  // cycle is compared. Returns the report of the first divergence; after
  // one, further calls throw. An operation other than open and
  // set_requester on a row neither started is the caller's bug
  // (std::logic_error).
  std::optional<std::string> step(const GbnOp* op);
  std::optional<std::string> drain();
  const std::optional<GbnOutcome>& last_outcome() const { return last_; }
  // After a divergence: the last operations (any row, the divergent one
  // last) replayed on a fresh traceable engine whose rows hold the RTL's
  // own contexts before them, each at its original cycle, into an FST.
  // Returns the operations replayed; std::logic_error before a divergence.
  size_t replay_fst(const std::string& path, uint64_t period_ps = 4000) const;

  const GbnEngine& golden() const { return golden_; }
  bool started(uint32_t row) const { return started_.count(row) != 0; }
  GbnQpRtl& rtl() { return rtl_; }
  uint64_t operations() const { return issued_; }
  uint64_t compared() const { return compared_; }

 private:
  struct Pending {
    uint64_t number;
    GbnOp op;
    GbnOutcome golden;
    uint64_t cycle;  // the RTL cycle it was issued at
  };
  struct Replayable {
    Pending p;
    std::optional<GbnContext> before;
  };
  static constexpr size_t kReplayOps = 16;
  GbnOutcome run_golden(const GbnOp& op);
  std::optional<std::string> compare(const Pending& p, const GbnOutcome& rtl);
  std::string report(const Pending& p, const GbnOutcome& rtl, const std::vector<std::string>& why);

  size_t history_;
  GbnQpRtl rtl_;
  GbnEngine golden_;
  std::map<uint32_t, bool> started_;
  std::deque<Pending> pending_;
  std::map<uint32_t, std::deque<Pending>> recent_;
  std::map<uint32_t, GbnContext> rtl_rows_;  // the RTL's rows as last read out
  std::deque<Replayable> replay_;
  uint64_t go_back_delay_;
  std::optional<GbnOutcome> last_;
  uint64_t issued_ = 0, compared_ = 0;
  bool diverged_ = false;
};

}  // namespace mprdma::nic::rtl
