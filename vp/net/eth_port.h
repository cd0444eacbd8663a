// The seam between an Ethernet port and the medium it is plugged into, so
// that a NIC's MAC (vp/nic) and a switch port (vp/fabric) meet a link
// without either block knowing the other: the fabric's EthLink implements
// EthMediumIf, ports implement EthPortIf.
#pragma once

#include <systemc>

#include "vp/core/units.h"
#include "vp/net/packet.h"

namespace mprdma::net {

// The receiving end of an Ethernet link: a NIC MAC or a switch port.
class EthPortIf {
 public:
  virtual ~EthPortIf() = default;
  // Called when the last bit of `pkt` arrives (the frame is complete and
  // may be checked). Runs inside the link's calendar process: it must not
  // block, but may call EthMediumIf::transmit().
  virtual void receive(PacketPtr pkt) = 0;
};

// A full-duplex point-to-point medium with two sides (0 and 1), as a port
// plugged into one side sees it.
class EthMediumIf {
 public:
  virtual ~EthMediumIf() = default;
  // Connects the port at `side`: it receives what the other side transmits.
  virtual void attach(int side, EthPortIf* port) = 0;
  // True if the transmitter of `side` may start a frame now.
  virtual bool idle(int side) const = 0;
  // The earliest time (>= now) at which transmit(side, ...) may be called.
  virtual sc_core::sc_time idle_at(int side) const = 0;
  // Starts serialising `pkt` from `side` now (requires idle(side)); returns
  // the absolute time the transmitter becomes free.
  virtual sc_core::sc_time transmit(int side, PacketPtr pkt) = 0;
  // The line rate of the direction `side` transmits on.
  virtual core::Bandwidth rate(int side) const = 0;
};

}  // namespace mprdma::net
