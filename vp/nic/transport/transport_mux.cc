#include "vp/nic/transport/transport_mux.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mprdma::nic {

namespace {

// The engine of QPs that have no connection: it holds no state and answers
// every question as for a connection that does not exist.
class NoConnection : public TransportEngine {
 public:
  const char* name() const override { return "none"; }
  size_t state_bytes() const override { return 0; }
  void open(const ConnParams&) override {}
  void set_requester(const ConnParams&) override {}
  void close(uint32_t) override {}
  void set_snd_max(uint32_t, uint32_t, uint64_t) override {}
  TxGrant next_tx(uint32_t, uint64_t) override { return {}; }
  void on_sent(uint32_t, uint32_t, uint32_t, uint64_t) override {}
  AckResult on_ack(uint32_t, const AckEvent&, uint64_t) override { return {}; }
  uint64_t wake_at(uint32_t) const override { return kNever; }
  AckResult on_timer(uint32_t, uint64_t) override { return {}; }
  uint32_t snd_una(uint32_t) const override { return 0; }
  uint32_t snd_nxt(uint32_t) const override { return 0; }
  RxVerdict classify(uint32_t, uint32_t, uint64_t) override { return RxVerdict::drop; }
  AckDecision commit(uint32_t, uint32_t, bool, bool, uint64_t) override { return {}; }
  uint32_t epsn(uint32_t) const override { return 0; }
  void nak_sent(uint32_t) override {}
  RxOutcome on_data(uint32_t, const RxPacket&, uint64_t) override { return {}; }
};

}  // namespace

TransportMux::TransportMux(std::vector<Offered> engines, uint8_t default_kind,
                           uint32_t qpn_index_bits)
    : default_(nullptr),
      unbound_(std::make_unique<NoConnection>()),
      index_mask_(qpn_index_bits >= 32 ? UINT32_MAX : (1u << qpn_index_bits) - 1) {
  for (Offered& o : engines) {
    if (!o.engine) continue;
    for (uint8_t k : o.kinds) {
      if (k == MPR_TRANSPORT_DEFAULT || k >= by_kind_.size() || by_kind_[k])
        throw std::invalid_argument("TransportMux: transport id " + std::to_string(k) +
                                    " is reserved, out of range or offered twice");
      by_kind_[k] = o.engine.get();
    }
    engines_.push_back(std::move(o.engine));
  }
  if (default_kind == MPR_TRANSPORT_DEFAULT || !find(default_kind))
    throw std::invalid_argument("TransportMux: the default engine is not offered");
  default_ = find(default_kind);
  traits_ = default_->traits();
}

size_t TransportMux::state_bytes() const {
  size_t bytes = 0;
  for (const auto& e : engines_) bytes = std::max(bytes, e->state_bytes());
  return bytes;
}

TransportEngine* TransportMux::find(uint8_t kind) const {
  if (kind == MPR_TRANSPORT_DEFAULT) return default_;
  return kind < by_kind_.size() ? by_kind_[kind] : nullptr;
}

TransportEngine& TransportMux::engine(uint8_t kind) const {
  TransportEngine* e = find(kind);
  // The firmware admits only offered kinds into a QP context.
  if (!e)
    throw std::invalid_argument("TransportMux: transport " + std::to_string(kind) +
                                " is not offered");
  return *e;
}

TransportEngine& TransportMux::route(uint32_t qpn) const {
  const Binding* b = slot(qpn);
  return b ? *b->engine : *unbound_;
}

void TransportMux::bind(const ConnParams& params) {
  TransportEngine& e = engine(params.engine);
  const uint32_t i = params.qpn & index_mask_;
  if (i >= bound_.size()) bound_.resize(size_t{i} + 1);
  Binding& b = bound_[i];
  // The entry reused (its earlier QP not closed), by another number or
  // with another engine: the old engine forgets the old number.
  if (b.engine && (b.engine != &e || b.qpn != params.qpn)) b.engine->close(b.qpn);
  b = Binding{params.qpn, &e};
}

void TransportMux::open(const ConnParams& params) {
  bind(params);
  route(params.qpn).open(params);
}

void TransportMux::set_requester(const ConnParams& params) {
  bind(params);
  route(params.qpn).set_requester(params);
}

void TransportMux::close(uint32_t qpn) {
  route(qpn).close(qpn);
  const uint32_t i = qpn & index_mask_;
  if (slot(qpn)) bound_[i] = Binding{};
}

}  // namespace mprdma::nic
