#include "vp/core/log.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

namespace mprdma::core {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Log::reset();
    Log::set_sink(&out);
  }
  void TearDown() override {
    Log::set_sink(nullptr);
    Log::reset();
  }
  std::ostringstream out;
};

TEST_F(LogTest, LevelNames) {
  for (const char* name : {"off", "error", "warn", "info", "debug", "trace"})
    EXPECT_STREQ(log_level_name(parse_log_level(name)), name);
  EXPECT_THROW(parse_log_level("verbose"), std::invalid_argument);
}

TEST_F(LogTest, DefaultIsWarn) {
  LogChannel& ch = Log::channel("test.default");
  EXPECT_TRUE(ch.enabled(LogLevel::error));
  EXPECT_TRUE(ch.enabled(LogLevel::warn));
  EXPECT_FALSE(ch.enabled(LogLevel::info));
  EXPECT_FALSE(ch.enabled(LogLevel::off));
  EXPECT_EQ(&Log::channel("test.default"), &ch);
}

TEST_F(LogTest, WildcardSpecLaterEntriesWin) {
  LogChannel& req = Log::channel("nic0.requester");
  LogChannel& resp = Log::channel("nic0.responder");
  LogChannel& pcie = Log::channel("pcie");
  Log::configure("*=error,nic*.requester=debug,pcie=trace");
  EXPECT_EQ(req.level(), LogLevel::debug);
  EXPECT_EQ(resp.level(), LogLevel::error);
  EXPECT_EQ(pcie.level(), LogLevel::trace);
  // Channels created later get the rules too.
  EXPECT_EQ(Log::channel("nic12.requester").level(), LogLevel::debug);
  Log::configure("*=off");
  EXPECT_EQ(req.level(), LogLevel::off);
  EXPECT_FALSE(req.enabled(LogLevel::error));
  // A bare level applies to everything.
  Log::configure("info");
  EXPECT_EQ(pcie.level(), LogLevel::info);
  EXPECT_THROW(Log::configure("pcie=loud"), std::invalid_argument);
  Log::reset();
  EXPECT_EQ(req.level(), LogLevel::warn);
  EXPECT_EQ(Log::channel("nic13.requester").level(), LogLevel::warn);
}

TEST_F(LogTest, MacroWritesToSinkOnlyWhenEnabled) {
  LogChannel& ch = Log::channel("test.sink");
  int evaluated = 0;
  auto value = [&] {
    ++evaluated;
    return 42;
  };
  MPR_LOG(ch, info, "hidden " << value());
  EXPECT_EQ(evaluated, 0);
  EXPECT_TRUE(out.str().empty());
  MPR_LOG(ch, warn, "shown " << value());
  EXPECT_EQ(evaluated, 1);
  EXPECT_EQ(out.str(), "warn test.sink: shown 42\n");
  EXPECT_EQ(&Log::sink(), &out);
}

}  // namespace
}  // namespace mprdma::core

namespace mprdma::core {
namespace {

TEST(LogRateLimit, BurstThenOneInEveryWithTheSuppressedCount) {
  LogRateLimit limit(2, 5);
  uint64_t suppressed = 99;
  EXPECT_TRUE(limit.allow(&suppressed));
  EXPECT_EQ(suppressed, 0u);
  EXPECT_TRUE(limit.allow(&suppressed));
  EXPECT_EQ(suppressed, 0u);
  int passed = 0;
  for (int i = 0; i < 10; ++i) passed += limit.allow(&suppressed);
  EXPECT_EQ(passed, 2);       // occurrences 7 and 12
  EXPECT_EQ(suppressed, 4u);  // 8, 9, 10, 11 dropped before 12
}

}  // namespace
}  // namespace mprdma::core
