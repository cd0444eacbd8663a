// Another implementation of the MP-RDMA receivers than the golden models
// (MpReceiver): the RTL engine (vp/nic/rtl/), alone or in lockstep with the
// golden models. An MpRdmaEngine given one hands it every receiver event and
// keeps only what the NIC's QP context would: the counters, derived from the
// decisions by MpReceiver::count, as the golden model derives its own.
#pragma once

#include <cstdint>

#include "vp/nic/transport/mp_rdma/mp_rdma_receiver.h"

namespace mprdma::nic {

class MpRxImpl {
 public:
  virtual ~MpRxImpl() = default;
  // QP `qpn`'s receiver starts, expecting `epsn` first (again, if it was
  // open: the QP was reset and brought up).
  virtual void open(uint32_t qpn, uint32_t epsn) = 0;
  virtual void close(uint32_t qpn) = 0;
  // Decides an arriving data packet at NIC cycle `now`.
  virtual MpRxResult on_data(uint32_t qpn, const MpData& d, uint64_t now) = 0;
  virtual uint32_t rcv_nxt(uint32_t qpn) const = 0;
};

}  // namespace mprdma::nic
