// The Verilated MP-RDMA sender engine against its golden model (MpSender),
// in lockstep: seeded random operation sequences over several connections
// (ACKs, SACKs, NACKs of both kinds, ECE, ReTx, RNR waits, timers at their
// deadlines, new data, synchronise messages, PSN wrap, restarts after idle),
// directed cases, fault injection that lockstep must name, and the replay.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "mprdma/rtl_params.h"
#include "vp/nic/rtl/mp_rdma_tx_lockstep.h"

namespace mprdma::nic::rtl {
namespace {

namespace p = mprdma::rtl;

// Operations per random run: MPRDMA_RTL_OPS, else 500,000 (two runs give
// CI its million).
uint64_t ops_per_run() {
  const char* env = std::getenv("MPRDMA_RTL_OPS");
  return env ? std::strtoull(env, nullptr, 10) : 500000;
}

// Every mechanism on, small RTT and RTO so that timers fire often, a high
// probing probability so that probes are frequent.
MpSenderParams lively() {
  MpSenderParams s;
  s.iw = 16;
  s.delta = 8;
  s.probe_ppm = 200000;
  s.max_per_ack = 2;
  s.rtt_cycles = 400;
  s.idle_rtts = 3;
  s.sync_alpha_milli = 1000;
  s.rto_cycles = 5000;
  return s;
}

// The other readings: strict recovery, no out-of-order control, no window
// reduction, no probing, a different burst limit and synchronise factor.
MpSenderParams strict() {
  MpSenderParams s = lively();
  s.iw = 4;
  s.ooo_control = false;
  s.strict_recovery = true;
  s.window_reduction = false;
  s.probe_ppm = 0;
  s.max_per_ack = 3;
  s.sync_alpha_milli = 500;
  s.vp_mask = 0xFF;
  return s;
}

MpSender::Counters& operator+=(MpSender::Counters& a, const MpSender::Counters& b) {
  a.acks += b.acks;
  a.ece_acks += b.ece_acks;
  a.pruned_acks += b.pruned_acks;
  a.nacks += b.nacks;
  a.recoveries += b.recoveries;
  a.retransmits += b.retransmits;
  a.early_retransmits += b.early_retransmits;
  a.rtos += b.rtos;
  a.probes += b.probes;
  a.burst_timer_sends += b.burst_timer_sends;
  a.window_reductions += b.window_reductions;
  a.restarts += b.restarts;
  a.sync_waits += b.sync_waits;
  a.rnr_nacks += b.rnr_nacks;
  a.rnr_waits += b.rnr_waits;
  return a;
}

struct Coverage {
  MpSender::Counters c;
  uint64_t psn_wraps = 0, multi_packet_ops = 0, releases = 0, inits = 0;
  uint64_t wake_divisions = 0, growth_divisions = 0;
  // Operations taken in the last cycle of the one before (back to back),
  // those of them on the same row (forwarded), and those taken after idle
  // cycles.
  uint64_t overlapped = 0, forwarded = 0, after_idle = 0;
};

// What a receiver and a message layer around the sender would plausibly do,
// and some of what they would not.
class RandomOps {
 public:
  RandomOps(uint64_t seed, uint32_t rows) : gen_(seed), rows_(rows) {}

  uint64_t now() const { return now_; }
  // One operation in eight comes after idle engine cycles.
  bool idle_before() { return pick(8) == 0; }
  // An epoch ends before the cycle count outgrows the context's timestamps.
  bool epoch_over() const { return now_ > MpTxRtl::max_cycle() - (uint64_t{1} << 32); }
  void new_epoch() { now_ = 0; }

  TxOp next(MpTxLockstep& ls) {
    TxOp op;
    op.row = static_cast<uint32_t>(pick(rows_));
    now_ += pick(8) == 0 ? pick(2000) : pick(60);
    op.now = now_;
    const MpSender* g = ls.golden(op.row);
    if (!g || pick(40000) == 0) {
      op.kind = TxOpKind::init;
      op.psn = pick(3) == 0 ? kPsnMask - static_cast<uint32_t>(pick(300))
                            : static_cast<uint32_t>(pick(kPsnMask + 1));
      return op;
    }
    const uint32_t una = g->snd_una(), nxt = g->snd_nxt();
    const uint32_t inflight = static_cast<uint32_t>(psn_diff(nxt, una));
    const uint64_t what = pick(100);
    if (what < 10 || (inflight == 0 && what < 40)) {
      op.kind = TxOpKind::set_max;
      const uint32_t max = g->context().max;
      // Sometimes the next message is a synchronise one.
      if (pick(6) == 0) ls.add_sync(op.row, max);
      op.psn = psn_add(max, 1 + static_cast<int64_t>(pick(pick(4) == 0 ? 200 : 24)));
      return op;
    }
    if (what < 25) {
      op.kind = TxOpKind::timer;
      // Mostly at the connection's deadline, as the NIC calls it.
      const uint64_t wake = g->wake_at();
      if (wake != kNever && wake > now_ && pick(4) != 0) now_ = wake + pick(3);
      op.now = now_;
      return op;
    }
    if (what < 26) {
      op.kind = TxOpKind::read;
      return op;
    }
    op.kind = what < 28 ? TxOpKind::rnr : TxOpKind::ack;
    MpAck& a = op.ack;
    a.vp = static_cast<uint16_t>(0xC000 | pick(16));
    // The acknowledged PSN: one in flight, or nonsense now and then.
    const uint64_t where = pick(100);
    if (inflight == 0 || where < 2)
      a.sack = psn_add(nxt, static_cast<int64_t>(pick(5)));
    else if (where < 60)
      a.sack = psn_add(una, static_cast<int64_t>(pick(std::min<uint32_t>(inflight, 4))));
    else
      a.sack = psn_add(una, static_cast<int64_t>(pick(inflight)));
    // The cumulative ACK: up to the SACK (in order), or short of it.
    const int64_t gap = psn_diff(a.sack, una);
    const uint64_t how = pick(10);
    if (how < 5 && gap >= 0)
      a.aack = a.sack;
    else if (how < 9 && gap > 0)
      a.aack = psn_add(una, static_cast<int64_t>(pick(static_cast<uint64_t>(gap))) - 1);
    else
      a.aack = psn_add(una, -1 - static_cast<int64_t>(pick(3)));
    a.nack = op.kind == TxOpKind::rnr || pick(12) == 0;
    if (a.nack && op.kind == TxOpKind::ack && pick(2) == 0) {
      // An overflow NACK: the receiver names its head.
      a.aack = psn_add(una, -1 + static_cast<int64_t>(pick(std::max<uint32_t>(inflight, 1))));
      a.sack = psn_add(a.aack, 1);
    }
    a.ece = pick(6) == 0;
    a.retx = pick(8) == 0;
    op.backlog = static_cast<uint32_t>(pick(5));
    op.until = now_ + 100 + pick(3000);
    return op;
  }

 private:
  uint64_t pick(uint64_t n) { return n ? gen_() % n : 0; }
  std::mt19937_64 gen_;
  uint32_t rows_;
  // Starting just below 2^32 cycles: the run crosses into the stamps' upper
  // bits.
  uint64_t now_ = (uint64_t{1} << 32) - 20000000;
};

void run_random(const MpSenderParams& params, uint64_t seed, Coverage& cov) {
  MpTxLockstep ls(params, static_cast<uint32_t>(seed * 2654435761u));
  constexpr uint32_t kRows = 5;
  RandomOps gen(seed, kRows);
  const uint64_t n = ops_per_run();
  std::map<uint32_t, uint32_t> last_nxt;
  uint64_t issued = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (gen.epoch_over()) {
      gen.new_epoch();
      for (uint32_t r = 0; r < kRows; ++r) {
        TxOp init;
        init.kind = TxOpKind::init;
        init.row = r;
        init.psn = static_cast<uint32_t>(i);
        ++issued;
        auto d = ls.run(init);
        ASSERT_FALSE(d) << "seed " << seed << "\n" << *d;
      }
    }
    const TxOp op = gen.next(ls);
    const MpSender* before = ls.golden(op.row);
    const bool was_armed = before && before->context().sync_armed;
    // Mostly back to back (the next operation taken in the last cycle of
    // the one before, forwarded when on the same row), sometimes after a
    // few idle cycles.
    if (gen.idle_before()) {
      ls.rtl().advance_to(ls.rtl().cycles() + 1 + i % 3);
      ++cov.after_idle;
    }
    ++issued;
    auto diverged = ls.run(op);
    ASSERT_FALSE(diverged) << "seed " << seed << "\n" << *diverged;
    const TxOutcome& o = ls.last_outcome();
    cov.c += o.counts;
    cov.inits += op.kind == TxOpKind::init;
    if (o.packets.size() > 1) ++cov.multi_packet_ops;
    // A timer released a synchronise message and clocked it out.
    if (op.kind == TxOpKind::timer && was_armed && !o.context.sync_armed && !o.packets.empty())
      ++cov.releases;
    // The dividers ran: the synchronise release time, the window growth.
    if (o.context.sync_armed && o.cycles >= 2 + 9) ++cov.wake_divisions;
    if (o.counts.acks && o.cycles >= 2 + 4) ++cov.growth_divisions;
    const uint32_t nxt = o.context.nxt;
    auto it = last_nxt.find(op.row);
    if (op.kind != TxOpKind::init && it != last_nxt.end() && nxt < it->second) ++cov.psn_wraps;
    last_nxt[op.row] = nxt;
  }
  EXPECT_EQ(ls.operations(), issued);
  cov.overlapped = ls.rtl().overlapped_ops();
  cov.forwarded = ls.rtl().forwarded_ops();
}

TEST(MpTxRtl, RandomOperationsAgreeEveryMechanismOn) {
  Coverage cov;
  run_random(lively(), 1, cov);
  if (HasFatalFailure()) return;
  // Every mechanism was exercised.
  const MpSender::Counters& c = cov.c;
  EXPECT_GT(c.acks, 0u);
  EXPECT_GT(c.ece_acks, 0u);
  EXPECT_GT(c.pruned_acks, 0u);
  EXPECT_GT(c.nacks, 0u);
  EXPECT_GT(c.recoveries, 0u);
  EXPECT_GT(c.retransmits, 0u);
  EXPECT_GT(c.early_retransmits, 0u);
  EXPECT_GT(c.rtos, 0u);
  EXPECT_GT(c.probes, 0u);
  EXPECT_GT(c.burst_timer_sends, 0u);
  EXPECT_GT(c.window_reductions, 0u);
  EXPECT_GT(c.restarts, 0u);
  EXPECT_GT(c.sync_waits, 0u);
  EXPECT_GT(c.rnr_nacks, 0u);
  EXPECT_GT(c.rnr_waits, 0u);
  EXPECT_GT(cov.psn_wraps, 0u);
  EXPECT_GT(cov.multi_packet_ops, 0u);
  EXPECT_GT(cov.releases, 0u);
  EXPECT_GT(cov.wake_divisions, 0u);
  EXPECT_GT(cov.growth_divisions, 0u);
  EXPECT_GT(cov.forwarded, 0u);
  EXPECT_GT(cov.overlapped, cov.forwarded);  // other rows back to back too
  EXPECT_GT(cov.after_idle, 0u);
  std::printf(
      "coverage: acks %llu ece %llu pruned %llu nacks %llu recoveries %llu retx %llu early %llu "
      "rtos %llu probes %llu burst-timer %llu reductions %llu restarts %llu sync-waits %llu rnr "
      "%llu/%llu psn-wraps %llu multi-packet %llu releases %llu back-to-back %llu forwarded "
      "%llu after-idle %llu\n",
      (unsigned long long)c.acks, (unsigned long long)c.ece_acks, (unsigned long long)c.pruned_acks,
      (unsigned long long)c.nacks, (unsigned long long)c.recoveries,
      (unsigned long long)c.retransmits, (unsigned long long)c.early_retransmits,
      (unsigned long long)c.rtos, (unsigned long long)c.probes,
      (unsigned long long)c.burst_timer_sends, (unsigned long long)c.window_reductions,
      (unsigned long long)c.restarts, (unsigned long long)c.sync_waits,
      (unsigned long long)c.rnr_nacks, (unsigned long long)c.rnr_waits,
      (unsigned long long)cov.psn_wraps, (unsigned long long)cov.multi_packet_ops,
      (unsigned long long)cov.releases, (unsigned long long)cov.overlapped,
      (unsigned long long)cov.forwarded, (unsigned long long)cov.after_idle);
}

TEST(MpTxRtl, RandomOperationsAgreeStrictRecovery) {
  Coverage cov;
  run_random(strict(), 2, cov);
  if (HasFatalFailure()) return;
  EXPECT_GT(cov.c.retransmits, 0u);
  EXPECT_GT(cov.c.rtos, 0u);
  EXPECT_EQ(cov.c.pruned_acks, 0u);        // no out-of-order control
  EXPECT_EQ(cov.c.window_reductions, 0u);  // none asked for
  EXPECT_EQ(cov.c.probes, 0u);             // probability 0
  EXPECT_GT(cov.forwarded, 0u);
}

// ---- directed cases ----

TxOp op_of(TxOpKind k, uint32_t row, uint64_t now, uint32_t psn = 0) {
  TxOp op;
  op.kind = k;
  op.row = row;
  op.now = now;
  op.psn = psn;
  return op;
}

TEST(MpTxRtl, InitialWindowLeavesOnePacketPerCycleOnRandomPaths) {
  MpTxLockstep ls(lively(), 7);
  ASSERT_FALSE(ls.run(op_of(TxOpKind::init, 3, 0, 1000)));
  ASSERT_FALSE(ls.run(op_of(TxOpKind::set_max, 3, 100, 1100)));
  const TxOutcome& o = ls.last_outcome();
  ASSERT_EQ(o.packets.size(), 16u);  // IW
  for (size_t i = 0; i < o.packets.size(); ++i) {
    EXPECT_EQ(o.packets[i].tx.psn, 1000 + i);
    EXPECT_FALSE(o.packets[i].tx.retx);
    EXPECT_EQ(o.packets[i].tx.vp & 0xC000, 0xC000);
  }
  // Taken, applied, one cycle per packet; the next may be taken at the
  // edge that writes the row back.
  EXPECT_EQ(o.cycles, 2 + o.packets.size());
  EXPECT_EQ(o.context.rto_at, 100 + lively().rto_cycles);
}

TEST(MpTxRtl, OperationsWithoutPacketsOccupyTwoCycles) {
  MpTxLockstep ls(lively(), 7);
  ASSERT_FALSE(ls.run(op_of(TxOpKind::init, 0, 0, 5)));
  EXPECT_EQ(ls.last_outcome().cycles, 2u);
  ASSERT_FALSE(ls.run(op_of(TxOpKind::read, 0, 1)));
  EXPECT_EQ(ls.last_outcome().cycles, 2u);
}

// Back to back on one row: the second operation is taken at the edge that
// writes the first one's row back, reads the old row from the RAM and must
// take the write-back register's instead.
TEST(MpTxRtl, BackToBackOnOneRowForwardsTheRowBeingWritten) {
  MpTxLockstep ls(lively(), 7);
  MpTxRtl& e = ls.rtl();
  ASSERT_FALSE(ls.run(op_of(TxOpKind::init, 2, 0, 700)));
  const uint64_t end_of_init = e.cycles();
  ASSERT_FALSE(ls.run(op_of(TxOpKind::set_max, 2, 10, 800)));  // IW out
  EXPECT_EQ(e.overlapped_ops(), 1u);
  EXPECT_EQ(e.forwarded_ops(), 1u);
  // Taken in init's last cycle: no cycle between the two.
  EXPECT_EQ(e.cycles(), end_of_init + 2 + 16);
  ASSERT_EQ(ls.last_outcome().packets.size(), 16u);
  EXPECT_EQ(ls.last_outcome().context.nxt, 716u);
  // Another row back to back: taken at the edge, nothing forwarded.
  ASSERT_FALSE(ls.run(op_of(TxOpKind::init, 3, 20, 900)));
  EXPECT_EQ(e.overlapped_ops(), 2u);
  EXPECT_EQ(e.forwarded_ops(), 1u);
  // After idle cycles the last edge is clocked alone: nothing overlaps.
  e.advance_to(e.cycles() + 5);
  TxOp ack = op_of(TxOpKind::ack, 2, 30);
  ack.ack.vp = 0xC001;
  ack.ack.sack = ack.ack.aack = 700;
  ASSERT_FALSE(ls.run(ack));
  EXPECT_EQ(e.overlapped_ops(), 2u);
  EXPECT_EQ(ls.last_outcome().context.una, 701u);
}

TEST(MpTxRtl, AckThatGrowsTheWindowWaitsFourCyclesForTheDivider) {
  MpTxLockstep ls(lively(), 7);
  ASSERT_FALSE(ls.run(op_of(TxOpKind::init, 1, 0, 500)));
  ASSERT_FALSE(ls.run(op_of(TxOpKind::set_max, 1, 100, 600)));  // IW: 500..515 out
  TxOp ack = op_of(TxOpKind::ack, 1, 200);
  ack.ack.vp = 0xC001;
  ack.ack.sack = 500;
  ack.ack.aack = 500;
  ASSERT_FALSE(ls.run(ack));
  const TxOutcome& o = ls.last_outcome();
  EXPECT_EQ(o.context.cwnd_q, (16u << 16) + (1u << 16) / 16);  // + 1/cwnd
  ASSERT_EQ(o.packets.size(), 1u);                             // awnd 16 - 15 in flight
  EXPECT_EQ(o.cycles, 2u + 4u + 1u);
  // An ECE ACK cuts the window instead: no division.
  ack.now = 300;
  ack.ack.sack = ack.ack.aack = 501;
  ack.ack.ece = true;
  ASSERT_FALSE(ls.run(ack));
  const TxOutcome& e = ls.last_outcome();
  EXPECT_EQ(e.context.cwnd_q, (16u << 16) + (1u << 16) / 16 - (1u << 15));
  EXPECT_TRUE(e.packets.empty());  // 15 in flight fill the 15.5 packets
  EXPECT_EQ(e.cycles, 2u);
}

TEST(MpTxRtl, CycleBeyondTheTimestampsIsRefused) {
  MpTxRtl e(lively(), 1);
  e.run(op_of(TxOpKind::init, 0, 0, 5));
  EXPECT_THROW(e.run(op_of(TxOpKind::timer, 0, MpTxRtl::max_cycle() + 1)), std::out_of_range);
  EXPECT_THROW(e.run(op_of(TxOpKind::read, MpTxRtl::rows(), 0)), std::out_of_range);
}

TEST(MpTxRtl, TimerTooLongForTheEngineIsRefused) {
  MpSenderParams s = lively();
  s.rto_cycles = uint64_t{1} << 31;
  try {
    MpTxRtl e(s, 1);
    FAIL() << "an RTO of 2^31 cycles was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RTO"), std::string::npos) << e.what();
  }
}

TEST(MpTxRtl, OperationOnARowNeverStartedIsTheCallersError) {
  MpTxLockstep ls(lively(), 7);
  EXPECT_THROW(ls.run(op_of(TxOpKind::timer, 4, 10)), std::logic_error);
}

// A connection with every field live: sent, ACKed (snd_una moved, a probe
// decision taken), the RTO and the burst timer running.
MpTxLockstep& live_connection(MpTxLockstep& ls) {
  EXPECT_FALSE(ls.run(op_of(TxOpKind::init, 2, 0, 0xFFFFF0)));  // just before the wrap
  EXPECT_FALSE(ls.run(op_of(TxOpKind::set_max, 2, 1000, 0x000040)));
  TxOp ack = op_of(TxOpKind::ack, 2, 1200);
  ack.ack.vp = 0xC123;
  ack.ack.sack = 0xFFFFF2;
  ack.ack.aack = 0xFFFFF1;
  EXPECT_FALSE(ls.run(ack));
  return ls;
}

struct Field {
  const char* name;  // as context_diff() names it
  uint32_t lsb;
};

// (How ctest lists the cases: by field, not by the bytes of a pointer.)
void PrintTo(const Field& f, std::ostream* os) { *os << f.name << " bit " << f.lsb; }

class FaultInjection : public ::testing::TestWithParam<Field> {};

TEST_P(FaultInjection, LockstepNamesTheFlippedField) {
  MpSenderParams s = lively();
  s.max_per_ack = 1;  // the ACK leaves window over: the burst timer runs
  MpTxLockstep ls(s, 11);
  live_connection(ls);
  const MpSenderContext& c = ls.last_outcome().context;
  ASSERT_NE(c.burst_at, kNever);
  ASSERT_NE(c.rto_at, kNever);
  ls.rtl().flip_context_bit(2, GetParam().lsb);
  auto report = ls.run(op_of(TxOpKind::read, 2, 1300));
  ASSERT_TRUE(report) << "a flipped bit of " << GetParam().name << " went unnoticed";
  EXPECT_NE(report->find(std::string("[context ") + GetParam().name + "]"), std::string::npos)
      << *report;
  EXPECT_NE(report->find("! " + std::string(GetParam().name) + ":"), std::string::npos) << *report;
  EXPECT_NE(report->find("earlier operations on row 2"), std::string::npos);
  // The divergent read is replayed with the operations before it.
  // (One file per case and process: ctest runs the cases in parallel.)
  const std::string fst = ::testing::TempDir() + "/tx-replay-" + std::to_string(GetParam().lsb) +
                          "-" + std::to_string(::getpid()) + ".fst";
  EXPECT_EQ(ls.replay_fst(fst), 4u);
  std::ifstream in(fst, std::ios::binary);
  EXPECT_TRUE(in.good());
  std::remove(fst.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    EveryField, FaultInjection,
    ::testing::Values(
        Field{"snd_una", p::TX_CTX_UNA_LSB}, Field{"snd_nxt", p::TX_CTX_NXT_LSB},
        Field{"snd_max", p::TX_CTX_MAX_LSB}, Field{"cwnd_q16", p::TX_CTX_CWND_LSB},
        Field{"inflate", p::TX_CTX_INFLATE_LSB}, Field{"snd_ooh", p::TX_CTX_OOH_LSB},
        Field{"recovering", p::TX_CTX_RECOVERING_LSB}, Field{"recovery", p::TX_CTX_RECOVERY_LSB},
        Field{"snd_retx", p::TX_CTX_RETX_LSB}, Field{"nack_head", p::TX_CTX_NACK_HEAD_LSB},
        Field{"early_retx", p::TX_CTX_EARLY_LSB}, Field{"last_send", p::TX_CTX_LAST_SEND_LSB},
        Field{"burst_at", p::TX_CTX_BURST_VALID_LSB}, Field{"burst_at", p::TX_CTX_BURST_AT_LSB},
        Field{"next_probe", p::TX_CTX_NEXT_PROBE_LSB}, Field{"rto_at", p::TX_CTX_RTO_VALID_LSB},
        Field{"rto_at", p::TX_CTX_RTO_AT_LSB}, Field{"ever_sent", p::TX_CTX_EVER_SENT_LSB},
        Field{"hold_until", p::TX_CTX_HOLD_UNTIL_LSB},
        Field{"prev_msg_sent", p::TX_CTX_PREV_MSG_SENT_LSB},
        Field{"sync_armed", p::TX_CTX_SYNC_ARMED_LSB}),
    [](const ::testing::TestParamInfo<Field>& i) { return std::to_string(i.param.lsb); });

TEST(MpTxRtl, ContextRowCoversEveryGoldenField) {
  // One RTL field per golden one (two for each deadline: valid and time).
  EXPECT_EQ(MpSenderContext{}.fields().size(), 19u);
  EXPECT_EQ(MpTxRtl::context_bits(), p::TX_CTX_SYNC_ARMED_LSB + 1);
}

TEST(MpTxLockstep, ReplayIsForAfterADivergence) {
  MpTxLockstep ls(lively(), 7);
  ASSERT_FALSE(ls.run(op_of(TxOpKind::init, 0, 0, 5)));
  EXPECT_THROW(ls.replay_fst(::testing::TempDir() + "/never.fst"), std::logic_error);
}

}  // namespace
}  // namespace mprdma::nic::rtl
