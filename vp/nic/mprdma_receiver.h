// MP-RDMA receiver (NSDI'18 §3.3, §3.4): the per-connection golden model of
// the tracking bitmap. L slots of 2 bits in a cyclic array whose head is
// rcv_nxt: Empty, Received, Tail, Tail-with-completion. Every data packet
// is placed at once (its address is in the packet) and ACKed on its own
// virtual path; the head-of-line message completes when a run of Received
// slots ends in a Tail. A packet beyond rcv_nxt + L is dropped and NACKed
// (loss recovery); a synchronise message that arrives before every earlier
// message is complete is dropped and NACKed so that the sender resends it.
//
// Plain C++, no SystemC: the same decisions are the reference for RTL.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "vp/nic/mprdma_sender.h"

namespace mprdma::nic {

enum class MpSlot : uint8_t { empty = 0, received = 1, tail = 2, tail_completion = 3 };

// The fields of an arriving data packet the receiver decides on.
struct MpData {
  uint32_t psn = 0;
  uint16_t vp = 0;
  bool ce = false;          // IP ECN was Congestion Experienced
  bool retx = false;        // ReTx bit
  bool tail = false;        // last packet of its message
  bool completion = false;  // tail of a message that needs a completion (SEND, READ response)
  bool sync = false;        // part of a synchronise message
  uint32_t ipsn = 0;        // packet index within its message (intra-message PSN)
};

struct MpRxResult {
  enum class Verdict { place, duplicate, drop };
  Verdict verdict = Verdict::drop;
  bool send_ack = false;
  MpAck ack;
  // Messages this packet completed, oldest first: tail PSN and whether the
  // message needs a completion (RECV WQE consumption, CQE).
  std::vector<std::pair<uint32_t, bool>> completed;
};

class MpReceiver {
 public:
  // `slots`: the bitmap length L (> 0).
  MpReceiver(uint32_t slots, uint32_t epsn);

  MpRxResult on_data(const MpData& d);

  uint32_t rcv_nxt() const { return nxt_; }
  uint32_t slots() const { return static_cast<uint32_t>(map_.size()); }
  // State of the slot of `psn` (empty outside [rcv_nxt, rcv_nxt + L)).
  MpSlot slot(uint32_t psn) const;

  struct Counters {
    uint64_t placed = 0, duplicates = 0, overflow_drops = 0, sync_drops = 0, nacks = 0;
    uint64_t messages = 0, completions = 0;
    uint32_t max_ood = 0;  // largest psn - rcv_nxt seen (out-of-order degree)
  };
  const Counters& counters() const { return counters_; }

  // Per-connection state over a RoCEv2 responder, field by field.
  static std::vector<StateField> extra_state(uint32_t slots);

 private:
  MpSlot& at(uint32_t psn) { return map_[psn % map_.size()]; }
  void complete_head(MpRxResult& r);

  std::vector<MpSlot> map_;
  uint32_t nxt_;
  bool sync_nacked_ = false;  // a synchronise NACK was sent for this rcv_nxt
  uint32_t sync_nacked_for_ = 0;
  Counters counters_;
};

}  // namespace mprdma::nic
