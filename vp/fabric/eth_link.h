// A full-duplex point-to-point Ethernet link between two ports (sides 0 and
// 1), e.g. two NICs cabled back to back.
//
// Each direction is an independent transmitter: a frame occupies it for its
// serialisation time (wire bytes, including preamble, FCS and inter-frame
// gap, at the line rate) and reaches the far port a fixed propagation delay
// after its last bit left. Losses are drawn per frame from a seeded stream.
// All arrivals go through one Calendar; no per-packet process exists.
//
// Direction names: "a2b" carries frames sent from side 0 to the port on
// side 1, "b2a" the reverse.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include <systemc>

#include "vp/core/calendar.h"
#include "vp/core/config.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/core/units.h"
#include "vp/fabric/eth_port.h"
#include "vp/net/packet.h"
#include "vp/net/pcap_writer.h"

namespace mprdma::fabric {

struct LinkConfig {
  std::string name = "link";
  core::Bandwidth rate{40e9};
  // Last bit out of the transmitting MAC to last bit into the receiving MAC,
  // excluding serialisation: a few metres of copper (about 5 ns/m) plus the
  // PHY transmit and receive pipelines of both ends. 200 ns is an assumed
  // figure for 40GBASE-CR4 over a 3 m direct-attach cable; set it from
  // measurements when they exist.
  core::Duration delay = core::Duration::from_ns(200);
  double loss = 0.0;  // probability in [0, 1] that a frame is lost
  bool pcap = false;
  core::Bytes pcap_snaplen{128};  // bytes kept per frame; 0 keeps whole frames
  void bind(core::Binder& b);
};

class EthLink : public sc_core::sc_module {
 public:
  static constexpr int kSides = 2;

  // Throws std::invalid_argument for a non-positive rate or a loss outside
  // [0, 1], std::runtime_error if the pcap file cannot be created.
  EthLink(sc_core::sc_module_name name, const LinkConfig& cfg, core::SimEnv& env);
  ~EthLink() override;

  // Connects the port at `side` (0 or 1): it receives the frames transmitted
  // from the other side. Re-attaching replaces the port.
  void attach(int side, EthPortIf* port);

  // True if the transmitter of `side` may start a frame now.
  bool idle(int side) const;
  // The earliest time (>= now) at which transmit(side, ...) may be called.
  sc_core::sc_time idle_at(int side) const;

  // Starts serialising `pkt` from `side` now. Requires idle(side) and a port
  // attached on the other side (std::logic_error otherwise). Returns the
  // absolute time the transmitter becomes free: now + wire_bytes()*8/rate,
  // rounded up to a picosecond. Unless lost, the packet reaches the other
  // side's port at that time + delay.
  sc_core::sc_time transmit(int side, net::PacketPtr pkt);

  const LinkConfig& config() const { return cfg_; }
  // Frames sent from `side` that have not reached the far port yet.
  size_t in_flight(int side) const;

 private:
  struct Direction {
    std::string tag;  // "a2b" / "b2a"
    sc_core::sc_time free_at = sc_core::SC_ZERO_TIME;
    std::deque<net::PacketPtr> in_flight;  // in arrival order
    core::RandomStream* loss = nullptr;
    core::Counter* tx_packets = nullptr;
    core::Counter* tx_bytes = nullptr;
    core::Counter* drops = nullptr;
    core::Counter* busy_ps = nullptr;
  };
  static void check_side(int side);
  void deliver(int side);

  LinkConfig cfg_;
  core::LogChannel& log_;
  core::Calendar arrivals_;
  Direction dir_[kSides];
  EthPortIf* ports_[kSides] = {nullptr, nullptr};
  sc_core::sc_time delay_;
  std::unique_ptr<net::PcapWriter> pcap_;
};

}  // namespace mprdma::fabric
