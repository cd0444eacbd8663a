#include "vp/fabric/switch.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "vp/core/calendar.h"
#include "vp/core/clock_domain.h"
#include "vp/core/log.h"
#include "vp/net/eth_port.h"
#include "vp/net/pfc.h"

namespace mprdma::fabric {

// ---------------------------------------------------------------- config

void EcnConfig::bind(core::Binder& b) {
  b.field("enabled", enabled,
          "Mark ECN-capable packets (ECT(0)/ECT(1)) Congestion Experienced with RED on the "
          "egress queue they join; packets that are not ECN-capable are never marked.");
  b.field("kmin", kmin,
          "Queue length (frame bytes incl. FCS, per egress port and priority) below which no "
          "packet is marked.");
  b.field("kmax", kmax,
          "Queue length at and above which every ECN-capable packet is marked; kmin == kmax "
          "with pmax 1 is the DCTCP step. Must not exceed the switch buffer.");
  b.field("pmax", pmax, "Marking probability reached at kmax (linear from 0 at kmin).", 0.0, 1.0,
          "probability");
  b.choice("queue", queue, {{"instantaneous", Queue::instantaneous}, {"average", Queue::average}},
           "Queue length RED uses: the instantaneous length a packet finds, or an EWMA of it "
           "updated at each enqueue.");
  b.field("weight", weight,
          "EWMA weight of the newest sample when queue is average: avg = (1 - weight) * avg + "
          "weight * q.",
          0.0, 1.0);
  if (b.reading() && kmin.n > kmax.n) b.error("kmin must not exceed kmax");
  if (b.reading() && queue == Queue::average && !(weight > 0.0))
    b.error("weight must be positive when queue is average");
}

void PfcConfig::bind(core::Binder& b) {
  b.field("enabled", enabled,
          "Run PFC (802.1Qbb) on the lossless priorities; false makes every priority lossy.");
  b.field("lossless_mask", lossless_mask,
          "Lossless priorities, bit i = priority i (priority = DSCP >> 3); RoCE commonly uses "
          "priority 3 (mask 8).",
          0, 255, "bitmask");
  b.field("xoff", xoff,
          "Per ingress port and lossless priority: buffer use (frame bytes incl. FCS) at which "
          "XOFF is sent to the upstream port.");
  b.field("xon", xon, "Buffer use at or below which XON is sent again; at most xoff.");
  b.field("headroom", headroom,
          "Bytes above xoff accepted after XOFF (in flight on the cable and in the upstream "
          "MAC) before a lossless frame is dropped; xoff + headroom must fit in the buffer.");
  b.field("quanta", quanta,
          "Pause time carried by XOFF frames, in quanta of 512 bit times at the port's rate "
          "(65535 at 40 Gbps = 839 us); XOFF is refreshed at half that time while still above "
          "xon.",
          1, 65535, "quanta");
  if (b.reading() && xon.n > xoff.n) b.error("xon must not exceed xoff");
}

void SwitchConfig::bind(core::Binder& b) {
  b.field("clock", clock, "Switch core clock; the forwarding latency is counted in its cycles.");
  b.field("forwarding_cycles", forwarding_cycles,
          "Cycles from the last bit of a frame received to the frame being eligible on its "
          "egress queue (parse, lookup, MMU).",
          0, 100000000, "cycles");
  b.field("buffer", buffer, "Shared packet buffer of the chip (frame bytes incl. FCS).", 1);
  b.field("dt_alpha", dt_alpha,
          "Dynamic threshold of lossy queues: a frame joins an egress queue only while the queue "
          "is shorter than dt_alpha times the free buffer. Must be positive.",
          0.0, 1024.0);
  b.choice("scheduler", scheduler, {{"strict", Scheduler::strict}, {"wrr", Scheduler::wrr}},
           "Egress scheduling among the eight priorities: strict (7 highest) or wrr (deficit "
           "round robin with byte weights).");
  b.field("wrr_weights", wrr_weights,
          "wrr only: eight weights, priority 0 first, in bytes credited per round; each should "
          "be at least one MTU to keep rounds short.",
          1, uint64_t{1} << 30);
  b.section("ecn", ecn, "ECN marking with RED on each egress queue.");
  b.section("pfc", pfc, "Priority flow control (802.1Qbb) per ingress port and priority.");
  if (b.reading() && scheduler == Scheduler::wrr && wrr_weights.size() != kNumPriorities)
    b.error("wrr_weights must list 8 weights when scheduler is wrr");
}

// ------------------------------------------------------------ free helpers

double red_mark_probability(const EcnConfig& ecn, double q) {
  const double kmin = static_cast<double>(ecn.kmin.n);
  const double kmax = static_cast<double>(ecn.kmax.n);
  if (q >= kmax) return 1.0;
  if (q < kmin) return 0.0;
  // kmin <= q < kmax implies kmax > kmin: no division by zero.
  return ecn.pmax * (q - kmin) / (kmax - kmin);
}

namespace {

// murmur3's fmix64: a bijective avalanche mixer (every input bit flips each
// output bit with probability close to 1/2).
uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

uint64_t ecmp_hash(uint64_t seed, uint32_t src_ip, uint32_t dst_ip, uint8_t proto, uint16_t sport,
                   uint16_t dport) {
  const uint64_t a = uint64_t{src_ip} << 32 | dst_ip;
  const uint64_t b = uint64_t{proto} << 32 | uint64_t{sport} << 16 | dport;
  // The golden-ratio constant keeps seed 0 from mixing to 0.
  uint64_t h = fmix64(seed ^ 0x9e3779b97f4a7c15ULL);
  h = fmix64(h ^ a);
  h = fmix64(h ^ b);
  return h;
}

uint64_t Switch::charged_bytes(const net::Packet& p) {
  return std::max(p.data.size(), net::kEthMinFrameBytes) + net::kEthFcsBytes;
}

// -------------------------------------------------------------- the switch

namespace {

std::string bytes_text(const core::Bytes& b) { return std::to_string(b.n) + " B"; }

// The ECN checks of the constructor and of set_port_ecn(); `fail` throws.
template <class Fail>
void validate_ecn(const EcnConfig& e, const core::Bytes& buffer, Fail&& fail) {
  if (!e.enabled) return;
  if (!(e.pmax >= 0.0 && e.pmax <= 1.0)) fail("ecn.pmax must be in [0, 1]");
  if (e.kmin.n > e.kmax.n)
    fail("ecn.kmin (" + bytes_text(e.kmin) + ") exceeds ecn.kmax (" + bytes_text(e.kmax) + ")");
  if (e.kmax.n > buffer.n)
    fail("ecn.kmax (" + bytes_text(e.kmax) + ") exceeds the buffer (" + bytes_text(buffer) + ")");
  if (e.queue == EcnConfig::Queue::average && !(e.weight > 0.0 && e.weight <= 1.0))
    fail("ecn.weight must be in (0, 1]");
}

// Checked before any member module exists, so a bad configuration leaves no
// half-built hierarchy behind.
void validate(const std::string& name, int ports, const SwitchConfig& c) {
  auto fail = [&](const std::string& msg) {
    throw std::invalid_argument("switch " + name + ": " + msg);
  };
  if (ports < 1) fail("ports must be at least 1 (got " + std::to_string(ports) + ")");
  if (!(c.clock.hz > 0)) fail("clock must be positive");
  if (c.forwarding_cycles < 0) fail("forwarding_cycles must not be negative");
  if (c.buffer.n == 0) fail("buffer must be positive");
  if (!(c.dt_alpha > 0)) fail("dt_alpha must be positive");
  if (c.scheduler == SwitchConfig::Scheduler::wrr) {
    if (c.wrr_weights.size() != kNumPriorities)
      fail("wrr_weights must list 8 weights (got " + std::to_string(c.wrr_weights.size()) + ")");
    for (const core::Bytes& w : c.wrr_weights)
      if (w.n == 0) fail("wrr_weights must all be positive");
  }
  validate_ecn(c.ecn, c.buffer, fail);
  const PfcConfig& p = c.pfc;
  if (p.enabled) {
    if (p.lossless_mask < 0 || p.lossless_mask > 255) fail("pfc.lossless_mask must be in [0, 255]");
    if (p.xon.n > p.xoff.n)
      fail("pfc.xon (" + bytes_text(p.xon) + ") exceeds pfc.xoff (" + bytes_text(p.xoff) + ")");
    if (p.xoff.n + p.headroom.n > c.buffer.n)
      fail("pfc.xoff + pfc.headroom (" + std::to_string(p.xoff.n + p.headroom.n) +
           " B) exceeds the buffer (" + bytes_text(c.buffer) + ")");
    if (p.quanta < 1 || p.quanta > 0xffff) fail("pfc.quanta must be in [1, 65535]");
  }
}

}  // namespace

struct Switch::Impl {
  // What a port receives goes to the switch with the port's index.
  struct PortAdapter : net::EthPortIf {
    Impl* sw = nullptr;
    int index = 0;
    void receive(net::PacketPtr pkt) override { sw->receive(index, std::move(pkt)); }
  };

  struct Queued {
    net::PacketPtr pkt;
    sc_core::sc_time ready;  // end of the forwarding pipeline
    int in_port;
    uint64_t charge;
  };

  struct Port {
    PortAdapter adapter;
    EthLink* link = nullptr;
    int side = 0;
    std::array<std::deque<Queued>, kNumPriorities> queues;
    std::array<uint64_t, kNumPriorities> egress{};   // bytes queued (MMU egress)
    std::array<uint64_t, kNumPriorities> ingress{};  // bytes received, not yet sent on
    std::array<double, kNumPriorities> red_avg{};
    // RED of this egress port: the switch's ecn, or a per-port override.
    EcnConfig ecn;
    bool ecn_average = false;  // ecn.queue is average
    uint64_t egress_total = 0;
    // Egress side of PFC: the peer's PAUSE holds priority p until then.
    std::array<sc_core::sc_time, kNumPriorities> paused_until{};
    // Ingress side of PFC: we told the peer to stop priority p.
    std::array<bool, kNumPriorities> pausing{};
    std::array<uint64_t, kNumPriorities> refresh_gen{};
    // PFC classes waiting for the transmitter, coalesced into one frame:
    // the latest decision per priority wins (an XOFF followed by an XON
    // before either left is just an XON).
    uint16_t ctrl_mask = 0;
    std::array<uint16_t, net::kPfcClasses> ctrl_quanta{};
    // Transmit scheduling: one pending wake-up per port; a newer, earlier
    // one supersedes it through the generation.
    bool wake_pending = false;
    sc_core::sc_time wake_at;
    uint64_t wake_gen = 0;
    // Deficit round robin state (wrr).
    std::array<int64_t, kNumPriorities> deficit{};
    int rr_cur = 0;
    bool rr_credited = false;
    // Statistics.
    core::Counter* tx_packets = nullptr;
    core::Counter* tx_bytes = nullptr;
    core::Counter* tx_data_bytes = nullptr;
    core::Counter* rx_packets = nullptr;
    core::Counter* rx_bytes = nullptr;
    core::Counter* drops = nullptr;
    core::Counter* ecn_marks = nullptr;
    core::Counter* ecn_capable = nullptr;
    core::Counter* pause_tx = nullptr;
    core::Counter* pause_rx = nullptr;
    core::Counter* queue_max = nullptr;
  };

  Impl(Switch& owner, int nports, const SwitchConfig& c, core::SimEnv& e)
      : self(owner),
        name(owner.basename()),
        cfg(c),
        wrr(c.scheduler == SwitchConfig::Scheduler::wrr),
        env(e),
        clock(c.clock.period_ps()),
        log(core::Log::channel("switch." + name)),
        calendar("calendar"),
        ports(static_cast<size_t>(nports)),
        red(e.random.stream("switch." + name + ".red")),
        seed(fmix64(e.random.seed() ^ core::fnv1a64("switch." + name))),
        name_hash(core::fnv1a64(name)) {
    const std::string base = "switch." + name + ".";
    for (int i = 0; i < nports; ++i) {
      Port& p = ports[static_cast<size_t>(i)];
      p.adapter.sw = this;
      p.adapter.index = i;
      p.ecn = c.ecn;
      p.ecn_average = c.ecn.queue == EcnConfig::Queue::average;
      const std::string pb = base + "port" + std::to_string(i) + ".";
      auto& st = env.stats;
      p.tx_packets =
          &st.counter(pb + "tx_packets", "packets", "frames transmitted, PAUSE frames included");
      p.tx_bytes = &st.counter(pb + "tx_bytes", "bytes",
                               "frame bytes transmitted incl. FCS (no preamble, no IFG)");
      p.tx_data_bytes =
          &st.counter(pb + "tx_data_bytes", "bytes",
                      "bytes of data frames transmitted (tx_bytes less PAUSE frames)");
      p.rx_packets = &st.counter(pb + "rx_packets", "packets",
                                 "frames received, PAUSE and dropped frames included");
      p.rx_bytes = &st.counter(pb + "rx_bytes", "bytes", "frame bytes received incl. FCS");
      p.drops = &st.counter(pb + "drops", "packets",
                            "frames dropped by the MMU on their way to this egress port");
      p.ecn_marks =
          &st.counter(pb + "ecn_marks", "packets", "frames marked CE by RED on this egress port");
      p.ecn_capable = &st.counter(
          pb + "ecn_capable", "packets",
          "ECN-capable frames (ECT, not yet CE) RED judged on this egress port, marked or not "
          "(0 with ECN off); ecn_marks / ecn_capable is the port's marking ratio");
      p.pause_tx = &st.counter(pb + "pause_tx", "frames", "PFC frames sent (XOFF and XON)");
      p.pause_rx = &st.counter(pb + "pause_rx", "frames", "PFC frames received");
      p.queue_max = &st.counter(pb + "queue_max_bytes", "bytes",
                                "largest egress queue of the port, all priorities together");
    }
    buffer_max =
        &env.stats.counter(base + "buffer_max_bytes", "bytes", "largest shared-buffer use seen");
    no_route = &env.stats.counter(base + "no_route_drops", "packets",
                                  "IPv4 frames dropped for want of a route to their destination");
    non_ipv4 = &env.stats.counter(base + "non_ipv4_drops", "packets",
                                  "frames dropped because they are not IPv4 (or are MAC Control "
                                  "frames other than PFC)");
    ttl_drops = &env.stats.counter(base + "ttl_drops", "packets",
                                   "IPv4 frames dropped because their TTL expired");
    headroom_drops = &env.stats.counter(
        base + "pfc_headroom_drops", "packets",
        "lossless frames dropped because the headroom (or the buffer) was exhausted; non-zero "
        "means the PFC thresholds do not cover the round trip");
  }

  Port& port(int i) { return ports[static_cast<size_t>(i)]; }
  const Port& port(int i) const { return ports[static_cast<size_t>(i)]; }
  void check_port(int i, const char* what) const {
    if (i < 0 || i >= static_cast<int>(ports.size()))
      throw std::out_of_range("switch " + name + ": " + what + ": port " + std::to_string(i) +
                              " does not exist (" + std::to_string(ports.size()) + " ports)");
  }
  static void check_prio(int p) {
    if (p < 0 || p >= kNumPriorities)
      throw std::out_of_range("switch: priority " + std::to_string(p) + " is not in 0..7");
  }
  bool lossless(int prio) const { return cfg.pfc.enabled && ((cfg.pfc.lossless_mask >> prio) & 1); }
  // Pause quanta are bit times at the current rate of the paused
  // transmitter: ours for a PAUSE we receive, the peer's for one we send.
  static core::Bandwidth tx_rate(const Port& p) { return p.link->rate(p.side); }
  static core::Bandwidth peer_rate(const Port& p) { return p.link->rate(1 - p.side); }
  sc_core::sc_time now() const { return sc_core::sc_time_stamp(); }

  // ---------------------------------------------------------------- receive

  void receive(int in, net::PacketPtr pkt) {
    Port& ip = port(in);
    ip.rx_packets->add();
    ip.rx_bytes->add(charged_bytes(*pkt));
    if (net::is_mac_control(*pkt)) {
      on_control(in, *pkt);
      return;
    }
    const std::vector<uint8_t>& d = pkt->data;
    const size_t ihl = d.size() > net::kIpOffset ? size_t{d[net::kIpOffset] & 0x0Fu} * 4 : 0;
    if (d.size() < net::kIpOffset + net::kIpv4HeaderBytes ||
        (d[12] << 8 | d[13]) != net::kEtherTypeIpv4 || (d[net::kIpOffset] >> 4) != 4 ||
        ihl < net::kIpv4HeaderBytes || d.size() < net::kIpOffset + ihl) {
      non_ipv4->add();
      MPR_LOG(log, debug, "port " << in << ": dropped non-IPv4 frame " << pkt->id);
      return;
    }
    const uint8_t* iph = d.data() + net::kIpOffset;
    const uint8_t dscp = iph[1] >> 2;
    const uint8_t ttl = iph[8];
    const uint8_t proto = iph[9];
    const uint32_t src = get32(iph + 12), dst = get32(iph + 16);
    uint16_t sport = 0, dport = 0;
    const bool first_fragment = (get16(iph + 6) & 0x1FFF) == 0;
    if ((proto == 17 || proto == 6) && first_fragment && d.size() >= net::kIpOffset + ihl + 4) {
      sport = get16(iph + ihl);
      dport = get16(iph + ihl + 2);
    }
    const int prio = dscp >> 3;
    pkt->priority = static_cast<uint8_t>(prio);

    auto route = routes.find(dst);
    if (route == routes.end()) {
      no_route->add();
      MPR_LOG(log, debug,
              "port " << in << ": no route to " << ip_text(dst) << ", dropped " << pkt->id);
      return;
    }
    if (ttl <= 1) {
      ttl_drops->add();
      MPR_LOG(log, debug, "port " << in << ": TTL expired, dropped " << pkt->id);
      return;
    }
    const int out = route->second.size() == 1 ? route->second.front()
                                              : pick(src, dst, proto, sport, dport, route->second);
    Port& op = port(out);
    if (!op.link) {
      op.drops->add();
      MPR_LOG(log, warn, "port " << out << " has no link; dropped " << pkt->id);
      return;
    }
    // A router decrements the TTL (and so breaks a forwarding loop); the
    // ICRC masks TTL and checksum, so only the IP checksum is redone.
    uint8_t* w = pkt->data.data() + net::kIpOffset;
    w[8] = static_cast<uint8_t>(ttl - 1);
    w[10] = w[11] = 0;
    const uint16_t sum = net::ipv4_checksum(w, ihl);
    w[10] = static_cast<uint8_t>(sum >> 8);
    w[11] = static_cast<uint8_t>(sum);

    const uint64_t charge = charged_bytes(*pkt);
    if (!admit(in, out, prio, charge, pkt->id)) return;
    mark_ecn(out, prio, *pkt);

    // Charge the MMU now: the frame occupies the buffer from its arrival,
    // so PFC reacts without waiting for the forwarding pipeline.
    ip.ingress[static_cast<size_t>(prio)] += charge;
    op.egress[static_cast<size_t>(prio)] += charge;
    op.egress_total += charge;
    used += charge;
    if (op.egress_total > op.queue_max->value()) op.queue_max->set(op.egress_total);
    if (used > buffer_max->value()) buffer_max->set(used);
    if (lossless(prio) && !ip.pausing[static_cast<size_t>(prio)] &&
        ip.ingress[static_cast<size_t>(prio)] >= cfg.pfc.xoff.n)
      start_pause(in, prio);

    const sc_core::sc_time ready = clock.after_cycles(static_cast<uint64_t>(cfg.forwarding_cycles));
    MPR_LOG(log, trace,
            "port " << in << " -> " << out << " prio " << prio << " packet " << pkt->id
                    << " ready at " << ready);
    op.queues[static_cast<size_t>(prio)].push_back(Queued{std::move(pkt), ready, in, charge});
    wake(out, ready);
  }

  int pick(uint32_t src, uint32_t dst, uint8_t proto, uint16_t sport, uint16_t dport,
           const std::vector<int>& group) const {
    const uint64_t h = ecmp_hash(seed, src, dst, proto, sport, dport);
    return group[h % group.size()];
  }

  // MMU admission of a frame of `charge` bytes from `in` to (out, prio).
  bool admit(int in, int out, int prio, uint64_t charge, uint64_t id) {
    Port& ip = port(in);
    Port& op = port(out);
    const size_t p = static_cast<size_t>(prio);
    if (lossless(prio)) {
      const uint64_t limit = cfg.pfc.xoff.n + cfg.pfc.headroom.n;
      if (ip.ingress[p] + charge > limit || used + charge > cfg.buffer.n) {
        op.drops->add();
        headroom_drops->add();
        MPR_LOG(log, warn,
                "port " << in << " prio " << prio << ": lossless frame " << id
                        << " dropped, headroom exhausted (ingress " << ip.ingress[p]
                        << " B, buffer " << used << " B)");
        return false;
      }
      return true;
    }
    const double free_bytes = static_cast<double>(cfg.buffer.n - used);
    if (used + charge > cfg.buffer.n ||
        !(static_cast<double>(op.egress[p]) < cfg.dt_alpha * free_bytes)) {
      op.drops->add();
      MPR_LOG(log, debug,
              "port " << out << " prio " << prio << ": dropped " << id << " (queue " << op.egress[p]
                      << " B, buffer " << used << " B)");
      return false;
    }
    return true;
  }

  void mark_ecn(int out, int prio, net::Packet& pkt) {
    Port& op = port(out);
    if (!op.ecn.enabled) return;
    const size_t p = static_cast<size_t>(prio);
    double q = static_cast<double>(op.egress[p]);
    if (op.ecn_average) {
      op.red_avg[p] = (1.0 - op.ecn.weight) * op.red_avg[p] + op.ecn.weight * q;
      q = op.red_avg[p];
    }
    const uint8_t ecn = pkt.data[net::kIpOffset + 1] & 0x3;
    if (ecn != 1 && ecn != 2) return;  // not ECN-capable, or already CE
    op.ecn_capable->add();
    const double prob = red_mark_probability(op.ecn, q);
    // Draw only in the linear region, so the stream advances once per
    // decision that is really random.
    if (prob >= 1.0 || (prob > 0.0 && red.uniform() < prob)) {
      net::set_ecn_ce(pkt);
      op.ecn_marks->add();
    }
  }

  // ------------------------------------------------------------------ PFC

  void on_control(int in, const net::Packet& pkt) {
    const auto f = net::parse_pfc(pkt);
    if (!f) {
      non_ipv4->add();
      MPR_LOG(log, info, "port " << in << ": MAC Control frame that is not PFC, dropped");
      return;
    }
    Port& ip = port(in);
    ip.pause_rx->add();
    if (!ip.link) return;
    const core::Bandwidth rate = tx_rate(ip);
    for (int p = 0; p < kNumPriorities; ++p) {
      if (!((f->class_mask >> p) & 1)) continue;
      ip.paused_until[static_cast<size_t>(p)] =
          now() +
          sc_core::sc_time::from_value(net::pause_ps(f->quanta[static_cast<size_t>(p)], rate));
      MPR_LOG(log, debug,
              "port " << in << " prio " << p
                      << (f->quanta[static_cast<size_t>(p)] ? " paused until " : " resumed at ")
                      << ip.paused_until[static_cast<size_t>(p)]);
    }
    // A resume may let a queue go now; a pause is re-examined by the next
    // transmit decision.
    wake(in, now());
  }

  void start_pause(int in, int prio) {
    Port& ip = port(in);
    ip.pausing[static_cast<size_t>(prio)] = true;
    MPR_LOG(log, debug,
            "port " << in << " prio " << prio << ": XOFF at "
                    << ip.ingress[static_cast<size_t>(prio)] << " B");
    send_xoff(in, prio);
  }

  void send_xoff(int in, int prio) {
    Port& ip = port(in);
    const size_t p = static_cast<size_t>(prio);
    queue_control(in, prio, static_cast<uint16_t>(cfg.pfc.quanta));
    // Refresh at half the pause time: the refresh may wait behind a data
    // frame and travel the cable, and the peer must not resume meanwhile.
    const uint64_t half = std::max<uint64_t>(
        1, net::pause_ps(static_cast<uint16_t>(cfg.pfc.quanta), peer_rate(ip)) / 2);
    const uint64_t gen = ++ip.refresh_gen[p];
    calendar.at(now() + sc_core::sc_time::from_value(half), [this, in, prio, gen] {
      Port& q = port(in);
      const size_t pp = static_cast<size_t>(prio);
      if (q.pausing[pp] && q.refresh_gen[pp] == gen) {
        MPR_LOG(log, debug, "port " << in << " prio " << prio << ": XOFF refresh");
        send_xoff(in, prio);
      }
    });
  }

  void maybe_resume(int in, int prio) {
    Port& ip = port(in);
    const size_t p = static_cast<size_t>(prio);
    if (!ip.pausing[p] || ip.ingress[p] > cfg.pfc.xon.n) return;
    ip.pausing[p] = false;
    ++ip.refresh_gen[p];  // cancels the pending refresh
    MPR_LOG(log, debug, "port " << in << " prio " << prio << ": XON at " << ip.ingress[p] << " B");
    queue_control(in, prio, 0);
  }

  void queue_control(int port_index, int prio, uint16_t quanta) {
    Port& p = port(port_index);
    if (!p.link) return;
    p.ctrl_mask = static_cast<uint16_t>(p.ctrl_mask | (1u << prio));
    p.ctrl_quanta[static_cast<size_t>(prio)] = quanta;
    wake(port_index, now());
  }

  // ------------------------------------------------------------- transmit

  // Makes sure the port's transmitter looks for work at `when` (or earlier).
  void wake(int index, const sc_core::sc_time& when) {
    Port& p = port(index);
    if (p.wake_pending && p.wake_at <= when) return;
    p.wake_pending = true;
    p.wake_at = when;
    const uint64_t gen = ++p.wake_gen;
    calendar.at(when, [this, index, gen] {
      Port& q = port(index);
      if (q.wake_gen != gen) return;  // superseded by an earlier wake-up
      q.wake_pending = false;
      transmit_next(index);
    });
  }

  bool eligible(const Port& p, size_t prio, const sc_core::sc_time& t) const {
    return !p.queues[prio].empty() && p.queues[prio].front().ready <= t &&
           p.paused_until[prio] <= t;
  }

  int pick_strict(const Port& p, const sc_core::sc_time& t) const {
    for (int prio = kNumPriorities - 1; prio >= 0; --prio)
      if (eligible(p, static_cast<size_t>(prio), t)) return prio;
    return -1;
  }

  // Deficit round robin (Shreedhar and Varghese): each visit credits the
  // priority its weight; it sends while its deficit covers the head frame.
  // A paused or not-yet-ready priority is skipped and keeps its deficit; an
  // empty one forfeits it.
  int pick_drr(Port& p, const sc_core::sc_time& t) {
    bool any = false;
    for (size_t i = 0; i < kNumPriorities; ++i) any = any || eligible(p, i, t);
    if (!any) return -1;
    for (;;) {  // terminates: every full round credits each eligible queue
      const size_t c = static_cast<size_t>(p.rr_cur);
      if (eligible(p, c, t)) {
        if (!p.rr_credited) {
          p.deficit[c] += static_cast<int64_t>(cfg.wrr_weights[c].n);
          p.rr_credited = true;
        }
        if (p.deficit[c] >= static_cast<int64_t>(p.queues[c].front().charge))
          return static_cast<int>(c);
      } else if (p.queues[c].empty()) {
        p.deficit[c] = 0;
      }
      p.rr_cur = (p.rr_cur + 1) % kNumPriorities;
      p.rr_credited = false;
    }
  }

  void transmit_next(int index) {
    Port& p = port(index);
    if (!p.link) return;
    const sc_core::sc_time t = now();
    if (!p.link->idle(p.side)) {
      wake(index, p.link->idle_at(p.side));
      return;
    }
    // Control frames first: a PAUSE must not wait behind a queue of data.
    if (p.ctrl_mask) {
      std::array<uint16_t, net::kPfcClasses> q{};
      for (int i = 0; i < net::kPfcClasses; ++i)
        if ((p.ctrl_mask >> i) & 1)
          q[static_cast<size_t>(i)] = p.ctrl_quanta[static_cast<size_t>(i)];
      net::PacketPtr pause = net::build_pfc(self.port_mac(index), p.ctrl_mask, q);
      pause->id = ++control_ids | (uint64_t{1} << 63);
      pause->birth_ps = t.value();
      p.ctrl_mask = 0;
      p.pause_tx->add();
      send(index, std::move(pause));
      return;
    }
    const int prio = wrr ? pick_drr(p, t) : pick_strict(p, t);
    if (prio < 0) {
      // Nothing can go now: wake when the first head becomes ready or its
      // pause expires (an XON or a new arrival wakes us earlier).
      sc_core::sc_time next = sc_core::SC_ZERO_TIME;
      bool found = false;
      for (size_t i = 0; i < kNumPriorities; ++i) {
        if (p.queues[i].empty()) continue;
        const sc_core::sc_time at = std::max(p.queues[i].front().ready, p.paused_until[i]);
        if (!found || at < next) next = at;
        found = true;
      }
      if (found) wake(index, next);
      return;
    }
    const size_t pr = static_cast<size_t>(prio);
    Queued e = std::move(p.queues[pr].front());
    p.queues[pr].pop_front();
    if (wrr) {
      p.deficit[pr] -= static_cast<int64_t>(e.charge);
      if (p.queues[pr].empty()) p.deficit[pr] = 0;
    }
    // The frame leaves the buffer as it starts to leave the chip.
    p.egress[pr] -= e.charge;
    p.egress_total -= e.charge;
    used -= e.charge;
    Port& ip = port(e.in_port);
    ip.ingress[pr] -= e.charge;
    if (lossless(prio)) maybe_resume(e.in_port, prio);
    send(index, std::move(e.pkt));
  }

  void send(int index, net::PacketPtr pkt) {
    Port& p = port(index);
    p.tx_packets->add();
    p.tx_bytes->add(charged_bytes(*pkt));
    if (!(pkt->id >> 63)) p.tx_data_bytes->add(charged_bytes(*pkt));
    const sc_core::sc_time free_at = p.link->transmit(p.side, std::move(pkt));
    wake(index, free_at);
  }

  static uint16_t get16(const uint8_t* b) { return static_cast<uint16_t>(b[0] << 8 | b[1]); }
  static uint32_t get32(const uint8_t* b) { return uint32_t{get16(b)} << 16 | get16(b + 2); }
  static std::string ip_text(uint32_t ip) { return net::ipv4_text(ip); }

  Switch& self;
  const std::string name;
  const SwitchConfig cfg;
  const bool wrr;  // scheduler wrr, decided once
  core::SimEnv& env;
  core::ClockDomain clock;
  core::LogChannel& log;
  core::Calendar calendar;
  std::vector<Port> ports;
  std::unordered_map<uint32_t, std::vector<int>> routes;
  core::RandomStream& red;
  uint64_t seed;
  const uint64_t name_hash;
  uint64_t used = 0;  // shared buffer in use
  uint64_t control_ids = 0;
  core::Counter* buffer_max = nullptr;
  core::Counter* no_route = nullptr;
  core::Counter* non_ipv4 = nullptr;
  core::Counter* ttl_drops = nullptr;
  core::Counter* headroom_drops = nullptr;
};

Switch::Switch(sc_core::sc_module_name name, int ports, const SwitchConfig& cfg, core::SimEnv& env)
    : sc_core::sc_module(name) {
  validate(basename(), ports, cfg);
  impl_ = std::make_unique<Impl>(*this, ports, cfg, env);
}

Switch::~Switch() = default;

int Switch::ports() const { return static_cast<int>(impl_->ports.size()); }

void Switch::attach(int port, EthLink* link, int side) {
  impl_->check_port(port, "attach");
  if (!link) throw std::invalid_argument("switch " + impl_->name + ": attach of a null link");
  if (side < 0 || side >= EthLink::kSides)
    throw std::out_of_range("switch " + impl_->name + ": link side " + std::to_string(side) +
                            " is not 0 or 1");
  Impl::Port& p = impl_->port(port);
  p.link = link;
  p.side = side;
  link->attach(side, &p.adapter);
}

void Switch::set_route(uint32_t dst_ip, std::vector<int> ports) {
  for (int p : ports) impl_->check_port(p, "set_route");
  if (ports.empty()) {
    impl_->routes.erase(dst_ip);
  } else {
    impl_->routes[dst_ip] = std::move(ports);
  }
}

void Switch::set_ecmp_seed(uint64_t seed) { impl_->seed = seed; }
uint64_t Switch::ecmp_seed() const { return impl_->seed; }

int Switch::ecmp_pick(uint32_t src_ip, uint32_t dst_ip, uint8_t proto, uint16_t sport,
                      uint16_t dport, const std::vector<int>& group) const {
  if (group.empty())
    throw std::invalid_argument("switch " + impl_->name + ": ecmp_pick over an empty group");
  return impl_->pick(src_ip, dst_ip, proto, sport, dport, group);
}

uint64_t Switch::queue_bytes(int port, int prio) const {
  impl_->check_port(port, "queue_bytes");
  Impl::check_prio(prio);
  return impl_->port(port).egress[static_cast<size_t>(prio)];
}

uint64_t Switch::ingress_bytes(int port, int prio) const {
  impl_->check_port(port, "ingress_bytes");
  Impl::check_prio(prio);
  return impl_->port(port).ingress[static_cast<size_t>(prio)];
}

uint64_t Switch::buffer_used() const { return impl_->used; }

uint64_t Switch::queued_from(int port, int prio, int ingress) const {
  impl_->check_port(port, "queued_from");
  impl_->check_port(ingress, "queued_from");
  Impl::check_prio(prio);
  uint64_t bytes = 0;
  for (const Impl::Queued& q : impl_->port(port).queues[static_cast<size_t>(prio)])
    if (q.in_port == ingress) bytes += q.charge;
  return bytes;
}

bool Switch::egress_paused(int port, int prio) const {
  impl_->check_port(port, "egress_paused");
  Impl::check_prio(prio);
  return impl_->port(port).paused_until[static_cast<size_t>(prio)] > sc_core::sc_time_stamp();
}

bool Switch::ingress_pausing(int port, int prio) const {
  impl_->check_port(port, "ingress_pausing");
  Impl::check_prio(prio);
  return impl_->port(port).pausing[static_cast<size_t>(prio)];
}

const SwitchConfig& Switch::config() const { return impl_->cfg; }

void Switch::set_port_ecn(int port, const EcnConfig& ecn) {
  impl_->check_port(port, "set_port_ecn");
  validate_ecn(ecn, impl_->cfg.buffer, [&](const std::string& msg) {
    throw std::invalid_argument("switch " + impl_->name + ": port " + std::to_string(port) + ": " +
                                msg);
  });
  Impl::Port& p = impl_->port(port);
  p.ecn = ecn;
  p.ecn_average = ecn.queue == EcnConfig::Queue::average;
  p.red_avg.fill(0.0);
}

const EcnConfig& Switch::port_ecn(int port) const {
  impl_->check_port(port, "port_ecn");
  return impl_->port(port).ecn;
}

double Switch::red_queue_bytes(int port, int prio) const {
  impl_->check_port(port, "red_queue_bytes");
  Impl::check_prio(prio);
  const Impl::Port& p = impl_->port(port);
  return p.ecn_average ? p.red_avg[static_cast<size_t>(prio)]
                       : static_cast<double>(p.egress[static_cast<size_t>(prio)]);
}

net::MacAddr Switch::port_mac(int port) const {
  impl_->check_port(port, "port_mac");
  const uint64_t h = impl_->name_hash;
  return net::MacAddr{{0x02, static_cast<uint8_t>(h >> 16), static_cast<uint8_t>(h >> 8),
                       static_cast<uint8_t>(h), static_cast<uint8_t>(port >> 8),
                       static_cast<uint8_t>(port)}};
}

}  // namespace mprdma::fabric
