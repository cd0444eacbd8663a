// The Verilated go-back-N engine against its golden model (GbnEngine), in
// lockstep: seeded random operation sequences over several QPs (half of
// them back to back on one row, PSN wrap, timers at their deadlines, every
// ACK and NAK kind, lost READ responses, retry and RNR budgets running out,
// ACK coalescing), and fault injection that lockstep must name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "mprdma/rtl_params.h"
#include "vp/nic/rtl/gbn_qp_lockstep.h"

namespace mprdma::nic::rtl {
namespace {

namespace p = mprdma::rtl;

// Operations per run: MPRDMA_RTL_OPS, else 500,000 (two runs: a million).
uint64_t ops_per_run() {
  const char* env = std::getenv("MPRDMA_RTL_OPS");
  return env ? std::strtoull(env, nullptr, 10) : 500000;
}

struct Coverage {
  uint64_t back_to_back = 0, sends = 0, retransmits = 0, progress = 0, rewinds = 0, accepts = 0;
  uint64_t retry_exceeded = 0, rnr_exceeded = 0, fatal = 0, timer_rewinds = 0;
  uint64_t verdicts[4] = {0, 0, 0, 0};
  uint64_t acks = 0, psn_wraps = 0;
};

class RandomOps {
 public:
  RandomOps(uint64_t seed, uint32_t rows) : gen_(seed), rows_(rows) {}

  GbnOp next(const GbnQpLockstep& ls, uint32_t last_row) {
    GbnOp op;
    op.row = pick(2) == 0 ? last_row : static_cast<uint32_t>(pick(rows_));
    now_ += pick(50);
    op.now = now_;
    if (!ls.started(op.row) || pick(5000) == 0) return open(op);
    const GbnContext c = ls.golden().context(op.row);
    if (!c.requester && pick(4) == 0) {
      op.kind = GbnOpKind::set_requester;
      op.psn = near_wrap();
      op.params = params_of(c);
      return op;
    }
    const uint64_t what = pick(100);
    if (what < 14) {
      op.kind = GbnOpKind::next_tx;
    } else if (what < 30) {
      op.kind = GbnOpKind::on_sent;
      op.psn = pick(8) ? c.nxt : psn_add(c.nxt, static_cast<int64_t>(pick(5)) - 2);
      op.npsn = 1 + static_cast<uint32_t>(pick(3));
    } else if (what < 38) {
      op.kind = GbnOpKind::set_snd_max;
      op.psn = psn_add(c.max, 1 + static_cast<int64_t>(pick(20)));
    } else if (what < 63) {
      op.kind = GbnOpKind::on_ack;
      const uint64_t k = pick(100);
      op.ack = k < 45   ? AckEvent::Kind::ack
               : k < 60 ? AckEvent::Kind::nak_sequence
               : k < 72 ? AckEvent::Kind::nak_rnr
               : k < 74 ? AckEvent::Kind::nak_fatal
               : k < 87 ? AckEvent::Kind::read_response
                        : AckEvent::Kind::atomic_ack;
      const int32_t span = psn_diff(c.high, c.una);
      op.psn = psn_add(c.una, static_cast<int64_t>(pick(static_cast<uint64_t>(span) + 4)) - 2);
      // Usually no response is missing; sometimes one is, before the ACK.
      op.ack_limit =
          pick(4) ? psn_add(c.high, 8) : psn_add(c.una, static_cast<int64_t>(pick(span + 1u)));
      op.rnr_delay = 100 + pick(2000);
    } else if (what < 75) {
      op.kind = GbnOpKind::on_timer;
      const uint64_t wake = ls.golden().wake_at(op.row);
      if (wake != kNever && wake > now_ && pick(4) != 0) now_ = wake + pick(3);
      op.now = now_;
    } else if (what < 86) {
      op.kind = GbnOpKind::classify;
      op.psn = psn_add(c.epsn, static_cast<int64_t>(pick(7)) - 3);
    } else if (what < 95) {
      op.kind = GbnOpKind::commit;
      op.npsn = 1 + static_cast<uint32_t>(pick(3));
      op.ack_req = pick(3) == 0;
      op.implicit_ack = pick(10) == 0;
    } else if (what < 98) {
      op.kind = GbnOpKind::nak_sent;
    } else {
      op.kind = GbnOpKind::read;
    }
    return op;
  }

 private:
  uint64_t pick(uint64_t n) { return n ? gen_() % n : 0; }
  uint32_t near_wrap() {
    return pick(3) == 0 ? kPsnMask - static_cast<uint32_t>(pick(40))
                        : static_cast<uint32_t>(pick(kPsnMask + 1));
  }
  ConnParams params_of(const GbnContext& c) {
    ConnParams cp;
    cp.retry_cnt = c.retry_cnt;
    cp.rnr_retry = c.rnr_retry;
    cp.ack_timeout_cycles = c.ack_timeout_cycles;
    cp.udp_sport = c.udp_sport;
    cp.ack_coalesce = c.ack_coalesce;
    return cp;
  }
  GbnOp open(GbnOp op) {
    op.kind = GbnOpKind::open;
    op.psn = near_wrap();
    ConnParams& cp = op.params;
    cp.retry_cnt = static_cast<uint8_t>(pick(8));
    cp.rnr_retry = static_cast<uint8_t>(pick(8));  // 7: for ever
    cp.ack_timeout_cycles = pick(10) == 0 ? 0 : 200 + pick(5000);
    cp.udp_sport = static_cast<uint16_t>(0xC000 | pick(0x4000));
    cp.ack_coalesce = 1 + static_cast<uint32_t>(pick(4));
    return op;
  }
  std::mt19937_64 gen_;
  uint32_t rows_;
  // Just below 2^32 cycles: the run crosses into the stamps' upper bits.
  uint64_t now_ = (uint64_t{1} << 32) - 10000000;
};

void run_random(uint64_t go_back_delay, uint64_t seed, Coverage& cov) {
  GbnQpLockstep ls(go_back_delay);
  RandomOps gen(seed, 6);
  uint32_t last_row = 0;
  const uint64_t n = ops_per_run();
  for (uint64_t i = 0; i < n; ++i) {
    const GbnOp op = gen.next(ls, last_row);
    if (op.row == last_row && i) ++cov.back_to_back;
    last_row = op.row;
    const uint32_t una_before = ls.started(op.row) ? ls.golden().context(op.row).una : 0;
    auto diverged = ls.step(&op);
    ASSERT_FALSE(diverged) << "seed " << seed << "\n" << *diverged;
    // The golden outcome of this operation (compared with the RTL's a cycle
    // later): what the run reached.
    const GbnContext c = ls.golden().context(op.row);
    if (op.kind != GbnOpKind::open && op.kind != GbnOpKind::set_requester && c.una < una_before &&
        una_before - c.una > (1u << 23))
      ++cov.psn_wraps;
  }
  auto diverged = ls.drain();
  ASSERT_FALSE(diverged) << *diverged;
  EXPECT_EQ(ls.compared(), n);
}

TEST(GbnQpRtl, RandomOperationsAgree) {
  Coverage cov;
  run_random(0, 1, cov);
  if (HasFatalFailure()) return;
  EXPECT_GT(cov.back_to_back, ops_per_run() / 4);
  EXPECT_GT(cov.psn_wraps, 0u);
}

TEST(GbnQpRtl, RandomOperationsAgreeWithAGoBackDelay) {
  Coverage cov;
  run_random(300, 2, cov);
  if (HasFatalFailure()) return;
  EXPECT_GT(cov.back_to_back, ops_per_run() / 4);
}

// Every kind of outcome occurs in a shorter run (each counted from the
// outcomes lockstep compared, so the RTL gave them too).
TEST(GbnQpRtl, RandomOperationsReachEveryOutcome) {
  GbnQpLockstep ls(0);
  RandomOps gen(3, 4);
  Coverage cov;
  uint32_t last_row = 0;
  for (int i = 0; i < 200000; ++i) {
    const GbnOp op = gen.next(ls, last_row);
    last_row = op.row;
    auto d = ls.step(&op);
    ASSERT_FALSE(d) << *d;
    const auto& o = ls.last_outcome();
    if (!o) continue;
    switch (o->kind) {
      case GbnOpKind::next_tx:
        cov.sends += o->grant.send;
        cov.retransmits += o->grant.retransmit;
        break;
      case GbnOpKind::on_ack:
      case GbnOpKind::on_timer:
        cov.progress += o->result.progress;
        cov.rewinds += o->result.rewound;
        cov.accepts += o->result.accept;
        cov.timer_rewinds += o->kind == GbnOpKind::on_timer && o->result.rewound;
        cov.retry_exceeded += o->result.error == AckResult::Error::retry_exceeded;
        cov.rnr_exceeded += o->result.error == AckResult::Error::rnr_exceeded;
        cov.fatal += o->result.error == AckResult::Error::fatal_nak;
        break;
      case GbnOpKind::classify:
        ++cov.verdicts[static_cast<int>(o->verdict)];
        break;
      case GbnOpKind::commit:
        cov.acks += o->decision.send;
        break;
      default:
        break;
    }
  }
  ASSERT_FALSE(ls.drain());
  EXPECT_GT(cov.sends, 0u);
  EXPECT_GT(cov.retransmits, 0u);
  EXPECT_GT(cov.progress, 0u);
  EXPECT_GT(cov.rewinds, 0u);
  EXPECT_GT(cov.accepts, 0u);
  EXPECT_GT(cov.timer_rewinds, 0u);
  EXPECT_GT(cov.retry_exceeded, 0u);
  EXPECT_GT(cov.rnr_exceeded, 0u);
  EXPECT_GT(cov.fatal, 0u);
  for (uint64_t v : cov.verdicts) EXPECT_GT(v, 0u);
  EXPECT_GT(cov.acks, 0u);
}

GbnOp op_of(GbnOpKind k, uint32_t row, uint64_t now, uint32_t psn = 0) {
  GbnOp op;
  op.kind = k;
  op.row = row;
  op.now = now;
  op.psn = psn;
  return op;
}

struct Field {
  const char* name;  // as context_diff() names it
  uint32_t lsb;
};
void PrintTo(const Field& f, std::ostream* os) { *os << f.name << " bit " << f.lsb; }

class GbnFaultInjection : public ::testing::TestWithParam<Field> {};

TEST_P(GbnFaultInjection, LockstepNamesTheFlippedField) {
  GbnQpLockstep ls(0);
  GbnOp open = op_of(GbnOpKind::open, 3, 10, 0x100);
  open.params.retry_cnt = 6;
  open.params.rnr_retry = 5;
  open.params.ack_timeout_cycles = 1000;
  open.params.udp_sport = 0xC123;
  open.params.ack_coalesce = 3;
  GbnOp req = open;
  req.kind = GbnOpKind::set_requester;
  req.psn = 0x200;
  GbnOp max = op_of(GbnOpKind::set_snd_max, 3, 11, 0x210);
  GbnOp sent = op_of(GbnOpKind::on_sent, 3, 12, 0x200);
  sent.npsn = 4;  // the RTO runs
  for (const GbnOp* o : {&open, &req, &max, &sent}) ASSERT_FALSE(ls.step(o));
  ASSERT_FALSE(ls.drain());
  ls.rtl().flip_context_bit(3, GetParam().lsb);
  GbnOp read = op_of(GbnOpKind::read, 3, 13);
  ASSERT_FALSE(ls.step(&read));
  auto report = ls.drain();
  ASSERT_TRUE(report) << "a flipped bit of " << GetParam().name << " went unnoticed";
  EXPECT_NE(report->find(std::string("[context ") + GetParam().name + "]"), std::string::npos)
      << *report;
  EXPECT_NE(report->find("! " + std::string(GetParam().name) + ":"), std::string::npos) << *report;
  // The divergent read is replayed with the operations before it. (One file
  // per case and process: ctest runs the cases in parallel.)
  const std::string fst = ::testing::TempDir() + "/gbn-replay-" + std::to_string(GetParam().lsb) +
                          "-" + std::to_string(::getpid()) + ".fst";
  EXPECT_EQ(ls.replay_fst(fst), 5u);
  std::ifstream in(fst, std::ios::binary);
  EXPECT_TRUE(in.good());
  std::remove(fst.c_str());
}

TEST(GbnQpRtl, ReplayIsForAfterADivergence) {
  GbnQpLockstep ls(0);
  GbnOp open = op_of(GbnOpKind::open, 0, 1, 5);
  ASSERT_FALSE(ls.step(&open));
  ASSERT_FALSE(ls.drain());
  EXPECT_THROW(ls.replay_fst(::testing::TempDir() + "/never.fst"), std::logic_error);
}

INSTANTIATE_TEST_SUITE_P(
    EveryField, GbnFaultInjection,
    ::testing::Values(
        Field{"requester", p::GBN_CTX_REQUESTER_LSB}, Field{"snd_una", p::GBN_CTX_UNA_LSB},
        Field{"snd_nxt", p::GBN_CTX_NXT_LSB}, Field{"snd_max", p::GBN_CTX_MAX_LSB},
        Field{"high", p::GBN_CTX_HIGH_LSB}, Field{"retry_left", p::GBN_CTX_RETRY_LEFT_LSB},
        Field{"rnr_left", p::GBN_CTX_RNR_LEFT_LSB},
        Field{"deadline", p::GBN_CTX_DEADLINE_VALID_LSB},
        Field{"deadline", p::GBN_CTX_DEADLINE_LSB}, Field{"hold_until", p::GBN_CTX_HOLD_UNTIL_LSB},
        Field{"rewound_for_una", p::GBN_CTX_REWOUND_LSB}, Field{"epsn", p::GBN_CTX_EPSN_LSB},
        Field{"nak_sent", p::GBN_CTX_NAK_SENT_LSB}, Field{"since_ack", p::GBN_CTX_SINCE_ACK_LSB},
        Field{"retry_cnt", p::GBN_CTX_RETRY_CNT_LSB}, Field{"rnr_retry", p::GBN_CTX_RNR_RETRY_LSB},
        Field{"ack_timeout", p::GBN_CTX_ACK_TIMEOUT_LSB}, Field{"udp_sport", p::GBN_CTX_SPORT_LSB},
        Field{"ack_coalesce", p::GBN_CTX_ACK_COALESCE_LSB}),
    [](const ::testing::TestParamInfo<Field>& i) { return std::to_string(i.param.lsb); });

TEST(GbnQpRtl, ContextRowCoversEveryGoldenField) {
  EXPECT_EQ(GbnContext{}.fields().size(), 18u);
  EXPECT_EQ(GbnQpRtl::context_bits(), p::GBN_CTX_W);
}

TEST(GbnQpRtl, OperationOnARowNeverOpenedIsTheCallersError) {
  GbnQpLockstep ls(0);
  GbnOp op = op_of(GbnOpKind::next_tx, 1, 5);
  EXPECT_THROW(ls.step(&op), std::logic_error);
}

TEST(GbnQpRtl, CycleBeyondTheTimestampsIsRefused) {
  GbnQpRtl e(0);
  GbnOp op = op_of(GbnOpKind::read, 0, GbnQpRtl::max_cycle() + 1);
  EXPECT_THROW(e.clock(&op), std::out_of_range);
}

}  // namespace
}  // namespace mprdma::nic::rtl
