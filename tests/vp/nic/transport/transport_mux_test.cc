// Unit: TransportMux routes every call for a QP to the engine of the QP's
// context (ConnParams.engine), answers for QPs no engine holds without
// asking any engine (a packet may name any QP number), and sizes the QPC
// line for the largest offered engine.
#include "vp/nic/transport/transport_mux.h"

#include <gtest/gtest.h>
#include <mprdma/hw.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mprdma::nic {
namespace {

// An engine that records which QPs it was asked about.
EngineTraits probe_traits(const std::string& name, bool ooo) {
  EngineTraits t;
  t.out_of_order = ooo;
  t.own_congestion_control = ooo && name == "mprdma";
  return t;
}

class Probe : public TransportEngine {
 public:
  Probe(std::string name, size_t bytes, bool ooo)
      : TransportEngine(probe_traits(name, ooo)), name_(std::move(name)), bytes_(bytes) {}
  const char* name() const override { return name_.c_str(); }
  size_t state_bytes() const override { return bytes_; }
  void open(const ConnParams& p) override { calls.push_back("open " + std::to_string(p.qpn)); }
  void set_requester(const ConnParams& p) override {
    calls.push_back("rts " + std::to_string(p.qpn));
  }
  void close(uint32_t qpn) override { calls.push_back("close " + std::to_string(qpn)); }
  void set_snd_max(uint32_t, uint32_t, uint64_t) override {}
  TxGrant next_tx(uint32_t qpn, uint64_t) override {
    calls.push_back("tx " + std::to_string(qpn));
    return {};
  }
  void on_sent(uint32_t, uint32_t, uint32_t, uint64_t) override {}
  AckResult on_ack(uint32_t qpn, const AckEvent&, uint64_t) override {
    calls.push_back("ack " + std::to_string(qpn));
    return {};
  }
  uint64_t wake_at(uint32_t) const override { return 0; }
  AckResult on_timer(uint32_t, uint64_t) override { return {}; }
  uint32_t snd_una(uint32_t) const override { return 0; }
  uint32_t snd_nxt(uint32_t) const override { return 0; }
  RxVerdict classify(uint32_t qpn, uint32_t, uint64_t) override {
    calls.push_back("rx " + std::to_string(qpn));
    return RxVerdict::accept;
  }
  AckDecision commit(uint32_t, uint32_t, bool, bool, uint64_t) override { return {}; }
  uint32_t epsn(uint32_t) const override { return 0; }
  void nak_sent(uint32_t) override {}

  std::vector<std::string> calls;

 private:
  std::string name_;
  size_t bytes_;
};

ConnParams conn(uint32_t qpn, uint8_t engine) {
  ConnParams p;
  p.qpn = qpn;
  p.engine = engine;
  return p;
}

class TransportMuxTest : public ::testing::Test {
 protected:
  void build(uint8_t default_kind, bool with_irn = true) {
    auto g = std::make_unique<Probe>("gbn", 40, false);
    auto m = std::make_unique<Probe>("mprdma", 106, true);
    auto i = with_irn ? std::make_unique<Probe>("irn", 90, true) : nullptr;
    gbn = g.get();
    mp = m.get();
    irn = i.get();
    std::vector<TransportMux::Offered> offered;
    offered.push_back({{MPR_TRANSPORT_GBN, MPR_TRANSPORT_DCQCN}, std::move(g)});
    offered.push_back({{MPR_TRANSPORT_MP_RDMA}, std::move(m)});
    offered.push_back({{MPR_TRANSPORT_IRN}, std::move(i)});  // a null engine is not offered
    mux = std::make_unique<TransportMux>(std::move(offered), default_kind);
  }
  static std::vector<TransportMux::Offered> one(std::vector<uint8_t> kinds) {
    std::vector<TransportMux::Offered> o;
    o.push_back({std::move(kinds), std::make_unique<Probe>("gbn", 40, false)});
    return o;
  }
  std::unique_ptr<TransportMux> mux;
  Probe *gbn = nullptr, *mp = nullptr, *irn = nullptr;
};

TEST_F(TransportMuxTest, RoutesEachQpToItsEngine) {
  build(MPR_TRANSPORT_GBN);
  mux->open(conn(5, MPR_TRANSPORT_MP_RDMA));
  mux->open(conn(6, MPR_TRANSPORT_IRN));
  mux->open(conn(7, MPR_TRANSPORT_DEFAULT));
  mux->open(conn(8, MPR_TRANSPORT_DCQCN));  // go-back-N under the NIC's DCQCN
  for (uint32_t q : {5u, 6u, 7u, 8u}) {
    mux->next_tx(q, 0);
    mux->on_ack(q, AckEvent{}, 0);
    mux->classify(q, 0, 0);
  }
  EXPECT_EQ(mp->calls, (std::vector<std::string>{"open 5", "tx 5", "ack 5", "rx 5"}));
  EXPECT_EQ(irn->calls, (std::vector<std::string>{"open 6", "tx 6", "ack 6", "rx 6"}));
  EXPECT_EQ(gbn->calls, (std::vector<std::string>{"open 7", "open 8", "tx 7", "ack 7", "rx 7",
                                                  "tx 8", "ack 8", "rx 8"}));
  // What the message layer asks per QP.
  EXPECT_TRUE(mux->traits_of(5).out_of_order);
  EXPECT_TRUE(mux->traits_of(5).own_congestion_control);
  EXPECT_TRUE(mux->traits_of(6).out_of_order);
  EXPECT_FALSE(mux->traits_of(6).own_congestion_control);
  EXPECT_FALSE(mux->traits_of(7).out_of_order);
  // NIC-wide answers are the default engine's.
  EXPECT_STREQ(mux->name(), "gbn");
  EXPECT_FALSE(mux->traits().out_of_order);
  EXPECT_STREQ(mux->name_of(5), "mprdma");
}

TEST_F(TransportMuxTest, UnboundQpsReachNoEngine) {
  build(MPR_TRANSPORT_MP_RDMA);
  EXPECT_STREQ(mux->name(), "mprdma");
  // A packet or an ACK for a QP that never reached RTR (a UD QP, a number
  // nobody holds): no engine is asked, the answer is "nothing to do".
  EXPECT_EQ(mux->classify(9, 0, 0), RxVerdict::drop);
  EXPECT_EQ(mux->on_data(9, RxPacket{}, 0).verdict, RxOutcome::Verdict::drop);
  EXPECT_FALSE(mux->next_tx(9, 0).send);
  EXPECT_FALSE(mux->on_ack(9, AckEvent{}, 0).progress);
  EXPECT_EQ(mux->on_read_ack(9, AckExt{}, 0).error, AckResult::Error::none);
  EXPECT_FALSE(mux->traits_of(9).explicit_read_acks);
  EXPECT_FALSE(mux->traits_of(9).out_of_order);
  EXPECT_STREQ(mux->name_of(9), "none");
  EXPECT_EQ(mux->wake_at(9), kNever);
  EXPECT_FALSE(mux->bound(9));
  EXPECT_TRUE(mp->calls.empty());
  EXPECT_TRUE(gbn->calls.empty());
  mux->open(conn(9, MPR_TRANSPORT_DEFAULT));
  EXPECT_TRUE(mux->bound(9));
  EXPECT_STREQ(mux->name_of(9), "mprdma");
  EXPECT_TRUE(mux->traits_of(9).out_of_order);
  // After close, the QP is unbound again.
  mux->open(conn(10, MPR_TRANSPORT_GBN));
  mux->close(10);
  mux->classify(10, 0, 0);
  EXPECT_EQ(gbn->calls, (std::vector<std::string>{"open 10", "close 10"}));
  EXPECT_FALSE(mux->bound(10));
}

TEST_F(TransportMuxTest, RebindingAQpNumberClosesItInTheOldEngine) {
  build(MPR_TRANSPORT_GBN);
  mux->open(conn(5, MPR_TRANSPORT_MP_RDMA));
  mux->set_requester(conn(5, MPR_TRANSPORT_MP_RDMA));  // RTS: same engine, no close
  mux->set_requester(conn(5, MPR_TRANSPORT_IRN));      // a later life of the number
  EXPECT_EQ(mp->calls, (std::vector<std::string>{"open 5", "rts 5", "close 5"}));
  EXPECT_EQ(irn->calls, std::vector<std::string>{"rts 5"});
  EXPECT_STREQ(mux->name_of(5), "irn");
}

TEST_F(TransportMuxTest, StateIsTheLargestOfferedEngines) {
  build(MPR_TRANSPORT_GBN);
  EXPECT_EQ(mux->state_bytes(), 106u);
  build(MPR_TRANSPORT_GBN, /*with_irn=*/false);
  EXPECT_EQ(mux->find(MPR_TRANSPORT_IRN), nullptr);
  EXPECT_EQ(mux->find(MPR_TRANSPORT_DEFAULT), gbn);
  EXPECT_THROW(mux->engine(MPR_TRANSPORT_IRN), std::invalid_argument);
  EXPECT_THROW(mux->engine(200), std::invalid_argument);
  EXPECT_THROW(mux->open(conn(3, MPR_TRANSPORT_IRN)), std::invalid_argument);
}

TEST_F(TransportMuxTest, RefusesADefaultThatIsNotOffered) {
  EXPECT_THROW(TransportMux(one({MPR_TRANSPORT_GBN}), MPR_TRANSPORT_IRN), std::invalid_argument);
  EXPECT_THROW(TransportMux({}, MPR_TRANSPORT_GBN), std::invalid_argument);
  EXPECT_THROW(TransportMux(one({MPR_TRANSPORT_GBN}), MPR_TRANSPORT_DEFAULT),
               std::invalid_argument);
}

// Ids are unique, below 32, and DEFAULT is no engine's own.
TEST_F(TransportMuxTest, RefusesIdsItCannotRoute) {
  EXPECT_THROW(TransportMux(one({MPR_TRANSPORT_GBN, MPR_TRANSPORT_GBN}), MPR_TRANSPORT_GBN),
               std::invalid_argument);
  EXPECT_THROW(TransportMux(one({MPR_TRANSPORT_GBN, 32}), MPR_TRANSPORT_GBN),
               std::invalid_argument);
  EXPECT_THROW(TransportMux(one({MPR_TRANSPORT_GBN, MPR_TRANSPORT_DEFAULT}), MPR_TRANSPORT_GBN),
               std::invalid_argument);
  // An experimental id routes like any other.
  TransportMux mux(one({MPR_TRANSPORT_EXPERIMENTAL_FIRST}), MPR_TRANSPORT_EXPERIMENTAL_FIRST);
  EXPECT_EQ(mux.find(MPR_TRANSPORT_DEFAULT), mux.find(MPR_TRANSPORT_EXPERIMENTAL_FIRST));
  EXPECT_EQ(mux.find(MPR_TRANSPORT_GBN), nullptr);
}

}  // namespace
}  // namespace mprdma::nic
