// The one-folder claim of the engine registry: an engine written here, in
// the test tree, registered with one EngineRegistry::add() and chosen by
// nic.transport, carries a WRITE between two modeled hosts, with no change
// anywhere else. It is a windowed variant of go-back-N with its own
// configuration section (a window of N packets) and an id
// the driver ABI does not name (MPR_TRANSPORT_EXPERIMENTAL_FIRST). The
// windows tried are multiples of the responder's ACK coalescing (8
// packets): a smaller window would wait for the retransmission timer, since
// the engine cannot ask for an ACK per packet.
#include <gtest/gtest.h>
#include <mprdma/hw.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "vp/host/two_hosts.h"
#include "vp/nic/firmware/firmware_hal.h"
#include "vp/nic/nic_config.h"
#include "vp/nic/transport/engine_registry.h"
#include "vp/nic/transport/gbn/gbn_engine.h"
#include "vp/nic/transport/transport_mux.h"

namespace mprdma::test {
namespace {

constexpr const char* kName = "test_window";

struct WindowConfig {
  static constexpr const char* kName = "test_window";
  int64_t window = 8;  // packets in flight per QP
  void bind(core::Binder& b) {
    b.field("window", window, "Packets in flight per QP.", 1, 1024, "packets");
  }
};

// Go-back-N that keeps at most `window` packets in flight per QP.
class WindowEngine final : public nic::GbnEngine {
 public:
  explicit WindowEngine(uint32_t window) : window_(window) {}
  const char* name() const override { return kName; }
  nic::TxGrant next_tx(uint32_t qpn, uint64_t now) override {
    if (snd_nxt(qpn) - snd_una(qpn) >= window_) return {};
    return GbnEngine::next_tx(qpn, now);
  }
  void on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) override {
    GbnEngine::on_sent(qpn, psn, npsn, now);
    sent_ += npsn;
    max_in_flight_ = std::max(max_in_flight_, (snd_nxt(qpn) - snd_una(qpn)) & 0xFFFFFF);
  }
  nic::AckResult on_ack(uint32_t qpn, const nic::AckEvent& ack, uint64_t now) override {
    nic::AckResult r = GbnEngine::on_ack(qpn, ack, now);
    if (r.progress) r.tx_ready = true;  // the window opened: ACK clocking
    return r;
  }
  uint32_t max_in_flight() const { return max_in_flight_; }
  uint64_t sent() const { return sent_; }

 private:
  uint32_t window_;
  uint32_t max_in_flight_ = 0;
  uint64_t sent_ = 0;
};

void register_once() {
  nic::EngineRegistry& r = nic::EngineRegistry::instance();
  if (r.find(kName)) return;
  nic::EngineEntry e;
  e.name = kName;
  e.kind = MPR_TRANSPORT_EXPERIMENTAL_FIRST;
  e.doc = "go-back-N with a window of packets (a test's engine)";
  e.section_doc = "The test engine's window.";
  e.make_section = [] { return std::make_unique<core::PluginSectionOf<WindowConfig>>(); };
  e.impls.push_back({"model", "in the test tree", [](const nic::NicConfig& cfg, core::SimEnv&) {
                       return std::make_unique<WindowEngine>(
                           static_cast<uint32_t>(cfg.engines.get<WindowConfig>().window));
                     }});
  r.add(std::move(e));
}

WindowEngine& engine_of(host::ModeledHost& h) {
  auto& mux = dynamic_cast<nic::TransportMux&>(h.nic().engine());
  return dynamic_cast<WindowEngine&>(mux.engine(MPR_TRANSPORT_DEFAULT));
}

class RegisteredEngine : public TwoHostsTest, public ::testing::WithParamInterface<int> {};

TEST_P(RegisteredEngine, CarriesAWriteBetweenTwoModeledHosts) {
  register_once();
  const int window = GetParam();
  TwoHosts::Options o;
  o.nic = [window](nic::NicConfig& n) {
    n.transport = kName;
    n.engines.get<WindowConfig>().window = window;
  };
  Build(o);
  Run([&] {
    QpPair p = bench->make_pair();
    EXPECT_STREQ(bench->h0().nic().engine().name_of(p.a.qpn()), kName);
    const std::vector<uint8_t> a0 = p.a.prefill(21), b0 = p.b.prefill(22);
    mpr_sge s = p.a.sge(0, 20000);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_WRITE, &s, p.b, 512)), 0);
    const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq);
    EXPECT_EQ(wc.status, MPR_CQE_SUCCESS);
    std::vector<uint8_t> want = b0;
    std::copy(a0.begin(), a0.begin() + 20000, want.begin() + 512);
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), want));
  });
  const WindowEngine& e = engine_of(bench->h0());
  EXPECT_EQ(e.sent(), 20u);  // 20000 B in 1 KB packets, none resent
  EXPECT_EQ(e.max_in_flight(), static_cast<uint32_t>(window));
  // The ABI does not name it: CAPS offers only go-back-N.
  const nic::TransportOffer offer{bench->h0().nic().config().transport_kinds(), MPR_TRANSPORT_GBN};
  EXPECT_EQ(offer.caps(), nic::TransportOffer().caps());
}

INSTANTIATE_TEST_SUITE_P(Windows, RegisteredEngine, ::testing::Values(8, 16));

// A name or id that is taken, or an ABI id under another name, is refused.
TEST(EngineRegistry, RefusesClashes) {
  register_once();
  nic::EngineRegistry& r = nic::EngineRegistry::instance();
  auto entry = [](const char* name, uint8_t kind) {
    nic::EngineEntry e;
    e.name = name;
    e.kind = kind;
    e.impls.push_back({"model", "", [](const nic::NicConfig&, core::SimEnv&) {
                         return std::make_unique<nic::GbnEngine>();
                       }});
    return e;
  };
  EXPECT_THROW(r.add(entry(kName, MPR_TRANSPORT_EXPERIMENTAL_FIRST + 1)), std::invalid_argument);
  EXPECT_THROW(r.add(entry("other", MPR_TRANSPORT_EXPERIMENTAL_FIRST)), std::invalid_argument);
  EXPECT_THROW(r.add(entry("other", MPR_TRANSPORT_IRN)), std::invalid_argument);
  EXPECT_THROW(r.add(entry("other", 40)), std::invalid_argument);
  EXPECT_THROW(r.add(entry("other", MPR_TRANSPORT_DEFAULT)), std::invalid_argument);
  nic::EngineEntry none = entry("other", MPR_TRANSPORT_EXPERIMENTAL_LAST);
  none.impls.clear();
  EXPECT_THROW(r.add(std::move(none)), std::invalid_argument);
}

// What the registry says of the built-in engines holds for the engines it
// builds: names, ids of the ABI, and who keeps a window of their own.
TEST(EngineRegistry, BuiltInEntriesMatchTheirEngines) {
  core::SimEnv env;
  nic::NicConfig cfg;
  for (const nic::EngineEntry& e : nic::EngineRegistry::instance().entries()) {
    if (e.kind >= MPR_TRANSPORT_EXPERIMENTAL_FIRST) continue;
    SCOPED_TRACE(e.name);
    EXPECT_STREQ(mpr_transport_name(e.kind), e.name.c_str());
    const auto engine = nic::EngineRegistry::instance().make(e.name, "model", cfg, env);
    EXPECT_EQ(engine->name(), e.name);
    EXPECT_EQ(engine->traits().own_congestion_control, e.own_congestion_control);
    EXPECT_TRUE(cfg.engines.find(e.name) != nullptr || !e.make_section);
  }
  EXPECT_EQ(nic::EngineRegistry::instance().qp_transport_names(),
            (std::vector<std::string>{"default", "gbn", "mprdma", "dcqcn", "irn"}));
}

}  // namespace
}  // namespace mprdma::test
