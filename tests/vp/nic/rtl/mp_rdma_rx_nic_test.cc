// The MP-RDMA receivers of a NIC on the RTL (nic.transport_impl rtl and
// lockstep): the engine behind MpRdmaEngine decides as the golden models
// do, counts the same, hands context rows to connections and takes them
// back, is clocked only while it works, and refuses what it cannot run.
#include "vp/nic/rtl/mp_rdma_rx_nic.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "mprdma/rtl_params.h"
#include "vp/core/sim_env.h"
#include "vp/nic/rtl/mp_rdma_rx_rtl.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_engine.h"

namespace mprdma::nic::rtl {
namespace {

namespace p = mprdma::rtl;

MpRdmaEngineParams params() {
  MpRdmaEngineParams p;
  p.bitmap_slots = MpRxRtl::slots();
  return p;
}

RxPacket packet(uint32_t psn, std::mt19937_64& gen) {
  RxPacket p;
  p.psn = psn & kPsnMask;
  p.vp = static_cast<uint16_t>(0xC000 + gen() % 8);
  p.ce = gen() % 5 == 0;
  p.retx = gen() % 7 == 0;
  p.tail = gen() % 3 == 0;
  p.completion = p.tail && gen() % 2;
  p.sync = gen() % 11 == 0;
  p.ipsn = p.sync ? static_cast<uint32_t>(gen() % 3) : 0;
  return p;
}

bool same(const nic::RxOutcome& a, const nic::RxOutcome& b) {
  return a.verdict == b.verdict && a.send_ack == b.send_ack && a.ack.echo_vp == b.ack.echo_vp &&
         a.ack.sack == b.ack.sack && a.ack.aack == b.ack.aack && a.ack.ece == b.ack.ece &&
         a.ack.retx == b.ack.retx && a.ack.nack == b.ack.nack && a.completed == b.completed;
}

// The same packets into an engine on the golden models and one on the
// RTL (and one in lockstep): the same outcomes, counters and rcv_nxt,
// across connections that open, close and open again.
TEST(MpRxNic, EngineOnTheRtlDecidesAsTheModel) {
  for (RxImplMode mode : {RxImplMode::rtl, RxImplMode::lockstep}) {
    core::SimEnv env;
    MpRdmaEngine model(params());
    MpRdmaEngine rtl(
        params(), &env.stats, "nic.h1.transport.",
        make_rx_impl(mode, "mprdma", MpRxRtl::slots(), MpOverflowNack::every_drop, "h1", env));
    std::mt19937_64 gen(3);
    std::vector<uint32_t> qpns = {17, 18, 4000};
    uint64_t now = 100;
    for (uint32_t q : qpns) {
      ConnParams c;
      c.qpn = q;
      c.rq_psn = q == 4000 ? kPsnMask - 20 : q * 1000;  // one across the PSN wrap
      model.open(c);
      rtl.open(c);
    }
    for (int i = 0; i < 20000; ++i) {
      const uint32_t q = qpns[gen() % qpns.size()];
      if (i % 5000 == 2500) {
        // A connection comes and goes: its row is handed back and reused.
        ConnParams c;
        c.qpn = q;
        c.rq_psn = static_cast<uint32_t>(gen()) & kPsnMask;
        model.close(q);
        rtl.close(q);
        model.open(c);
        rtl.open(c);
      }
      const int64_t ahead = static_cast<int64_t>(gen() % 80) - 8;
      const RxPacket p = packet(psn_add(model.epsn(q), ahead), gen);
      now += gen() % 3;  // at times two packets in one cycle
      const nic::RxOutcome a = model.on_data(q, p, now);
      const nic::RxOutcome b = rtl.on_data(q, p, now);
      ASSERT_TRUE(same(a, b)) << "operation " << i << " on QP " << q << " psn " << p.psn;
      ASSERT_EQ(model.epsn(q), rtl.epsn(q));
    }
    for (uint32_t q : qpns) {
      const MpReceiver::Counters& a = *model.receiver_counters(q);
      const MpReceiver::Counters& b = *rtl.receiver_counters(q);
      EXPECT_EQ(a.placed, b.placed);
      EXPECT_EQ(a.duplicates, b.duplicates);
      EXPECT_EQ(a.overflow_drops, b.overflow_drops);
      EXPECT_EQ(a.sync_drops, b.sync_drops);
      EXPECT_EQ(a.nacks, b.nacks);
      EXPECT_EQ(a.messages, b.messages);
      EXPECT_EQ(a.completions, b.completions);
      EXPECT_EQ(a.max_ood, b.max_ood);
      EXPECT_GT(b.placed, 0u);
      EXPECT_GT(b.overflow_drops + b.sync_drops, 0u);
    }
    EXPECT_EQ(rtl.receiver(17), nullptr) << "no golden receiver where the RTL decides";
    // 20000 packets, 3 inits and 4 reopenings.
    const uint64_t ops = env.stats.find_counter("nic.h1.transport.rtl.operations")->value();
    EXPECT_EQ(ops, 20000u + 3 + 4);
    // Clocked only while an operation is in it: two edges of work each,
    // however many idle cycles lay between.
    EXPECT_EQ(env.stats.find_counter("nic.h1.transport.rtl.cycles")->value(), 2 * ops);
  }
}

// A flipped bit in the RTL's RAM stops a NIC in lockstep at the next
// packet of that QP, with the NIC, the QP, its row and the field named, and
// the replay's waveform written into the run's directory.
TEST(MpRxNic, LockstepDivergenceStopsWithAReportAndAWaveform) {
  core::SimEnv env;
  env.out_dir = ::testing::TempDir();
  const std::string fst = env.out_dir + "/lockstep-h1.fst";
  std::remove(fst.c_str());
  auto rx = make_rx_impl(RxImplMode::lockstep, "mprdma", MpRxRtl::slots(),
                         MpOverflowNack::every_drop, "h1", env);
  rx->open(40, 1000);
  rx->open(41, 5000);
  MpData d;
  for (uint32_t i = 0; i < 30; ++i) {
    d.psn = 1000 + (i ^ 1);
    rx->on_data(40, d, 10 + i);
  }
  MpRxRtl* e = rx_impl_engine(*rx);
  ASSERT_NE(e, nullptr);
  e->flip_context_bit(1, p::RX_CTX_RCV_NXT_LSB + 2);  // QP 41's row
  d.psn = 1030;
  rx->on_data(40, d, 50);  // another QP: unharmed
  d.psn = 5000;
  try {
    rx->on_data(41, d, 60);
    FAIL() << "a flipped rcv_nxt bit went unnoticed";
  } catch (const std::runtime_error& err) {
    const std::string m = err.what();
    EXPECT_EQ(m.rfind("nic h1, QP 41 (context row 1): lockstep divergence", 0), 0u) << m;
    EXPECT_NE(m.find("[context rcv_nxt]"), std::string::npos) << m;
    EXPECT_NE(m.find("waveform: " + fst), std::string::npos) << m;
  }
  std::ifstream in(fst, std::ios::binary);
  EXPECT_TRUE(in) << fst;
}

TEST(MpRxNic, RowsAreHandedOutAndBack) {
  core::SimEnv env;
  auto rx = make_rx_impl(RxImplMode::rtl, "mprdma", MpRxRtl::slots(), MpOverflowNack::every_drop,
                         "h0", env);
  for (uint32_t q = 0; q < MpRxRtl::rows(); ++q) rx->open(100 + q, q);
  try {
    rx->open(99, 0);
    FAIL() << "a receiver beyond the context RAM's rows";
  } catch (const EngineContextExhausted& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("nic h0"), std::string::npos) << m;
    EXPECT_NE(m.find("QP 99"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(MpRxRtl::rows()) + " rows"), std::string::npos) << m;
  }
  rx->close(150);
  rx->open(99, 7);
  EXPECT_EQ(rx->rcv_nxt(99), 7u);
  // Reopening a QP reuses its own row, and starts over.
  rx->open(99, 8);
  EXPECT_EQ(rx->rcv_nxt(99), 8u);
  EXPECT_THROW(rx->rcv_nxt(150), std::logic_error);
}

TEST(MpRxNic, RefusesABitmapOfAnotherLength) {
  core::SimEnv env;
  try {
    make_rx_impl(RxImplMode::rtl, "mprdma", 2 * MpRxRtl::slots(), MpOverflowNack::every_drop, "h3",
                 env);
    FAIL() << "an RTL receiver of the wrong L";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("nic h3"), std::string::npos) << m;
    EXPECT_NE(m.find("mprdma.bitmap_slots is " + std::to_string(2 * MpRxRtl::slots())),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("L = " + std::to_string(MpRxRtl::slots())), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace mprdma::nic::rtl
