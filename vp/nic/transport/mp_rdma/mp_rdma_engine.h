// MP-RDMA behind the transport-engine interface: one MpSender per requester
// connection and one MpReceiver per responder connection (the golden models
// of mp_rdma_sender.h and mp_rdma_receiver.h), a NIC-wide path LFSR, and what
// the models leave to the NIC: the packets an ACK clocks out wait in a small
// per-connection send FIFO until the TX scheduler serves the QP, and a retry
// budget turns retransmission timeouts without progress into the verbs error
// RETRY_EXC_ERR.
//
// Log channel `nic.<host>.transport` (the stats prefix without its dot):
// debug names every recovery, its end, every RTO and idle restart; trace
// adds one line per ACK, timer, start and arriving data packet with the
// sender's or receiver's state after it and the packets it clocked out
// (psn@vp, "r" for a retransmission), e.g.
//   --log 'nic.t0h0.transport=trace'
// to follow a connection's virtual paths packet by packet.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vp/core/log.h"
#include "vp/core/stats.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_receiver.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_rx_impl.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_sender.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_tx_impl.h"
#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

struct MpRdmaEngineParams {
  MpSenderParams sender;
  uint32_t bitmap_slots = 64;  // L
  MpOverflowNack overflow_nack = MpOverflowNack::every_drop;
  uint32_t rng_seed = 1;  // the NIC's path LFSR
};

class MpRdmaEngine : public TransportEngine {
 public:
  // `stats`: where the NIC-wide sums of the models' counters go, under
  // `prefix` (null: nowhere). `rx_impl`: where the receivers decide (null:
  // the golden models, one MpReceiver per connection); `tx_impl`: where the
  // senders decide (null: the golden models, one MpSender per connection).
  MpRdmaEngine(const MpRdmaEngineParams& params, core::StatsRegistry* stats = nullptr,
               const std::string& prefix = "", std::unique_ptr<MpRxImpl> rx_impl = nullptr,
               std::unique_ptr<MpTxImpl> tx_impl = nullptr);

  const char* name() const override { return "mprdma"; }
  // Go-back-N's 28 bytes plus the sender's and receiver's extra fields.
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
  uint32_t snd_una(uint32_t qpn) const override;
  uint32_t snd_nxt(uint32_t qpn) const override;

  // In-order responder calls: not used by an out-of-order engine.
  RxVerdict classify(uint32_t qpn, uint32_t psn, uint64_t now) override;
  AckDecision commit(uint32_t qpn, uint32_t npsn, bool ack_req, bool implicit_ack,
                     uint64_t now) override;
  uint32_t epsn(uint32_t qpn) const override;
  void nak_sent(uint32_t) override {}

  void mark_sync(uint32_t qpn, uint32_t psn) override;
  RxOutcome on_data(uint32_t qpn, const RxPacket& p, uint64_t now) override;

  // The window state of the NIC's requester connections, for sampled series
  // (nic.<host>.transport.cwnd, .recovering): the congestion windows of the
  // connections that have sent anything, summed, in packets (exact: Q16.16
  // summed as integers), and how many connections are in recovery mode.
  // Kept as running totals, brought up to date after every sender event:
  // the sampler reads them every sample_interval on every NIC, and walking
  // hundreds of connections each time cost a run with many of them (row
  // M6) an eighth of its time.
  double cwnd_sum() const { return static_cast<double>(cwnd_q_total_) / 65536.0; }
  uint32_t recovering() const { return recovering_total_; }

  // For counters and tests: the QPs that have a connection here (ascending)
  // and the models of a connection (null if none; the receiver also when
  // another implementation decides for it).
  std::vector<uint32_t> qpns() const;
  const MpSender* sender(uint32_t qpn) const;
  const MpReceiver* receiver(uint32_t qpn) const;
  const MpReceiver::Counters* receiver_counters(uint32_t qpn) const;

 private:
  struct Conn {
    ConnParams params;
    std::optional<MpSender> tx;
    std::optional<MpReceiver> rx;    // golden model (no rx_impl_)
    bool rx_open = false;            // rx_impl_ holds this connection's receiver
    MpReceiver::Counters rx_counts;  // rx_impl_'s decisions, counted
    std::deque<MpTx> fifo;           // clocked out, waiting for the TX scheduler
    // The cycle the head of `fifo` leaves the engine (MpTx::at) when the TX
    // scheduler asked for it before: a wake-up then (wake_at). kNever: none.
    uint64_t hold_at = kNever;
    uint8_t retry_left = 0;
    uint8_t rnr_left = 0;  // RNR waits left (rnr_retry 7: for ever)
    uint64_t rtos_seen = 0;
    std::vector<MpTx> scratch;
    // Per-QP copies of the counters kQpStats names (null until the first
    // event, so an idle side adds nothing to the results).
    std::vector<core::Counter*> qp_stats;
    // What this connection adds to cwnd_q_total_ and recovering_total_.
    uint64_t cwnd_counted = 0;
    bool recovering_counted = false;
  };
  // Brings the totals up to date with c's sender / takes c out of them.
  void recount(Conn& c);
  void uncount(Conn& c);
  Conn& conn(uint32_t qpn) { return conns_.at(qpn); }
  const Conn& conn(uint32_t qpn) const { return conns_.at(qpn); }
  void take(Conn& c);
  // Adds what a call changed in a connection's model counters to the
  // NIC-wide statistics and to the connection's own (nic.<host>.transport.
  // qp<N>.<counter>, for the counters kQpStats lists).
  void account(uint32_t qpn, Conn& c, const MpSender::Counters& before,
               const MpSender::Counters& after);
  void account(uint32_t qpn, Conn& c, const MpReceiver::Counters& before,
               const MpReceiver::Counters& after);
  void add_qp(uint32_t qpn, Conn& c, size_t stat, uint64_t delta);
  // The log lines of one sender event (`what`: ack, timer, start), from the
  // counters before it and the packets it clocked out (c.scratch).
  void log_tx(uint32_t qpn, const Conn& c, const char* what, const MpSender::Counters& before,
              bool was_recovering, const std::string& detail) const;

  MpRdmaEngineParams p_;
  std::unique_ptr<MpRxImpl> rx_impl_;
  // Where the senders decide (null: the golden models, c.tx itself); with
  // one, c.tx is a view of its context row.
  std::unique_ptr<MpTxImpl> tx_impl_;
  core::StatsRegistry* stats_;
  std::string prefix_;
  core::LogChannel& log_;
  MpRandom rng_;
  std::unordered_map<uint32_t, Conn> conns_;
  uint64_t cwnd_q_total_ = 0;  // Q16.16
  uint32_t recovering_total_ = 0;
  std::vector<core::Counter*> tx_stats_, rx_stats_;
  core::Counter* max_ood_ = nullptr;
  // OOD (PSN - rcv_nxt) of every arriving data packet that is not a
  // duplicate, exact per integer value (percentiles for row M7).
  core::Histogram* ood_ = nullptr;
};

}  // namespace mprdma::nic
