#include "vp/core/clock_domain.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "support/sim_test.h"

namespace mprdma::core {
namespace {

using sc_core::sc_time;

sc_time ps(uint64_t v) { return sc_time::from_value(v); }

class ClockDomainTest : public test::SimTest {};

TEST_F(ClockDomainTest, PeriodAndFrequency) {
  EXPECT_EQ(ClockDomain().period_ps(), 4000u);
  ClockDomain c = ClockDomain::from_hz(250e6);
  EXPECT_EQ(c.period_ps(), 4000u);
  EXPECT_DOUBLE_EQ(c.hz(), 250e6);
  EXPECT_EQ(ClockDomain::from_hz(312.5e6).period_ps(), 3200u);
  EXPECT_THROW(ClockDomain(0), std::invalid_argument);
  EXPECT_THROW(ClockDomain::from_hz(0), std::invalid_argument);
  EXPECT_THROW(ClockDomain::from_hz(-1), std::invalid_argument);
}

TEST_F(ClockDomainTest, EdgeArithmetic) {
  ClockDomain c(4000);
  EXPECT_EQ(c.cycles(3), ps(12000));
  EXPECT_EQ(c.cycle_at(ps(0)), 0u);
  EXPECT_EQ(c.cycle_at(ps(3999)), 0u);
  EXPECT_EQ(c.cycle_at(ps(4000)), 1u);
  EXPECT_EQ(c.cycle_at(ps(7999)), 1u);
  EXPECT_EQ(c.edge_at_or_after(ps(0)), ps(0));
  EXPECT_EQ(c.edge_at_or_after(ps(4000)), ps(4000));
  EXPECT_EQ(c.edge_at_or_after(ps(4001)), ps(8000));
  EXPECT_EQ(c.edge_at_or_after(ps(7999)), ps(8000));
}

TEST_F(ClockDomainTest, RelativeToNow) {
  ClockDomain c(4000);
  EXPECT_EQ(c.after_cycles(2), ps(8000));
  EXPECT_EQ(c.now_cycle(), 0u);
  sc_core::sc_start(ps(5000));
  EXPECT_EQ(c.now_cycle(), 1u);
  // Next edge is at 8000; two cycles later is 16000.
  EXPECT_EQ(c.after_cycles(2), ps(16000));
  EXPECT_EQ(c.after_cycles(0), ps(8000));
  sc_core::sc_start(ps(3000));  // now exactly on the 8000 edge
  EXPECT_EQ(c.after_cycles(1), ps(12000));
}

}  // namespace
}  // namespace mprdma::core
