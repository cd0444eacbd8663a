// TIMELY reaction point (vp/nic/rate_control/timely/timely.h) against rate
// updates computed by hand from Algorithm 1 of the paper: the first sample,
// the T_low and T_high rules, the EWMA gradient, increase and HAI, clamping,
// pacing and the clock.
#include "vp/nic/rate_control/timely/timely.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

namespace mprdma::nic {
namespace {

// 1 cycle = 1 ns so that RTTs read as nanoseconds. The paper's values:
// T_low 50 us, T_high 500 us, minRTT 20 us, alpha 0.875, beta 0.8,
// delta 10 Mb/s, HAI after 5 with N = 5.
constexpr double kDelta = 10e6;
// Rates are sums and products of doubles such as 0.8 that are not exact in
// binary: one bit per second is far below any real error.
constexpr double kBps = 1.0;

TimelyParams params() {
  TimelyParams p;
  p.cycles_per_second = 1e9;
  p.line_rate_bps = 40e9;
  p.min_rate_bps = 10e6;
  p.ewma_alpha = 0.875;
  p.beta = 0.8;
  p.add_step_bps = kDelta;
  p.t_low_cycles = 50000;
  p.t_high_cycles = 500000;
  p.min_rtt_cycles = 20000;
  p.hai_threshold = 5;
  p.hai_multiplier = 5;
  return p;
}

TEST(TimelyRp, DefaultsAreThePapersValuesAt250MHz) {
  const TimelyParams p;
  EXPECT_DOUBLE_EQ(p.cycles_per_second, 250e6);
  EXPECT_DOUBLE_EQ(p.line_rate_bps, 40e9);
  EXPECT_DOUBLE_EQ(p.min_rate_bps, 10e6);
  EXPECT_DOUBLE_EQ(p.ewma_alpha, 0.875);
  EXPECT_DOUBLE_EQ(p.beta, 0.8);
  EXPECT_DOUBLE_EQ(p.add_step_bps, 10e6);
  EXPECT_EQ(p.t_low_cycles, 12500u);    // 50 us x 250 cycles/us
  EXPECT_EQ(p.t_high_cycles, 125000u);  // 500 us x 250
  EXPECT_EQ(p.min_rtt_cycles, 5000u);   // 20 us x 250
  EXPECT_EQ(p.hai_threshold, 5u);
  EXPECT_EQ(p.hai_multiplier, 5u);
}

TEST(TimelyRp, StartsUnlimitedAtLineRate) {
  TimelyRp rp(params());
  EXPECT_FALSE(rp.limited());
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 40e9);
  EXPECT_EQ(rp.samples(), 0u);
  rp.on_sent(1000, 5);
  EXPECT_EQ(rp.tx_allowed_at(), 0u);  // no pacing at line rate
}

TEST(TimelyRp, FirstSampleOnlyInitialises) {
  TimelyRp rp(params());
  // 1 ms is twice T_high: as a second sample it would cut; as the first it
  // only becomes prev_rtt.
  rp.on_rtt(1000000, 10);
  EXPECT_EQ(rp.samples(), 1u);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 40e9);
  EXPECT_EQ(rp.cuts(), 0u);
  EXPECT_DOUBLE_EQ(rp.rtt_diff_cycles(), 0.0);
  EXPECT_DOUBLE_EQ(rp.gradient(), 0.0);
  EXPECT_FALSE(rp.limited());
  // The second sample acts: new_rtt_diff = 0, rtt_diff = 0, but rtt > T_high:
  // rate = 40e9 (1 - 0.8 (1 - 500000/1000000)) = 40e9 x 0.6 = 24e9.
  rp.on_rtt(1000000, 20);
  EXPECT_EQ(rp.samples(), 2u);
  EXPECT_NEAR(rp.rate_bps(), 24e9, kBps);
  EXPECT_EQ(rp.cuts(), 1u);
  EXPECT_TRUE(rp.limited());
}

TEST(TimelyRp, BelowTLowAddsDeltaWhateverTheGradient) {
  TimelyRp rp(params());
  rp.on_rtt(1000000, 0);
  rp.on_rtt(1000000, 0);  // 24e9, rtt_diff 0 (see FirstSampleOnlyInitialises)
  ASSERT_NEAR(rp.rate_bps(), 24e9, kBps);
  // 40 us < T_low: new_rtt_diff = 40000 - 1000000 = -960000,
  // rtt_diff = 0.125 x 0 + 0.875 x -960000 = -840000, gradient = -42.
  rp.on_rtt(40000, 0);
  EXPECT_DOUBLE_EQ(rp.rtt_diff_cycles(), -840000.0);
  EXPECT_DOUBLE_EQ(rp.gradient(), -42.0);
  EXPECT_NEAR(rp.rate_bps(), 24e9 + kDelta, kBps);
  // Five more below T_low: the run of negative gradients reaches HAI, but
  // the T_low rule is +delta alone (Algorithm 1 returns before the HAI
  // branch): 24e9 + 6 x 10e6.
  for (int i = 0; i < 5; ++i) rp.on_rtt(40000, 0);
  EXPECT_TRUE(rp.hai());
  EXPECT_NEAR(rp.rate_bps(), 24e9 + 6 * kDelta, kBps);
  EXPECT_EQ(rp.cuts(), 1u);
  // rtt == T_low is not below it: the gradient decides. rtt_diff was
  // -840000 x 0.125^5 = -25.634765625; +10000: rtt_diff = -3.204345703125
  // + 8750 = 8746.795654296875, gradient 0.43733978271484375 > 0: a cut to
  // 24.06e9 (1 - 0.8 x gradient) = 15.6420839e9.
  rp.on_rtt(50000, 0);
  EXPECT_DOUBLE_EQ(rp.gradient(), 0.43733978271484375);
  EXPECT_EQ(rp.cuts(), 2u);
  EXPECT_NEAR(rp.rate_bps(), 24.06e9 * (1 - 0.8 * 0.43733978271484375), 1e3);
  EXPECT_NEAR(rp.rate_bps(), 15.642e9, 1e6);
}

TEST(TimelyRp, AboveTHighCutsByTheTHighRuleNotTheGradient) {
  TimelyRp rp(params());
  rp.on_rtt(400000, 0);
  // new_rtt_diff = 400000, rtt_diff = 0.875 x 400000 = 350000,
  // gradient = 350000 / 20000 = 17.5 (the gradient rule would give
  // 1 - 0.8 x 17.5 < 0, i.e. min rate). rtt = 800 us > T_high:
  // rate = 40e9 (1 - 0.8 (1 - 500000/800000)) = 40e9 (1 - 0.8 x 0.375) = 28e9.
  rp.on_rtt(800000, 0);
  EXPECT_DOUBLE_EQ(rp.gradient(), 17.5);
  EXPECT_NEAR(rp.rate_bps(), 28e9, kBps);
  EXPECT_EQ(rp.cuts(), 1u);
  // rtt == T_high is not above it: the gradient decides.
  // new_rtt_diff = -300000, rtt_diff = 0.125 x 350000 + 0.875 x -300000
  // = 43750 - 262500 = -218750, gradient = -10.9375 <= 0: +delta.
  rp.on_rtt(500000, 0);
  EXPECT_DOUBLE_EQ(rp.rtt_diff_cycles(), -218750.0);
  EXPECT_NEAR(rp.rate_bps(), 28e9 + kDelta, kBps);
  EXPECT_EQ(rp.cuts(), 1u);
}

TEST(TimelyRp, PositiveGradientCutsByBetaTimesGradient) {
  TimelyRp rp(params());
  rp.on_rtt(100000, 0);
  // new_rtt_diff = 4000, rtt_diff = 0.875 x 4000 = 3500,
  // gradient = 3500 / 20000 = 0.175; rate = 40e9 (1 - 0.8 x 0.175)
  // = 40e9 x 0.86 = 34.4e9.
  rp.on_rtt(104000, 0);
  EXPECT_DOUBLE_EQ(rp.rtt_diff_cycles(), 3500.0);
  EXPECT_DOUBLE_EQ(rp.gradient(), 0.175);
  EXPECT_NEAR(rp.rate_bps(), 34.4e9, kBps);
  // new_rtt_diff = 2000, rtt_diff = 0.125 x 3500 + 0.875 x 2000
  // = 437.5 + 1750 = 2187.5, gradient = 0.109375;
  // rate = 34.4e9 (1 - 0.0875) = 31.39e9.
  rp.on_rtt(106000, 0);
  EXPECT_DOUBLE_EQ(rp.rtt_diff_cycles(), 2187.5);
  EXPECT_NEAR(rp.rate_bps(), 31.39e9, kBps);
  // A flat RTT still cuts while the EWMA remembers the rise:
  // rtt_diff = 0.125 x 2187.5 = 273.4375, gradient = 0.013671875;
  // rate = 31.39e9 (1 - 0.0109375) = 31.046671875e9.
  rp.on_rtt(106000, 0);
  EXPECT_DOUBLE_EQ(rp.gradient(), 0.013671875);
  EXPECT_NEAR(rp.rate_bps(), 31.046671875e9, kBps);
  EXPECT_EQ(rp.cuts(), 3u);
  EXPECT_FALSE(rp.hai());
}

TEST(TimelyRp, NonPositiveGradientIncreasesAndFiveInARowIsHai) {
  TimelyRp rp(params());
  rp.on_rtt(100000, 0);
  // +8000: rtt_diff = 7000, gradient 0.35, rate = 40e9 (1 - 0.28) = 28.8e9.
  rp.on_rtt(108000, 0);
  ASSERT_NEAR(rp.rate_bps(), 28.8e9, kBps);
  // -1000: rtt_diff = 0.125 x 7000 + 0.875 x -1000 = 875 - 875 = 0:
  // gradient exactly 0 counts as "<= 0": +delta. Run 1.
  rp.on_rtt(107000, 0);
  EXPECT_DOUBLE_EQ(rp.gradient(), 0.0);
  EXPECT_NEAR(rp.rate_bps(), 28.81e9, kBps);
  // -2000: rtt_diff = -1750, gradient -0.0875: +delta. Run 2.
  rp.on_rtt(105000, 0);
  EXPECT_DOUBLE_EQ(rp.rtt_diff_cycles(), -1750.0);
  EXPECT_NEAR(rp.rate_bps(), 28.82e9, kBps);
  // Flat: rtt_diff = -218.75 (run 3), -27.34375 (run 4): +delta each.
  rp.on_rtt(105000, 0);
  rp.on_rtt(105000, 0);
  EXPECT_DOUBLE_EQ(rp.rtt_diff_cycles(), -27.34375);
  EXPECT_NEAR(rp.rate_bps(), 28.84e9, kBps);
  EXPECT_FALSE(rp.hai());
  // rtt_diff = -3.41796875, run 5 = hai_threshold: HAI, +5 delta.
  rp.on_rtt(105000, 0);
  EXPECT_TRUE(rp.hai());
  EXPECT_NEAR(rp.rate_bps(), 28.89e9, kBps);
  // rtt_diff = -0.42724609375, run 6: +5 delta again.
  rp.on_rtt(105000, 0);
  EXPECT_DOUBLE_EQ(rp.rtt_diff_cycles(), -0.42724609375);
  EXPECT_NEAR(rp.rate_bps(), 28.94e9, kBps);
  EXPECT_EQ(rp.cuts(), 1u);
  // +10000: rtt_diff = 0.125 x -0.42724609375 + 0.875 x 10000
  // = 8749.94659423828125, gradient = 0.4374973297119140625 > 0: the run
  // ends; rate = 28.94e9 (1 - 0.8 x gradient) = 28.94e9 x 0.65000213623046875
  // = 18.8110618225097656e9.
  rp.on_rtt(115000, 0);
  EXPECT_DOUBLE_EQ(rp.gradient(), 0.4374973297119140625);
  EXPECT_FALSE(rp.hai());
  EXPECT_NEAR(rp.rate_bps(), 18.8110618225097656e9, 1e3);
  EXPECT_EQ(rp.cuts(), 2u);
  // -10000: rtt_diff = 1093.74332427978515625 - 8750 < 0, run 1: +delta only.
  const double before = rp.rate_bps();
  rp.on_rtt(105000, 0);
  EXPECT_LT(rp.gradient(), 0.0);
  EXPECT_FALSE(rp.hai());
  EXPECT_NEAR(rp.rate_bps(), before + kDelta, kBps);
}

TEST(TimelyRp, HaiThresholdZeroDisablesHai) {
  TimelyParams p = params();
  p.hai_threshold = 0;
  TimelyRp rp(p);
  rp.on_rtt(100000, 0);
  rp.on_rtt(108000, 0);  // 28.8e9, as above
  for (int i = 0; i < 10; ++i) rp.on_rtt(107000 - 1000 * static_cast<uint64_t>(i), 0);
  EXPECT_FALSE(rp.hai());
  EXPECT_NEAR(rp.rate_bps(), 28.8e9 + 10 * kDelta, kBps);  // ten single steps
}

TEST(TimelyRp, ClampsAtMinimumRate) {
  // A gradient above 1/beta: +100 us in one sample, rtt_diff = 87500,
  // gradient = 4.375, factor 1 - 3.5 = -2.5: the rate goes to the floor, not
  // below zero.
  TimelyRp rp(params());
  rp.on_rtt(100000, 0);
  rp.on_rtt(200000, 0);
  EXPECT_DOUBLE_EQ(rp.gradient(), 4.375);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 10e6);
  EXPECT_EQ(rp.cuts(), 1u);
  // T_high cuts with a higher floor: rtt = 10 ms = 20 T_high,
  // factor = 1 - 0.8 (1 - 0.05) = 0.24: 9.6e9, 2.304e9, then 0.55296e9 < 1e9.
  TimelyParams p = params();
  p.min_rate_bps = 1e9;
  TimelyRp rq(p);
  rq.on_rtt(100000, 0);
  rq.on_rtt(10000000, 0);
  EXPECT_NEAR(rq.rate_bps(), 9.6e9, kBps);
  rq.on_rtt(10000000, 0);
  EXPECT_NEAR(rq.rate_bps(), 2.304e9, kBps);
  rq.on_rtt(10000000, 0);
  EXPECT_DOUBLE_EQ(rq.rate_bps(), 1e9);
  EXPECT_EQ(rq.cuts(), 3u);
}

TEST(TimelyRp, ClampsAtLineRateAndReleasesThePacer) {
  TimelyParams p = params();
  p.add_step_bps = 5e9;
  TimelyRp rp(p);
  rp.on_rtt(1000000, 0);
  rp.on_rtt(1000000, 0);  // 24e9
  rp.on_sent(1000, 0);
  EXPECT_GT(rp.tx_allowed_at(), 0u);
  // 10 us < T_low: +5e9 each: 29e9, 34e9, 39e9, then 44e9 clamped to 40e9.
  const double expect[] = {29e9, 34e9, 39e9, 40e9, 40e9};
  for (double e : expect) {
    rp.on_rtt(10000, 0);
    EXPECT_NEAR(rp.rate_bps(), e, kBps);
  }
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 40e9);
  EXPECT_FALSE(rp.limited());
  EXPECT_EQ(rp.tx_allowed_at(), 0u);
}

// Defaults (250 MHz): two samples of 2,000,000 cycles = 16 T_high:
// rate = 40e9 (1 - 0.8 (1 - 1/16)) = 40e9 (1 - 0.75) = 10e9.
TimelyRp cut_to_10g() {
  TimelyRp rp{TimelyParams{}};
  rp.on_rtt(2000000, 0);
  rp.on_rtt(2000000, 0);
  return rp;
}

TEST(TimelyRp, PacesAtTheCurrentRate) {
  TimelyRp rp = cut_to_10g();
  ASSERT_DOUBLE_EQ(rp.rate_bps(), 10e9);
  // 1000 bytes = 8000 bits at 10 Gb/s = 800 ns = 200 cycles at 250 MHz.
  rp.on_sent(1000, 100);
  EXPECT_EQ(rp.tx_allowed_at(), 300u);
  // 1001 bytes: 8008 bits, 800.8 ns = 200.2 cycles, rounded up: 300 + 201.
  rp.on_sent(1001, 300);
  EXPECT_EQ(rp.tx_allowed_at(), 501u);
}

TEST(TimelyRp, ClockNeverGoesBackwards) {
  // As DcqcnRp::advance: an earlier `now` is ignored, so pacing after it
  // counts from the latest cycle seen.
  TimelyRp rp = cut_to_10g();
  rp.advance(1000);
  rp.advance(500);
  rp.on_sent(1000, 600);
  EXPECT_EQ(rp.tx_allowed_at(), 1200u);  // 1000 + 200, not 600 + 200
  // A sample stamped earlier still counts (it is a measurement, not a timer).
  rp.on_rtt(2000000, 10);
  EXPECT_EQ(rp.samples(), 3u);
  EXPECT_EQ(rp.cuts(), 2u);
}

TEST(TimelyRp, RejectsParametersTheUpdateCannotUse) {
  TimelyParams p = params();
  p.min_rtt_cycles = 0;
  EXPECT_THROW(TimelyRp{p}, std::invalid_argument);
  p = params();
  p.min_rate_bps = 50e9;
  EXPECT_THROW(TimelyRp{p}, std::invalid_argument);
  p = params();
  p.cycles_per_second = 0;
  EXPECT_THROW(TimelyRp{p}, std::invalid_argument);
  EXPECT_NO_THROW(TimelyRp{params()});
}

}  // namespace
}  // namespace mprdma::nic
