// RoCEv2 go-back-N: the baseline transport of commodity RDMA NICs. One path
// per connection (a fixed UDP source port), no congestion window, cumulative
// ACKs, a sequence NAK makes the requester resend everything from the NAKed
// PSN, a timeout resends from the oldest unacknowledged PSN; the responder
// accepts only the next expected PSN and drops everything else.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

// One QP's go-back-N state as the RTL engine holds it in its context row
// (lockstep compares it field by field), with the parameters it uses.
struct GbnContext {
  bool requester = false;
  uint32_t una = 0, nxt = 0, max = 0, high = 0;
  uint8_t retry_left = 0, rnr_left = 0;
  uint64_t deadline = kNever;
  uint64_t hold_until = 0;
  bool rewound_for_una = false;
  uint32_t epsn = 0;
  bool nak_sent = false;
  uint32_t since_ack = 0;
  uint8_t retry_cnt = 0, rnr_retry = 0;
  uint64_t ack_timeout_cycles = 0;
  uint16_t udp_sport = 0;
  uint32_t ack_coalesce = 0;
  // Each field by name with its value as text, in the RTL row's order.
  std::vector<std::pair<const char*, std::string>> fields() const;
};

class GbnEngine : public TransportEngine {
 public:
  // What a hardware GBN context holds: una, nxt, max, high, epsn (3 B each),
  // retry and RNR counters (1 B each), timer deadline (4 B of cycle-coarse
  // time), RNR wait end (4 B), flags (1 B), ACK coalescing counter (2 B).
  // The out-of-order engines extend this context.
  static constexpr size_t kStateBytes = 5 * 3 + 2 + 4 + 4 + 1 + 2;

  // `go_back_delay_cycles`: from the event that sends the requester back to
  // its first resent packet (nic.gbn.go_back_delay); 0 turns around at once.
  explicit GbnEngine(uint64_t go_back_delay_cycles = 0) : go_back_delay_(go_back_delay_cycles) {}

  const char* name() const override { return "gbn"; }
  size_t state_bytes() const override;

  void open(const ConnParams& params) override;
  void set_requester(const ConnParams& params) override;
  void close(uint32_t qpn) override;

  void set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t now) override;
  TxGrant next_tx(uint32_t qpn, uint64_t now) override;
  void on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) override;
  AckResult on_ack(uint32_t qpn, const AckEvent& ack, uint64_t now) override;
  uint64_t wake_at(uint32_t qpn) const override;
  AckResult on_timer(uint32_t qpn, uint64_t now) override;
  uint32_t snd_una(uint32_t qpn) const override { return conns_.at(qpn).una; }
  uint32_t snd_nxt(uint32_t qpn) const override { return conns_.at(qpn).nxt; }

  RxVerdict classify(uint32_t qpn, uint32_t psn, uint64_t now) override;
  AckDecision commit(uint32_t qpn, uint32_t npsn, bool ack_req, bool implicit_ack,
                     uint64_t now) override;
  uint32_t epsn(uint32_t qpn) const override { return conns_.at(qpn).epsn; }
  // QP `qpn`'s state (std::out_of_range when it has none).
  GbnContext context(uint32_t qpn) const;
  void nak_sent(uint32_t qpn) override { conns_.at(qpn).nak_sent = true; }

 private:
  struct Conn {
    ConnParams params;
    bool requester = false;
    // requester
    uint32_t una = 0, nxt = 0, max = 0, high = 0;  // high: one past the highest PSN sent
    uint8_t retry_left = 0, rnr_left = 0;
    uint64_t deadline = kNever;    // retransmission timer
    uint64_t hold_until = 0;       // no sending before this cycle (RNR wait, go-back delay)
    bool rewound_for_una = false;  // one go-back per lost response
    // responder
    uint32_t epsn = 0;
    bool nak_sent = false;
    uint32_t since_ack = 0;
  };
  void advance(Conn& c, uint32_t new_una, uint64_t now, AckResult& r);
  void rewind(Conn& c, uint32_t to, uint64_t now, AckResult& r);
  void arm(Conn& c, uint64_t now);
  uint64_t go_back_delay_;
  std::unordered_map<uint32_t, Conn> conns_;
};

}  // namespace mprdma::nic
