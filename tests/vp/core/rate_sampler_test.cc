#include "vp/core/rate_sampler.h"

#include <gtest/gtest.h>

#include "support/sim_test.h"
#include "vp/core/calendar.h"

namespace mprdma::core {
namespace {

class RateSamplerTest : public test::SimTest {};

TEST_F(RateSamplerTest, RecordsTheRateOfEachIntervalAtItsEnd) {
  Counter& bytes = env->stats.counter("x.bytes", "bytes", "test");
  RateSampler sampler(env->stats, Duration::from_us(10));
  sampler.add("x.bytes", "x.gbps", "Gb/s", 1e9 / 8, "test");
  sampler.start();
  Calendar cal("cal");
  // 12500 bytes in the first 10 us = 10 Gb/s; nothing in the second; 25000
  // bytes in the third = 20 Gb/s.
  cal.at(sc_core::sc_time(3, sc_core::SC_US), [&] { bytes.add(12500); });
  cal.at(sc_core::sc_time(25, sc_core::SC_US), [&] { bytes.add(25000); });
  ObserverSet set;
  set.add(&sampler);
  run_observed(set, sc_core::sc_time(35, sc_core::SC_US));
  const TimeSeries* s = env->stats.find_series("x.gbps");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->points().size(), 3u);
  EXPECT_EQ(s->points()[0].time_ps, 10000000u);
  EXPECT_DOUBLE_EQ(s->points()[0].value, 10.0);
  EXPECT_DOUBLE_EQ(s->points()[1].value, 0.0);
  EXPECT_DOUBLE_EQ(s->points()[2].value, 20.0);
}

TEST_F(RateSamplerTest, GaugesAreSampledAtTheEndOfEachInterval) {
  double level = 0;
  RateSampler sampler(env->stats, Duration::from_us(10));
  sampler.add_gauge("q.bytes", "B", "test", [&] { return level; });
  sampler.start();
  Calendar cal("cal");
  cal.at(sc_core::sc_time(5, sc_core::SC_US), [&] { level = 1500; });
  cal.at(sc_core::sc_time(15, sc_core::SC_US), [&] { level = 3000; });
  ObserverSet set;
  set.add(&sampler);
  run_observed(set, sc_core::sc_time(25, sc_core::SC_US));
  const TimeSeries* s = env->stats.find_series("q.bytes");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->points().size(), 2u);
  EXPECT_DOUBLE_EQ(s->points()[0].value, 1500.0);
  EXPECT_DOUBLE_EQ(s->points()[1].value, 3000.0);
}

// An event at a sample's due time is not yet seen by that sample: the
// sampler looks after everything before the due time and before anything
// at it, whatever order the kernel would give simultaneous processes.
TEST_F(RateSamplerTest, AnEventAtTheDueTimeCountsInTheNextInterval) {
  Counter& bytes = env->stats.counter("x.bytes", "bytes", "test");
  RateSampler sampler(env->stats, Duration::from_us(10));
  sampler.add("x.bytes", "x.gbps", "Gb/s", 1e9 / 8, "test");
  sampler.start();
  Calendar cal("cal");
  cal.at(sc_core::sc_time(10, sc_core::SC_US), [&] { bytes.add(12500); });
  ObserverSet set;
  set.add(&sampler);
  run_observed(set, sc_core::sc_time(25, sc_core::SC_US));
  const TimeSeries* s = env->stats.find_series("x.gbps");
  ASSERT_EQ(s->points().size(), 2u);
  EXPECT_DOUBLE_EQ(s->points()[0].value, 0.0);
  EXPECT_DOUBLE_EQ(s->points()[1].value, 10.0);
}

TEST_F(RateSamplerTest, UnknownCounterIsAnError) {
  RateSampler sampler(env->stats, Duration::from_us(1));
  EXPECT_THROW(sampler.add("no.such", "s", "u", 1, "d"), std::invalid_argument);
  EXPECT_THROW(RateSampler(env->stats, Duration{0}), std::invalid_argument);
}

}  // namespace
}  // namespace mprdma::core
