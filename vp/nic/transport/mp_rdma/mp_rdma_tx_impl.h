// Another implementation of the MP-RDMA senders than the golden model's own
// decisions: the RTL engine (vp/nic/rtl/), alone or in lockstep with the
// golden model. An MpRdmaEngine given one hands it every sender event; the
// MpSender the engine keeps per QP is then a view of the engine's context
// row (MpSender::load), which the rest of the NIC reads as it reads the
// golden model (window, snd_una, deadlines, counters).
#pragma once

#include <cstdint>
#include <vector>

#include "vp/nic/transport/mp_rdma/mp_rdma_sender.h"

namespace mprdma::nic {

class MpTxImpl {
 public:
  virtual ~MpTxImpl() = default;
  // A context row for QP `qpn`'s sender, taken when the QP opens (RTR),
  // so that a full RAM fails the QP where the NIC can report it.
  // EngineContextExhausted when none is free.
  virtual void reserve(uint32_t qpn) = 0;
  virtual void release(uint32_t qpn) = 0;
  // QP `qpn`'s sender starts (RTS) with first PSN `isn` and `params` (its
  // virtual-path base may be the QP's own); `s` is its view.
  virtual void start(uint32_t qpn, MpSender& s, const MpSenderParams& params, uint32_t isn) = 0;
  // The events of MpSender of the same names, on QP `qpn`, with view `s`.
  virtual void set_snd_max(uint32_t qpn, MpSender& s, uint32_t snd_max, uint64_t now,
                           std::vector<MpTx>& out) = 0;
  virtual void add_sync(uint32_t qpn, MpSender& s, uint32_t psn) = 0;
  virtual void on_ack(uint32_t qpn, MpSender& s, const MpAck& ack, uint64_t now,
                      std::vector<MpTx>& out, uint32_t egress_backlog) = 0;
  virtual bool on_rnr(uint32_t qpn, MpSender& s, const MpAck& ack, uint64_t until,
                      uint64_t now) = 0;
  virtual void on_timer(uint32_t qpn, MpSender& s, uint64_t now, std::vector<MpTx>& out) = 0;
};

}  // namespace mprdma::nic
