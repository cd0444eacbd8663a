#include "vp/nic/transport_mux.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mprdma::nic {

TransportMux::TransportMux(std::unique_ptr<TransportEngine> gbn,
                           std::unique_ptr<TransportEngine> mprdma,
                           std::unique_ptr<TransportEngine> irn, uint8_t default_kind)
    : gbn_(std::move(gbn)), mprdma_(std::move(mprdma)), irn_(std::move(irn)), default_(nullptr) {
  if (!gbn_) throw std::invalid_argument("TransportMux: go-back-N is always offered");
  if (default_kind == MPR_TRANSPORT_DEFAULT || !find(default_kind))
    throw std::invalid_argument("TransportMux: the default engine is not offered");
  default_ = find(default_kind);
}

size_t TransportMux::state_bytes() const {
  size_t bytes = 0;
  for (const TransportEngine* e : {gbn_.get(), mprdma_.get(), irn_.get()})
    if (e) bytes = std::max(bytes, e->state_bytes());
  return bytes;
}

TransportEngine* TransportMux::find(uint8_t kind) const {
  switch (kind) {
    case MPR_TRANSPORT_DEFAULT:
      return default_;
    case MPR_TRANSPORT_GBN:
    case MPR_TRANSPORT_DCQCN:
      return gbn_.get();
    case MPR_TRANSPORT_MP_RDMA:
      return mprdma_.get();
    case MPR_TRANSPORT_IRN:
      return irn_.get();
    default:
      return nullptr;
  }
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
  return qpn < bound_.size() && bound_[qpn] ? *bound_[qpn] : *default_;
}

void TransportMux::bind(const ConnParams& params) {
  TransportEngine& e = engine(params.engine);
  if (params.qpn >= bound_.size()) bound_.resize(size_t{params.qpn} + 1, nullptr);
  TransportEngine*& slot = bound_[params.qpn];
  // A QP number reused with another engine (its earlier life not closed):
  // the old engine forgets it.
  if (slot && slot != &e) slot->close(params.qpn);
  slot = &e;
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
  if (qpn < bound_.size()) bound_[qpn] = nullptr;
}

}  // namespace mprdma::nic
