// The MP-RDMA senders of a NIC on the RTL, and the timing the NIC charges
// for them (nic.rtl_timing): charged, each packet leaves when the engine
// clocked it out, an ACK's operation overlapping the ACK stage; model, at
// once, as the golden model's. Either way the same packets on the same
// paths as the golden model.
#include "vp/nic/rtl/mp_rdma_tx_nic.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "vp/core/sim_env.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_engine.h"

namespace mprdma::nic::rtl {
namespace {

constexpr uint32_t kQp = 7;
constexpr uint32_t kIsn = 100;

struct Bench {
  explicit Bench(bool charged, uint64_t ack_stage = 4) {
    TxTiming t;
    t.charged = charged;
    t.ack_stage_cycles = ack_stage;
    engine = std::make_unique<MpRdmaEngine>(
        params, &env.stats, "nic.h0.transport.", nullptr,
        make_tx_impl(RxImplMode::rtl, params.sender, params.rng_seed, "h0", env, t));
    ConnParams c;
    c.qpn = kQp;
    c.sq_psn = kIsn;
    engine->set_requester(c);
  }
  uint64_t counter(const char* name) const {
    return env.stats.find_counter(std::string("nic.h0.transport.rtl.") + name)->value();
  }
  MpRdmaEngineParams params;
  core::SimEnv env;
  std::unique_ptr<MpRdmaEngine> engine;
};

AckEvent ack_for(const TxGrant& g) {
  AckEvent a;
  a.kind = AckEvent::Kind::ack;
  a.has_ext = true;
  a.ext.echo_vp = g.udp_sport;
  a.ext.sack = g.psn;
  a.ext.aack = g.psn;
  return a;
}

// Charged: the first of the initial window's packets is held for the
// cycles the set_max operation takes to clock it out, the next ones one
// cycle apart; wake_at() names each cycle; the held cycles are counted.
// They are the golden model's packets, on its paths.
TEST(MpTxNic, ChargedTimingHoldsEachPacketUntilTheEngineClockedItOut) {
  Bench b(true);
  MpRdmaEngine model(b.params);
  ConnParams c;
  c.qpn = kQp;
  c.sq_psn = kIsn;
  model.set_requester(c);
  const uint64_t now = 1000;
  b.engine->set_snd_max(kQp, kIsn + 64, now);
  model.set_snd_max(kQp, kIsn + 64, now);
  uint64_t held_sum = 0, prev = 0;
  size_t n = 0;
  for (TxGrant m = model.next_tx(kQp, now); m.send; m = model.next_tx(kQp, now), ++n) {
    const TxGrant early = b.engine->next_tx(kQp, now);
    ASSERT_FALSE(early.send) << "packet " << n << " left before the engine clocked it out";
    ASSERT_GT(early.held_until, now);
    EXPECT_EQ(b.engine->wake_at(kQp), early.held_until);
    if (n == 0) {
      EXPECT_GE(early.held_until, now + 3) << "take, apply, clock out: three edges at least";
    } else {
      EXPECT_EQ(early.held_until, prev + 1) << "one packet per cycle";
    }
    prev = early.held_until;
    held_sum += early.held_until - now;
    const TxGrant g = b.engine->next_tx(kQp, early.held_until);
    ASSERT_TRUE(g.send);
    EXPECT_EQ(g.psn, m.psn);
    EXPECT_EQ(g.udp_sport, m.udp_sport);
    EXPECT_EQ(g.held_until, 0u);
  }
  EXPECT_GT(n, 1u);
  EXPECT_FALSE(b.engine->next_tx(kQp, prev + 100).send);
  EXPECT_EQ(b.counter("tx_held_cycles"), held_sum);
}

// The wake-up for a held packet is no operation of the engine's: on_timer
// at that cycle hands the packet over and leaves the sender's own deadline
// (its RTO) as the next wake-up.
TEST(MpTxNic, WakeUpForAHeldPacketRunsNoOperation) {
  Bench b(true);
  b.engine->set_snd_max(kQp, kIsn + 1, 1000);
  const TxGrant early = b.engine->next_tx(kQp, 1000);
  ASSERT_FALSE(early.send);
  const uint64_t ops = b.counter("tx_operations");
  const AckResult r = b.engine->on_timer(kQp, early.held_until);
  EXPECT_TRUE(r.tx_ready);
  EXPECT_FALSE(r.rewound);
  EXPECT_EQ(b.counter("tx_operations"), ops);
  const uint64_t rto = b.engine->wake_at(kQp);
  EXPECT_GT(rto, early.held_until + 1000) << "the sender's RTO, not the hold";
  EXPECT_TRUE(b.engine->next_tx(kQp, early.held_until).send);
}

// Model timing: the same engine's packets leave at the call, nothing held.
TEST(MpTxNic, ModelTimingSendsAtOnce) {
  Bench b(false);
  b.engine->set_snd_max(kQp, kIsn + 64, 1000);
  size_t n = 0;
  while (b.engine->next_tx(kQp, 1000).send) ++n;
  EXPECT_GT(n, 1u);
  EXPECT_EQ(b.counter("tx_held_cycles"), 0u);
  EXPECT_GT(b.counter("tx_cycles"), 0u) << "the engine ran all the same";
}

// An ACK's operation enters the engine when its ACK stage starts
// (ack_process cycles before the call): its packets leave that many cycles
// earlier than if the whole decision came after the stage.
TEST(MpTxNic, AckOperationOverlapsTheAckStage) {
  uint64_t first_out[2] = {0, 0};
  const uint64_t stage[2] = {0, 4};
  for (int k = 0; k < 2; ++k) {
    Bench b(true, stage[k]);
    b.engine->set_snd_max(kQp, kIsn + 2, 1000);
    TxGrant g = b.engine->next_tx(kQp, 1000);
    ASSERT_FALSE(g.send);
    g = b.engine->next_tx(kQp, g.held_until);
    ASSERT_TRUE(g.send);
    while (b.engine->next_tx(kQp, 2000).send) {
    }
    b.engine->set_snd_max(kQp, kIsn + 40, 2000);  // more data: the ACK sends
    while (b.engine->next_tx(kQp, 3000).send) {
    }
    const uint64_t now = 5000;  // the engine long idle
    b.engine->on_ack(kQp, ack_for(g), now);
    const TxGrant after = b.engine->next_tx(kQp, now);
    ASSERT_FALSE(after.send) << "stage " << stage[k];
    first_out[k] = after.held_until;
  }
  EXPECT_EQ(first_out[0] - first_out[1], 4u);
}

}  // namespace
}  // namespace mprdma::nic::rtl
