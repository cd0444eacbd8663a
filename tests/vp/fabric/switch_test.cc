// Switch: forwarding and its exact latency, drops without a route, ECMP
// (stability and spread, chi-square), RED/ECN marking against its curve,
// PFC (lossless incast, XOFF/XON hysteresis, XOFF refresh), strict and
// weighted round robin scheduling, configuration checks and bind().
//
// Topologies are built by hand: test hosts (EthPortIf endpoints that send
// RoCEv2 frames at line rate, honour PFC like the NIC's MAC and record what
// arrives) joined to the switch by EthLinks, host i on port i.
#include "vp/fabric/switch.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/recording_binder.h"
#include "support/sim_test.h"
#include "vp/core/calendar.h"
#include "vp/core/config.h"
#include "vp/core/kernel.h"
#include "vp/core/random.h"
#include "vp/fabric/eth_link.h"
#include "vp/net/pfc.h"
#include "vp/net/roce_codec.h"

namespace mprdma::fabric {
namespace {

using sc_core::sc_time;

sc_time ps(uint64_t v) { return sc_time::from_value(v); }
sc_time us(double v) { return sc_time::from_value(static_cast<uint64_t>(v * 1e6 + 0.5)); }

constexpr uint32_t HostIp(int i) { return 0x0A000001u + static_cast<uint32_t>(i); }
constexpr uint32_t kVirtualDst = 0x0A010001u;  // 10.1.0.1, reached over an ECMP group

uint16_t Get16(const std::vector<uint8_t>& d, size_t at) {
  return static_cast<uint16_t>(d[at] << 8 | d[at + 1]);
}

struct FrameSpec {
  uint32_t src = HostIp(0);
  uint32_t dst = HostIp(1);
  uint16_t sport = 0xC000;
  uint8_t dscp = 0;
  uint8_t ecn = 0;
  size_t bytes = 1002;  // whole frame (no FCS): 74 bytes of headers + payload
  uint8_t ttl = 64;
};

// A RoCEv2 RDMA WRITE ONLY frame of exactly `s.bytes` bytes.
net::PacketPtr Frame(const FrameSpec& s, uint64_t id) {
  net::RoceFields f;
  f.src_mac.b = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(s.src)};
  f.dst_mac.b = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(s.dst)};
  f.src_ip = s.src;
  f.dst_ip = s.dst;
  f.dscp = s.dscp;
  f.ecn = s.ecn;
  f.ttl = s.ttl;
  f.udp_sport = s.sport;
  f.ip_id = static_cast<uint16_t>(id);
  f.opcode = net::Opcode::RDMA_WRITE_ONLY;
  f.dest_qp = 0x11;
  f.psn = static_cast<uint32_t>(id & 0xFFFFFF);
  const size_t overhead = net::roce_overhead_bytes(f.opcode);
  if (s.bytes < overhead || (s.bytes - overhead) % 4)
    throw std::invalid_argument("test frame size must be 74 + a multiple of 4");
  std::vector<uint8_t> payload(s.bytes - overhead, static_cast<uint8_t>(id));
  net::PacketPtr p = net::build_roce(f, payload.data(), payload.size());
  p->id = id;
  return p;
}

// A test endpoint. Data frames leave in order, back to back at the line
// rate; PFC frames go ahead of data. Like the NIC's MAC it honours PAUSE:
// a paused head frame (class DSCP >> 3) blocks the single queue.
class TestHost : public net::EthPortIf {
 public:
  struct Rx {
    uint64_t time_ps;
    uint64_t id;
    uint8_t prio;
    uint8_t ecn;
    uint8_t ttl;
    uint16_t sport;
    uint32_t src_ip;
    uint64_t charged;  // bytes as the switch charges them
    bool roce_ok;      // the frame still parses (checksums valid)
  };
  struct PauseRx {
    uint64_t time_ps;
    uint16_t mask;
    std::array<uint16_t, 8> quanta;
  };

  explicit TestHost(core::Calendar& cal) : cal_(cal) {}

  void attach(EthLink* link, int side) {
    link_ = link;
    side_ = side;
    link->attach(side, this);
  }
  void send(net::PacketPtr p) {
    p->priority = static_cast<uint8_t>(p->data[net::kIpOffset + 1] >> 5);
    txq_.push_back(std::move(p));
    wake(sc_core::sc_time_stamp());
  }
  void send_control(net::PacketPtr p) {
    ctrl_.push_back(std::move(p));
    wake(sc_core::sc_time_stamp());
  }
  // PFC from this host to its switch port.
  void pause(uint16_t mask, uint16_t quanta) {
    std::array<uint16_t, 8> q{};
    for (int i = 0; i < 8; ++i)
      if ((mask >> i) & 1) q[i] = quanta;
    send_control(net::build_pfc(net::MacAddr{{0x02, 0, 0, 0, 0, 0x99}}, mask, q));
  }

  void receive(net::PacketPtr pkt) override {
    const uint64_t now = sc_core::sc_time_stamp().value();
    if (net::is_mac_control(*pkt)) {
      const auto f = net::parse_pfc(*pkt);
      if (!f) {
        ADD_FAILURE() << "unexpected MAC Control frame";
        return;
      }
      pauses.push_back({now, f->class_mask, f->quanta});
      for (int p = 0; p < 8; ++p)
        if ((f->class_mask >> p) & 1)
          paused_until_[p] =
              sc_core::sc_time_stamp() + ps(net::pause_ps(f->quanta[p], link_->rate(side_)));
      wake(sc_core::sc_time_stamp());
      return;
    }
    const auto& d = pkt->data;
    net::RoceFields f;
    rx.push_back({now, pkt->id, static_cast<uint8_t>(d[net::kIpOffset + 1] >> 5),
                  static_cast<uint8_t>(d[net::kIpOffset + 1] & 3), d[net::kIpOffset + 8],
                  Get16(d, net::kUdpOffset),
                  uint32_t{Get16(d, net::kIpOffset + 12)} << 16 | Get16(d, net::kIpOffset + 14),
                  Switch::charged_bytes(*pkt), net::parse_roce(*pkt, f) == net::ParseStatus::ok});
  }

  std::vector<Rx> rx;
  std::vector<PauseRx> pauses;
  std::vector<uint64_t> tx_start_ps;  // data frames only
  size_t queued() const { return txq_.size(); }

 private:
  void wake(const sc_time& when) {
    if (wake_pending_ && wake_at_ <= when) return;
    wake_pending_ = true;
    wake_at_ = when;
    const uint64_t gen = ++gen_;
    cal_.at(when, [this, gen] {
      if (gen != gen_) return;
      wake_pending_ = false;
      next();
    });
  }
  void next() {
    if (!link_->idle(side_)) return wake(link_->idle_at(side_));
    if (!ctrl_.empty()) {
      net::PacketPtr p = std::move(ctrl_.front());
      ctrl_.pop_front();
      return wake(link_->transmit(side_, std::move(p)));
    }
    if (txq_.empty()) return;
    const uint8_t prio = txq_.front()->priority;
    if (paused_until_[prio] > sc_core::sc_time_stamp()) return wake(paused_until_[prio]);
    tx_start_ps.push_back(sc_core::sc_time_stamp().value());
    net::PacketPtr p = std::move(txq_.front());
    txq_.pop_front();
    wake(link_->transmit(side_, std::move(p)));
  }

  core::Calendar& cal_;
  EthLink* link_ = nullptr;
  int side_ = 0;
  std::deque<net::PacketPtr> txq_, ctrl_;
  std::array<sc_time, 8> paused_until_{};
  bool wake_pending_ = false;
  sc_time wake_at_;
  uint64_t gen_ = 0;
};

class SwitchTest : public test::SimTest {
 protected:
  // A switch "sw" with `n` ports; host i on port i over link i (host on
  // side 0), with a route to its address. Links default to 40 Gbps, 200 ns.
  void Build(int n, const SwitchConfig& cfg,
             const std::function<void(int, LinkConfig&)>& tweak = nullptr) {
    driver = std::make_unique<core::Calendar>("driver");
    sw = std::make_unique<Switch>("sw", n, cfg, *env);
    for (int i = 0; i < n; ++i) {
      LinkConfig lc;
      lc.name = "l" + std::to_string(i);
      if (tweak) tweak(i, lc);
      links.push_back(std::make_unique<EthLink>(lc.name.c_str(), lc, *env));
      hosts.push_back(std::make_unique<TestHost>(*driver));
      hosts.back()->attach(links.back().get(), 0);
      sw->attach(i, links.back().get(), 1);
      sw->set_route(HostIp(i), {i});
    }
  }
  void Destroy() {
    sw.reset();
    links.clear();
    hosts.clear();
    driver.reset();
  }
  // A fresh kernel and environment for another simulation in one test.
  void Restart() {
    Destroy();
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(1);
  }
  void TearDown() override { Destroy(); }

  uint64_t counter(const std::string& path) const {
    const core::Counter* c = env->stats.find_counter(path);
    EXPECT_NE(c, nullptr) << "no counter " << path;
    return c ? c->value() : 0;
  }
  uint64_t port_stat(int port, const std::string& stat) const {
    return counter("switch.sw.port" + std::to_string(port) + "." + stat);
  }
  uint64_t total_drops() const {
    uint64_t n = 0;
    for (int i = 0; i < sw->ports(); ++i) n += port_stat(i, "drops");
    return n;
  }
  // `n` frames from host `h`, queued at time 0 (they leave back to back).
  void Stream(int h, const FrameSpec& s, int n, uint64_t first_id) {
    for (int k = 0; k < n; ++k) hosts[h]->send(Frame(s, first_id + k));
  }

  std::unique_ptr<core::Calendar> driver;
  std::unique_ptr<Switch> sw;
  std::vector<std::unique_ptr<EthLink>> links;
  std::vector<std::unique_ptr<TestHost>> hosts;
};

SwitchConfig Plain() {
  SwitchConfig c;
  c.ecn.enabled = false;
  return c;
}

// ------------------------------------------------------------ forwarding

TEST_F(SwitchTest, ForwardingLatencyIsExact) {
  Build(2, Plain());  // 1 GHz, 300 cycles; 40 Gbps, 200 ns links
  FrameSpec s;
  s.dscp = 26;
  hosts[0]->send(Frame(s, 1));
  sc_core::sc_start();
  ASSERT_EQ(hosts[1]->rx.size(), 1u);
  // 1002 B frame = 1026 B on the wire = 205.2 ns at 40 Gbps. Last bit at
  // the switch: 205.2 + 200 = 405.2 ns; next clock edge 406 ns; + 300 cycles
  // = 706 ns; serialisation 205.2 ns and 200 ns of cable: 1111.2 ns.
  EXPECT_EQ(hosts[1]->rx[0].time_ps, 1111200u);
  EXPECT_EQ(hosts[1]->rx[0].ttl, 63);    // routed: TTL decremented ...
  EXPECT_TRUE(hosts[1]->rx[0].roce_ok);  // ... and the IP checksum redone
  EXPECT_EQ(port_stat(0, "rx_packets"), 1u);
  EXPECT_EQ(port_stat(1, "tx_packets"), 1u);
  EXPECT_EQ(port_stat(1, "tx_bytes"), 1006u);  // frame + FCS
  EXPECT_EQ(sw->buffer_used(), 0u);
  EXPECT_EQ(counter("switch.sw.buffer_max_bytes"), 1006u);
}

TEST_F(SwitchTest, ForwardingLatencyFollowsClockAndRates) {
  SwitchConfig c = Plain();
  c.clock = core::Frequency::mhz(500);
  Build(2, c, [](int i, LinkConfig& l) {
    if (i == 1) {
      l.rate = core::Bandwidth::gbps(10);
      l.delay = core::Duration::from_ns(500);
    }
  });
  hosts[0]->send(Frame(FrameSpec{}, 1));
  sc_core::sc_start();
  ASSERT_EQ(hosts[1]->rx.size(), 1u);
  // In at 405.2 ns; 2 ns clock: edge 406 ns + 300 x 2 ns = 1006 ns; store
  // and forward onto 10 Gbps: 820.8 ns; 500 ns cable: 2326.8 ns.
  EXPECT_EQ(hosts[1]->rx[0].time_ps, 2326800u);
}

TEST_F(SwitchTest, DropsWithoutRouteNonIpv4AndExpiredTtlAreCounted) {
  Build(2, Plain());
  FrameSpec s;
  s.dst = 0x0A090909;  // no route
  hosts[0]->send(Frame(s, 1));
  auto v6 = Frame(FrameSpec{}, 2);
  v6->data[12] = 0x86;  // IPv6 ethertype
  v6->data[13] = 0xDD;
  hosts[0]->send(std::move(v6));
  auto pause3x = net::build_pfc(net::MacAddr{}, 0x01, {});
  pause3x->data[14] = 0x00;  // 802.3x PAUSE opcode 0x0001: not PFC, not forwarded
  hosts[0]->send_control(std::move(pause3x));
  FrameSpec t;
  t.ttl = 1;
  hosts[0]->send(Frame(t, 3));
  hosts[0]->send(Frame(FrameSpec{}, 4));  // forwarded
  sc_core::sc_start();
  ASSERT_EQ(hosts[1]->rx.size(), 1u);
  EXPECT_EQ(hosts[1]->rx[0].id, 4u);
  EXPECT_EQ(counter("switch.sw.no_route_drops"), 1u);
  EXPECT_EQ(counter("switch.sw.non_ipv4_drops"), 2u);
  EXPECT_EQ(counter("switch.sw.ttl_drops"), 1u);
  EXPECT_EQ(port_stat(0, "rx_packets"), 5u);
  EXPECT_EQ(port_stat(0, "pause_rx"), 0u);
  EXPECT_EQ(total_drops(), 0u);  // MMU drops are another thing
  // Removing a route makes its destination unreachable.
  sw->set_route(HostIp(1), {});
  EXPECT_THROW(sw->set_route(HostIp(1), {2}), std::out_of_range);
  EXPECT_THROW(sw->attach(5, links[0].get(), 1), std::out_of_range);
}

// ------------------------------------------------------------------ ECMP

// Pearson's statistic of `counts` against a uniform distribution.
double ChiSquare(const std::vector<uint64_t>& counts) {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  const double e = static_cast<double>(n) / static_cast<double>(counts.size());
  double x2 = 0;
  for (uint64_t c : counts) x2 += (static_cast<double>(c) - e) * (static_cast<double>(c) - e) / e;
  return x2;
}

TEST_F(SwitchTest, EcmpKeepsOneFiveTupleOnOnePort) {
  Build(5, Plain());
  sw->set_route(kVirtualDst, {1, 2, 3, 4});
  FrameSpec s;
  s.dst = kVirtualDst;
  s.sport = 0xC123;
  s.bytes = 98;
  Stream(0, s, 200, 0);
  sc_core::sc_start();
  const int want = sw->ecmp_pick(s.src, s.dst, 17, s.sport, net::kRoceUdpPort, {1, 2, 3, 4});
  for (int p = 1; p <= 4; ++p)
    EXPECT_EQ(hosts[p]->rx.size(), p == want ? 200u : 0u) << "port " << p;
  // In order, as sent.
  for (size_t k = 0; k < hosts[want]->rx.size(); ++k) EXPECT_EQ(hosts[want]->rx[k].id, k);
  // The pick is a function of the 5-tuple only: asking again changes nothing.
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(sw->ecmp_pick(s.src, s.dst, 17, s.sport, net::kRoceUdpPort, {1, 2, 3, 4}), want);
}

// 10000 random UDP source ports through the switch to a destination with 4
// equal-cost ports. Chi-square with 3 degrees of freedom: critical value
// 16.27 at significance 0.001 (a uniform hash fails with probability 0.1%;
// the seed is fixed, so the outcome is deterministic).
TEST_F(SwitchTest, EcmpSpreadsSourcePortsEvenlyOverFourPorts) {
  Build(5, Plain());
  sw->set_ecmp_seed(0x5eed);
  const std::vector<int> group = {1, 2, 3, 4};
  sw->set_route(kVirtualDst, group);
  core::RandomStream sports(2024, "test.sports");
  FrameSpec s;
  s.dst = kVirtualDst;
  s.bytes = 98;
  std::map<uint64_t, int> predicted;  // id -> port
  for (uint64_t id = 0; id < 10000; ++id) {
    s.sport = static_cast<uint16_t>(49152 + sports.below(16384));
    predicted[id] = sw->ecmp_pick(s.src, s.dst, 17, s.sport, net::kRoceUdpPort, group);
    hosts[0]->send(Frame(s, id));
  }
  sc_core::sc_start();
  std::vector<uint64_t> counts;
  uint64_t total = 0;
  for (int p = 1; p <= 4; ++p) {
    counts.push_back(hosts[p]->rx.size());
    total += hosts[p]->rx.size();
    for (const auto& r : hosts[p]->rx) ASSERT_EQ(predicted[r.id], p) << "frame " << r.id;
  }
  EXPECT_EQ(total, 10000u);
  const double x2 = ChiSquare(counts);
  std::cout << "chi-square over 4 ports: " << x2 << " (counts " << counts[0] << ' ' << counts[1]
            << ' ' << counts[2] << ' ' << counts[3] << ")\n";
  RecordProperty("chi_square_4", std::to_string(x2));
  EXPECT_LT(x2, 16.27);
}

// The same for 2 ports (1 degree of freedom, critical value 10.83) and 8
// ports (7 degrees of freedom, 24.32), at significance 0.001.
TEST_F(SwitchTest, EcmpSpreadsOverTwoAndEightPorts) {
  Build(9, Plain());
  sw->set_ecmp_seed(0x5eed);
  for (const auto& [n, critical] : {std::pair<int, double>{2, 10.83}, {8, 24.32}}) {
    std::vector<int> group;
    for (int p = 1; p <= n; ++p) group.push_back(p);
    core::RandomStream sports(2024, "test.sports");
    std::vector<uint64_t> counts(static_cast<size_t>(n), 0);
    for (int i = 0; i < 10000; ++i) {
      const uint16_t sport = static_cast<uint16_t>(49152 + sports.below(16384));
      ++counts[static_cast<size_t>(
          sw->ecmp_pick(HostIp(0), kVirtualDst, 17, sport, net::kRoceUdpPort, group) - 1)];
    }
    const double x2 = ChiSquare(counts);
    std::cout << "chi-square over " << n << " ports: " << x2 << "\n";
    RecordProperty("chi_square_" + std::to_string(n), std::to_string(x2));
    EXPECT_LT(x2, critical) << n << " ports";
  }
}

TEST_F(SwitchTest, EcmpSeedsGiveDifferentMappings) {
  Build(5, Plain());
  const std::vector<int> group = {1, 2, 3, 4};
  auto mapping = [&](uint64_t seed) {
    sw->set_ecmp_seed(seed);
    EXPECT_EQ(sw->ecmp_seed(), seed);
    std::vector<int> m;
    for (uint16_t sport = 49152; sport < 49152 + 1000; ++sport)
      m.push_back(sw->ecmp_pick(HostIp(0), kVirtualDst, 17, sport, 4791, group));
    return m;
  };
  const auto a = mapping(1), b = mapping(2), a2 = mapping(1);
  EXPECT_EQ(a, a2);  // deterministic
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  // Independent mappings over 4 ports differ for 3/4 of the keys: 750 of
  // 1000, standard deviation 13.7; accept +-5 sigma.
  EXPECT_NEAR(differ, 750, 69);
  // Every field of the 5-tuple matters.
  int by_src = 0, by_dport = 0, by_proto = 0;
  for (uint16_t sport = 49152; sport < 49152 + 1000; ++sport) {
    const int base = sw->ecmp_pick(HostIp(0), kVirtualDst, 17, sport, 4791, group);
    by_src += base != sw->ecmp_pick(HostIp(1), kVirtualDst, 17, sport, 4791, group);
    by_dport += base != sw->ecmp_pick(HostIp(0), kVirtualDst, 17, sport, 4792, group);
    by_proto += base != sw->ecmp_pick(HostIp(0), kVirtualDst, 6, sport, 4791, group);
  }
  EXPECT_NEAR(by_src, 750, 69);
  EXPECT_NEAR(by_dport, 750, 69);
  EXPECT_NEAR(by_proto, 750, 69);
  // Two switches of one scenario get different default seeds (no hash
  // polarisation between tiers).
  Switch other("other", 5, Plain(), *env);
  EXPECT_NE(other.ecmp_seed(), Switch("third", 5, Plain(), *env).ecmp_seed());
  EXPECT_EQ(ecmp_hash(7, 1, 2, 17, 3, 4), ecmp_hash(7, 1, 2, 17, 3, 4));
  EXPECT_NE(ecmp_hash(7, 1, 2, 17, 3, 4), ecmp_hash(8, 1, 2, 17, 3, 4));
}

// ------------------------------------------------------------------- RED

TEST(RedCurve, ProbabilityFollowsKminKmaxPmax) {
  EcnConfig e;
  e.kmin = core::Bytes{10000};
  e.kmax = core::Bytes{30000};
  e.pmax = 0.2;
  EXPECT_EQ(red_mark_probability(e, 0), 0.0);
  EXPECT_EQ(red_mark_probability(e, 9999), 0.0);
  EXPECT_EQ(red_mark_probability(e, 10000), 0.0);
  EXPECT_DOUBLE_EQ(red_mark_probability(e, 20000), 0.1);
  EXPECT_DOUBLE_EQ(red_mark_probability(e, 25000), 0.15);
  EXPECT_EQ(red_mark_probability(e, 30000), 1.0);  // at kmax: every packet
  EXPECT_EQ(red_mark_probability(e, 1e9), 1.0);
  e.kmin = e.kmax = core::Bytes{5000};  // step
  EXPECT_EQ(red_mark_probability(e, 4999), 0.0);
  EXPECT_EQ(red_mark_probability(e, 5000), 1.0);
}

struct RedRun {
  uint64_t probes = 0, marked = 0;
  std::vector<uint64_t> queue_seen;  // queue_bytes just before probe arrivals
  std::vector<bool> marks;           // per frame id, in order
  uint64_t mark_counter = 0;
  double red_queue_end = 0;
};

class SwitchRedTest : public SwitchTest {
 protected:
  static constexpr uint64_t kT = 205200;     // 1026 wire bytes at 40 Gbps
  static constexpr uint64_t kD = 200000;     // cable
  static constexpr uint64_t kCharge = 1006;  // frame + FCS
  static constexpr uint64_t kPause = 16800;  // a PFC frame on the wire
  static uint64_t Arrival(uint64_t k) { return (k + 1) * kT + kD; }

  // Holds the egress queue to host 1 at exactly (level) frames: host 1
  // pauses priority 1 on its port while `level + 1` frames arrive, then
  // resumes it half a frame time later; from then on one frame leaves for
  // each that arrives (same size, same rate), so every later arrival finds
  // the same queue. `probes` frames are measured after that.
  // `port1`: the ECN of egress port 1 (set_port_ecn) instead of `ecn`.
  RedRun Run(const EcnConfig& ecn, uint64_t level, uint64_t probes, uint8_t ecn_bits,
             const EcnConfig* port1 = nullptr) {
    Restart();
    SwitchConfig c;
    c.ecn = ecn;
    Build(2, c);
    if (port1) sw->set_port_ecn(1, *port1);
    const uint64_t l = level + 1;
    FrameSpec s;
    s.dscp = 8;  // priority 1: lossy, so only the receiver's PAUSE holds it
    s.ecn = ecn_bits;
    const uint64_t total = l + probes;
    Stream(0, s, static_cast<int>(total), 0);
    hosts[1]->pause(0x02, 0xFFFF);  // reaches the switch at 216.8 ns
    const uint64_t xon_at_switch = Arrival(l - 1) + kT / 2;
    driver->at(ps(xon_at_switch - kPause - kD), [this] { hosts[1]->pause(0x02, 0); });
    RedRun r;
    for (uint64_t k = l; k < l + 20; ++k)
      driver->at(ps(Arrival(k) - 1), [this, &r] { r.queue_seen.push_back(sw->queue_bytes(1, 1)); });
    sc_core::sc_start();
    EXPECT_EQ(hosts[1]->rx.size(), total);
    r.marks.assign(total, false);
    for (const auto& rx : hosts[1]->rx) r.marks[rx.id] = rx.ecn == 3;
    for (uint64_t k = l; k < total; ++k) {
      ++r.probes;
      r.marked += r.marks[k];
    }
    r.mark_counter = port_stat(1, "ecn_marks");
    r.red_queue_end = sw->red_queue_bytes(1, 1);
    return r;
  }
};

TEST_F(SwitchRedTest, MarkingFractionFollowsTheRedCurve) {
  EcnConfig e;
  e.kmin = core::Bytes{40000};
  e.kmax = core::Bytes{140000};
  e.pmax = 0.5;
  const uint64_t n = 4000;
  for (uint64_t level : {30, 60, 90, 130, 150}) {
    SCOPED_TRACE("queue of " + std::to_string(level) + " frames");
    const RedRun r = Run(e, level, n, /*ECT(0)*/ 2);
    // The set-up holds the queue where intended.
    for (uint64_t q : r.queue_seen) ASSERT_EQ(q, level * kCharge);
    const double p = red_mark_probability(e, static_cast<double>(level * kCharge));
    const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    // Binomial(n, p): accept +-5 standard deviations (a correct switch
    // fails with probability below 1e-6; exact at p = 0 and p = 1).
    std::cout << "queue " << level * kCharge << " B: p " << p << ", marked " << r.marked << " of "
              << r.probes << " (expected " << p * n << " +- " << 5 * sd << ")\n";
    EXPECT_EQ(r.probes, n);
    EXPECT_NEAR(static_cast<double>(r.marked), p * n, 5 * sd);
    EXPECT_GE(r.mark_counter, r.marked);
  }
}

TEST_F(SwitchRedTest, StepMarksAtAndAboveK) {
  EcnConfig e;
  e.pmax = 1.0;
  e.kmin = e.kmax = core::Bytes{60 * kCharge};
  RedRun at = Run(e, 60, 500, 2);  // queue == K: every probe marked
  EXPECT_EQ(at.marked, 500u);
  e.kmin = e.kmax = core::Bytes{60 * kCharge + 1};
  RedRun below = Run(e, 60, 500, 2);  // one byte short of K: none
  EXPECT_EQ(below.marked, 0u);
}

TEST_F(SwitchRedTest, OnlyEcnCapablePacketsAreMarked) {
  EcnConfig e;
  e.kmin = e.kmax = core::Bytes{20000};
  RedRun not_ect = Run(e, 100, 300, 0);
  EXPECT_EQ(not_ect.marked, 0u);
  EXPECT_EQ(not_ect.mark_counter, 0u);
  RedRun ect1 = Run(e, 100, 300, 1);
  EXPECT_EQ(ect1.marked, 300u);
  EcnConfig off = e;
  off.enabled = false;
  EXPECT_EQ(Run(off, 100, 300, 2).marked, 0u);
}

TEST_F(SwitchRedTest, APortOverrideReplacesTheSwitchEcnOnThatPortOnly) {
  EcnConfig step;  // the switch: DCTCP step at 20 frames
  step.kmin = step.kmax = core::Bytes{20 * kCharge};
  EcnConfig high = step;  // port 1: the step at 240 KB (the M7/M8 mis-configuration)
  high.kmin = high.kmax = core::Bytes{240 * 1000};
  // A queue of 60 frames (60 KB): above the switch's K, below the port's.
  const RedRun plain = Run(step, 60, 400, 2);
  EXPECT_EQ(plain.marked, 400u);
  const RedRun over = Run(step, 60, 400, 2, &high);
  EXPECT_EQ(over.marked, 0u);
  EXPECT_EQ(over.mark_counter, 0u);
  EXPECT_EQ(sw->port_ecn(1).kmin.n, 240000u);
  EXPECT_EQ(sw->port_ecn(0).kmin.n, 20 * kCharge);  // other ports keep the switch's
  // Every ECN-capable frame RED judged on port 1 is counted (the marking
  // ratio's denominator): all 61 + 400 frames.
  EXPECT_EQ(port_stat(1, "ecn_capable"), 461u);
  // The override's own curve: RED from 40 to 140 KB with pmax 0.5 at a
  // queue of 90 frames marks with p = 0.5 * (90540 - 40000) / 100000.
  EcnConfig red;
  red.kmin = core::Bytes{40000};
  red.kmax = core::Bytes{140000};
  red.pmax = 0.5;
  const uint64_t n = 4000;
  const RedRun r = Run(step, 90, n, 2, &red);
  const double p = red_mark_probability(red, 90.0 * kCharge);
  EXPECT_NEAR(static_cast<double>(r.marked), p * n, 5 * std::sqrt(n * p * (1 - p)));
  // ECN off on the switch, on for the port: the port marks.
  EcnConfig off = step;
  off.enabled = false;
  EXPECT_EQ(Run(off, 60, 300, 2, &step).marked, 300u);
  EXPECT_EQ(Run(step, 60, 300, 2, &off).marked, 0u);
  EXPECT_EQ(port_stat(1, "ecn_capable"), 0u);  // off: nothing judged
}

TEST_F(SwitchTest, APortOverrideIsValidatedNamingSwitchAndPort) {
  Build(2, SwitchConfig{});
  auto error_of = [&](const EcnConfig& e, int port) -> std::string {
    try {
      sw->set_port_ecn(port, e);
    } catch (const std::invalid_argument& err) {
      return err.what();
    }
    return "";
  };
  EcnConfig e;
  e.kmin = core::Bytes{50000};
  e.kmax = core::Bytes{40000};
  EXPECT_NE(error_of(e, 1).find("switch sw: port 1: ecn.kmin"), std::string::npos)
      << error_of(e, 1);
  e = EcnConfig{};
  e.kmax = core::Bytes{13 * 1024 * 1024};
  EXPECT_NE(error_of(e, 0).find("port 0: ecn.kmax"), std::string::npos);
  e = EcnConfig{};
  e.pmax = 2;
  EXPECT_NE(error_of(e, 1).find("ecn.pmax"), std::string::npos);
  e.enabled = false;  // a disabled override is not checked further
  EXPECT_EQ(error_of(e, 1), "");
  EXPECT_THROW(sw->set_port_ecn(2, EcnConfig{}), std::out_of_range);
}

TEST_F(SwitchRedTest, AveragedQueueLagsTheInstantaneousOne) {
  EcnConfig e;
  e.kmin = e.kmax = core::Bytes{30000};
  e.queue = EcnConfig::Queue::average;
  e.weight = 0.01;
  const uint64_t level = 60, probes = 600;
  const RedRun r = Run(e, level, probes, 2);
  // Frame k finds min(k, level) frames queued; the EWMA is updated with
  // that before the decision.
  std::vector<bool> want;
  double avg = 0;
  for (uint64_t k = 0; k < level + 1 + probes; ++k) {
    const double q = static_cast<double>(std::min(k, level) * kCharge);
    avg = (1.0 - e.weight) * avg + e.weight * q;
    want.push_back(avg >= 30000.0);
  }
  EXPECT_EQ(r.marks, want);
  EXPECT_DOUBLE_EQ(r.red_queue_end, avg);
  // The instantaneous queue crosses K at frame 30 (30 x 1006 B); the
  // average only about ln 2 / 0.01 = 69 frames later.
  const auto first = std::find(want.begin(), want.end(), true) - want.begin();
  EXPECT_GT(first, 90);
  e.queue = EcnConfig::Queue::instantaneous;
  const RedRun inst = Run(e, level, probes, 2);
  EXPECT_EQ(std::find(inst.marks.begin(), inst.marks.end(), true) - inst.marks.begin(), 30);
}

// ------------------------------------------------------------------- PFC

struct IncastResult {
  uint64_t sent = 0, received = 0, drops = 0, headroom_drops = 0;
  uint64_t pause_tx_to_senders = 0, pause_rx_at_senders = 0;
  uint64_t last_sender_start_ps = 0;
  bool in_order = true;
};

class SwitchPfcTest : public SwitchTest {
 protected:
  // Hosts 0..2 each send `n` 1002-byte frames of priority 3 at 40 Gbps to
  // host 3 (one 40 Gbps port).
  IncastResult Incast(const SwitchConfig& c, int n) {
    Build(4, c);
    FrameSpec s;
    s.dst = HostIp(3);
    s.dscp = 26;  // priority 3
    for (int h = 0; h < 3; ++h) {
      s.src = HostIp(h);
      Stream(h, s, n, static_cast<uint64_t>(h) << 32);
    }
    sc_core::sc_start();
    IncastResult r;
    r.sent = 3u * static_cast<uint64_t>(n);
    r.received = hosts[3]->rx.size();
    r.drops = total_drops();
    r.headroom_drops = counter("switch.sw.pfc_headroom_drops");
    std::map<uint32_t, uint64_t> next;
    for (const auto& rx : hosts[3]->rx) {
      const uint64_t k = rx.id & 0xFFFFFFFFu;
      if (k < next[rx.src_ip]) r.in_order = false;
      next[rx.src_ip] = k + 1;
    }
    for (int h = 0; h < 3; ++h) {
      r.pause_tx_to_senders += port_stat(h, "pause_tx");
      r.pause_rx_at_senders += hosts[h]->pauses.size();
      r.last_sender_start_ps = std::max(r.last_sender_start_ps, hosts[h]->tx_start_ps.back());
    }
    return r;
  }
};

TEST_F(SwitchPfcTest, LosslessIncastDropsNothing) {
  SwitchConfig c = Plain();  // PFC on priority 3 with the default thresholds
  const int n = 1500;        // 1500 x 205.2 ns = 308 us of line rate per sender
  const IncastResult r = Incast(c, n);
  EXPECT_EQ(r.drops, 0u);
  EXPECT_EQ(r.headroom_drops, 0u);
  EXPECT_EQ(r.received, r.sent);
  EXPECT_TRUE(r.in_order);
  EXPECT_GT(r.pause_tx_to_senders, 0u);
  EXPECT_EQ(r.pause_rx_at_senders, r.pause_tx_to_senders);
  EXPECT_EQ(port_stat(3, "pause_tx"), 0u);  // the receiver's port never fills
  // The senders were held: at line rate the last frame would start at
  // (n - 1) x 205.2 ns; the receiver drains 3n frames at 40 Gbps.
  EXPECT_GT(r.last_sender_start_ps, 2u * (n - 1) * 205200);
  // Each ingress stays within xoff + headroom, and the buffer never holds
  // more than three such allowances.
  EXPECT_LE(counter("switch.sw.buffer_max_bytes"), 3 * (c.pfc.xoff.n + c.pfc.headroom.n));
  EXPECT_EQ(sw->buffer_used(), 0u);
  for (int h = 0; h < 3; ++h) {
    EXPECT_FALSE(sw->ingress_pausing(h, 3)) << h;  // all XONed at the end
    ASSERT_FALSE(hosts[h]->pauses.empty()) << "host " << h << " was never paused";
    EXPECT_EQ(hosts[h]->pauses.back().quanta[3], 0) << "last PAUSE to host " << h << " is XON";
  }
}

TEST_F(SwitchPfcTest, SameIncastWithoutPfcDrops) {
  SwitchConfig c = Plain();
  c.pfc.enabled = false;
  c.buffer = core::Bytes{200 * 1024};
  const IncastResult r = Incast(c, 1500);
  EXPECT_GT(r.drops, 0u);
  EXPECT_EQ(port_stat(3, "drops"), r.drops);  // counted at the congested egress
  EXPECT_EQ(r.received + r.drops, r.sent);
  EXPECT_EQ(r.pause_tx_to_senders, 0u);
  EXPECT_EQ(r.headroom_drops, 0u);
  // Dynamic threshold, alpha 1: the queue stops growing at half the buffer.
  EXPECT_LE(port_stat(3, "queue_max_bytes"), c.buffer.n / 2 + 1006);
  EXPECT_GT(port_stat(3, "queue_max_bytes"), c.buffer.n / 2 - 1006);
  std::cout << "lossy incast: " << r.drops << " of " << r.sent << " frames dropped\n";
}

TEST_F(SwitchPfcTest, XoffAndXonFollowTheirThresholds) {
  SwitchConfig c = Plain();
  c.buffer = core::Bytes{1 << 20};
  c.pfc.xoff = core::Bytes{20000};
  c.pfc.xon = core::Bytes{10000};
  c.pfc.headroom = core::Bytes{20000};
  // The receiver's port runs at 10 Gbps: the sender's ingress fills at 30 Gbps.
  Build(2, c, [](int i, LinkConfig& l) {
    if (i == 1) l.rate = core::Bandwidth::gbps(10);
  });
  FrameSpec s;
  s.dscp = 26;
  const int n = 600;
  Stream(0, s, n, 0);
  // Samples the ingress accounting of (port 0, priority 3) every 20 ns.
  uint64_t samples = 0, max_ingress = 0, xoff_edges = 0, xon_edges = 0;
  bool was_pausing = false;
  std::function<void()> probe = [&] {
    const uint64_t q = sw->ingress_bytes(0, 3);
    const bool pausing = sw->ingress_pausing(0, 3);
    ++samples;
    max_ingress = std::max(max_ingress, q);
    // XOFF goes out as the use reaches xoff, XON as it falls to xon.
    if (!pausing) {
      EXPECT_LT(q, c.pfc.xoff.n) << "at " << sc_core::sc_time_stamp();
    } else {
      EXPECT_GT(q, c.pfc.xon.n) << "at " << sc_core::sc_time_stamp();
    }
    xoff_edges += pausing && !was_pausing;
    xon_edges += !pausing && was_pausing;
    was_pausing = pausing;
    if (hosts[1]->rx.size() < static_cast<size_t>(n)) driver->after(ps(20000), probe);
  };
  driver->at(ps(0), probe);
  sc_core::sc_start();
  EXPECT_EQ(hosts[1]->rx.size(), static_cast<size_t>(n));
  EXPECT_EQ(total_drops(), 0u);
  EXPECT_GE(xoff_edges, 3u);
  EXPECT_EQ(xon_edges, xoff_edges);
  // Between XOFF and the sender stopping, at most the frame on the wire, the
  // one being sent and the PAUSE's own trip arrive: a few frames, well
  // within the headroom.
  EXPECT_GE(max_ingress, c.pfc.xoff.n);
  EXPECT_LE(max_ingress, c.pfc.xoff.n + 4 * 1006);
  // The sender saw XOFF and XON strictly alternating, one of each per cycle.
  const auto& pz = hosts[0]->pauses;
  ASSERT_EQ(pz.size(), 2 * xoff_edges);
  for (size_t i = 0; i < pz.size(); ++i) {
    EXPECT_EQ(pz[i].mask, 0x08) << i;
    EXPECT_EQ(pz[i].quanta[3], i % 2 == 0 ? 0xFFFF : 0) << i;
  }
  EXPECT_EQ(port_stat(0, "pause_tx"), pz.size());
  std::cout << xoff_edges << " XOFF/XON cycles, " << samples << " samples, max ingress "
            << max_ingress << " B\n";
}

TEST_F(SwitchPfcTest, XoffIsRefreshedBeforeItExpires) {
  SwitchConfig c = Plain();
  c.pfc.xoff = core::Bytes{20000};
  c.pfc.xon = core::Bytes{10000};
  c.pfc.headroom = core::Bytes{20000};
  c.pfc.quanta = 100;  // 1.28 us at 40 Gbps
  Build(2, c);
  FrameSpec s;
  s.dscp = 26;
  const int n = 300;
  Stream(0, s, n, 0);
  // The receiver holds the switch's egress for 50 us, so the sender's
  // ingress stays above xon all that time.
  hosts[1]->pause(0x08, 0xFFFF);
  driver->at(us(50), [&] { hosts[1]->pause(0x08, 0); });
  bool held_at_40us = false;
  driver->at(us(40), [&] { held_at_40us = sw->egress_paused(1, 3) && sw->ingress_pausing(0, 3); });
  sc_core::sc_start();
  EXPECT_TRUE(held_at_40us);
  EXPECT_EQ(hosts[1]->rx.size(), static_cast<size_t>(n));
  EXPECT_EQ(total_drops(), 0u);
  const auto& pz = hosts[0]->pauses;
  ASSERT_GE(pz.size(), 3u);
  // XOFFs until the single XON at the end, never more than 1.28 us apart:
  // the sender is never released while the switch is above xon.
  const uint64_t pause_len = net::pause_ps(100, core::Bandwidth::gbps(40));
  size_t xoffs = 0;
  for (size_t i = 0; i + 1 < pz.size(); ++i) {
    EXPECT_EQ(pz[i].quanta[3], 100) << i;
    EXPECT_LT(pz[i + 1].time_ps - pz[i].time_ps, pause_len) << i;
    ++xoffs;
  }
  EXPECT_EQ(pz.back().quanta[3], 0);
  EXPECT_GT(xoffs, 30u);  // 50 us / 0.64 us refresh period
  // The sender started nothing between its first XOFF (plus the frame in
  // progress) and the XON.
  const auto& starts = hosts[0]->tx_start_ps;
  for (uint64_t t : starts)
    EXPECT_FALSE(t > pz.front().time_ps && t < pz.back().time_ps) << "frame started at " << t;
}

TEST_F(SwitchTest, PeerPauseHoldsTheEgressForItsQuantaAtTheLinkRate) {
  for (const bool slow : {false, true}) {
    SCOPED_TRACE(slow ? "10 Gbps (changed at run time)" : "40 Gbps");
    Restart();
    Build(2, Plain());
    if (slow) links[1]->set_rate(core::Bandwidth::gbps(10));
    hosts[1]->pause(0x01, 1000);  // priority 0, 1000 quanta
    hosts[0]->send(Frame(FrameSpec{}, 1));
    bool paused_mid = false;
    driver->at(us(10), [&] { paused_mid = sw->egress_paused(1, 0) && !sw->egress_paused(1, 1); });
    sc_core::sc_start();
    EXPECT_TRUE(paused_mid);
    EXPECT_EQ(port_stat(1, "pause_rx"), 1u);
    ASSERT_EQ(hosts[1]->rx.size(), 1u);
    // 40 Gbps: the PAUSE (84 wire bytes, 16.8 ns) arrives at 216.8 ns and
    // holds the port 1000 x 12.8 ns; the frame then takes 205.2 + 200 ns.
    // 10 Gbps: 67.2 ns, 1000 x 51.2 ns, then 820.8 + 200 ns.
    EXPECT_EQ(hosts[1]->rx[0].time_ps, slow ? 52488000u : 13422000u);
  }
}

// ------------------------------------------------------------ scheduling

TEST_F(SwitchTest, StrictPriorityServesTheHigherClassFirst) {
  Build(3, Plain());
  FrameSpec lo, hi;
  lo.src = HostIp(0);
  lo.dst = hi.dst = HostIp(2);
  hi.src = HostIp(1);
  lo.dscp = 8;   // priority 1
  hi.dscp = 40;  // priority 5
  Stream(0, lo, 40, 0);
  Stream(1, hi, 40, 1000);
  // Host 2 holds both classes until both queues are full, then releases.
  hosts[2]->pause(0x22, 0xFFFF);
  bool paused_seen = false;
  driver->at(us(15), [&] {
    paused_seen = sw->egress_paused(2, 1) && sw->egress_paused(2, 5) && !sw->egress_paused(2, 3);
    EXPECT_EQ(sw->queue_bytes(2, 1), 40u * 1006);
    EXPECT_EQ(sw->queue_bytes(2, 5), 40u * 1006);
    hosts[2]->pause(0x22, 0);
  });
  sc_core::sc_start();
  EXPECT_TRUE(paused_seen);
  EXPECT_EQ(port_stat(2, "pause_rx"), 2u);
  const auto& rx = hosts[2]->rx;
  ASSERT_EQ(rx.size(), 80u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(rx[i].prio, 5) << i;
  for (size_t i = 40; i < 80; ++i) EXPECT_EQ(rx[i].prio, 1) << i;
}

TEST_F(SwitchTest, WeightedRoundRobinSharesBytesByWeight) {
  SwitchConfig c = Plain();
  c.scheduler = SwitchConfig::Scheduler::wrr;
  c.wrr_weights.assign(8, core::Bytes{1500});
  c.wrr_weights[1] = core::Bytes{3000};
  c.wrr_weights[5] = core::Bytes{1000};
  Build(3, c);
  FrameSpec a, b;
  a.src = HostIp(0);
  b.src = HostIp(1);
  a.dst = b.dst = HostIp(2);
  a.dscp = 8;  // priority 1, small frames
  a.bytes = 502;
  b.dscp = 40;  // priority 5, large frames
  b.bytes = 1502;
  Stream(0, a, 2000, 0);     // 2000 x 105.2 ns = 210 us
  Stream(1, b, 700, 10000);  // 700 x 305.2 ns = 214 us
  // Both classes arrive at 40 Gbps into one 40 Gbps port: both stay
  // backlogged. Count what leaves in 20..180 us.
  sc_core::sc_start();
  uint64_t bytes[8] = {}, frames[8] = {};
  for (const auto& r : hosts[2]->rx) {
    if (r.time_ps < 20000000 || r.time_ps > 180000000) continue;
    bytes[r.prio] += r.charged;
    ++frames[r.prio];
  }
  const double ratio = static_cast<double>(bytes[1]) / static_cast<double>(bytes[5]);
  std::cout << "wrr 3000:1000 bytes " << bytes[1] << ':' << bytes[5] << " = " << ratio
            << ", frames " << frames[1] << ':' << frames[5] << "\n";
  // DRR is exact to within one frame per class per measurement edge.
  EXPECT_NEAR(ratio, 3.0, 0.06);
  // Shared by bytes, not frames: the small frames go 9 to 1.
  EXPECT_NEAR(static_cast<double>(frames[1]) / static_cast<double>(frames[5]), 9.0, 0.3);
  EXPECT_EQ(hosts[2]->rx.size(), 2700u);
  EXPECT_EQ(total_drops(), 0u);
}

// --------------------------------------------------------- configuration

TEST_F(SwitchTest, InvalidConfigurationsNameTheParameter) {
  auto expect_error = [&](const SwitchConfig& c, int ports, const std::string& what) {
    try {
      Switch s("bad0", ports, c, *env);
      ADD_FAILURE() << "accepted; expected an error naming " << what;
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("switch bad0"), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  };
  SwitchConfig c;
  c.ecn.kmin = core::Bytes{50000};
  c.ecn.kmax = core::Bytes{40000};
  expect_error(c, 4, "ecn.kmin");
  c = SwitchConfig();
  c.ecn.pmax = 1.5;
  expect_error(c, 4, "ecn.pmax");
  c.ecn.pmax = -0.1;
  expect_error(c, 4, "ecn.pmax");
  c = SwitchConfig();
  c.buffer = core::Bytes{100000};
  c.pfc.enabled = false;
  c.ecn.kmax = core::Bytes{200000};
  expect_error(c, 4, "ecn.kmax");
  c = SwitchConfig();
  c.buffer = core::Bytes{150000};  // xoff 96 KiB + headroom 64 KiB do not fit
  expect_error(c, 4, "pfc.xoff + pfc.headroom");
  c = SwitchConfig();
  c.pfc.xon = core::Bytes{200000};
  expect_error(c, 4, "pfc.xon");
  c = SwitchConfig();
  c.scheduler = SwitchConfig::Scheduler::wrr;
  c.wrr_weights.assign(7, core::Bytes{1500});
  expect_error(c, 4, "wrr_weights");
  expect_error(SwitchConfig(), 0, "ports");
  c = SwitchConfig();
  c.dt_alpha = 0;
  expect_error(c, 4, "dt_alpha");
  // Disabled features are not checked: a small lossy, unmarked switch.
  c = SwitchConfig();
  c.buffer = core::Bytes{10000};
  c.pfc.enabled = false;
  c.ecn.enabled = false;
  EXPECT_NO_THROW(Switch("ok", 1, c, *env));
}

TEST(SwitchConfigBind, DeclaresEveryKeyWithDocsAndLimits) {
  {
    SwitchConfig c;
    test::RecordingBinder b;
    c.bind(b);
    for (const char* k : {"clock", "forwarding_cycles", "buffer", "dt_alpha", "scheduler",
                          "wrr_weights", "kmin", "kmax", "pmax", "queue", "weight", "lossless_mask",
                          "xoff", "xon", "headroom", "quanta", "enabled"}) {
      ASSERT_TRUE(b.keys.count(k)) << k;
      EXPECT_GT(b.keys[k].doc.size(), 20u) << k;
    }
    EXPECT_EQ(b.keys["pmax"].max, 1.0);
    EXPECT_EQ(b.keys["quanta"].min, 1.0);
    EXPECT_EQ(b.keys["quanta"].max, 65535.0);
    EXPECT_EQ(b.keys["lossless_mask"].max, 255.0);
    EXPECT_EQ(b.keys["forwarding_cycles"].unit, "cycles");
    EXPECT_TRUE(b.errors.empty());
  }
  {
    PfcConfig p;
    test::RecordingBinder b;
    b.set["xon"] = 200000;  // above xoff
    p.bind(b);
    ASSERT_EQ(b.errors.size(), 1u);
    EXPECT_NE(b.errors[0].find("xon"), std::string::npos);
  }
}

TEST(SwitchConfigBind, ReadsYaml) {
  const char* yaml = R"(
clock: 500MHz
forwarding_cycles: 150
buffer: 9MiB
dt_alpha: 0.5
scheduler: wrr
wrr_weights: [1KiB, 2KiB, 3KiB, 4KiB, 5KiB, 6KiB, 7KiB, 8KiB]
ecn: {enabled: true, kmin: 5KiB, kmax: 200KiB, pmax: 0.01, queue: average, weight: 0.1}
pfc: {enabled: true, lossless_mask: 24, xoff: 100KiB, xon: 80KiB, headroom: 50KiB, quanta: 1000}
)";
  SwitchConfig c;
  core::YamlBinder(YAML::Load(yaml), "t.yaml").bind_root(c);
  EXPECT_EQ(c.clock.hz, 500e6);
  EXPECT_EQ(c.forwarding_cycles, 150);
  EXPECT_EQ(c.buffer.n, 9u << 20);
  EXPECT_EQ(c.dt_alpha, 0.5);
  EXPECT_EQ(c.scheduler, SwitchConfig::Scheduler::wrr);
  ASSERT_EQ(c.wrr_weights.size(), 8u);
  EXPECT_EQ(c.wrr_weights[7].n, 8192u);
  EXPECT_EQ(c.ecn.kmax.n, 200u * 1024);
  EXPECT_EQ(c.ecn.queue, EcnConfig::Queue::average);
  EXPECT_EQ(c.ecn.weight, 0.1);
  EXPECT_EQ(c.pfc.lossless_mask, 24);
  EXPECT_EQ(c.pfc.quanta, 1000);

  SwitchConfig bad;
  try {
    core::YamlBinder(YAML::Load("scheduler: wrr\npfc: {xon: 1MiB}\necn: {queue: median}\n"),
                     "bad.yaml")
        .bind_root(bad);
    ADD_FAILURE() << "accepted";
  } catch (const core::ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("wrr_weights"), std::string::npos) << msg;
    EXPECT_NE(msg.find("xon"), std::string::npos) << msg;
    EXPECT_NE(msg.find("median"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace mprdma::fabric
