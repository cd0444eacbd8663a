// A datacenter Ethernet switch: N ports, a shared-buffer MMU with per-port
// and per-priority accounting, eight egress queues per port (strict priority
// or weighted round robin), ECN marking with RED, PFC (802.1Qbb) per ingress
// port and priority with XOFF/XON thresholds and headroom, real PAUSE
// frames, ECMP over the 5-tuple, and a forwarding latency in cycles of the
// switch clock. Store and forward: a packet is forwarded once fully
// received.
//
// The contract used by the fabric builder (vp/fabric/fabric.h) and the
// observability (time series, deadlock detector). See switch.md.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "vp/core/config.h"
#include "vp/core/sim_env.h"
#include "vp/core/units.h"
#include "vp/fabric/eth_link.h"
#include "vp/net/roce_codec.h"

namespace mprdma::fabric {

constexpr int kNumPriorities = 8;

struct EcnConfig {
  bool enabled = true;
  // RED on the egress queue: no mark below kmin, probability rising
  // linearly to pmax at kmax, every packet marked above kmax. kmin == kmax
  // with pmax 1 is the DCTCP-style step.
  core::Bytes kmin{20 * 1024};
  core::Bytes kmax{20 * 1024};
  double pmax = 1.0;
  // The queue length RED reads: the instantaneous one, or an EWMA with
  // weight `weight` updated at each enqueue.
  enum class Queue { instantaneous, average };
  Queue queue = Queue::instantaneous;
  double weight = 0.002;
  void bind(core::Binder& b);
};

struct PfcConfig {
  bool enabled = true;
  // Priorities that are lossless (bit i = priority i); RoCE uses 3.
  int64_t lossless_mask = 1 << 3;
  // Per ingress port and lossless priority: send XOFF when its buffer use
  // reaches xoff, XON when it falls to xon. Headroom absorbs what is in
  // flight after XOFF (cable, MAC, the frame being sent).
  core::Bytes xoff{96 * 1024};
  core::Bytes xon{64 * 1024};
  core::Bytes headroom{64 * 1024};
  // Pause time carried by XOFF frames, in 512-bit-time quanta.
  int64_t quanta = 0xffff;
  void bind(core::Binder& b);
};

struct SwitchConfig {
  core::Frequency clock{1e9};
  int64_t forwarding_cycles = 300;       // ingress parse to egress enqueue
  core::Bytes buffer{12 * 1024 * 1024};  // shared buffer of the chip
  // Lossy egress admission (Broadcom-style dynamic threshold): a queue may
  // grow while its length < alpha * free buffer.
  double dt_alpha = 1.0;
  enum class Scheduler { strict, wrr };  // strict priority, or weighted round robin
  Scheduler scheduler = Scheduler::strict;
  std::vector<core::Bytes> wrr_weights;  // 8 weights (bytes per round), wrr only
  EcnConfig ecn;
  PfcConfig pfc;
  void bind(core::Binder& b);
};

// RED marking probability for an (instantaneous or averaged) queue of
// `queue_bytes`: 0 below kmin, pmax * (q - kmin) / (kmax - kmin) from kmin
// up to kmax, 1 at or above kmax. With kmin == kmax it is a step: 0 below,
// 1 at or above.
double red_mark_probability(const EcnConfig& ecn, double queue_bytes);

// The ECMP hash of a 5-tuple under `seed` (see switch.md): murmur3's 64-bit
// finaliser applied to the seed, then after xoring in each of the two 64-bit
// words (src_ip << 32 | dst_ip) and (proto << 32 | sport << 16 | dport).
// Deterministic and platform independent; a member of a group of n ports is
// group[hash % n].
uint64_t ecmp_hash(uint64_t seed, uint32_t src_ip, uint32_t dst_ip, uint8_t proto, uint16_t sport,
                   uint16_t dport);

class Switch : public sc_core::sc_module {
 public:
  // `ports` ports, each attached to one link side by attach(). Throws
  // std::invalid_argument for an inconsistent configuration (a threshold
  // above the buffer size, xon > xoff, ...), naming the switch and the
  // parameter.
  Switch(sc_core::sc_module_name name, int ports, const SwitchConfig& cfg, core::SimEnv& env);
  ~Switch() override;

  int ports() const;
  // Port `port` transmits on `link` from `side` and receives what the other
  // side sends.
  void attach(int port, EthLink* link, int side);
  // Packets to `dst_ip` leave by one of `ports`, chosen by the ECMP hash of
  // their 5-tuple (a single port: no choice). Replaces an earlier route.
  void set_route(uint32_t dst_ip, std::vector<int> ports);
  // Seed of this switch's ECMP hash (from the scenario seed).
  void set_ecmp_seed(uint64_t seed);
  // The port the ECMP hash picks for this 5-tuple among `group`.
  int ecmp_pick(uint32_t src_ip, uint32_t dst_ip, uint8_t proto, uint16_t sport, uint16_t dport,
                const std::vector<int>& group) const;

  // --- observability ---
  uint64_t queue_bytes(int port, int prio) const;    // egress queue length
  uint64_t ingress_bytes(int port, int prio) const;  // MMU ingress accounting
  uint64_t buffer_used() const;
  bool egress_paused(int port, int prio) const;    // a PAUSE from the peer holds it
  bool ingress_pausing(int port, int prio) const;  // we sent XOFF on this port
  // Bytes in egress queue (port, prio) that arrived on `ingress` (the
  // buffer dependency between an ingress and an egress: deadlock analysis).
  uint64_t queued_from(int port, int prio, int ingress) const;
  const SwitchConfig& config() const;
  // ECN of one egress port: the switch's `ecn` unless set_port_ecn()
  // replaced it (the fabric's ecn_overrides). Throws std::invalid_argument
  // naming the switch, port and parameter for a bad configuration (the
  // checks of the constructor: kmin > kmax, kmax above the buffer, pmax,
  // queue, weight), std::out_of_range for a bad port. The RED average of
  // the port restarts from 0.
  void set_port_ecn(int port, const EcnConfig& ecn);
  const EcnConfig& port_ecn(int port) const;

  // --- additions beyond the fabric contract ---
  // The ECMP seed in use (set_ecmp_seed(), or the default derived from the
  // scenario seed and the switch name).
  uint64_t ecmp_seed() const;
  // The queue length RED compares with kmin/kmax for (port, prio): the
  // instantaneous egress queue, or its EWMA when ecn.queue is "average".
  double red_queue_bytes(int port, int prio) const;
  // Source MAC of the PAUSE frames port `port` sends: locally administered,
  // 02:<3 bytes of the name's hash>:<port, 16 bits>.
  net::MacAddr port_mac(int port) const;
  // Bytes the MMU charges for a frame: the frame as stored, padded to the
  // 60-byte minimum, plus its 4-byte FCS (no preamble, no inter-frame gap).
  static uint64_t charged_bytes(const net::Packet& p);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mprdma::fabric
