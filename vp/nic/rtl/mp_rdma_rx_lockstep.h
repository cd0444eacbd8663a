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
  explicit MpRxLockstep(MpOverflowNack overflow_nack, size_t history = 8);

  // One cycle with `op` (or none) issued; the outcome that comes out of the
  // RTL this cycle is compared with the golden model's. Returns the report
  // of the first divergence; after one, the run is over (further calls
  // throw). A data or read operation on a row never initialised throws
  // std::logic_error: that is the caller's bug, not the RTL's.
  std::optional<std::string> step(const RxOp* op);
  // Cycles without operations until every issued one is compared.
  std::optional<std::string> drain();

  uint64_t operations() const { return issued_; }
  uint64_t compared() const { return compared_; }
  MpRxRtl& rtl() { return rtl_; }
  const MpReceiver* golden(uint32_t row) const;

 private:
  struct Pending {
    uint64_t number;
    RxOp op;
    RxOutcome golden;
  };
  RxOutcome run_golden(const RxOp& op);
  std::optional<std::string> compare(const Pending& p, const RxOutcome& rtl);
  std::string report(const Pending& p, const RxOutcome& rtl, const std::vector<std::string>& why);

  MpOverflowNack mode_;
  size_t history_;
  MpRxRtl rtl_;
  std::map<uint32_t, MpReceiver> golden_;
  std::deque<Pending> pending_;
  std::map<uint32_t, std::deque<Pending>> recent_;  // per row, oldest first
  uint64_t issued_ = 0, compared_ = 0;
  bool diverged_ = false;
};

}  // namespace mprdma::nic::rtl
