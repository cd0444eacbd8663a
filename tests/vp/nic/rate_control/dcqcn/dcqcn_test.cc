// DCQCN reaction point and notification point (vp/nic/rate_control/dcqcn/dcqcn.h) with crafted
// inputs: the cut on a CNP, the alpha update and decay, fast recovery,
// additive and hyper increase, release to line rate, pacing, and the NP's
// minimum CNP interval.
#include "vp/nic/rate_control/dcqcn/dcqcn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace mprdma::nic {
namespace {

using Stage = DcqcnRp::Stage;

// 1 cycle = 1 ns so that rates and gaps are easy to check by hand.
constexpr uint64_t kUs = 1000;  // cycles per microsecond
constexpr uint64_t kT = 55 * kUs;
constexpr uint64_t kK = 55 * kUs;

DcqcnRpParams params() {
  DcqcnRpParams p;
  p.cycles_per_second = 1e9;
  p.line_rate_bps = 40e9;
  p.min_rate_bps = 10e6;
  p.g = 1.0 / 256;
  p.initial_alpha = 1.0;
  p.alpha_interval = kK;
  p.rate_timer = kT;
  p.byte_counter = 10000000;
  p.fast_recovery = 5;
  p.rate_ai_bps = 40e6;
  p.rate_hai_bps = 400e6;
  return p;
}

TEST(DcqcnRp, StartsUnlimitedAtLineRate) {
  DcqcnRp rp(params());
  EXPECT_FALSE(rp.limited());
  EXPECT_EQ(rp.stage(), Stage::unlimited);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 40e9);
  rp.on_sent(1000, 5);
  EXPECT_EQ(rp.tx_allowed_at(), 0u);  // no pacing before the first CNP
}

TEST(DcqcnRp, CnpCutsRateByHalfAlphaAndSetsTarget) {
  DcqcnRpParams p = params();
  p.initial_alpha = 0.5;
  DcqcnRp rp(p);
  rp.on_cnp(1000);
  EXPECT_TRUE(rp.limited());
  EXPECT_DOUBLE_EQ(rp.target_bps(), 40e9);       // Rt <- Rc
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 40e9 * 0.75);  // Rc (1 - alpha/2), the old alpha
  const double a1 = (1 - 1.0 / 256) * 0.5 + 1.0 / 256;
  EXPECT_DOUBLE_EQ(rp.alpha(), a1);  // alpha <- (1-g) alpha + g
  EXPECT_EQ(rp.cuts(), 1u);
  // A second CNP within K: cut again with the raised alpha; no decay.
  rp.on_cnp(2000);
  EXPECT_DOUBLE_EQ(rp.target_bps(), 30e9);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 30e9 * (1 - a1 / 2));
  EXPECT_DOUBLE_EQ(rp.alpha(), (1 - 1.0 / 256) * a1 + 1.0 / 256);
  EXPECT_EQ(rp.cuts(), 2u);
}

TEST(DcqcnRp, RateNeverBelowMinimum) {
  DcqcnRpParams p = params();
  p.min_rate_bps = 1e9;
  DcqcnRp rp(p);
  for (int i = 0; i < 20; ++i) rp.on_cnp(static_cast<uint64_t>(i) * 10);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 1e9);
}

TEST(DcqcnRp, AlphaDecaysOncePerIntervalWithoutCnp) {
  DcqcnRpParams p = params();
  p.initial_alpha = 0.5;
  DcqcnRp rp(p);
  rp.advance(10 * kK);
  EXPECT_DOUBLE_EQ(rp.alpha(), 0.5);  // the alpha timer starts with the first CNP
  const uint64_t t0 = 10 * kK + 7;
  rp.on_cnp(t0);
  const double a = rp.alpha();
  rp.advance(t0 + kK - 1);
  EXPECT_DOUBLE_EQ(rp.alpha(), a);
  rp.advance(t0 + kK);
  EXPECT_DOUBLE_EQ(rp.alpha(), a * (1 - 1.0 / 256));
  rp.advance(t0 + 3 * kK + 5);
  EXPECT_NEAR(rp.alpha(), a * std::pow(1 - 1.0 / 256, 3), 1e-15);
  // A CNP restarts the interval: half an interval later, no decay.
  rp.on_cnp(t0 + 3 * kK + 10);
  const double b = rp.alpha();
  rp.advance(t0 + 3 * kK + 10 + kK / 2);
  EXPECT_DOUBLE_EQ(rp.alpha(), b);
}

// Two CNPs back to back from line rate (alpha = 1): Rt = 20 Gb/s,
// Rc = 10 Gb/s, so every stage is a round number.
DcqcnRp cut_to_10g(const DcqcnRpParams& p) {
  DcqcnRp rp(p);
  rp.on_cnp(0);
  rp.on_cnp(0);
  return rp;
}

TEST(DcqcnRp, FastRecoveryHalvesTheGapToTarget) {
  DcqcnRp rp = cut_to_10g(params());
  ASSERT_DOUBLE_EQ(rp.target_bps(), 20e9);
  ASSERT_DOUBLE_EQ(rp.rate_bps(), 10e9);
  EXPECT_EQ(rp.stage(), Stage::fast_recovery);
  rp.advance(kT - 1);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 10e9);  // no event before T
  const double expect[] = {15e9, 17.5e9, 18.75e9, 19.375e9, 19.6875e9};
  for (uint64_t i = 0; i < 5; ++i) {
    rp.advance((i + 1) * kT);
    EXPECT_EQ(rp.timer_events(), i + 1);
    EXPECT_DOUBLE_EQ(rp.rate_bps(), expect[i]) << "stage " << i + 1;
    EXPECT_DOUBLE_EQ(rp.target_bps(), 20e9);  // the target holds in fast recovery
  }
  EXPECT_EQ(rp.stage(), Stage::fast_recovery);
}

TEST(DcqcnRp, AdditiveIncreaseAfterFastRecovery) {
  DcqcnRp rp = cut_to_10g(params());
  rp.advance(5 * kT);
  const double rc5 = rp.rate_bps();
  rp.advance(6 * kT);
  EXPECT_EQ(rp.stage(), Stage::additive);
  EXPECT_DOUBLE_EQ(rp.target_bps(), 20e9 + 40e6);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), (20e9 + 40e6 + rc5) / 2);
  rp.advance(7 * kT);
  EXPECT_DOUBLE_EQ(rp.target_bps(), 20e9 + 80e6);
}

TEST(DcqcnRp, ByteCounterDrivesIncreasesAndHyperIncreaseNeedsBoth) {
  DcqcnRpParams p = params();
  p.byte_counter = 1000;
  DcqcnRp rp = cut_to_10g(p);
  rp.advance(7 * kT);  // 7 timer events: 5 fast recovery, 2 additive
  EXPECT_DOUBLE_EQ(rp.target_bps(), 20e9 + 2 * 40e6);
  double rt = rp.target_bps();
  // Byte-counter events 1..5: the timer count is past F, the byte count is
  // not: additive increase.
  for (uint32_t i = 1; i <= 5; ++i) {
    rp.on_sent(1000, 7 * kT);
    EXPECT_EQ(rp.byte_events(), i);
    rt += 40e6;
    EXPECT_DOUBLE_EQ(rp.target_bps(), rt) << "byte event " << i;
    EXPECT_EQ(rp.stage(), Stage::additive);
  }
  // Both counters past F: hyper increase by (min count - F) * R_HAI.
  const double rc = rp.rate_bps();
  rp.on_sent(1000, 7 * kT);
  EXPECT_EQ(rp.stage(), Stage::hyper);
  EXPECT_DOUBLE_EQ(rp.target_bps(), rt + 400e6);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), (rt + 400e6 + rc) / 2);
  rp.on_sent(1000, 7 * kT);
  EXPECT_DOUBLE_EQ(rp.target_bps(), rt + 400e6 + 2 * 400e6);
  // A CNP restarts both counters and the byte count.
  rp.on_sent(600, 7 * kT);
  rp.on_cnp(7 * kT + 1);
  EXPECT_EQ(rp.byte_events(), 0u);
  EXPECT_EQ(rp.timer_events(), 0u);
  rp.on_sent(600, 7 * kT + 2);
  EXPECT_EQ(rp.byte_events(), 0u);  // 600 bytes before the CNP were forgotten
}

TEST(DcqcnRp, PacesAtTheCurrentRate) {
  DcqcnRp rp = cut_to_10g(params());
  rp.on_sent(1000, 100);
  EXPECT_EQ(rp.tx_allowed_at(), 100u + 800u);  // 8000 bits at 10 Gb/s = 800 ns
  rp.on_sent(1001, 900);
  EXPECT_EQ(rp.tx_allowed_at(), 900u + 801u);  // 800.8 ns, rounded up to a cycle
}

// Item 5 of issue 5: a CNP cuts the rate, and the flow recovers through
// fast recovery and additive increase back to an unlimited line rate, with
// the paper's defaults at a 250 MHz NIC clock.
TEST(DcqcnRp, CutsOnCnpAndRecoversThroughItsStages) {
  DcqcnRpParams p;  // defaults: the paper's values
  p.cycles_per_second = 250e6;
  p.alpha_interval = p.rate_timer = 55 * 250;  // 55 us
  DcqcnRp rp(p);
  rp.on_cnp(0);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 20e9);  // alpha starts at 1: halved
  double last = rp.rate_bps();
  int fast = 0, additive = 0, hyper = 0;
  uint64_t now = 0;
  while (rp.limited() && now < 1000000000) {
    now += p.rate_timer;
    rp.advance(now);
    EXPECT_GE(rp.rate_bps(), last);
    last = rp.rate_bps();
    switch (rp.stage()) {
      case Stage::fast_recovery:
        ++fast;
        break;
      case Stage::additive:
        ++additive;
        break;
      case Stage::hyper:
        ++hyper;
        break;
      case Stage::unlimited:
        break;
    }
  }
  EXPECT_FALSE(rp.limited());
  EXPECT_EQ(fast, 5);
  EXPECT_GT(additive, 0);
  EXPECT_EQ(hyper, 0);  // no bytes sent: the byte counter never fired
  EXPECT_DOUBLE_EQ(rp.rate_bps(), p.line_rate_bps);
  EXPECT_EQ(rp.tx_allowed_at(), 0u);
  // Recovery from 20 Gb/s takes about F + log2(20G / R_AI) timer periods.
  EXPECT_LT(now, 25 * p.rate_timer);
}

TEST(DcqcnNp, AtMostOneCnpPerFlowPerInterval) {
  DcqcnNp np(50 * kUs);
  EXPECT_TRUE(np.on_ce(7, 1000));
  EXPECT_FALSE(np.on_ce(7, 1000 + 10 * kUs));  // two CE packets 10 us apart: one CNP
  EXPECT_TRUE(np.on_ce(8, 1000 + 10 * kUs));   // flows are independent
  EXPECT_FALSE(np.on_ce(7, 1000 + 50 * kUs - 1));
  EXPECT_TRUE(np.on_ce(7, 1000 + 50 * kUs));
  np.forget(7);
  EXPECT_TRUE(np.on_ce(7, 1000 + 51 * kUs));
}

}  // namespace
}  // namespace mprdma::nic
