// IRN (Mittal et al., "Revisiting Network Support for RDMA", SIGCOMM'18):
// the per-connection golden model of its loss recovery and flow control.
//
// Sender: selective retransmission driven by a SACK bitmap of BDP bits;
// loss recovery entered on the first NACK (retransmit only PSNs inferred
// lost: not SACKed and below the highest SACKed PSN), left once the
// cumulative ACK passes the PSN that was next when it began; two timeouts,
// RTO_low when at most N packets are in flight and RTO_high otherwise;
// BDP-FC, at most BDP packets in flight. Receiver: accepts out-of-order
// packets within BDP of the expected PSN (two bitmaps: received, message
// tail), ACKs in-order arrivals and NACKs out-of-order ones with the
// cumulative ACK and the SACKed PSN; completes messages in order.
//
// Plain C++ with integer state timed in NIC cycles, no SystemC: the
// reference for RTL, like the MP-RDMA model (mp_rdma_sender.h).
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

struct IrnParams {
  uint32_t bdp_packets = 64;         // BDP-FC cap and the bitmaps' length (power of two)
  bool bdp_fc = true;                // false: no cap on packets in flight
  uint64_t rto_low_cycles = 25000;   // 100 us at 250 MHz (IRN §4.1)
  uint64_t rto_high_cycles = 80000;  // 320 us at 250 MHz (IRN §4.1)
  uint32_t rto_low_threshold = 3;    // N: RTO_low with at most N packets in flight
  // Explicit READ acknowledgements: the requester answers READ responses
  // with Read (N)ACKs and the responder recovers lost responses itself
  // (IrnReadResponder); false: the requester asks again for them.
  bool read_acks = true;
};

// What the receiver tells the sender: the cumulative ACK (next expected
// PSN), and for a NACK the out-of-order PSN that arrived.
struct IrnAck {
  uint32_t cum = 0;  // every PSN before it has arrived
  bool nack = false;
  uint32_t sack = 0;  // NACK: the PSN that arrived out of order
};

struct IrnTx {
  uint32_t psn = 0;
  bool retx = false;
};

class IrnSender {
 public:
  IrnSender(const IrnParams& params, uint32_t isn);

  // PSNs before `snd_max` exist.
  void set_snd_max(uint32_t snd_max) { max_ = snd_max & kPsnMask; }
  // The next packet this connection may send now: a retransmission of a
  // PSN inferred lost first, then new data within BDP-FC. False when none.
  bool next(IrnTx& tx);
  // `npsn`: PSNs the packet covers (a READ request covers its responses').
  void on_sent(const IrnTx& tx, uint64_t now, uint32_t npsn = 1);
  void on_ack(const IrnAck& ack, uint64_t now);
  uint64_t wake_at() const { return rto_at_; }
  // A timeout: retransmit from snd_una (the PSNs not SACKed).
  void on_timer(uint64_t now);
  // The end of an RNR wait (the receiver had no RECV for a message and
  // dropped its packets): retransmit from snd_una what is not SACKed, as a
  // timeout does, without counting one.
  void resend_unacknowledged(uint64_t now);

  uint32_t snd_una() const { return una_; }
  uint32_t snd_nxt() const { return nxt_; }
  bool in_recovery() const { return recovering_; }
  bool sacked(uint32_t psn) const;
  uint32_t in_flight() const { return static_cast<uint32_t>(psn_diff(nxt_, una_)); }
  bool done() const { return una_ == max_ && nxt_ == max_; }
  // Records `psn` as arrived without a NACK's recovery: READ responses
  // whose loss their responder recovers (explicit Read ACKs). Restarts the
  // timeout, which then covers only what the responder cannot: a lost
  // request.
  void sack(uint32_t psn, uint64_t now);

  struct Counters {
    uint64_t nacks = 0, recoveries = 0, retransmits = 0, rto_low = 0, rto_high = 0;
    uint64_t bdp_stalls = 0;
  };
  const Counters& counters() const { return counters_; }
  // State over RoCEv2 go-back-N, field by field.
  static std::vector<StateField> extra_state(uint32_t bdp_packets);

 private:
  uint8_t& bit(uint32_t psn) { return sacked_[psn % sacked_.size()]; }
  void arm(uint64_t now);

  IrnParams p_;
  uint32_t una_, nxt_, max_;
  std::vector<uint8_t> sacked_;  // BDP bits from snd_una (a byte each in the model)
  bool recovering_ = false;
  uint32_t recovery_ = 0;   // snd_nxt when recovery began
  uint32_t retx_ = 0;       // next PSN to consider for retransmission
  uint32_t high_sack_ = 0;  // highest SACKed PSN + 1 (retransmit only below it)
  uint64_t rto_at_ = kNever;
  Counters counters_;
};

// The responder's half of IRN's explicit READ acknowledgements: it sends a
// READ's responses and recovers their loss itself, from the requester's
// Read (N)ACKs (every response before `cum` arrived; a NACK: response
// `sack` arrived after a gap) and a timeout (RTO_low / RTO_high by
// responses in flight), as a sender of data does: a response not
// acknowledged and below the highest SACKed one is sent again, once per
// recovery; a timeout sends again every one in flight. Responses are keyed
// by PSN, READ by READ: READs may be answered in any order (a lost request
// is asked again later), and the PSNs between them belong to other
// requests. Per READ only the responses between the first one not yet
// acknowledged and the last one sent have state of their own, so a READ
// costs what it has in flight, not what it asks for (a 2 GiB READ is 8 Mi
// responses at MTU 256).
class IrnReadResponder {
 public:
  explicit IrnReadResponder(const IrnParams& params);

  // A READ was accepted: its responses cover [first, first + n).
  void add_read(uint32_t first, uint32_t n);
  // Response `psn` left (first time or again).
  void on_sent(uint32_t psn, uint64_t now);
  // A Read (N)ACK.
  void on_ack(const IrnAck& a, uint64_t now);
  // The next response to send again; false when none is due.
  bool next_retx(uint32_t& psn);
  uint64_t wake_at() const { return rto_at_; }
  void on_timer(uint64_t now);
  // The READ starting at `first` still has responses not acknowledged.
  bool pending(uint32_t first) const;
  // Forgets every READ (the requester stopped answering: its QP is gone
  // or does not send Read ACKs); nothing more is sent again.
  void abandon();
  bool in_recovery() const { return recovering_; }
  uint32_t in_flight() const { return in_flight_; }
  // Responses that have state of their own now (the READs' windows).
  size_t window_responses() const {
    size_t n = 0;
    for (const Read& r : reads_) n += r.state.size();
    return n;
  }

  struct Counters {
    uint64_t read_acks = 0, read_nacks = 0, recoveries = 0, retransmits = 0, rtos = 0;
    uint64_t abandoned = 0;  // READs given up (abandon())
  };
  const Counters& counters() const { return counters_; }

 private:
  enum : uint8_t { kQueued = 0, kSent = 1, kAcked = 2 };
  struct Read {
    uint32_t first = 0;
    uint32_t n = 1;     // responses
    uint32_t base = 0;  // every response before it is kAcked
    // Responses base .. base + state.size() - 1; every one beyond is kQueued.
    std::deque<uint8_t> state;   // kQueued, kSent, kAcked
    std::deque<uint8_t> resent;  // sent again in this recovery
    uint8_t at(uint32_t k) const {
      if (k < base) return kAcked;
      return k - base < state.size() ? state[k - base] : uint8_t{kQueued};
    }
    uint32_t window_end() const { return base + static_cast<uint32_t>(state.size()); }
  };
  // The READ holding `psn`, or null.
  Read* read_of(uint32_t psn);
  // Response k of READ r moves to state s (in_flight_ follows).
  void set(Read& r, uint32_t k, uint8_t s);
  void acknowledge(uint32_t psn);
  void arm(uint64_t now);
  // Oldest READ's first PSN: the base that orders PSNs across READs.
  int32_t order(uint32_t psn) const;

  IrnParams p_;
  std::deque<Read> reads_;  // by first PSN
  bool recovering_ = false;
  uint32_t high_sack_ = 0;  // responses before it (in order()) are candidates
  uint32_t in_flight_ = 0;  // responses in kSent
  uint64_t rto_at_ = kNever;
  Counters counters_;
};

struct IrnRxResult {
  enum class Verdict { place, duplicate, drop };
  Verdict verdict = Verdict::drop;
  bool send_ack = false;
  IrnAck ack;
  std::vector<uint32_t> completed;  // tail PSNs of messages completed, in order
};

class IrnReceiver {
 public:
  IrnReceiver(uint32_t bdp_packets, uint32_t epsn);
  // `tail`: last packet of its message. `npsn`: PSNs the packet covers (a
  // READ request covers its responses', its last being the message tail);
  // out of order, the whole range must fit the bitmap.
  IrnRxResult on_data(uint32_t psn, bool tail, uint32_t npsn = 1);
  uint32_t epsn() const { return nxt_; }
  static std::vector<StateField> extra_state(uint32_t bdp_packets);

 private:
  std::vector<uint8_t> got_;  // per slot: 0 empty, 1 received, 2 received tail
  uint32_t nxt_;
};

}  // namespace mprdma::nic
