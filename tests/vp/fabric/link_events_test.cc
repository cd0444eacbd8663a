// EthLink run-time controls: down/up (frames in flight lost, pacing kept),
// rate changes (a frame in serialisation keeps its rate), the IP-ID loss
// rule, per-direction settings, and scheduling them on a timeline.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/recording_binder.h"
#include "support/sim_test.h"
#include "vp/core/calendar.h"
#include "vp/fabric/eth_link.h"
#include "vp/net/packet.h"
#include "vp/net/roce_codec.h"

namespace mprdma::fabric {
namespace {

using sc_core::sc_time;

sc_time ps(uint64_t v) { return sc_time::from_value(v); }

// A RoCEv2 frame with a given IP identification.
net::PacketPtr roce(uint16_t ip_id, uint64_t id) {
  net::RoceFields f;
  f.src_ip = 0x0A000001;
  f.dst_ip = 0x0A000002;
  f.ip_id = ip_id;
  f.opcode = net::Opcode::ACKNOWLEDGE;
  net::PacketPtr p = net::build_roce(f, nullptr, 0);
  p->id = id;
  return p;
}

// A raw frame of `bytes` (not IPv4: its type field is zero).
net::PacketPtr raw(size_t bytes, uint64_t id) {
  auto p = std::make_unique<net::Packet>();
  p->data.assign(bytes, 0);
  p->id = id;
  return p;
}

class Recorder : public net::EthPortIf {
 public:
  void receive(net::PacketPtr pkt) override {
    ids.push_back(pkt->id);
    times.push_back(sc_core::sc_time_stamp().value());
  }
  std::vector<uint64_t> ids;
  std::vector<uint64_t> times;
};

class LinkEvents : public test::SimTest {
 protected:
  void make(LinkConfig cfg) {
    cfg.name = "l";
    driver = std::make_unique<core::Calendar>("driver");
    link = std::make_unique<EthLink>("l", cfg, *env);
    link->attach(0, &rx0);
    link->attach(1, &rx1);
  }
  uint64_t counter(const std::string& path) const {
    const core::Counter* c = env->stats.find_counter(path);
    EXPECT_NE(c, nullptr) << path;
    return c ? c->value() : 0;
  }
  // Sends `make_frame(i)` for i in [0, n) from `side`, each as soon as the
  // transmitter is free; records each transmit's free time.
  void stream(int side, size_t n, std::function<net::PacketPtr(size_t)> make_frame) {
    auto i = std::make_shared<size_t>(0);
    auto next = std::make_shared<std::function<void()>>();
    *next = [this, side, n, make_frame, i, next] {
      if (*i == n) return;
      const sc_time free = link->transmit(side, make_frame((*i)++));
      free_times.push_back(free.value());
      driver->at(free, *next);
    };
    driver->at(sc_core::SC_ZERO_TIME, *next);
    keep.push_back(next);
  }
  void TearDown() override {
    for (auto& f : keep) *f = nullptr;
    link.reset();
    driver.reset();
  }
  Recorder rx0, rx1;
  std::unique_ptr<core::Calendar> driver;
  std::unique_ptr<EthLink> link;
  std::vector<uint64_t> free_times;
  std::vector<std::shared_ptr<std::function<void()>>> keep;
};

// 1000-byte frames: 1024 wire bytes = 204.8 ns at 40 Gb/s.
constexpr uint64_t kFramePs = 204800;
constexpr uint64_t kDelayPs = 200000;

TEST_F(LinkEvents, DownLosesFramesInFlightAndSentButKeepsThePace) {
  make(LinkConfig{});
  stream(0, 10, [](size_t i) { return raw(1000, i); });
  // Down after frame 2 finished serialising (it is on the wire, arriving
  // at 3 * frame + delay) and during frame 3; up before frame 7 starts.
  const uint64_t down_at = 3 * kFramePs + 1000;
  const uint64_t up_at = 7 * kFramePs - 1000;
  driver->at(ps(down_at), [&] {
    EXPECT_EQ(link->in_flight(0), 2u);  // frames 2 (on the wire) and 3 (being sent)
    link->set_up(false, 0);
    EXPECT_EQ(link->in_flight(0), 0u);
    EXPECT_FALSE(link->is_up(0));
    EXPECT_TRUE(link->is_up(1));  // the other direction is untouched
  });
  driver->at(ps(up_at), [&] { link->set_up(true, 0); });
  sc_core::sc_start();
  // Frames 0 and 1 arrived before the failure; 2..6 were lost (in flight or
  // sent while down); 7..9 arrive.
  EXPECT_EQ(rx1.ids, (std::vector<uint64_t>{0, 1, 7, 8, 9}));
  EXPECT_EQ(counter("link.l.a2b.down_drops"), 5u);
  EXPECT_EQ(counter("link.l.a2b.drops"), 5u);
  EXPECT_EQ(counter("link.l.a2b.tx_packets"), 10u);
  // The transmitter kept its pace: frame i ended at (i + 1) * frame time.
  ASSERT_EQ(free_times.size(), 10u);
  for (size_t i = 0; i < free_times.size(); ++i) EXPECT_EQ(free_times[i], (i + 1) * kFramePs) << i;
  EXPECT_EQ(rx1.times[2], 8 * kFramePs + kDelayPs);
}

TEST_F(LinkEvents, RateChangeAppliesToTheNextFrame) {
  make(LinkConfig{});
  stream(0, 3, [](size_t i) { return raw(1000, i); });
  // During frame 0: it finishes at 40 Gb/s; frames 1 and 2 go at 10 Gb/s.
  driver->at(ps(1000), [&] { link->set_rate(core::Bandwidth{10e9}, 0); });
  sc_core::sc_start();
  EXPECT_EQ(free_times,
            (std::vector<uint64_t>{kFramePs, kFramePs + 4 * kFramePs, kFramePs + 8 * kFramePs}));
  EXPECT_EQ(link->rate(0).bps, 10e9);
  EXPECT_EQ(link->rate(1).bps, 40e9);
  EXPECT_THROW(link->set_rate(core::Bandwidth{0}), std::invalid_argument);
}

TEST_F(LinkEvents, IpIdModuloDropsExactlyTheMultiplesInItsDirection) {
  LinkConfig cfg;
  cfg.loss_ip_id_modulo = 7;
  cfg.loss_dir = LinkConfig::LossDir::a2b;
  make(cfg);
  stream(0, 50, [](size_t i) { return roce(static_cast<uint16_t>(i), i); });
  sc_core::sc_start();
  std::vector<uint64_t> want;
  for (uint64_t i = 0; i < 50; ++i)
    if (i % 7) want.push_back(i);
  EXPECT_EQ(rx1.ids, want);
  EXPECT_EQ(counter("link.l.a2b.ip_id_drops"), 8u);  // 0, 7, ..., 49
  EXPECT_EQ(counter("link.l.a2b.drops"), 8u);
  EXPECT_EQ(link->loss_ip_id_modulo(1), 0u);  // b2a is not lossy
}

TEST_F(LinkEvents, IpIdRuleSparesTheOtherDirectionAndNonIpFrames) {
  LinkConfig cfg;
  cfg.loss_ip_id_modulo = 2;
  cfg.loss_dir = LinkConfig::LossDir::a2b;
  make(cfg);
  stream(1, 10, [](size_t i) { return roce(static_cast<uint16_t>(i), i); });
  sc_core::sc_start();
  EXPECT_EQ(rx0.ids.size(), 10u);
  EXPECT_EQ(counter("link.l.b2a.ip_id_drops"), 0u);
  // Non-IPv4 frames (PAUSE frames, say) pass whatever their bytes.
  link->set_loss_ip_id_modulo(1);  // every IPv4 frame, both directions
  driver->at(sc_core::sc_time_stamp(), [&] { link->transmit(0, raw(100, 100)); });
  driver->at(sc_core::sc_time_stamp() + ps(kFramePs), [&] { link->transmit(0, roce(3, 101)); });
  sc_core::sc_start();
  EXPECT_EQ(rx1.ids, std::vector<uint64_t>{100});
  EXPECT_EQ(counter("link.l.a2b.ip_id_drops"), 1u);
}

TEST_F(LinkEvents, ScheduledChangesRunAtTheirTime) {
  make(LinkConfig{});
  LinkChange down;
  down.kind = LinkChange::Kind::kDown;
  LinkChange up;
  up.kind = LinkChange::Kind::kUp;
  LinkChange slow;
  slow.kind = LinkChange::Kind::kRate;
  slow.rate = core::Bandwidth{1e9};
  slow.side = 1;
  LinkChange lossy;
  lossy.kind = LinkChange::Kind::kLoss;
  lossy.loss = 1.0;
  lossy.side = 0;
  link->schedule(ps(1000), down);
  link->schedule(ps(2000), up);
  link->schedule(ps(3000), slow);
  link->schedule(ps(4000), lossy);
  std::vector<std::string> seen;
  auto probe = [&] {
    seen.push_back(std::string(link->is_up(0) ? "up" : "down") + "/" +
                   std::to_string(int(link->rate(1).gbps())) + "/" +
                   std::to_string(link->loss(0)).substr(0, 3));
  };
  for (uint64_t t : {500, 1500, 2500, 3500, 4500}) driver->at(ps(t), probe);
  sc_core::sc_start();
  EXPECT_EQ(seen, (std::vector<std::string>{"up/40/0.0", "down/40/0.0", "up/40/0.0", "up/1/0.0",
                                            "up/1/1.0"}));
  LinkChange bad;
  bad.kind = LinkChange::Kind::kLoss;
  bad.loss = 2;
  EXPECT_THROW(link->schedule(ps(5000), bad), std::invalid_argument);
}

TEST_F(LinkEvents, DownBothDirectionsThenUpDeliversAgain) {
  make(LinkConfig{});
  link->set_up(false);
  EXPECT_FALSE(link->is_up(0));
  EXPECT_FALSE(link->is_up(1));
  driver->at(ps(0), [&] {
    link->transmit(0, raw(100, 1));
    link->transmit(1, raw(100, 2));
  });
  driver->at(ps(1000000), [&] {
    link->set_up(true);
    link->transmit(0, raw(100, 3));
    link->transmit(1, raw(100, 4));
  });
  sc_core::sc_start();
  EXPECT_EQ(rx1.ids, std::vector<uint64_t>{3});
  EXPECT_EQ(rx0.ids, std::vector<uint64_t>{4});
  EXPECT_EQ(counter("link.l.a2b.down_drops"), 1u);
  EXPECT_EQ(counter("link.l.b2a.down_drops"), 1u);
}

TEST_F(LinkEvents, LossModeKeysAreBoundApartAndChecked) {
  // The back-to-back keys (LinkConfig::bind) stay as they were; the loss
  // modes are bound by bind_loss_modes().
  LinkConfig cfg;
  test::RecordingBinder b;
  cfg.bind_loss_modes(b);
  EXPECT_EQ(b.keys.size(), 2u);
  EXPECT_TRUE(b.keys.count("loss_ip_id_modulo"));
  EXPECT_TRUE(b.keys.count("loss_dir"));
  EXPECT_EQ(b.keys["loss_ip_id_modulo"].max, 65536.0);
}

}  // namespace
}  // namespace mprdma::fabric
