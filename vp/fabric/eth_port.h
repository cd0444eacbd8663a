// The receiving end of an Ethernet link: a NIC MAC or a switch port.
#pragma once

#include "vp/net/packet.h"

namespace mprdma::fabric {

class EthPortIf {
 public:
  virtual ~EthPortIf() = default;
  // Called when the last bit of `pkt` arrives (the frame is complete and
  // may be checked). Runs inside the link's calendar process: it must not
  // block, but may call EthLink::transmit().
  virtual void receive(net::PacketPtr pkt) = 0;
};

}  // namespace mprdma::fabric
