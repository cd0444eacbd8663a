// IRN behind the transport-engine interface: one IrnSender per requester
// connection and one IrnReceiver per responder connection (irn_model.h). One path
// per connection, as RoCEv2; packets are placed in any order within the BDP
// bitmap and carry the trailer of vp/net/mp_ext.h (message number and
// intra-message PSN for SEND placement, ACKs with the cumulative ACK and the
// SACKed PSN of a NACK). A retry budget turns timeouts without progress into
// RETRY_EXC_ERR, as go-back-N's does.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vp/core/log.h"
#include "vp/core/stats.h"
#include "vp/nic/transport/irn/irn_model.h"
#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

class IrnEngine : public TransportEngine {
 public:
  // `stats`: where the NIC-wide sums of the models' counters go, under
  // `prefix` (null: nowhere).
  explicit IrnEngine(const IrnParams& params, core::StatsRegistry* stats = nullptr,
                     const std::string& prefix = "");

  const char* name() const override { return "irn"; }
  // Go-back-N's 28 bytes plus the sender's and receiver's bitmaps and pointers.
  size_t state_bytes() const override;

  void open(const ConnParams& params) override;
  void set_requester(const ConnParams& params) override;
  void close(uint32_t qpn) override { conns_.erase(qpn); }

  void set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t now) override;
  TxGrant next_tx(uint32_t qpn, uint64_t now) override;
  void on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) override;
  AckResult on_ack(uint32_t qpn, const AckEvent& ack, uint64_t now) override;
  uint64_t wake_at(uint32_t qpn) const override;
  AckResult on_timer(uint32_t qpn, uint64_t now) override;
  uint32_t snd_una(uint32_t qpn) const override { return conns_.at(qpn).tx->snd_una(); }
  uint32_t snd_nxt(uint32_t qpn) const override { return conns_.at(qpn).tx->snd_nxt(); }

  RxVerdict classify(uint32_t qpn, uint32_t psn, uint64_t now) override;
  AckDecision commit(uint32_t qpn, uint32_t npsn, bool ack_req, bool implicit_ack,
                     uint64_t now) override;
  uint32_t epsn(uint32_t qpn) const override { return conns_.at(qpn).rx->epsn(); }
  void nak_sent(uint32_t) override {}

  RxOutcome on_data(uint32_t qpn, const RxPacket& p, uint64_t now) override;

  void read_queued(uint32_t qpn, uint32_t first_psn, uint32_t n, uint64_t now) override;
  void read_response_sent(uint32_t qpn, uint32_t psn, uint64_t now) override;
  AckResult on_read_ack(uint32_t qpn, const AckExt& ack, uint64_t now) override;
  bool next_read_retx(uint32_t qpn, uint32_t& psn) override;
  bool read_pending(uint32_t qpn, uint32_t first_psn) const override;
  uint64_t read_wake_at(uint32_t qpn) const override;
  AckResult on_read_timer(uint32_t qpn, uint64_t now) override;

  const IrnSender* sender(uint32_t qpn) const;
  // The responder half of explicit READ acknowledgements, if the QP has one.
  const IrnReadResponder* read_responder(uint32_t qpn) const;

 private:
  struct Conn {
    ConnParams params;
    std::optional<IrnSender> tx;
    std::optional<IrnReceiver> rx;
    std::optional<IrnReadResponder> rd;  // explicit READ acknowledgements
    uint8_t read_stalls = 0;       // READ-response timeouts in a row without a Read ACK's progress
    std::optional<IrnTx> granted;  // next_tx's answer, until on_sent
    uint8_t retry_left = 0;
    uint8_t rnr_left = 0;     // RNR waits left (rnr_retry 7: for ever)
    uint64_t hold_until = 0;  // end of an RNR wait: nothing is sent before it
    uint32_t una_at_timeout = 0;
    bool timed_out = false;
  };
  // Adds what a call changed in a sender's counters to the NIC-wide ones.
  void account(const IrnSender::Counters& before, const IrnSender::Counters& after);
  void account(const IrnReadResponder::Counters& before, const IrnReadResponder::Counters& after);
  // Sets r.progress when snd_una moved past `una_before`, and renews the
  // retry budget then.
  void note_progress(Conn& c, uint32_t una_before, AckResult& r);
  // An RNR NAK with the ACK trailer (rnr_nacks()).
  AckResult on_rnr(uint32_t qpn, Conn& c, const AckEvent& ev, uint64_t now);
  // The Read (N)ACK a requester sends for READ response `k`.
  AckResult read_response(Conn& c, const AckEvent& ev, uint64_t now);
  // Debug lines on nic.<host>.transport for what an event changed: a
  // recovery begun (`cause`) or ended, a timeout; the READ responder's.
  void log_sender(uint32_t qpn, const Conn& c, const IrnSender::Counters& before,
                  bool was_recovering, const char* cause) const;
  void log_reads(uint32_t qpn, const Conn& c, const IrnReadResponder::Counters& before,
                 bool was_recovering) const;

  IrnParams p_;
  core::LogChannel& log_;
  std::unordered_map<uint32_t, Conn> conns_;
  std::vector<core::Counter*> tx_stats_;
  std::vector<core::Counter*> rd_stats_;
  core::Counter* rx_placed_ = nullptr;
  core::Counter* rx_duplicates_ = nullptr;
  core::Counter* rx_drops_ = nullptr;
  core::Counter* rnr_waits_ = nullptr;
};

}  // namespace mprdma::nic
