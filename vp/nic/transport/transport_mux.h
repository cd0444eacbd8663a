// Per-QP transport engines: the NIC holds one engine of each kind it offers
// (EngineRegistry) and routes every call to the engine of the QP's context
// (mpr_qpc.transport, set by CREATE_QP: enum mpr_transport, 0 = the NIC's
// configured engine). The message layer asks per QP what it needs to
// know about the engine (traits_of(qpn), cached by the QP when it binds).
//
// Each engine keeps only its own QPs' state; the QPC line holds the largest
// engine's state (state_bytes() is the maximum), the price of letting any QP
// take any engine. A QP is bound at open() or set_requester() (RTR, RTS) and
// unbound at close(). A QP that is not bound (a UD QP, a QP in RESET or
// INIT, a QP number nobody holds: whatever a packet from the wire names)
// has no connection in any engine: calls for it go to an engine that holds
// none and answers as a transport without state would (nothing to send,
// every packet dropped, no progress), so that no engine is ever asked
// about a connection it does not have.
#pragma once

#include <mprdma/hw.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

class TransportMux : public TransportEngine {
 public:
  // An engine and the ids (enum mpr_transport) it answers to.
  struct Offered {
    std::vector<uint8_t> kinds;
    std::unique_ptr<TransportEngine> engine;
  };
  // `default_kind`: the engine of MPR_TRANSPORT_DEFAULT QPs, one of the
  // offered. `qpn_index_bits`: the low bits of a QP number that are its
  // table index (ContextMemory::qpn_index_bits; 24 with lowest-free
  // numbers). std::invalid_argument when the default is not offered, an id
  // is offered twice, or an id is beyond 31.
  TransportMux(std::vector<Offered> engines, uint8_t default_kind, uint32_t qpn_index_bits = 24);

  // The default engine's name.
  const char* name() const override { return default_->name(); }
  // True when QP `qpn` has a connection in one of the engines.
  bool bound(uint32_t qpn) const { return slot(qpn) != nullptr; }
  size_t state_bytes() const override;
  // The engine of a kind (enum mpr_transport; DEFAULT as above), null when
  // the NIC does not offer it.
  TransportEngine* find(uint8_t kind) const;
  // find(), for a kind that must be offered (else std::invalid_argument).
  TransportEngine& engine(uint8_t kind) const;

  void open(const ConnParams& params) override;
  void set_requester(const ConnParams& params) override;
  void close(uint32_t qpn) override;

  void set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t now) override {
    route(qpn).set_snd_max(qpn, snd_max, now);
  }
  TxGrant next_tx(uint32_t qpn, uint64_t now) override { return route(qpn).next_tx(qpn, now); }
  void on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) override {
    route(qpn).on_sent(qpn, psn, npsn, now);
  }
  AckResult on_ack(uint32_t qpn, const AckEvent& ack, uint64_t now) override {
    return route(qpn).on_ack(qpn, ack, now);
  }
  uint64_t wake_at(uint32_t qpn) const override { return route(qpn).wake_at(qpn); }
  AckResult on_timer(uint32_t qpn, uint64_t now) override { return route(qpn).on_timer(qpn, now); }
  uint32_t snd_una(uint32_t qpn) const override { return route(qpn).snd_una(qpn); }
  uint32_t snd_nxt(uint32_t qpn) const override { return route(qpn).snd_nxt(qpn); }

  RxVerdict classify(uint32_t qpn, uint32_t psn, uint64_t now) override {
    return route(qpn).classify(qpn, psn, now);
  }
  AckDecision commit(uint32_t qpn, uint32_t npsn, bool ack_req, bool implicit_ack,
                     uint64_t now) override {
    return route(qpn).commit(qpn, npsn, ack_req, implicit_ack, now);
  }
  uint32_t epsn(uint32_t qpn) const override { return route(qpn).epsn(qpn); }
  void nak_sent(uint32_t qpn) override { route(qpn).nak_sent(qpn); }

  // Per QP: the traits and name of the QP's engine (an unbound QP's are
  // an in-order engine's: nothing of it is placed).
  const EngineTraits& traits_of(uint32_t qpn) const override { return route(qpn).traits(); }
  const char* name_of(uint32_t qpn) const override { return route(qpn).name(); }
  void mark_sync(uint32_t qpn, uint32_t psn) override { route(qpn).mark_sync(qpn, psn); }
  void read_queued(uint32_t qpn, uint32_t first_psn, uint32_t n, uint64_t now) override {
    route(qpn).read_queued(qpn, first_psn, n, now);
  }
  void read_response_sent(uint32_t qpn, uint32_t psn, uint64_t now) override {
    route(qpn).read_response_sent(qpn, psn, now);
  }
  AckResult on_read_ack(uint32_t qpn, const AckExt& ack, uint64_t now) override {
    return route(qpn).on_read_ack(qpn, ack, now);
  }
  bool next_read_retx(uint32_t qpn, uint32_t& psn) override {
    return route(qpn).next_read_retx(qpn, psn);
  }
  bool read_pending(uint32_t qpn, uint32_t first_psn) const override {
    return route(qpn).read_pending(qpn, first_psn);
  }
  uint64_t read_wake_at(uint32_t qpn) const override { return route(qpn).read_wake_at(qpn); }
  AckResult on_read_timer(uint32_t qpn, uint64_t now) override {
    return route(qpn).on_read_timer(qpn, now);
  }
  RxOutcome on_data(uint32_t qpn, const RxPacket& p, uint64_t now) override {
    return route(qpn).on_data(qpn, p, now);
  }

 private:
  TransportEngine& route(uint32_t qpn) const;
  void bind(const ConnParams& params);

  std::vector<std::unique_ptr<TransportEngine>> engines_;
  std::array<TransportEngine*, 32> by_kind_{};  // indexed by enum mpr_transport
  TransportEngine* default_;
  // What unbound QPs are routed to (see the top of this file).
  std::unique_ptr<TransportEngine> unbound_;
  // Indexed by the QP number's table index (dense: lowest free first),
  // holding the whole number it is bound for. Every call of the data path
  // looks here, so no hashing.
  struct Binding {
    uint32_t qpn = 0;
    TransportEngine* engine = nullptr;
  };
  const Binding* slot(uint32_t qpn) const {
    const uint32_t i = qpn & index_mask_;
    return i < bound_.size() && bound_[i].engine && bound_[i].qpn == qpn ? &bound_[i] : nullptr;
  }
  uint32_t index_mask_;
  std::vector<Binding> bound_;
};

}  // namespace mprdma::nic
