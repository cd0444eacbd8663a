// The MP-RDMA golden model: each mechanism of NSDI'18 §3 with crafted ACK
// and packet sequences, then property tests that run a sender and a
// receiver over random multi-path networks (reordering, loss) and check
// that every PSN is placed once and every message completes once, in order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "vp/core/log.h"
#include "vp/core/stats.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_engine.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_receiver.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_sender.h"

namespace mprdma::nic {
namespace {

constexpr uint32_t kQ = 1u << 16;

MpSenderParams params(uint32_t iw = 10) {
  MpSenderParams p;
  p.iw = iw;
  p.probe_ppm = 0;  // probing is tested on its own
  p.rtt_cycles = 1000;
  p.rto_cycles = 100000;
  return p;
}

MpAck ack(uint32_t sack, uint32_t aack, uint16_t vp = 0xC123, bool ece = false) {
  MpAck a;
  a.vp = vp;
  a.sack = sack;
  a.aack = aack;
  a.ece = ece;
  return a;
}

// --- sender -----------------------------------------------------------------

TEST(MpSender, InitialWindowGoesOutOnRandomVirtualPaths) {
  MpRandom rng(7);
  MpSender s(params(16), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  ASSERT_EQ(out.size(), 16u);
  std::set<uint16_t> vps;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].psn, i);
    EXPECT_FALSE(out[i].retx);
    EXPECT_EQ(out[i].vp & 0xC000, 0xC000);
    vps.insert(out[i].vp);
  }
  EXPECT_GE(vps.size(), 15u);  // 16 draws from 16384 paths
  EXPECT_EQ(s.snd_nxt(), 16u);
}

TEST(MpSender, AnAckWithoutEcnGrowsCwndByOneOverCwndAndClocksOnItsPath) {
  MpRandom rng(1);
  MpSender s(params(10), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  s.on_ack(ack(0, 0, 0xC777), 10, out);
  EXPECT_EQ(s.cwnd_q16(), 10 * kQ + (uint64_t{1} << 32) / (10 * kQ));
  // awnd = 10 + 0 - (10 - 1) = 1: one new packet on the ACK's path.
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn, 10u);
  EXPECT_EQ(out[0].vp, 0xC777);
}

TEST(MpSender, AnAckDoesNotGrowCwndWhileTheNicHoldsItsEarlierPackets) {
  // Window validation: the NIC's port, not the window, limits the
  // connection while packets it clocked out wait for the wire.
  MpRandom rng(1);
  MpSender s(params(10), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  s.on_ack(ack(0, 0), 10, out, /*egress_backlog=*/3);
  EXPECT_EQ(s.cwnd_q16(), 10 * kQ);
  EXPECT_EQ(out.size(), 1u);  // still clocks out what the window allows
  s.on_ack(ack(1, 1), 11, out, 0);
  EXPECT_GT(s.cwnd_q16(), 10 * kQ);
}

TEST(MpSender, AnEcnAckLowersCwndByHalfASegment) {
  MpRandom rng(1);
  MpSender s(params(10), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  s.on_ack(ack(0, 0, 0xC001, true), 10, out);
  EXPECT_EQ(s.cwnd_q16(), 10 * kQ - kQ / 2);
  // awnd = floor(9.5) + 0 - 9 = 0: nothing goes out.
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.counters().ece_acks, 1u);
}

TEST(MpSender, AvailableWindowCountsSelectiveAcksThroughInflate) {
  MpRandom rng(1);
  MpSender s(params(10), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(10, 0, out);  // exactly the initial window: no new data after
  // PSN 3 arrives before 0..2: snd_una stays, inflate counts it.
  out.clear();
  s.on_ack(ack(3, psn_add(0, -1)), 10, out);
  EXPECT_EQ(s.inflate(), 1);
  EXPECT_EQ(s.snd_una(), 0u);
  EXPECT_EQ(s.snd_ooh(), 3u);
  // Then 0..2 arrive: aack = 3 moves snd_una by 4, inflate drops by 4 (not
  // below 0).
  s.on_ack(ack(0, 0), 11, out);
  s.on_ack(ack(1, 1), 12, out);
  s.on_ack(ack(2, 3), 13, out);
  EXPECT_EQ(s.snd_una(), 4u);
  EXPECT_EQ(s.inflate(), 0);
  EXPECT_EQ(s.awnd(), static_cast<int64_t>(s.cwnd_q16() >> 16) - 6);
}

TEST(MpSender, AnAckFarBehindTheFastestPathPrunesThatPath) {
  MpRandom rng(1);
  MpSenderParams p = params(20);
  p.delta = 4;
  MpSender s(p, 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  s.on_ack(ack(10, psn_add(0, -1)), 10, out);  // the fast path: snd_ooh = 10
  ASSERT_EQ(s.snd_ooh(), 10u);
  const uint32_t before = s.cwnd_q16();
  out.clear();
  // SACK 5 < snd_ool = 10 - 4: a slow path. cwnd -1, nothing clocked out.
  s.on_ack(ack(5, psn_add(0, -1), 0xC055), 20, out);
  EXPECT_EQ(s.cwnd_q16(), before - kQ);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.counters().pruned_acks, 1u);
  // SACK 6 = snd_ool is not behind it: normal.
  s.on_ack(ack(6, psn_add(0, -1), 0xC066), 21, out);
  EXPECT_EQ(s.counters().pruned_acks, 1u);
  // A ReTx ACK is exempt even far behind.
  MpAck r = ack(1, psn_add(0, -1), 0xC011);
  r.retx = true;
  s.on_ack(r, 22, out);
  EXPECT_EQ(s.counters().pruned_acks, 1u);
}

TEST(MpSender, WithoutOooControlSlowPathsAreNotPruned) {
  MpRandom rng(1);
  MpSenderParams p = params(20);
  p.delta = 4;
  p.ooo_control = false;
  MpSender s(p, 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  s.on_ack(ack(10, psn_add(0, -1)), 10, out);
  s.on_ack(ack(1, psn_add(0, -1)), 11, out);
  EXPECT_EQ(s.counters().pruned_acks, 0u);
}

TEST(MpSender, OneAckClocksOutAtMostTwoAndTheBurstTimerSendsTheRest) {
  MpRandom rng(3);
  MpSender s(params(10), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  // One cumulative ACK for 0..4: awnd = 10 + 0 - 5 = 5.
  s.on_ack(ack(4, 4, 0xC444), 100, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].vp, 0xC444);
  EXPECT_EQ(out[1].vp, 0xC444);
  EXPECT_EQ(s.wake_at(), 100u + 500u);  // half an RTT
  out.clear();
  s.on_timer(600, out);
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(s.counters().burst_timer_sends, 3u);
  EXPECT_EQ(s.awnd(), 0);
}

TEST(MpSender, ANackStartsRecoveryThatRetransmitsUntilSndUnaPassesRecovery) {
  MpRandom rng(1);
  MpSender s(params(10), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  MpAck n = ack(2, 1);  // PSN 2 lost; 0 and 1 in
  n.nack = true;
  s.on_ack(n, 50, out);
  EXPECT_TRUE(s.in_recovery());
  EXPECT_EQ(s.recovery(), 10u);
  // The NACK clocks out the retransmission of PSN 2 first.
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].psn, 2u);
  EXPECT_TRUE(out[0].retx);
  // PSN 2 arrives again and the receiver's cumulative ACK jumps past
  // recovery (it already held 3..9): recovery ends.
  out.clear();
  MpAck a = ack(2, 9);
  a.retx = true;
  s.on_ack(a, 60, out);
  EXPECT_FALSE(s.in_recovery());
  EXPECT_EQ(s.snd_una(), 10u);
  for (const MpTx& t : out) EXPECT_FALSE(t.retx) << t.psn;
}

TEST(MpSender, ANackOrTheAckOfARetransmissionClocksOutOnePacketOnly) {
  // Each stands for one packet that left the network without opening the
  // window, so each clocks out one packet even when awnd allows more (with
  // two, the virtual path of a NACK storm multiplied itself).
  MpRandom rng(1);
  MpSender s(params(10), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  MpAck n = ack(2, 1, 0xC0AA);  // PSN 2 lost; 0 and 1 in
  n.nack = true;
  s.on_ack(n, 50, out);
  // 10 + 0 - 8 (the NACK's inflate is spent as snd_una moves past 0 and 1):
  // room for two, yet one goes; a retransmission leaves snd_nxt where it is.
  EXPECT_EQ(s.awnd(), 2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn, 2u);
  EXPECT_EQ(out[0].vp, 0xC0AA);
  out.clear();
  MpAck r = ack(2, 2, 0xC0BB);  // the resent 2 arrived; 3 still missing
  r.retx = true;
  s.on_ack(r, 60, out);
  EXPECT_EQ(s.awnd(), 3);  // 10 + 0 - 7: room for three, yet one goes
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn, 3u);
  EXPECT_TRUE(out[0].retx);
  EXPECT_EQ(out[0].vp, 0xC0BB);
}

TEST(MpSender, LaterOverflowNacksClockOutRetransmissionsWithoutRewinding) {
  MpRandom rng(1);
  MpSender s(params(10), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  // PSN 0 lost; the receiver drops and NACKs every packet beyond its
  // bitmap, each NACK naming the head (SACK = AACK + 1 = 0).
  MpAck n = ack(0, kPsnMask);
  n.nack = true;
  s.on_ack(n, 50, out);
  ASSERT_TRUE(s.in_recovery());
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].psn, 0u);
  const uint32_t after_first = s.snd_retx();
  // The dropped packets left the network: each NACK inflates the window
  // and clocks out the next retransmission, never PSN 0 again.
  for (int i = 0; i < 3; ++i) {
    out.clear();
    s.on_ack(n, 60 + i, out);
    ASSERT_FALSE(out.empty()) << i;
    for (const MpTx& t : out) EXPECT_NE(t.psn, 0u) << i;
  }
  EXPECT_GT(s.snd_retx(), after_first);
  EXPECT_EQ(s.counters().nacks, 4u);
}

// A NACK for PSN 2 (0 and 1 in) with 10 packets out, then the ACKs of the
// originals 3..9: what they clock out.
std::vector<MpTx> recovery_walk(MpSender& s) {
  std::vector<MpTx> out, all;
  s.set_snd_max(100, 0, out);
  out.clear();
  MpAck n = ack(2, 1);
  n.nack = true;
  s.on_ack(n, 50, all);
  for (uint32_t k = 3; k < 10; ++k) s.on_ack(ack(k, 1), 50 + k, all);
  return all;
}

TEST(MpSender, NewDataFollowsOnceTheRetransmissionsOfARecoveryAreOut) {
  MpRandom rng(1);
  MpSender s(params(10), 0, rng);
  const std::vector<MpTx> all = recovery_walk(s);
  EXPECT_TRUE(s.in_recovery());
  EXPECT_EQ(s.snd_retx(), 10u);  // 2..9 went again
  size_t fresh = 0;
  for (const MpTx& t : all) fresh += !t.retx && t.psn >= 10;
  EXPECT_GT(fresh, 0u);
}

TEST(MpSender, StrictRecoverySendsNothingNewUntilSndUnaPassesRecovery) {
  MpRandom rng(1);
  MpSenderParams p = params(10);
  p.strict_recovery = true;
  MpSender s(p, 0, rng);
  const std::vector<MpTx> all = recovery_walk(s);
  EXPECT_TRUE(s.in_recovery());
  EXPECT_EQ(s.snd_retx(), 10u);
  for (const MpTx& t : all) {
    EXPECT_TRUE(t.retx) << t.psn;
    EXPECT_LT(t.psn, 10u);
  }
  EXPECT_EQ(s.snd_nxt(), 10u);
  // The ACKs that found nothing to send gave up window (use it or lose it).
  EXPECT_GE(s.counters().window_reductions, 1u);
  // PSN 2's retransmission arrives; the receiver held 3..9: recovery ends
  // and the same ACK clocks out new data.
  std::vector<MpTx> out;
  MpAck a = ack(2, 9);
  a.retx = true;
  s.on_ack(a, 70, out);
  EXPECT_FALSE(s.in_recovery());
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].psn, 10u);
  EXPECT_FALSE(out[0].retx);
}

TEST(MpSender, WithNoNewDataUnacknowledgedPacketsGoAgainEarly) {
  MpRandom rng(1);
  MpSender s(params(4), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(4, 0, out);  // all the data there is
  out.clear();
  // PSNs 1..3 are SACKed, 0 is not: the ACKs find no new data and resend
  // the oldest unacknowledged (FUSO) instead of waiting for the RTO.
  s.on_ack(ack(3, psn_add(0, -1)), 10, out);
  s.on_ack(ack(2, psn_add(0, -1)), 11, out);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].psn, 0u);
  EXPECT_TRUE(out[0].retx);
  EXPECT_GE(s.counters().early_retransmits, 1u);
}

// Sends four packets and acknowledges them in order: each ACK that could
// clock out a packet finds nothing (no new data, nothing to resend).
void send_four_and_ack_them(MpSender& s) {
  std::vector<MpTx> out;
  s.set_snd_max(4, 0, out);
  for (uint32_t i = 0; i < 4; ++i) s.on_ack(ack(i, i), 10 + i, out);
}

TEST(MpSender, UseItOrLoseItShrinksCwndWhenAnAckFindsNoData) {
  MpRandom rng(1);
  MpSender s(params(4), 0, rng);
  send_four_and_ack_them(s);
  EXPECT_TRUE(s.done());
  EXPECT_GE(s.counters().window_reductions, 1u);
  EXPECT_LT(s.cwnd(), 4.5);
}

TEST(MpSender, WithoutWindowReductionAnAckThatFindsNoDataKeepsCwnd) {
  MpRandom rng(1);
  MpSenderParams p = params(4);
  p.window_reduction = false;
  MpSender s(p, 0, rng);
  send_four_and_ack_them(s);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.counters().window_reductions, 0u);
  // Four ACKs without ECE, each +1/cwnd: the window only grew.
  EXPECT_GT(s.cwnd(), 4.9);
}

TEST(MpSender, RtoRetransmitsEveryUnacknowledgedPacket) {
  MpRandom rng(1);
  MpSenderParams p = params(8);
  MpSender s(p, 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(8, 0, out);
  s.on_ack(ack(0, 0), 10, out);  // only PSN 0 comes back
  out.clear();
  ASSERT_EQ(s.wake_at(), 10u + p.rto_cycles);
  s.on_timer(10 + p.rto_cycles, out);
  EXPECT_EQ(s.counters().rtos, 1u);
  std::vector<uint32_t> psns;
  for (const MpTx& t : out) {
    EXPECT_TRUE(t.retx);
    psns.push_back(t.psn);
  }
  EXPECT_EQ(psns, (std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7}));
}

TEST(MpSender, RtoRestartsTheAckClockFromTheInitialWindowOnRandomPaths) {
  MpRandom rng(1);
  MpSenderParams p = params(4);
  MpSender s(p, 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(1000, 0, out);
  // Forty ACKs on one path grow the window well past IW (+1/cwnd each).
  for (uint32_t k = 0; k < 40; ++k) s.on_ack(ack(k, k, 0xC0CC), 10 + k, out);
  ASSERT_GE(s.cwnd(), 8.0);
  const uint32_t una = s.snd_una();
  ASSERT_LT(una, s.snd_nxt());
  // Then nothing comes back: the burst timer sends what the window allows,
  // then the RTO fires.
  for (int i = 0; i < 10 && s.counters().rtos == 0; ++i) {
    out.clear();
    s.on_timer(s.wake_at(), out);
  }
  ASSERT_EQ(s.counters().rtos, 1u);
  EXPECT_EQ(s.cwnd(), 4.0);
  ASSERT_EQ(out.size(), 4u);  // what the initial window allows
  std::set<uint16_t> vps;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].psn, una + i);
    EXPECT_TRUE(out[i].retx);
    EXPECT_NE(out[i].vp, 0xC0CC);
    vps.insert(out[i].vp);
  }
  EXPECT_GE(vps.size(), 3u);  // 4 draws from 16384 paths
}

// An RNR NACK (no RECV for the message of PSN 5; PSN 3 was lost on the
// way, so rcv_nxt is 3): nothing leaves until the RNR timer ends, whatever
// ACKs arrive meanwhile, the RTO waits too, and the window is not spent by
// "use it or lose it"; then the sender resends from snd_una on random
// paths. The other packets of the message, NACKed too, join the wait.
TEST(MpSender, AnRnrNackHoldsEverythingUntilItsTimerThenResendsFromSndUna) {
  MpRandom rng(1);
  MpSenderParams p = params(10);
  MpSender s(p, 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(100, 0, out);
  out.clear();
  s.on_ack(ack(0, 0), 10, out);
  s.on_ack(ack(1, 1), 11, out);
  s.on_ack(ack(2, 2), 12, out);
  s.on_ack(ack(4, 2), 13, out);
  const uint32_t nxt = s.snd_nxt();
  const double cwnd = s.cwnd();
  out.clear();
  MpAck r = ack(5, 2);
  r.nack = true;
  const uint64_t until = 5000;
  EXPECT_TRUE(s.on_rnr(r, until, 20)) << "a new wait";
  EXPECT_TRUE(s.holding(20));
  EXPECT_TRUE(s.in_recovery());
  EXPECT_EQ(s.wake_at(), until);
  MpAck r2 = ack(6, 2);
  r2.nack = true;
  EXPECT_FALSE(s.on_rnr(r2, until + 7, 30)) << "the same wait";
  EXPECT_EQ(s.wake_at(), until + 7);
  // ACKs of packets still in flight clock nothing out and cost no window.
  s.on_ack(ack(7, 2), 40, out);
  s.on_ack(ack(8, 2), 41, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.snd_nxt(), nxt);
  EXPECT_GE(s.cwnd(), cwnd);
  EXPECT_EQ(s.counters().window_reductions, 0u);
  s.on_timer(until, out);  // early: still waiting (and no RTO)
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.counters().rtos, 0u);
  s.on_timer(until + 7, out);
  EXPECT_FALSE(s.holding(until + 7));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].psn, 3u) << "from snd_una, the lost packet before the NACKed one";
  for (const MpTx& t : out) EXPECT_TRUE(t.retx) << t.psn;
  EXPECT_EQ(s.counters().rnr_nacks, 2u);
  EXPECT_EQ(s.counters().rnr_waits, 1u);
  EXPECT_EQ(s.counters().rtos, 0u);
  // A NACK for what is already acknowledged starts nothing.
  MpAck stale = ack(1, 2);
  stale.nack = true;
  EXPECT_FALSE(s.on_rnr(stale, 90000, until + 8));
  EXPECT_FALSE(s.holding(until + 8));
}

TEST(MpSender, RestartsFromTheInitialWindowAfterIdle) {
  MpRandom rng(1);
  MpSender s(params(4), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(4, 0, out);
  for (uint32_t i = 0; i < 4; ++i) s.on_ack(ack(i, i), 10 + i, out);
  ASSERT_TRUE(s.done());
  out.clear();
  s.set_snd_max(20, 10 + 3 * 1000, out);  // 3 RTTs later
  EXPECT_EQ(s.cwnd(), 4.0);
  EXPECT_EQ(out.size(), 4u);
  EXPECT_EQ(s.counters().restarts, 1u);
}

TEST(MpSender, ASynchroniseMessageWaitsAlphaDeltaOverRate) {
  MpRandom rng(1);
  MpSenderParams p = params(16);
  p.delta = 32;
  p.sync_alpha_milli = 1000;
  MpSender s(p, 0, rng);
  s.add_sync(8);
  std::vector<MpTx> out;
  s.set_snd_max(16, 100, out);
  // PSNs 0..7 leave at 100; 8 starts a synchronise message: it may leave
  // at 100 + 1.0 * 32 * 1000 / 16 = 2100.
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(s.wake_at(), 2100u);
  out.clear();
  s.on_timer(2099, out);
  EXPECT_TRUE(out.empty());
  s.on_timer(2100, out);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].psn, 8u);
}

TEST(MpSender, ProbesANewPathWithProbabilityPPerRtt) {
  MpRandom rng(11);
  MpSenderParams p = params(4);
  p.probe_ppm = 1000000;  // always: every RTT's first packet probes
  MpSender s(p, 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(1000, 0, out);
  out.clear();
  s.on_ack(ack(0, 0, 0xC0AA), 10, out);
  s.on_ack(ack(1, 1, 0xC0AA), 20, out);  // same RTT: no second probe
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].vp, 0xC0AA);
  EXPECT_EQ(out[1].vp, 0xC0AA);
  EXPECT_EQ(s.counters().probes, 1u);
}

TEST(MpSender, AcksForUnsentPsnsAreIgnored) {
  MpRandom rng(1);
  MpSender s(params(4), 0, rng);
  std::vector<MpTx> out;
  s.set_snd_max(4, 0, out);
  const uint32_t before = s.cwnd_q16();
  s.on_ack(ack(50, 50), 10, out);
  EXPECT_EQ(s.cwnd_q16(), before);
  EXPECT_EQ(s.snd_una(), 0u);
}

// --- receiver ---------------------------------------------------------------

MpData data(uint32_t psn, bool tail = false, bool completion = false) {
  MpData d;
  d.psn = psn;
  d.vp = static_cast<uint16_t>(0xC000 | psn);
  d.tail = tail;
  d.completion = completion;
  return d;
}

TEST(MpReceiver, OutOfOrderPacketsArePlacedAndTheMessageCompletesOnce) {
  MpReceiver r(64, 0);
  // Message 0..2 (SEND: completion), arriving 2, 0, 1.
  MpRxResult a = r.on_data(data(2, true, true));
  EXPECT_EQ(a.verdict, MpRxResult::Verdict::place);
  EXPECT_TRUE(a.completed.empty());
  EXPECT_EQ(a.ack.sack, 2u);
  EXPECT_EQ(a.ack.aack, psn_add(0, -1));
  EXPECT_EQ(a.ack.vp, 0xC002);  // ACKed on the data packet's path
  EXPECT_EQ(r.slot(2), MpSlot::tail_completion);
  EXPECT_TRUE(r.on_data(data(0)).completed.empty());
  const MpRxResult c = r.on_data(data(1));
  ASSERT_EQ(c.completed.size(), 1u);
  EXPECT_EQ(c.completed[0], std::make_pair(2u, true));
  EXPECT_EQ(r.rcv_nxt(), 3u);
  EXPECT_EQ(c.ack.aack, 2u);
  EXPECT_EQ(r.slot(2), MpSlot::empty);
  // A duplicate is ACKed again and not placed.
  const MpRxResult d = r.on_data(data(1));
  EXPECT_EQ(d.verdict, MpRxResult::Verdict::duplicate);
  EXPECT_TRUE(d.send_ack);
}

TEST(MpReceiver, EachAckEchoesTheCongestionMarkOfItsOwnPacket) {
  // Per-ACK ECN (section 3.2.1): the ACK of a CE-marked packet carries ECE,
  // whatever the packet's fate (placed, duplicate, dropped beyond the
  // bitmap); the ACK of an unmarked packet does not.
  MpReceiver r(8, 0);
  MpData marked = data(1);
  marked.ce = true;
  const MpRxResult a = r.on_data(marked);
  ASSERT_EQ(a.verdict, MpRxResult::Verdict::place);
  EXPECT_TRUE(a.ack.ece);
  const MpRxResult b = r.on_data(data(2));
  ASSERT_TRUE(b.send_ack);
  EXPECT_FALSE(b.ack.ece);
  const MpRxResult dup = r.on_data(marked);
  ASSERT_EQ(dup.verdict, MpRxResult::Verdict::duplicate);
  EXPECT_TRUE(dup.ack.ece);
  MpData beyond = data(9);
  beyond.ce = true;
  const MpRxResult nack = r.on_data(beyond);
  ASSERT_EQ(nack.verdict, MpRxResult::Verdict::drop);
  ASSERT_TRUE(nack.ack.nack);
  EXPECT_TRUE(nack.ack.ece);
}

TEST(MpReceiver, BitmapOverflowDropsAndNacksTheHeadForEveryDrop) {
  MpReceiver r(8, 100);
  const MpRxResult a = r.on_data(data(108, true));  // rcv_nxt + L
  EXPECT_EQ(a.verdict, MpRxResult::Verdict::drop);
  ASSERT_TRUE(a.send_ack);
  EXPECT_TRUE(a.ack.nack);
  EXPECT_EQ(a.ack.sack, 100u);
  EXPECT_EQ(a.ack.aack, 99u);
  // Each drop is NACKed (it keeps the sender's ACK clock), always naming
  // the head.
  const MpRxResult b = r.on_data(data(109, true));
  EXPECT_EQ(b.verdict, MpRxResult::Verdict::drop);
  ASSERT_TRUE(b.send_ack);
  EXPECT_TRUE(b.ack.nack);
  EXPECT_EQ(b.ack.sack, 100u);
  EXPECT_EQ(r.counters().overflow_drops, 2u);
  EXPECT_EQ(r.counters().nacks, 2u);
  // 107 is within the window.
  EXPECT_EQ(r.on_data(data(107, true)).verdict, MpRxResult::Verdict::place);
}

TEST(MpReceiver, OncePerHeadNacksOnlyTheFirstDropForEachRcvNxt) {
  MpReceiver r(8, 100, MpOverflowNack::once_per_head);
  const MpRxResult a = r.on_data(data(108, true));
  EXPECT_EQ(a.verdict, MpRxResult::Verdict::drop);
  ASSERT_TRUE(a.send_ack);
  EXPECT_TRUE(a.ack.nack);
  EXPECT_EQ(a.ack.sack, 100u);
  // The next drop for the same head goes unanswered.
  const MpRxResult b = r.on_data(data(109, true));
  EXPECT_EQ(b.verdict, MpRxResult::Verdict::drop);
  EXPECT_FALSE(b.send_ack);
  EXPECT_EQ(r.counters().overflow_drops, 2u);
  EXPECT_EQ(r.counters().nacks, 1u);
  // The head moves: the next drop names the new head.
  EXPECT_EQ(r.on_data(data(100, true)).verdict, MpRxResult::Verdict::place);
  const MpRxResult c = r.on_data(data(110, true));
  EXPECT_EQ(c.verdict, MpRxResult::Verdict::drop);
  ASSERT_TRUE(c.send_ack);
  EXPECT_TRUE(c.ack.nack);
  EXPECT_EQ(c.ack.sack, 101u);
  // Remembering the NACKed head is receiver state the default does not need.
  uint32_t every = 0, once = 0;
  for (const StateField& f : MpReceiver::extra_state(64)) every += f.bytes;
  for (const StateField& f : MpReceiver::extra_state(64, MpOverflowNack::once_per_head))
    once += f.bytes;
  EXPECT_EQ(once, every + 3);
}

TEST(MpReceiver, AMessageLongerThanTheBitmapCompletesAndTheHeadMovesPerPacket) {
  // L = 8, one message of 20 packets: the head must move over packets
  // that arrived in order before the tail exists, or the message could
  // never fit.
  MpReceiver r(8, 0);
  for (uint32_t p = 0; p < 19; ++p) {
    const MpRxResult x = r.on_data(data(p));
    ASSERT_EQ(x.verdict, MpRxResult::Verdict::place) << p;
    EXPECT_EQ(x.ack.aack, p);  // cumulative ACK per packet
    EXPECT_TRUE(x.completed.empty());
  }
  const MpRxResult t = r.on_data(data(19, true, true));
  ASSERT_EQ(t.completed.size(), 1u);
  EXPECT_EQ(t.completed[0], std::make_pair(19u, true));
  EXPECT_EQ(r.rcv_nxt(), 20u);
}

TEST(MpReceiver, ASynchroniseMessageThatOvertakesIsNackedThenAcceptedInTurn) {
  MpReceiver r(64, 0);
  // Messages: 0..1 (plain), 2 (synchronise, one packet).
  MpData sync = data(2, true, true);
  sync.sync = true;
  const MpRxResult early = r.on_data(sync);
  EXPECT_EQ(early.verdict, MpRxResult::Verdict::drop);
  ASSERT_TRUE(early.send_ack);
  EXPECT_TRUE(early.ack.nack);
  EXPECT_EQ(early.ack.sack, 2u);  // resend the synchronise message
  // A copy that overtakes again while rcv_nxt has not moved is dropped
  // without another NACK: one per rcv_nxt, or the sender would rewind for
  // every copy in flight.
  const MpRxResult again = r.on_data(sync);
  EXPECT_EQ(again.verdict, MpRxResult::Verdict::drop);
  EXPECT_FALSE(again.send_ack);
  EXPECT_EQ(r.counters().sync_drops, 2u);
  EXPECT_EQ(r.counters().nacks, 1u);
  r.on_data(data(0));
  r.on_data(data(1, true));
  ASSERT_EQ(r.rcv_nxt(), 2u);
  sync.retx = true;
  const MpRxResult later = r.on_data(sync);
  EXPECT_EQ(later.verdict, MpRxResult::Verdict::place);
  ASSERT_EQ(later.completed.size(), 1u);
  EXPECT_TRUE(later.ack.retx);
}

TEST(MpReceiver, TheBitmapWrapsWithThePsnSpace) {
  MpReceiver r(64, kPsnMask - 2);
  for (uint32_t i = 0; i < 6; ++i) r.on_data(data(psn_add(kPsnMask - 2, i), i == 5));
  EXPECT_EQ(r.rcv_nxt(), 3u);
  EXPECT_EQ(r.counters().messages, 1u);
  EXPECT_THROW(MpReceiver(48, 0), std::invalid_argument);
}

// The engine's NIC-wide OOD histogram: PSN - rcv_nxt of every arriving
// packet before the receiver sees it, 0 in order, overflow drops included,
// duplicates (and PSNs below rcv_nxt) left out; its maximum is rx_max_ood.
TEST(MpRdmaEngine, RecordsTheOutOfOrderDegreeOfEveryNewPacket) {
  core::StatsRegistry stats;
  MpRdmaEngineParams ep;
  ep.bitmap_slots = 8;
  MpRdmaEngine t(ep, &stats, "nic.x.transport.");
  ConnParams cp;
  cp.qpn = 5;
  t.open(cp);
  auto rx = [&](uint32_t psn) {
    RxPacket p;
    p.psn = psn;
    p.tail = psn == 6;
    return t.on_data(5, p, 0).verdict;
  };
  using V = RxOutcome::Verdict;
  EXPECT_EQ(rx(0), V::place);      // ood 0, rcv_nxt 1
  EXPECT_EQ(rx(5), V::place);      // 4
  EXPECT_EQ(rx(2), V::place);      // 1
  EXPECT_EQ(rx(1), V::place);      // 0, rcv_nxt 3
  EXPECT_EQ(rx(5), V::duplicate);  // left out
  EXPECT_EQ(rx(0), V::duplicate);  // below rcv_nxt: left out
  EXPECT_EQ(rx(3), V::place);      // 0, rcv_nxt 4
  EXPECT_EQ(rx(4), V::place);      // 0, rcv_nxt 6
  EXPECT_EQ(rx(20), V::drop);      // 14, beyond L = 8: overflow drop
  const core::Histogram* h = stats.find_histogram("nic.x.transport.rx_ood");
  ASSERT_NE(h, nullptr);
  // 0, 0, 0, 0, 1, 4, 14.
  EXPECT_EQ(h->count(), 7u);
  EXPECT_EQ(h->sum(), 19.0);
  EXPECT_EQ(h->percentile(50), 0.0);
  EXPECT_EQ(h->percentile(100.0 * 5 / 7), 1.0);
  EXPECT_EQ(h->percentile(80), 4.0);
  EXPECT_EQ(h->percentile(99.9), 14.0);
  EXPECT_EQ(h->max(), double(stats.find_counter("nic.x.transport.rx_max_ood")->value()));
  EXPECT_EQ(stats.find_counter("nic.x.transport.rx_duplicates")->value(), 2u);
  // Exact per integer value, not the log-linear buckets' midpoints.
  EXPECT_GT(h->exact_below(), 65536.0);
  // Without a registry nothing is recorded, and nothing breaks.
  MpRdmaEngine quiet(ep);
  quiet.open(cp);
  RxPacket p;
  p.psn = 3;
  EXPECT_EQ(quiet.on_data(5, p, 0).verdict, V::place);
}

// The engine's log channel tells a recovery's story: at debug its start and
// end, at trace every ACK with the state after it and what it clocked out,
// and every data packet the receiver saw. At the default level, nothing.
TEST(MpRdmaEngine, LogsRecoveryAndEveryAckOnItsChannel) {
  auto run = [](const std::string& spec) {
    std::ostringstream log;
    core::Log::set_sink(&log);
    core::Log::configure(spec);
    core::StatsRegistry stats;
    MpRdmaEngineParams ep;
    ep.sender = params(4);
    MpRdmaEngine t(ep, &stats, "nic.q.transport.");
    ConnParams cp;
    cp.qpn = 7;
    t.open(cp);
    t.set_requester(cp);
    t.set_snd_max(7, 20, 0);  // IW 4: PSNs 0..3 on random paths
    AckEvent ev;
    ev.has_ext = true;
    ev.ext.echo_vp = 0xC0DE;
    ev.ext.sack = 0;  // PSN 0 lost, 1..3 beyond the bitmap: a NACK for 0
    ev.ext.aack = kPsnMask;
    ev.ext.nack = true;
    t.on_ack(7, ev, 10);
    ev.ext.nack = false;
    ev.ext.retx = true;
    ev.ext.aack = 3;  // the resent 0 arrived; 1..3 were held
    ev.ext.sack = 0;
    t.on_ack(7, ev, 20);
    RxPacket p;
    p.psn = 2;
    p.vp = 0xC0DF;
    t.on_data(7, p, 30);  // ood 2, placed
    core::Log::set_sink(nullptr);
    core::Log::reset();
    return log.str();
  };
  const std::string quiet = run("*=warn");
  EXPECT_EQ(quiet, "");
  const std::string debug = run("nic.q.transport=debug");
  EXPECT_NE(debug.find("qp 7: recovery on NACK vp 0xc0de sack 0"), std::string::npos) << debug;
  EXPECT_NE(debug.find("resends until snd_una passes 4"), std::string::npos) << debug;
  EXPECT_NE(debug.find("qp 7: recovery over, snd_una 4 passed 4"), std::string::npos) << debug;
  EXPECT_EQ(debug.find("qp 7 ack"), std::string::npos) << "per-ACK lines are trace:\n" << debug;
  const std::string trace = run("nic.q.transport=trace");
  // The NACK clocks out PSN 0 again, on the NACK's path.
  EXPECT_NE(trace.find("qp 7 ack NACK vp 0xc0de sack 0"), std::string::npos) << trace;
  EXPECT_NE(trace.find("sent [0r@0xc0de]"), std::string::npos) << trace;
  EXPECT_NE(trace.find("recovering(retx 1 to 4)"), std::string::npos) << trace;
  EXPECT_NE(trace.find("qp 7 start snd_max 20"), std::string::npos) << trace;
  EXPECT_NE(trace.find("qp 7 data psn 2 vp 0xc0df ood 2: placed, rcv_nxt 0; ACK sack 2"),
            std::string::npos)
      << trace;
}

TEST(MpState, ExtraBytesOverRoceAreAccountedFieldByField) {
  uint32_t sender = 0, receiver = 0;
  for (const MpSender::Field& f : MpSender::extra_state()) sender += f.bytes;
  for (const MpSender::Field& f : MpReceiver::extra_state(64)) receiver += f.bytes;
  // See vp/nic/transport/transport.md for each field and the comparison with the
  // paper's 66 bytes.
  EXPECT_EQ(sender, 38u);
  EXPECT_EQ(receiver, 19u);
  EXPECT_EQ(MpReceiver::extra_state(64)[0].bytes, 16u);  // 64 slots x 2 bits
}

// --- property tests ---------------------------------------------------------

// A sender and a receiver over a random multi-path network: each virtual
// path maps to one of `paths` physical paths with its own delay; packets
// and ACKs get random jitter; data packets are lost with probability
// `loss`. Messages of random length; some need completions; some are
// synchronise messages.
struct Net {
  uint64_t seed;
  int paths;
  double loss;
  bool ooo_control;
  uint32_t slots;
  double ack_loss = 0;
  MpOverflowNack overflow_nack = MpOverflowNack::every_drop;
  bool strict_recovery = false;
};

void run_network(const Net& n) {
  std::mt19937_64 gen(n.seed);
  std::uniform_real_distribution<double> u(0, 1);
  MpRandom rng(static_cast<uint32_t>(n.seed * 2654435761u + 1));
  MpSenderParams p;
  p.iw = 16;
  p.delta = std::min<uint32_t>(32, n.slots / 2);
  p.ooo_control = n.ooo_control;
  p.strict_recovery = n.strict_recovery;
  p.rtt_cycles = 2000;
  p.rto_cycles = 40000;
  const uint32_t isn = static_cast<uint32_t>(gen() & kPsnMask);
  MpSender s(p, isn, rng);
  MpReceiver r(n.slots, isn, n.overflow_nack);

  // Messages: [first PSN, count), tail needs completion or not, sync.
  struct Msg {
    uint32_t first, count;
    bool completion, sync;
  };
  std::vector<Msg> msgs;
  uint32_t total = 0;
  while (total < 3000) {
    Msg m{psn_add(isn, total), 1 + static_cast<uint32_t>(gen() % 8), gen() % 3 == 0,
          gen() % 10 == 0};
    msgs.push_back(m);
    total += m.count;
  }
  std::map<uint32_t, size_t> msg_of;  // PSN -> message index
  for (size_t i = 0; i < msgs.size(); ++i)
    for (uint32_t k = 0; k < msgs[i].count; ++k) msg_of[psn_add(msgs[i].first, k)] = i;
  for (size_t i = 1; i < msgs.size(); ++i)
    if (msgs[i].sync) s.add_sync(msgs[i].first);

  std::vector<int> path_delay(static_cast<size_t>(n.paths));
  for (int& d : path_delay) d = 400 + static_cast<int>(gen() % 600);

  struct Ev {
    uint64_t at;
    uint64_t seq;
    bool is_ack;
    MpTx tx;
    MpAck ack;
    bool operator>(const Ev& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> q;
  uint64_t seq = 0;
  auto path_of = [&](uint16_t vp) {
    return static_cast<size_t>((vp * 40503u) >> 7) % path_delay.size();
  };
  auto launch = [&](const std::vector<MpTx>& out, uint64_t now) {
    for (const MpTx& t : out) {
      if (u(gen) < n.loss) continue;
      const uint64_t at = now + path_delay[path_of(t.vp)] + gen() % 50;
      q.push(Ev{at, seq++, false, t, {}});
    }
  };

  std::map<uint32_t, int> placed;
  std::vector<uint32_t> completed_tails;
  uint64_t now = 0;
  std::vector<MpTx> out;
  s.set_snd_max(psn_add(isn, total), now, out);
  launch(out, now);
  int steps = 0;
  while (!s.done() && steps < 2000000) {
    ++steps;
    const uint64_t t_timer = s.wake_at();
    const uint64_t t_ev = q.empty() ? kNever : q.top().at;
    ASSERT_TRUE(t_timer != kNever || t_ev != kNever) << "stalled at " << now;
    out.clear();
    if (t_timer <= t_ev) {
      now = t_timer;
      s.on_timer(now, out);
      launch(out, now);
      continue;
    }
    Ev e = q.top();
    q.pop();
    now = e.at;
    if (e.is_ack) {
      s.on_ack(e.ack, now, out);
      launch(out, now);
      continue;
    }
    const size_t mi = msg_of.at(e.tx.psn);
    const Msg& m = msgs[mi];
    MpData d;
    d.psn = e.tx.psn;
    d.vp = e.tx.vp;
    d.retx = e.tx.retx;
    d.ipsn = static_cast<uint32_t>(psn_diff(e.tx.psn, m.first));
    d.tail = d.ipsn + 1 == m.count;
    d.completion = m.completion;
    d.sync = m.sync;
    const MpRxResult res = r.on_data(d);
    if (res.verdict == MpRxResult::Verdict::place) ++placed[e.tx.psn];
    for (const auto& c : res.completed) completed_tails.push_back(c.first);
    if (res.send_ack && u(gen) >= n.ack_loss) {
      // Jitter reorders ACKs too.
      Ev a{now + path_delay[path_of(res.ack.vp)] + gen() % 50, seq++, true, {}, res.ack};
      q.push(a);
    }
  }
  ASSERT_TRUE(s.done()) << "sender did not finish: una " << s.snd_una() << " nxt " << s.snd_nxt()
                        << " of " << psn_add(isn, total) << " recovering " << s.in_recovery()
                        << " retx " << s.snd_retx() << " recovery " << s.recovery() << " cwnd "
                        << s.cwnd() << " awnd " << s.awnd() << " wake " << s.wake_at() << " now "
                        << now << " rcv_nxt " << r.rcv_nxt() << " rtos " << s.counters().rtos
                        << " nacks " << s.counters().nacks << " queue " << q.size();
  // Every PSN placed exactly once; every message completed once, in order.
  ASSERT_EQ(placed.size(), total);
  for (const auto& [psn, times] : placed) ASSERT_EQ(times, 1) << "PSN " << psn;
  ASSERT_EQ(completed_tails.size(), msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i)
    ASSERT_EQ(completed_tails[i], psn_add(msgs[i].first, msgs[i].count - 1)) << "message " << i;
  EXPECT_EQ(r.rcv_nxt(), psn_add(isn, total));
  if (n.ooo_control && n.loss == 0) {
    EXPECT_EQ(r.counters().overflow_drops, 0u) << n.seed;
  }
}

TEST(MpProperty, EveryPsnPlacedOnceAndEveryMessageCompletesOnceInOrder) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    run_network({seed, 4, 0.0, true, 64});
  }
}

TEST(MpProperty, SoUnderLossWithRecoveryAndTimeouts) {
  for (uint64_t seed = 101; seed <= 130; ++seed) {
    SCOPED_TRACE(seed);
    run_network({seed, 4, 0.01, true, 64});
    run_network({seed, 8, 0.05, true, 32});
    run_network({seed, 4, 0.02, true, 64, 0.02});  // ACKs lost too
  }
}

TEST(MpProperty, SoWithoutOutOfOrderControl) {
  for (uint64_t seed = 201; seed <= 220; ++seed) {
    SCOPED_TRACE(seed);
    run_network({seed, 4, 0.0, false, 64});
    run_network({seed, 4, 0.02, false, 16});
  }
}

TEST(MpProperty, SoWithEitherReadingOfOverflowNacksAndRecovery) {
  const MpOverflowNack once = MpOverflowNack::once_per_head;
  const MpOverflowNack every = MpOverflowNack::every_drop;
  for (uint64_t seed = 301; seed <= 315; ++seed) {
    SCOPED_TRACE(seed);
    run_network({seed, 4, 0.01, true, 64, 0, once, false});
    run_network({seed, 4, 0.02, false, 16, 0, once, false});
    run_network({seed, 4, 0.01, true, 64, 0, every, true});
    run_network({seed, 4, 0.02, false, 16, 0.02, every, true});
    run_network({seed, 8, 0.05, true, 32, 0, once, true});
  }
}

}  // namespace
}  // namespace mprdma::nic
