#include "vp/core/calendar.h"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/sim_test.h"
#include "vp/core/log.h"

namespace mprdma::core {
namespace {

using sc_core::SC_NS;
using sc_core::sc_time;

class CalendarTest : public test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    cal = std::make_unique<Calendar>("cal");
  }
  // Records "<name>@<ns>" when run.
  Calendar::Action note(const std::string& name) {
    return [this, name] {
      log.push_back(name + "@" + std::to_string(sc_core::sc_time_stamp().value() / 1000));
    };
  }
  std::unique_ptr<Calendar> cal;
  std::vector<std::string> log;
};

TEST_F(CalendarTest, OrdersByTimeThenInsertion) {
  cal->at(sc_time(30, SC_NS), note("c"));
  cal->at(sc_time(10, SC_NS), note("a1"));
  cal->at(sc_time(20, SC_NS), note("b"));
  cal->at(sc_time(10, SC_NS), note("a2"));
  cal->after(sc_time(10, SC_NS), note("a3"));
  EXPECT_EQ(cal->pending(), 5u);
  sc_core::sc_start();
  EXPECT_EQ(log, (std::vector<std::string>{"a1@10", "a2@10", "a3@10", "b@20", "c@30"}));
  EXPECT_EQ(cal->pending(), 0u);
}

TEST_F(CalendarTest, SameTimeActionsRunInOneActivation) {
  const uint64_t act0 = Calendar::total_activations();
  const uint64_t disp0 = Calendar::total_dispatched();
  for (int i = 0; i < 3; ++i) cal->at(sc_time(5, SC_NS), note("x" + std::to_string(i)));
  // An action may add more work for the same instant and for later.
  cal->at(sc_time(5, SC_NS), [this] {
    cal->after(sc_core::SC_ZERO_TIME, note("now"));
    cal->after(sc_time(2, SC_NS), note("later"));
  });
  sc_core::sc_start();
  EXPECT_EQ(log, (std::vector<std::string>{"x0@5", "x1@5", "x2@5", "now@5", "later@7"}));
  EXPECT_EQ(Calendar::total_activations() - act0, 2u);
  EXPECT_EQ(Calendar::total_dispatched() - disp0, 6u);
}

TEST_F(CalendarTest, EarlierActionPreemptsPendingWakeUp) {
  cal->at(sc_time(100, SC_NS), note("late"));
  sc_core::sc_start(sc_time(10, SC_NS));
  cal->after(sc_time(5, SC_NS), note("early"));
  sc_core::sc_start();
  EXPECT_EQ(log, (std::vector<std::string>{"early@15", "late@100"}));
}

TEST_F(CalendarTest, SchedulingInThePastThrows) {
  sc_core::sc_start(sc_time(20, SC_NS));
  EXPECT_THROW(cal->at(sc_time(10, SC_NS), note("past")), std::logic_error);
  EXPECT_NO_THROW(cal->at(sc_time(20, SC_NS), note("now")));
  sc_core::sc_start();
  EXPECT_EQ(log, (std::vector<std::string>{"now@20"}));
}

TEST_F(CalendarTest, LogMessagesCarryTheSimulatedTime) {
  std::ostringstream out;
  Log::set_sink(&out);
  LogChannel& ch = Log::channel("test.cal");
  cal->at(sc_time(10, SC_NS), [&] { MPR_LOG(ch, warn, "tick"); });
  sc_core::sc_start();
  Log::set_sink(nullptr);
  EXPECT_EQ(out.str(), "[10 ns] warn test.cal: tick\n");
}

}  // namespace
}  // namespace mprdma::core
