#include "vp/core/progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

namespace mprdma::core {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

struct FakeClock {
  nanoseconds now{0};
  int reads = 0;
  ProgressReporter::Clock fn() {
    return [this] {
      ++reads;
      return now;
    };
  }
};

TEST(Progress, ReadsTheClockOnlyEveryNCalls) {
  FakeClock clock;
  std::ostringstream os;
  ProgressReporter p(os, true, clock.fn(), 100);
  const int at_start = clock.reads;
  for (int i = 0; i < 1000; ++i) p.update(i, i);
  EXPECT_EQ(clock.reads - at_start, 10);
}

TEST(Progress, RedrawsAtMostEveryHalfSecond) {
  FakeClock clock;
  std::ostringstream os;
  ProgressReporter p(os, true, clock.fn(), 1);
  p.update(1, 1);
  EXPECT_EQ(p.redraws(), 0u);  // no time has passed
  clock.now = milliseconds(499);
  p.update(2, 2);
  EXPECT_EQ(p.redraws(), 0u);
  clock.now = milliseconds(500);
  p.update(3, 3);
  EXPECT_EQ(p.redraws(), 1u);
  clock.now = milliseconds(900);
  p.update(4, 4);
  EXPECT_EQ(p.redraws(), 1u);
  clock.now = milliseconds(1000);
  p.update(5, 5);
  EXPECT_EQ(p.redraws(), 2u);
  EXPECT_EQ(os.str().find('\n'), std::string::npos);
  EXPECT_EQ(os.str()[0], '\r');
}

TEST(Progress, LineShowsSimWallRateAndSlowdown) {
  FakeClock clock;
  std::ostringstream os;
  ProgressReporter p(os, true, clock.fn(), 1);
  clock.now = std::chrono::seconds(2);
  p.update(1000000000ull, 3000000);  // 1 ms simulated, 3 M events in 2 s
  EXPECT_EQ(p.line(), "sim 1.000 ms | wall 2.0 s | 1.50M events/s | slowdown 2000x");
  EXPECT_EQ(os.str(), "\r" + p.line());
  p.finish();
  EXPECT_EQ(os.str(), "\r" + p.line() + "\r" + p.line() + "\n");
  p.finish();  // once only
  EXPECT_EQ(os.str(), "\r" + p.line() + "\r" + p.line() + "\n");
  clock.now = std::chrono::seconds(4);
  p.update(2000000000000ull, 0);  // 2 s simulated
  EXPECT_EQ(p.line(), "sim 2.000 s | wall 4.0 s | 0 events/s | slowdown 2.00x");
}

TEST(Progress, ShorterLineBlanksTheRest) {
  FakeClock clock;
  std::ostringstream os;
  ProgressReporter p(os, true, clock.fn(), 1);
  clock.now = std::chrono::seconds(1);
  p.update(5000000000000ull, 123456789);
  const std::string first = os.str();
  clock.now = std::chrono::seconds(2);
  p.update(5000000000000ull, 0);
  const std::string second = os.str().substr(first.size());
  EXPECT_EQ(second.size(), first.size());
  EXPECT_EQ(second.back(), ' ');
}

TEST(Progress, DisabledWritesNothing) {
  FakeClock clock;
  std::ostringstream os;
  ProgressReporter p(os, false, clock.fn(), 1);
  clock.now = std::chrono::seconds(10);
  for (int i = 0; i < 10; ++i) p.update(i, i);
  p.finish();
  EXPECT_TRUE(os.str().empty());
  EXPECT_EQ(clock.reads, 0);
}

TEST(Progress, DefaultClockIsUsable) {
  std::ostringstream os;
  ProgressReporter p(os, true);
  p.update(1, 1);
  p.finish();
  EXPECT_EQ(p.redraws(), 1u);
  EXPECT_NE(os.str().find("sim 1 ps"), std::string::npos) << os.str();
}

}  // namespace
}  // namespace mprdma::core
