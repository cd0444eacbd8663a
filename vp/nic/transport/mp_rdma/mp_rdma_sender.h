// MP-RDMA sender (NSDI'18 §3): the per-connection golden model of the
// multi-path requester. One congestion window for all paths, multi-path
// ACK clocking, out-of-order-aware path selection, NACK recovery with early
// retransmission, RTO, path probing, burst control, path window reduction,
// restart after idle and the synchronise delay.
//
// Plain C++ with integer state: no SystemC, no simulator time, no packets.
// Time is the NIC cycle the caller passes in; randomness is a NIC-wide
// xorshift32 (MpRandom) the caller owns, as hardware would share one LFSR.
// The same decisions in the same order are what the SystemVerilog engine
// must reproduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

// A NIC-wide pseudo-random source (xorshift32; never zero).
class MpRandom {
 public:
  explicit MpRandom(uint32_t seed) : s_(seed ? seed : 0x9E3779B9u) {}
  uint32_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 17;
    s_ ^= s_ << 5;
    return s_;
  }
  // True with probability ppm / 1e6.
  bool chance_ppm(uint32_t ppm) { return next() % 1000000u < ppm; }
  // The generator's state (lockstep compares the RTL's LFSR with it).
  uint32_t state() const { return s_; }

 private:
  uint32_t s_;
};

struct MpSenderParams {
  uint32_t iw = 64;         // initial window, packets (one BDP)
  uint32_t delta = 32;      // target out-of-order level (<= the receiver's L)
  bool ooo_control = true;  // false: no pruning of slow paths (M8 baseline)
  // Recovery mode once its retransmissions have reached `recovery`: false
  // (default), ACKs clock out new data while the retransmissions travel;
  // true (§3.4 read strictly: "an incoming ACK clocks out a retransmission
  // ... instead of a new packet"), nothing new leaves until snd_una passes
  // `recovery`, and an ACK that finds nothing to send shrinks cwnd by one
  // (use it or lose it). transport.md, "Two readings of §3.4's loss
  // recovery", compares them.
  bool strict_recovery = false;
  // Path window reduction ("use it or lose it"): an ACK that could clock
  // out a packet but finds no data lowers cwnd by one. false: an ablation,
  // cwnd keeps what such ACKs opened (transport.md, "When the sender runs
  // out of data").
  bool window_reduction = true;
  uint32_t probe_ppm = 10000;        // probability of probing a new VP, per RTT (1 %)
  uint32_t max_per_ack = 2;          // burst control: packets one ACK may clock out
  uint64_t rtt_cycles = 3000;        // base RTT estimate (burst timer, idle, probing, sync)
  uint32_t idle_rtts = 3;            // restart from IW after this long without sending
  uint32_t sync_alpha_milli = 1000;  // synchronise scaling factor alpha, x1000
  uint64_t rto_cycles = 250000;      // retransmission timeout
  uint16_t vp_base = 0xC000;         // virtual paths are UDP source ports vp_base | (r & vp_mask)
  uint16_t vp_mask = 0x3FFF;
};

// What an ACK (or NACK) tells the sender (Fig. 3 fields).
struct MpAck {
  uint16_t vp = 0;    // echo of the data packet's virtual path
  uint32_t sack = 0;  // PSN of the data packet acknowledged
  uint32_t aack = 0;  // receiver's cumulative ACK: every PSN <= aack is in
  bool ece = false;   // the data packet arrived marked CE
  bool retx = false;  // the data packet was a retransmission
  bool nack = false;  // the receiver asks for `sack` again (bitmap overflow
                      // or an early synchronise message); aack still holds
};

// One packet the sender wants on the wire now.
struct MpTx {
  uint32_t psn = 0;
  uint16_t vp = 0;
  bool retx = false;
  // The NIC cycle from which it may leave: when an RTL engine whose cycles
  // the NIC charges (nic.rtl_timing charged) clocked it out. 0: at once
  // (the golden model decides in no time).
  uint64_t at = 0;
};

// One connection's sender state as the RTL engine holds it in its context
// RAM (lockstep compares it field by field after every operation). The
// synchronise PSNs are the message layer's, not in it.
struct MpSenderContext {
  uint32_t una = 0, nxt = 0, max = 0;
  uint32_t cwnd_q = 0;  // Q16.16 packets
  int32_t inflate = 0;
  uint32_t ooh = 0;
  bool recovering = false;
  uint32_t recovery = 0, retx = 0, nack_head = 0, early = 0;
  uint64_t last_send = 0;
  uint64_t burst_at = kNever;
  uint64_t next_probe = 0;
  uint64_t rto_at = kNever;
  bool ever_sent = false;
  uint64_t hold_until = 0;  // 0: no RNR wait
  uint64_t prev_msg_sent = 0;
  bool sync_armed = false;
  // Each field by name with its value as text, in the RTL row's order.
  std::vector<std::pair<const char*, std::string>> fields() const;
  bool operator==(const MpSenderContext& o) const { return fields() == o.fields(); }
};

class MpSender {
 public:
  // `isn`: first PSN. `rng` must outlive the sender.
  MpSender(const MpSenderParams& params, uint32_t isn, MpRandom& rng);

  // PSNs before `snd_max` exist (the message layer has built them).
  // Sending may start at once (initial window, restart after idle): the
  // packets are appended to `out`.
  void set_snd_max(uint32_t snd_max, uint64_t now, std::vector<MpTx>& out);
  // PSN `psn` starts a synchronise message: it leaves no earlier than
  // alpha * delta / (cwnd / RTT) after the message before it was sent.
  void add_sync(uint32_t psn);

  // An ACK or NACK arrives; packets it clocks out go to `out`.
  // `egress_backlog`: packets clocked out earlier that the NIC has not put
  // on the wire yet. While there are more than max_per_ack, the NIC's own
  // port, not the window, limits the connection, and an ACK does not grow
  // cwnd (window validation, as RFC 7661 does for TCP; the paper is silent:
  // without it a connection that meets no congestion, as in Fig. 11a, grows
  // its window without bound into the NIC's queue, and every loss then
  // overflows the bitmap by that much).
  void on_ack(const MpAck& ack, uint64_t now, std::vector<MpTx>& out, uint32_t egress_backlog = 0);
  // An RNR NACK: the receiver had no RECV posted for the message of packet
  // `ack.sack` and dropped it (ack.nack set, aack as in any ACK). Nothing
  // leaves until `until` (the receiver's RNR timer); then the sender resends
  // from snd_una (recovery), on random paths, the ACK clock having stopped
  // meanwhile. True when this starts a wait (the
  // caller spends one RNR retry), false when it falls in one already
  // running (the other packets of the message, dropped too, are NACKed
  // each) or names nothing unacknowledged.
  bool on_rnr(const MpAck& ack, uint64_t until, uint64_t now);
  // Waiting out an RNR NACK at `now`.
  bool holding(uint64_t now) const { return now < hold_until_; }
  // The next cycle at which on_timer() has work (burst timer, synchronise
  // release, RTO), or kNever.
  uint64_t wake_at() const;
  void on_timer(uint64_t now, std::vector<MpTx>& out);

  // --- state, for the message layer, counters and tests ---
  uint32_t snd_una() const { return una_; }
  uint32_t snd_nxt() const { return nxt_; }
  uint32_t snd_ooh() const { return ooh_; }
  bool in_recovery() const { return recovering_; }
  uint32_t recovery() const { return recovery_; }
  uint32_t snd_retx() const { return retx_; }
  // Congestion window in packets (Q16.16 internally).
  double cwnd() const { return cwnd_q_ / 65536.0; }
  uint32_t cwnd_q16() const { return cwnd_q_; }
  int32_t inflate() const { return inflate_; }
  // awnd = cwnd + inflate - (snd_nxt - snd_una), in whole packets.
  int64_t awnd() const;
  bool done() const { return una_ == max_ && nxt_ == max_; }
  // Whether anything was ever sent (a QP in RTS that never sends keeps IW).
  bool ever_sent() const { return ever_sent_; }
  MpSenderContext context() const;
  // Synchronise PSNs added and not yet sent.
  size_t sync_pending() const { return sync_psns_.size(); }

  struct Counters {
    uint64_t acks = 0, ece_acks = 0, pruned_acks = 0, nacks = 0, recoveries = 0;
    uint64_t retransmits = 0, early_retransmits = 0, rtos = 0, probes = 0;
    uint64_t burst_timer_sends = 0, window_reductions = 0, restarts = 0, sync_waits = 0;
    uint64_t rnr_nacks = 0, rnr_waits = 0;
  };
  const Counters& counters() const { return counters_; }
  // Makes this sender a view of another implementation's (the RTL
  // engine's): its state becomes `ctx`, `delta` is added to its counters
  // and the synchronise PSNs that implementation sent are dropped, until
  // `sync_pending` remain. Its own decisions are not taken.
  void load(const MpSenderContext& ctx, const Counters& delta, size_t sync_pending);

  // Per-connection state this sender adds over a RoCEv2 go-back-N
  // requester, field by field (Table 1 of the paper; see transport.md).
  using Field = StateField;
  static const std::vector<Field>& extra_state();

 private:
  enum class Why { ack, timer, start };
  // Sends up to `n` packets: the ACK's VP (or random ones when `vp` < 0).
  void clock_out(uint32_t n, int vp, uint64_t now, Why why, std::vector<MpTx>& out);
  // The next packet to send, if any: retransmission in recovery, new data,
  // or early retransmission. False when there is nothing.
  bool pick(MpTx& tx, uint64_t now);
  uint16_t random_vp() { return static_cast<uint16_t>(p_.vp_base | (rng_.next() & p_.vp_mask)); }
  void sent(const MpTx& tx, uint64_t now);
  // An ACK's AACK: snd_una moves to aack + 1 if that is ahead.
  void advance_una(uint32_t aack, uint64_t now);
  void cwnd_add_q(int64_t delta_q);
  void restart(uint64_t now, std::vector<MpTx>& out);
  uint64_t sync_delay() const;
  bool sync_blocked(uint32_t psn, uint64_t now) const;

  MpSenderParams p_;
  MpRandom& rng_;
  // --- state (extra_state() accounts each for the on-chip budget) ---
  uint32_t una_, nxt_, max_;  // RoCEv2 baseline: snd_una, snd_nxt, end of data
  uint32_t cwnd_q_;           // Q16.16 packets
  int32_t inflate_ = 0;
  uint32_t ooh_;  // highest SACKed PSN
  bool recovering_ = false;
  uint32_t recovery_ = 0;       // snd_nxt when recovery began
  uint32_t retx_ = 0;           // next PSN to retransmit in recovery
  uint32_t nack_head_ = 0;      // SACK of the last overflow NACK that rewound
  uint32_t early_ = 0;          // next PSN for early retransmission (no new data)
  uint64_t last_send_ = 0;      // cycle of the last transmission (idle restart)
  uint64_t burst_at_ = kNever;  // burst timer
  uint64_t next_probe_ = 0;     // earliest cycle of the next probing decision
  uint64_t rto_at_ = kNever;
  bool ever_sent_ = false;
  // RoCEv2 baseline state (a go-back-N requester has it too, so not in
  // extra_state()): the end of an RNR wait, 0 when none is running.
  uint64_t hold_until_ = 0;
  // Message-layer information rather than transport state: PSNs that
  // start synchronise messages, in order.
  std::deque<uint32_t> sync_psns_;
  uint64_t prev_msg_sent_ = 0;  // cycle the packet before the head sync PSN left
  bool sync_armed_ = false;     // a send waited for the synchronise release
  Counters counters_;
};

}  // namespace mprdma::nic
