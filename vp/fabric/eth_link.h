// A full-duplex point-to-point Ethernet link between two ports (sides 0 and
// 1), e.g. two NICs cabled back to back.
//
// Each direction is an independent transmitter: a frame occupies it for its
// serialisation time (wire bytes, including preamble, FCS and inter-frame
// gap, at the line rate) and reaches the far port a fixed propagation delay
// after its last bit left. Losses are drawn per frame from a seeded stream,
// or chosen by the IPv4 identification (drop when ip_id % N == 0, the
// MP-RDMA paper's iCAP method). A direction can be taken down and up and its
// rate changed while the simulation runs, at once or at a scheduled time.
// All arrivals and changes go through one Calendar; no per-packet process
// exists.
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
#include "vp/net/eth_port.h"
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
  // Drop IPv4 frames whose identification field is a multiple of this
  // (0: off); frames that are not IPv4 are never dropped by it.
  int64_t loss_ip_id_modulo = 0;
  // Directions `loss` and `loss_ip_id_modulo` apply to.
  enum class LossDir { both, a2b, b2a };
  LossDir loss_dir = LossDir::both;
  // The keys of a back-to-back link (name, rate, delay, loss, pcap,
  // pcap_snaplen).
  void bind(core::Binder& b);
  // The loss-mode keys (loss_ip_id_modulo, loss_dir), bound beside bind()
  // by the scenario's links and the fabric's link defaults.
  void bind_loss_modes(core::Binder& b);
};

// A change to a link while it runs (see EthLink::apply): down and up act
// like pulling and re-plugging the cable of one direction; rate, loss and
// loss_ip_id replace that setting of the direction.
struct LinkChange {
  enum class Kind { kDown, kUp, kRate, kLoss, kLossIpId };
  Kind kind = Kind::kDown;
  int side = -1;              // transmitting side 0 (a2b) or 1 (b2a); -1: both
  core::Bandwidth rate;       // kRate
  double loss = 0.0;          // kLoss
  uint64_t ip_id_modulo = 0;  // kLossIpId (0: off)
};

class EthLink : public sc_core::sc_module, public net::EthMediumIf {
 public:
  static constexpr int kSides = 2;
  // Selects both directions in the run-time controls below.
  static constexpr int kBothSides = -1;

  // Throws std::invalid_argument for a non-positive rate or a loss outside
  // [0, 1], std::runtime_error if the pcap file cannot be created.
  EthLink(sc_core::sc_module_name name, const LinkConfig& cfg, core::SimEnv& env);
  ~EthLink() override;

  // Connects the port at `side` (0 or 1): it receives the frames transmitted
  // from the other side. Re-attaching replaces the port.
  void attach(int side, net::EthPortIf* port) override;

  // True if the transmitter of `side` may start a frame now.
  bool idle(int side) const override;
  // The earliest time (>= now) at which transmit(side, ...) may be called.
  sc_core::sc_time idle_at(int side) const override;

  // Starts serialising `pkt` from `side` now. Requires idle(side) and a port
  // attached on the other side (std::logic_error otherwise). Returns the
  // absolute time the transmitter becomes free: now + wire_bytes()*8/rate,
  // rounded up to a picosecond. Unless lost, the packet reaches the other
  // side's port at that time + delay.
  sc_core::sc_time transmit(int side, net::PacketPtr pkt) override;

  // The configuration the link was built with (run-time changes are not
  // reflected here; use the getters below).
  const LinkConfig& config() const { return cfg_; }
  // Frames sent from `side` that have not reached the far port yet.
  size_t in_flight(int side) const;

  // --- run-time controls; `side` is the transmitting side, kBothSides both.
  // A direction that goes down loses every frame in flight on it (counted
  // in down_drops); while down, its transmitter still serialises at the
  // line rate (senders see no change in pacing) but every frame is lost.
  // Up again: frames transmitted from then on are delivered.
  void set_up(bool up, int side = kBothSides);
  bool is_up(int side) const;
  // The next frame to start uses `rate`; a frame being serialised finishes
  // at the rate it started with. Throws std::invalid_argument if rate <= 0.
  void set_rate(core::Bandwidth rate, int side = kBothSides);
  core::Bandwidth rate(int side) const override;
  // Throws std::invalid_argument for a probability outside [0, 1].
  void set_loss(double probability, int side = kBothSides);
  double loss(int side) const;
  // 0 turns the IP-ID loss off.
  void set_loss_ip_id_modulo(uint64_t n, int side = kBothSides);
  uint64_t loss_ip_id_modulo(int side) const;
  // Applies `change` now, or at the absolute time `when` (>= now). Changes
  // and arrivals due at the same instant run in the order they were
  // scheduled, so a change scheduled at elaboration precedes arrivals.
  void apply(const LinkChange& change);
  void schedule(const sc_core::sc_time& when, const LinkChange& change);

 private:
  struct Direction {
    std::string tag;  // "a2b" / "b2a"
    sc_core::sc_time free_at = sc_core::SC_ZERO_TIME;
    // In arrival order; a null packet was lost in flight (the link went
    // down) and its arrival is skipped.
    std::deque<net::PacketPtr> in_flight;
    bool up = true;
    core::Bandwidth rate;
    double loss_p = 0.0;
    uint64_t ip_id_modulo = 0;
    core::RandomStream* loss = nullptr;
    core::Counter* tx_packets = nullptr;
    core::Counter* tx_bytes = nullptr;
    core::Counter* drops = nullptr;
    core::Counter* down_drops = nullptr;
    core::Counter* ip_id_drops = nullptr;
    core::Counter* busy_ps = nullptr;
  };
  static void check_side(int side);
  // The directions `side` (a side or kBothSides) selects.
  template <class F>
  void for_sides(int side, F&& f);
  void deliver(int side);

  LinkConfig cfg_;
  core::LogChannel& log_;
  core::Calendar arrivals_;
  Direction dir_[kSides];
  net::EthPortIf* ports_[kSides] = {nullptr, nullptr};
  sc_core::sc_time delay_;
  std::unique_ptr<net::PcapWriter> pcap_;
};

}  // namespace mprdma::fabric
